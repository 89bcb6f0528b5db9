"""PPI++ against ppi-python (``ppi_py``): the rate, plain PPI, the classical mean, groups at
once, the paired difference as ppi_py fed the differences, and the edge cases."""

from __future__ import annotations

import numpy as np
import ppi_py
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hylo_analytics.errors import InputError
from hylo_analytics.stats.ppi import ppi_mean, ppi_paired

CASES = [(20, 1_000, 0.6, 0.8), (200, 5_000, 0.3, 0.9), (50, 50, 0.5, 0.6), (30, 3_000, 0.9, 0.55)]


def _sample(n: int, big_n: int, rate: float, accuracy: float, seed: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    y = (rng.random(n + big_n) < rate).astype(float)
    f = np.where(rng.random(n + big_n) < accuracy, y, 1 - y)
    return y[:n], f[:n], f[n:]


@pytest.mark.parametrize(("n", "big_n", "rate", "accuracy"), CASES)
@pytest.mark.parametrize("lam", [None, 1.0, 0.0, 0.4])
def test_the_rate_is_ppi_pys(n: int, big_n: int, rate: float, accuracy: float,
                             lam: float | None) -> None:  # fmt: skip
    y, f, fu = _sample(n, big_n, rate, accuracy, seed=n + big_n)
    got = ppi_mean(np.r_[y, np.full(big_n, np.nan)], np.r_[f, fu], lam=lam, level=0.9)
    point = np.ravel(ppi_py.ppi_mean_pointestimate(y, f, fu, lam=lam))[0]
    low, high = ppi_py.ppi_mean_ci(y, f, fu, alpha=0.1, lam=lam)
    np.testing.assert_allclose(got.estimate[0], point, rtol=0, atol=1e-14)
    np.testing.assert_allclose([got.low[0], got.high[0]], [low[0], high[0]], rtol=0, atol=1e-14)
    c_low, c_high = ppi_py.classical_mean_ci(y, alpha=0.1)
    np.testing.assert_allclose([got.classical_low[0], got.classical_high[0]], [c_low, c_high],
                               rtol=0, atol=1e-14)  # fmt: skip
    if lam is not None:
        assert got.lam[0] == lam


def test_the_tuned_weight_is_ppi_pys_and_continuous_grades_too() -> None:
    rng = np.random.default_rng(5)
    y = rng.normal(3, 2, 400)
    f = 0.7 * y + rng.normal(0, 1, 400) + 0.5  # a biased, noisy regression judge
    fu = 0.7 * rng.normal(3, 2, 4_000) + rng.normal(0, 1, 4_000) + 0.5
    got = ppi_mean(np.r_[y, np.full(4_000, np.nan)], np.r_[f, fu])
    low, high = ppi_py.ppi_mean_ci(y, f, fu, alpha=0.05)
    np.testing.assert_allclose([got.low[0], got.high[0]], [low[0], high[0]], rtol=1e-14)
    assert 0 < got.lam[0] < 1 and got.width_ratio[0] < 1
    # lam = 1 and 0 bracket nothing: the tuned interval is the narrowest of the three
    widths = [ppi_mean(np.r_[y, np.full(4_000, np.nan)], np.r_[f, fu], lam=w).stderr[0]
              for w in (0.0, 1.0)]  # fmt: skip
    assert got.stderr[0] <= min(widths) + 1e-12


def test_groups_at_once_are_each_group_alone() -> None:
    trusted, judge, group, want = [], [], [], []
    for g, (n, big_n, rate, accuracy) in enumerate(CASES):
        y, f, fu = _sample(n, big_n, rate, accuracy, seed=g)
        trusted += [y, np.full(big_n, np.nan)]
        judge += [f, fu]
        group += [np.full(n + big_n, g)]
        want.append(ppi_py.ppi_mean_ci(y, f, fu, alpha=0.05))
    order = np.random.default_rng(0).permutation(sum(len(a) for a in group))  # rows any order
    t, j, gr = (np.concatenate(a)[order] for a in (trusted, judge, group))
    got = ppi_mean(t, j, gr)
    np.testing.assert_allclose(got.low, [w[0][0] for w in want], rtol=0, atol=1e-13)
    np.testing.assert_allclose(got.high, [w[1][0] for w in want], rtol=0, atol=1e-13)
    assert got.n_labelled.tolist() == [c[0] for c in CASES]
    assert got.n_unlabelled.tolist() == [c[1] for c in CASES]


def test_the_paired_difference_is_ppi_py_fed_the_differences() -> None:
    rng = np.random.default_rng(9)
    n_keys, labelled = 2_000, rng.random(2_000) < 0.05
    hard = rng.random(n_keys) < 0.3  # keys both fail more often: the pairing matters
    ya = (rng.random(n_keys) < np.where(hard, 0.3, 0.8)).astype(float)
    yb = (rng.random(n_keys) < np.where(hard, 0.2, 0.7)).astype(float)
    fa, fb = (np.where(rng.random(n_keys) < 0.85, y, 1 - y) for y in (ya, yb))
    ta, tb = np.where(labelled, ya, np.nan), np.where(labelled, yb, np.nan)
    got = ppi_paired(ta, fa, tb, fb)
    d, dj = ya - yb, fa - fb
    low, high = ppi_py.ppi_mean_ci(d[labelled], dj[labelled], dj[~labelled], alpha=0.05)
    np.testing.assert_allclose([got.low[0], got.high[0]], [low[0], high[0]], rtol=0, atol=1e-14)
    point = ppi_py.ppi_mean_pointestimate(d[labelled], dj[labelled], dj[~labelled])
    np.testing.assert_allclose(got.estimate[0], np.ravel(point)[0], rtol=0, atol=1e-14)
    p = ppi_py.ppi_mean_pval(d[labelled], dj[labelled], dj[~labelled], null=0)
    np.testing.assert_allclose(got.p_value[0], np.ravel(p)[0], rtol=1e-10)
    # a key only one policy has a trusted grade of is unlabelled for the difference
    half = ppi_paired(ta, fa, np.where(labelled & (np.arange(n_keys) % 2 == 0), yb, np.nan), fb)
    assert half.n_labelled[0] == int((labelled & (np.arange(n_keys) % 2 == 0)).sum())


def test_a_useless_judge_gives_the_classical_mean() -> None:
    y, _, _ = _sample(60, 600, 0.5, 1.0, seed=3)
    constant = ppi_mean(np.r_[y, np.full(600, np.nan)], np.full(660, 0.7))
    assert constant.lam[0] == 0 and constant.estimate[0] == y.mean()
    assert constant.stderr[0] == constant.classical_stderr[0]
    no_unlabelled = ppi_mean(y, 1 - y)  # every key labelled: nothing to borrow
    assert no_unlabelled.lam[0] == 0 and no_unlabelled.estimate[0] == y.mean()


def test_a_perfect_judge_is_worth_nearly_every_key() -> None:
    y, f, fu = _sample(100, 9_900, 0.4, 1.0, seed=4)
    got = ppi_mean(np.r_[y, np.full(9_900, np.nan)], np.r_[f, fu])
    # lam = var(y) / ((1 + n/N) var(f)): the labelled keys' variance over every key's
    var_ratio = y.var() / np.r_[f, fu].var(ddof=1)
    assert got.lam[0] == pytest.approx(var_ratio * 9_900 / 10_000, rel=1e-12)
    assert got.effective_n[0] > 50 * 100  # the classical mean would need thousands of labels
    assert got.judge[0] == pytest.approx(np.r_[f, fu].mean())


def test_fewer_than_two_labels_give_nan_and_bad_input_is_refused() -> None:
    got = ppi_mean([1.0, np.nan, np.nan, 0.0, np.nan], [1.0, 1.0, 0.0, 0.0, 1.0],
                   [0, 0, 0, 1, 1], n_groups=3)  # fmt: skip
    assert np.isnan(got.estimate).all() and got.n_labelled.tolist() == [1, 1, 0]
    with pytest.raises(InputError, match="fill abstentions"):
        ppi_mean([1.0, 0.0], [np.nan, 1.0])
    with pytest.raises(InputError, match="lam must be"):
        ppi_mean([1.0, 0.0], [1.0, 1.0], lam=1.5)
    with pytest.raises(InputError, match="group codes"):
        ppi_mean([1.0, 0.0], [1.0, 1.0], [0, 3], n_groups=2)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), st.floats(0, 1), st.integers(0, 2)), min_size=8, max_size=80),
    st.floats(0.5, 0.99),
)
def test_intervals_hold_their_point_and_lam_stays_in_0_1(
    rows: list[tuple[bool, float, int]], level: float
) -> None:
    t = np.array([float(r[1] > 0.5) if r[0] else np.nan for r in rows])
    f = np.array([r[1] for r in rows])
    g = np.array([r[2] for r in rows])
    got = ppi_mean(t, f, g, n_groups=3, level=level)
    ok = np.isfinite(got.estimate)
    assert ((got.low[ok] <= got.estimate[ok]) & (got.estimate[ok] <= got.high[ok])).all()
    assert ((got.lam[ok] >= 0) & (got.lam[ok] <= 1)).all()
    assert (got.n_labelled + got.n_unlabelled).tolist() == np.bincount(g, minlength=3).tolist()
