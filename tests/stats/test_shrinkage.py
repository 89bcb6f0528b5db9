"""Small-n pooling (stats.shrinkage): the beta-binomial MLE against scipy.stats.betabinom's
log-likelihood maximized by scipy.optimize on (log a, log b) and by statsmodels'
GenericLikelihoodModel (statsmodels 0.15 has no beta-binomial model of its own), the regime
test against the likelihood itself, the posterior and its intervals by hand and by brute-force
integration, and the invariants (between the raw rate and the prior mean, unshrunk as n grows,
identical tasks pooled)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize, stats

from hylo_analytics.errors import InputError
from hylo_analytics.stats.beta_binomial import beta_binomial_loglik, fit_beta_binomial
from hylo_analytics.stats.closed_form import wilson
from hylo_analytics.stats.shrinkage import shrink_rates

# three suites of tasks: successes and episodes per task (unequal n in the second)
SUITES = [
    ([3, 7, 5, 9, 2, 6, 8, 4, 10, 1], [10] * 10),
    ([12, 30, 3, 44, 25, 9, 18], [20, 40, 10, 50, 30, 15, 25]),
    ([0, 1, 0, 2, 0, 5, 1, 0, 0, 3, 1, 0], [10] * 12),
]


def _flat(suites: list[tuple[list[int], list[int]]]) -> tuple[np.ndarray, ...]:
    k = np.concatenate([np.asarray(s[0], float) for s in suites])
    n = np.concatenate([np.asarray(s[1], float) for s in suites])
    g = np.concatenate([np.full(len(s[0]), i) for i, s in enumerate(suites)])
    return k, n, g


def _scipy_mle(k: list[int], n: list[int]) -> tuple[float, float, float]:
    """The MLE by scipy.optimize on (log a, log b) of betabinom.logpmf summed."""

    def nll(x: np.ndarray) -> float:
        return -float(stats.betabinom.logpmf(k, n, np.exp(x[0]), np.exp(x[1])).sum())

    res = optimize.minimize(nll, [0.0, 0.0], method="Nelder-Mead",
                            options={"xatol": 1e-10, "fatol": 1e-13, "maxiter": 20_000})  # fmt: skip
    res = optimize.minimize(nll, res.x, method="BFGS", options={"gtol": 1e-9})
    return float(np.exp(res.x[0])), float(np.exp(res.x[1])), -float(res.fun)


def test_mle_equals_scipy_optimize_on_betabinom_every_group_at_once() -> None:
    k, n, g = _flat(SUITES)
    fit = fit_beta_binomial(k, n, g)
    assert list(fit.pooling) == ["partial"] * 3 and fit.converged.all()
    for i, (ks, ns) in enumerate(SUITES):
        a, b, ll = _scipy_mle(ks, ns)
        assert fit.loglik[i] == pytest.approx(ll, abs=1e-9)  # ours is at least as high
        assert fit.loglik[i] >= ll - 1e-10
        assert (fit.a[i], fit.b[i]) == pytest.approx((a, b), rel=1e-4)
        assert fit.mean[i] == pytest.approx(a / (a + b), rel=1e-6)
    # the log-likelihood reported is betabinom's, binomial coefficients included
    want = [stats.betabinom.logpmf(s[0], s[1], fit.a[i], fit.b[i]).sum()
            for i, s in enumerate(SUITES)]  # fmt: skip
    assert fit.loglik == pytest.approx(want, abs=1e-10)
    assert beta_binomial_loglik(k, n, fit.a, fit.b, g) == pytest.approx(want, abs=1e-10)


def test_mle_equals_statsmodels_generic_likelihood() -> None:
    from statsmodels.base.model import GenericLikelihoodModel

    ks, ns = SUITES[1]

    class BetaBinomial(GenericLikelihoodModel):  # type: ignore[misc]
        def loglike(self, params: np.ndarray) -> float:
            a, b = np.exp(params)
            return float(stats.betabinom.logpmf(self.endog, ns, a, b).sum())

    model = BetaBinomial(np.asarray(ks, float), None, extra_params_names=["log_a", "log_b"])
    res = model.fit(start_params=[0.0, 0.0], method="nm", disp=False, maxiter=5000, xtol=1e-10,
                    ftol=1e-12)  # fmt: skip
    assert res.mle_retvals["converged"]
    fit = fit_beta_binomial(ks, ns)
    assert (np.log(fit.a[0]), np.log(fit.b[0])) == pytest.approx(tuple(res.params), abs=1e-4)
    assert fit.loglik[0] >= res.llf - 1e-9


def test_thousands_of_groups_match_one_group_at_a_time() -> None:
    rng = np.random.default_rng(5)
    groups, tasks = 2000, 10
    n = rng.integers(10, 51, groups * tasks).astype(float)
    p = rng.beta(np.repeat(rng.choice([0.5, 2, 8], groups), tasks),
                 np.repeat(rng.choice([0.5, 3, 30], groups), tasks))  # fmt: skip
    k = rng.binomial(n.astype(int), p).astype(float)
    g = np.repeat(np.arange(groups), tasks)
    fit = fit_beta_binomial(k, n, g)
    assert fit.converged.all()
    for i in rng.choice(np.flatnonzero(fit.pooling == "partial"), 25, replace=False):
        one = fit_beta_binomial(k[g == i], n[g == i])
        assert one.loglik[0] == pytest.approx(fit.loglik[i], abs=1e-9)
        *_, ll = _scipy_mle(k[g == i].astype(int).tolist(), n[g == i].astype(int).tolist())
        assert fit.loglik[i] >= ll - 1e-8, i


def test_complete_pooling_where_the_likelihood_rises_to_the_binomial() -> None:
    """No overdispersion: every finite (a, b) on scipy's grid is below the binomial limit at
    the pooled rate, the fit says complete, and every shrunk rate is the pooled rate."""
    ks, ns = [5, 5, 6, 4, 5, 5, 4, 6], [10] * 8
    fit = fit_beta_binomial(ks, ns)
    assert fit.pooling[0] == "complete" and np.isinf(fit.a[0]) and np.isinf(fit.strength[0])
    pooled = sum(ks) / sum(ns)
    binomial = stats.binom.logpmf(ks, ns, pooled).sum()
    assert fit.mean[0] == pooled and fit.loglik[0] == pytest.approx(binomial, abs=1e-12)
    strengths = np.geomspace(0.1, 1e6, 60)
    finite = np.array([stats.betabinom.logpmf(ks, ns, pooled * m, (1 - pooled) * m).sum()
                       for m in strengths])  # fmt: skip
    assert max(finite) < binomial and np.all(np.diff(finite) > 0)  # rising toward M = inf
    out = shrink_rates(ks, ns, interval="plain")
    assert out.shrunk == pytest.approx([pooled] * 8) and out.weight == pytest.approx([1.0] * 8)
    lo, hi = wilson(sum(ks), sum(ns))
    assert out.low == pytest.approx([float(lo)] * 8) and out.high == pytest.approx([float(hi)] * 8)


def test_all_or_nothing_tasks_shrink_nothing_and_all_fail_is_complete() -> None:
    ks, ns = [0, 10, 10, 0, 10], [10] * 5
    fit = fit_beta_binomial(ks, ns)
    assert fit.pooling[0] == "none"
    # the likelihood keeps rising as a + b -> 0 at the share of all-success tasks
    rising = [stats.betabinom.logpmf(ks, ns, 0.6 * m, 0.4 * m).sum() for m in (1, 0.1, 0.01)]
    assert np.all(np.diff(rising) > 0)
    assert fit.loglik[0] == pytest.approx(3 * np.log(0.6) + 2 * np.log(0.4), abs=1e-12)
    out = shrink_rates(ks, ns, interval="plain")
    assert out.shrunk == pytest.approx(np.array(ks) / 10) and out.weight == pytest.approx([0] * 5)
    zero = fit_beta_binomial([0, 0, 0], [10, 20, 10])
    assert zero.pooling[0] == "complete" and zero.mean[0] == 0.0


def test_posterior_and_plain_interval_by_hand() -> None:
    ks, ns = SUITES[0]
    fit = fit_beta_binomial(ks, ns)
    a, b = fit.a[0], fit.b[0]
    out = shrink_rates(ks, ns, interval="plain", level=0.9)
    k, n = np.asarray(ks, float), np.asarray(ns, float)
    assert out.shrunk == pytest.approx((k + a) / (n + a + b), rel=1e-12)
    assert out.weight == pytest.approx((a + b) / (n + a + b), rel=1e-12)
    assert out.low == pytest.approx(stats.beta.ppf(0.05, k + a, n - k + b), rel=1e-9)
    assert out.high == pytest.approx(stats.beta.ppf(0.95, k + a, n - k + b), rel=1e-9)
    lo, hi = wilson(k, n, 0.9)
    assert (out.raw_low, out.raw_high) == (pytest.approx(lo), pytest.approx(hi))
    assert out.raw == pytest.approx(k / n) and out.method == "eb posterior"


def _brute_force(k: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each task's posterior mean and variance under the hierarchical interval's hyperprior
    (mean and rho = 1 / (1 + a + b) flat on (0, 1)), by a dense midpoint rule on (mean, rho)."""
    mu = (np.arange(1500) + 0.5) / 1500
    rho = (np.arange(1500) + 0.5) / 1500
    mm, rr = np.meshgrid(mu, rho, indexing="ij")
    big = (1 - rr) / rr
    a, b = mm * big, (1 - mm) * big
    ll = sum(stats.betabinom.logpmf(ki, ni, a, b) for ki, ni in zip(k, n, strict=True))
    w = np.exp(ll - ll.max())
    w /= w.sum()
    means, variances = [], []
    for ki, ni in zip(k, n, strict=True):
        post = (ki + a) / (ni + big)
        second = post * (1 - post) / (ni + big + 1) + post**2
        means.append((w * post).sum())
        variances.append((w * second).sum() - means[-1] ** 2)
    return np.array(means), np.array(variances)


@pytest.mark.parametrize("suite", [SUITES[0], ([5, 5, 6, 4, 5, 5], [10] * 6)])
def test_hierarchical_interval_is_the_integrated_posterior(suite) -> None:
    """The grid's mixture equals a brute-force integral over (mean, rho); its bounds are the
    beta of that mean and variance."""
    from hylo_analytics.stats.shrinkage import _beta_matched, _hierarchical

    k, n = np.asarray(suite[0], float), np.asarray(suite[1], float)
    got_mean, got_var = _hierarchical(k, n, np.zeros(len(k), dtype=np.int64), 1)
    want_mean, want_var = _brute_force(k, n)
    assert got_mean == pytest.approx(want_mean, abs=2e-4)
    assert np.sqrt(got_var) == pytest.approx(np.sqrt(want_var), rel=5e-3)
    out = shrink_rates(k, n)
    size = want_mean * (1 - want_mean) / want_var - 1
    lo = stats.beta.ppf(0.025, want_mean * size, (1 - want_mean) * size)
    hi = stats.beta.ppf(0.975, want_mean * size, (1 - want_mean) * size)
    assert out.low == pytest.approx(np.minimum(lo, out.shrunk), abs=2e-3)
    assert out.high == pytest.approx(np.maximum(hi, out.shrunk), abs=2e-3)
    assert _beta_matched(want_mean, want_var, 0.95)[0] == pytest.approx(lo, rel=1e-8)
    assert out.method == "hierarchical (flat mean and icc)"


def test_the_hierarchical_grid_is_converged(monkeypatch: pytest.MonkeyPatch) -> None:
    from hylo_analytics.stats import shrinkage

    rng = np.random.default_rng(3)
    groups, tasks = 200, 10
    n = np.repeat(rng.choice([10, 20, 50], groups), tasks).astype(float)
    shapes = rng.choice([0.5, 2, 8, 30, 1000], (2, groups))
    p = rng.beta(np.repeat(shapes[0], tasks), np.repeat(shapes[1], tasks))
    k = rng.binomial(n.astype(int), p).astype(float)
    g = np.repeat(np.arange(groups), tasks)
    coarse = shrink_rates(k, n, g)
    monkeypatch.setattr(shrinkage, "_GRID_SHRINK", 96)
    monkeypatch.setattr(shrinkage, "_GRID_MEAN", 64)
    fine = shrink_rates(k, n, g)
    assert np.max(np.abs(coarse.low - fine.low)) < 1e-3
    assert np.max(np.abs(coarse.high - fine.high)) < 1e-3


def test_laird_louis_bootstrap_is_seeded_and_wider_than_plain() -> None:
    k, n, g = _flat(SUITES)
    boot = shrink_rates(k, n, g, interval="bootstrap", n_resamples=300, seed=3)
    again = shrink_rates(k, n, g, interval="bootstrap", n_resamples=300, seed=3)
    plain = shrink_rates(k, n, g, interval="plain")
    assert np.array_equal(boot.low, again.low) and np.array_equal(boot.high, again.high)
    assert np.mean(boot.high - boot.low) > np.mean(plain.high - plain.low)
    assert np.array_equal(boot.shrunk, plain.shrunk)
    assert boot.method == "laird-louis bootstrap"


def test_the_bootstrap_chunks_give_the_same_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    from hylo_analytics.stats import shrinkage

    k, n, g = _flat(SUITES)
    whole = shrink_rates(k, n, g, interval="bootstrap", n_resamples=50)
    hier = shrink_rates(k, n, g)
    monkeypatch.setattr(shrinkage, "_CELLS_PER_CHUNK", 1)  # one group per chunk
    parts = shrink_rates(k, n, g, interval="bootstrap", n_resamples=50)
    assert np.all(np.isfinite(parts.low)) and parts.low.shape == whole.low.shape
    assert shrink_rates(k, n, g).low == pytest.approx(hier.low, rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 60), st.floats(0, 1)), min_size=1, max_size=15),
    st.sampled_from(["hierarchical", "plain"]),
)
def test_invariants(cells: list[tuple[int, float]], interval: str) -> None:
    n = np.array([c[0] for c in cells], float)
    k = np.floor(np.array([c[1] for c in cells]) * n)
    out = shrink_rates(k, n, interval=interval)  # type: ignore[arg-type]
    mean = out.fit.mean[0]
    raw = k / n
    eps = 1e-9
    # between the raw rate and the prior mean
    assert np.all(out.shrunk >= np.minimum(raw, mean) - eps)
    assert np.all(out.shrunk <= np.maximum(raw, mean) + eps)
    assert np.all((out.low <= out.shrunk + eps) & (out.shrunk <= out.high + eps))
    assert np.all((out.low >= 0) & (out.high <= 1))
    assert np.all((out.weight >= 0) & (out.weight <= 1))


def test_many_episodes_leave_the_rates_unshrunk_and_identical_tasks_pool() -> None:
    rates = np.array([0.1, 0.35, 0.5, 0.62, 0.9])
    for n_each in (10, 1_000, 100_000):
        n = np.full(5, float(n_each))
        out = shrink_rates(np.round(rates * n), n)
        gap = np.max(np.abs(out.shrunk - out.raw))
        assert n_each < 100_000 or gap < 1e-4, gap
    big = shrink_rates(np.round(rates * 1e5), np.full(5, 1e5))
    small = shrink_rates(np.round(rates * 10), np.full(5, 10.0))
    assert np.max(big.weight) < np.min(small.weight)
    same = shrink_rates([7, 7, 7, 7], [10, 10, 10, 10])
    assert same.fit.pooling[0] == "complete" and same.shrunk == pytest.approx([0.7] * 4)


def test_refusals() -> None:
    with pytest.raises(InputError, match="cell 1 has 11 successes of 10"):
        shrink_rates([1, 11], [10, 10])
    with pytest.raises(InputError, match="n >= 1"):
        fit_beta_binomial([0], [0])
    with pytest.raises(InputError, match="unknown interval 'wald'"):
        shrink_rates([1], [2], interval="wald")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="level"):
        shrink_rates([1], [2], level=1.5)
    with pytest.raises(InputError, match="groups must be one code"):
        fit_beta_binomial([1, 2], [3, 3], [0])
