"""``bootstrap_test``: the test each bootstrap interval inverts, from the interval's draws."""

from __future__ import annotations

import numpy as np
import pytest

from hylo_analytics.stats import bootstrap_means, bootstrap_test
from hylo_analytics.stats.bootstrap import BootstrapMethod, bootstrap_cis

METHODS: list[BootstrapMethod] = ["percentile", "bca", "studentized"]


def _groups(seed: int) -> tuple[np.ndarray, list[int]]:
    """Continuous groups, -1/0/1 groups (the counts path), shifted and flat ones."""
    rng = np.random.default_rng(seed)
    groups = [rng.normal(rng.uniform(-0.6, 0.6), 1, rng.integers(5, 40)) for _ in range(5)]
    groups += [rng.integers(-1, 2, rng.integers(5, 40)).astype(float) for _ in range(4)]
    groups += [rng.poisson(3, 25) - 2.0, np.zeros(6), np.full(4, 2.0), np.full(3, -1.0)]
    return np.concatenate(groups), [len(g) for g in groups]


@pytest.mark.parametrize("method", METHODS)
def test_the_bounds_are_bootstrap_cis_bounds(method: BootstrapMethod) -> None:
    x, sizes = _groups(0)
    got = bootstrap_test(x, sizes, levels=[0.95, 0.9], method=method, seed=4, n_resamples=999)
    want = bootstrap_cis(x, sizes, levels=[0.95, 0.9], method=method, seed=4, n_resamples=999)
    for (lo, hi), (wlo, whi) in zip(got.bounds, want, strict=True):
        assert np.array_equal(lo, wlo, equal_nan=True) and np.array_equal(hi, whi, equal_nan=True)


@pytest.mark.parametrize("method", ["percentile", "bca"])
@pytest.mark.parametrize("seed", range(6))
def test_the_one_sided_test_rejects_where_the_interval_excludes_zero(
    method: BootstrapMethod, seed: int
) -> None:
    """At alpha 0.05 one-sided, p < alpha exactly where the 90 % interval clears 0."""
    x, sizes = _groups(seed)
    t = bootstrap_test(x, sizes, levels=[0.90], method=method, seed=seed, n_resamples=2000)
    lo, hi = t.bounds[0]
    assert np.array_equal(t.p_greater < 0.05, lo > 0)
    assert np.array_equal(t.p_less < 0.05, hi < 0)
    assert np.array_equal(t.p_two_sided, np.minimum(1, 2 * np.minimum(t.p_greater, t.p_less)))


def test_the_percentile_p_is_the_share_of_resampled_means_at_or_below_zero() -> None:
    rng = np.random.default_rng(2)
    x = np.concatenate([rng.normal(0.2, 1, 30), rng.normal(-0.1, 2, 45)])
    sizes = [30, 45]
    t = bootstrap_test(x, sizes, levels=[0.95], seed=9, n_resamples=1999)
    ((g0, g1, means),) = list(bootstrap_means(x, sizes, seed=9, n_resamples=1999, binary=False))
    assert (g0, g1) == (0, 2)
    want_up = (1 + (means <= 0).sum(axis=1)) / 2000
    want_down = (1 + (means >= 0).sum(axis=1)) / 2000
    assert np.array_equal(t.p_greater, want_up) and np.array_equal(t.p_less, want_down)


@pytest.mark.parametrize("method", METHODS)
def test_a_group_without_spread_rejects_only_on_its_side(method: BootstrapMethod) -> None:
    x = np.array([0.0] * 5 + [2.0] * 4 + [-1.5] * 3)
    t = bootstrap_test(x, [5, 4, 3], levels=[0.95], method=method, seed=0, n_resamples=500)
    assert t.p_greater[0] == 1.0 and t.p_less[0] == 1.0  # at the null: no evidence either way
    assert t.p_greater[1] == pytest.approx(1 / 501) and t.p_less[1] == 1.0
    assert t.p_greater[2] == 1.0 and t.p_less[2] == pytest.approx(1 / 501)


def test_the_studentized_test_is_the_bootstrap_t_test() -> None:
    """Shifting the null by the mean makes t_obs 0: the p is about one half either way."""
    rng = np.random.default_rng(5)
    x = rng.lognormal(0, 1, 60)
    at_mean = bootstrap_test(x, [60], levels=[0.95], method="studentized", null=float(x.mean()),
                             seed=1, n_resamples=4000)  # fmt: skip
    assert 0.4 < at_mean.p_greater[0] < 0.6 and 0.4 < at_mean.p_less[0] < 0.6
    far = bootstrap_test(x, [60], levels=[0.95], method="studentized", seed=1, n_resamples=4000)
    assert far.p_greater[0] == pytest.approx(1 / 4001)  # lognormal values: all above 0


def test_empty_groups_get_nan_and_levels_are_needed() -> None:
    t = bootstrap_test([1.0, 2.0], [0, 2], levels=[0.95], seed=0, n_resamples=100)
    assert np.isnan(t.p_greater[0]) and np.isnan(t.p_less[0])
    with pytest.raises(ValueError, match="at least one level"):
        bootstrap_test([1.0], [1], levels=[])
