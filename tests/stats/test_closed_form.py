"""Intervals against golden values (statsmodels/scipy, computed once and pinned) and properties."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from hylo_analytics import stats as iv
from hylo_analytics.stats.bootstrap import _row_quantiles

# statsmodels.stats.proportion.proportion_confint(k, n, alpha, method="wilson" / "beta")
GOLDEN_BINOMIAL = [
    # k, n, level, wilson, clopper_pearson
    (7, 10, 0.95, (0.396778, 0.892209), (0.347547, 0.933260)),
    (0, 10, 0.95, (0.0, 0.277533), (0.0, 0.308497)),
    (10, 10, 0.95, (0.722467, 1.0), (0.691503, 1.0)),
    (1, 20, 0.90, (0.011235, 0.196007), (0.002561, 0.216106)),
    (45, 50, 0.99, (0.740269, 0.966009), (0.741950, 0.977782)),
    (3, 1000, 0.95, (0.001021, 0.008783), (0.000619, 0.008742)),
]

# scipy.stats.bootstrap(..., n_resamples=200_000, random_state=0)
SKEWED = np.array([0.3, 1.2, 2.5, 0.1, 4.0, 0.7, 1.9, 3.3, 0.2, 5.5])
SKEWED_PERCENTILE = (0.96, 3.10)
SKEWED_BCA = (1.04, 3.23)
BINARY_13_OF_40 = np.array([1.0] * 13 + [0.0] * 27)
BINARY_PERCENTILE = (0.175, 0.475)
BINARY_BCA = (0.200, 0.475)


@pytest.mark.parametrize(("k", "n", "level", "wil", "cp"), GOLDEN_BINOMIAL)
def test_binomial_intervals_match_statsmodels(k, n, level, wil, cp):
    lo, hi = iv.wilson([k], [n], level)
    assert (lo[0], hi[0]) == pytest.approx(wil, abs=1e-6)
    lo, hi = iv.clopper_pearson([k], [n], level)
    assert (lo[0], hi[0]) == pytest.approx(cp, abs=1e-6)


def test_binomial_intervals_are_vectorized_and_nan_for_empty_groups():
    k = np.array([7, 0, 3])
    n = np.array([10, 0, 1000])
    lo, hi = iv.wilson(k, n)
    assert np.isnan(lo[1]) and np.isnan(hi[1])
    assert lo[[0, 2]] == pytest.approx([0.396778, 0.001021], abs=1e-6)
    lo, hi = iv.clopper_pearson(k, n)
    assert np.isnan(lo[1]) and hi[2] == pytest.approx(0.008742, abs=1e-6)


def test_normal_interval_matches_statsmodels():
    lo, hi = iv.normal_ci([0.7], [np.sqrt(0.7 * 0.3 / 10)])
    assert (lo[0], hi[0]) == pytest.approx((0.415974, 0.984026), abs=1e-6)


def test_level_outside_zero_one_is_an_error():
    with pytest.raises(ValueError, match="level must be between 0 and 1"):
        iv.wilson([1], [2], level=95)


@pytest.mark.parametrize(
    ("method", "expected"), [("percentile", SKEWED_PERCENTILE), ("bca", SKEWED_BCA)]
)
def test_bootstrap_matches_scipy_within_monte_carlo_error(method, expected):
    lo, hi = iv.bootstrap_ci(SKEWED, [10], method=method, n_resamples=50_000, seed=1)
    assert (lo[0], hi[0]) == pytest.approx(expected, abs=0.05)


@pytest.mark.parametrize("binary", [True, False])
@pytest.mark.parametrize(
    ("method", "expected"), [("percentile", BINARY_PERCENTILE), ("bca", BINARY_BCA)]
)
def test_binary_shortcut_and_general_path_match_scipy(method, expected, binary):
    lo, hi = iv.bootstrap_ci(
        BINARY_13_OF_40, [40], method=method, n_resamples=50_000, seed=2, binary=binary
    )
    assert (lo[0], hi[0]) == pytest.approx(expected, abs=0.026)


def test_bootstrap_many_groups_in_one_pass_with_small_memory_budget():
    rng = np.random.default_rng(5)
    sizes = np.array([10, 25, 10, 0, 40])
    values = rng.exponential(size=sizes.sum())
    lo, hi = iv.bootstrap_ci(values, sizes, n_resamples=4000, seed=3, max_bytes=50_000)
    assert np.isnan(lo[3]) and np.isnan(hi[3])
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    for g in (0, 1, 2, 4):
        x = values[starts[g] : starts[g] + sizes[g]]
        one_lo, one_hi = iv.bootstrap_ci(x, [len(x)], n_resamples=4000, seed=9)
        width = one_hi[0] - one_lo[0]
        assert lo[g] == pytest.approx(one_lo[0], abs=0.15 * width)
        assert hi[g] == pytest.approx(one_hi[0], abs=0.15 * width)


def test_same_seed_same_interval_and_generator_accepted():
    a = iv.bootstrap_ci(SKEWED, [10], method="bca", n_resamples=2000, seed=7)
    b = iv.bootstrap_ci(SKEWED, [10], method="bca", n_resamples=2000, seed=7)
    c = iv.bootstrap_ci(SKEWED, [10], method="bca", n_resamples=2000, seed=8)
    g = iv.bootstrap_ci(SKEWED, [10], method="bca", n_resamples=2000, seed=np.random.default_rng(7))
    assert a == b
    assert a != c
    assert g == a


def test_stratified_bootstrap_resamples_within_strata_only():
    # Task A always fails, task B always succeeds: within-task resampling cannot move the mean.
    values = np.array([0.0] * 10 + [1.0] * 10)
    lo, hi = iv.bootstrap_ci(values, [20], strata_sizes=[10, 10], n_resamples=2000, seed=0)
    assert lo[0] == hi[0] == 0.5
    lo, hi = iv.bootstrap_ci(values, [20], n_resamples=2000, seed=0)
    assert hi[0] - lo[0] > 0.3


def test_stratified_groups_must_align_with_strata():
    with pytest.raises(ValueError, match="must end where one of its strata ends"):
        next(iv.bootstrap_means(np.ones(6), [3, 3], strata_sizes=[2, 4]))


def test_clustered_stderr_matches_statsmodels_ols_cluster():
    # statsmodels OLS(y, 1).fit(cov_type="cluster", use_correction=False / True).bse
    y = np.array([1, 2, 3, 4, 5, 6.0, 10, 2])
    g = np.array([0, 0, 1, 1, 2, 2, 3, 3])
    assert iv.clustered_stderr(y, g)[0] == pytest.approx(0.89048793, abs=1e-8)
    assert iv.clustered_stderr(y, g, small_sample=True)[0] == pytest.approx(1.02824689, abs=1e-8)


def test_clustered_stderr_per_group_and_singleton_clusters():
    x = np.array([1.0, 2, 3, 4, 5, 6])
    groups = np.array(["a", "a", "a", "b", "b", "b"])
    # one value per cluster: the plain std(ddof=0) / sqrt(n) of each group
    se = iv.clustered_stderr(x, np.arange(6), groups)
    assert se == pytest.approx([np.std(x[:3]) / np.sqrt(3), np.std(x[3:]) / np.sqrt(3)])
    one = iv.clustered_stderr(x[:3], [0, 0, 0], small_sample=True)
    assert np.isnan(one[0])


# -- properties ---------------------------------------------------------------------------------

counts = st.integers(1, 400).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n)))
samples = st.lists(
    st.floats(-1e3, 1e3, allow_nan=False, allow_subnormal=False), min_size=2, max_size=40
)


@settings(deadline=None)
@given(counts, st.sampled_from([iv.wilson, iv.clopper_pearson]))
def test_binomial_interval_contains_estimate_and_nests(kn, fn):
    k, n = kn
    lo95, hi95 = fn([k], [n], 0.95)
    lo90, hi90 = fn([k], [n], 0.90)
    assert lo95[0] <= k / n <= hi95[0]
    assert lo95[0] <= lo90[0] + 1e-12 and hi90[0] <= hi95[0] + 1e-12


@settings(max_examples=40, deadline=None)
@given(samples, st.sampled_from(["percentile", "bca"]))
def test_bootstrap_nests_and_percentile_contains_mean(xs, method):
    x = np.array(xs)
    lo95, hi95 = iv.bootstrap_ci(x, [len(x)], method=method, n_resamples=500, seed=0)
    lo90, hi90 = iv.bootstrap_ci(x, [len(x)], method=method, level=0.9, n_resamples=500, seed=0)
    assert lo95[0] <= lo90[0] + 1e-9 and hi90[0] <= hi95[0] + 1e-9
    if method == "percentile":
        assert lo95[0] - 1e-9 <= x.mean() <= hi95[0] + 1e-9


@settings(max_examples=40, deadline=None)
@given(
    samples,
    st.floats(0.01, 100),
    st.floats(-100, 100),
    st.sampled_from(["percentile", "bca"]),
)
def test_affine_data_gives_affine_interval(xs, a, b, method):
    x = np.array(xs)
    # rounding can merge two values (1 + 6e-299 == 1): that is other data, not an affine image
    assume(len(np.unique(a * x + b)) == len(np.unique(x)))
    kw = {"method": method, "n_resamples": 500, "seed": 4, "binary": False}
    lo, hi = iv.bootstrap_ci(x, [len(x)], **kw)
    lo2, hi2 = iv.bootstrap_ci(a * x + b, [len(x)], **kw)
    scale = a * (np.abs(x).max() + 1) + abs(b)
    assert lo2[0] == pytest.approx(a * lo[0] + b, abs=1e-6 * scale)
    assert hi2[0] == pytest.approx(a * hi[0] + b, abs=1e-6 * scale)


@settings(deadline=None)
@given(st.floats(-1e3, 1e3, allow_nan=False), st.integers(1, 30))
def test_constant_data_gives_zero_width(c, n):
    x = np.full(n, c)
    for method in ("percentile", "bca"):
        lo, hi = iv.bootstrap_ci(x, [n], method=method, n_resamples=200, seed=0)
        assert lo[0] == hi[0] == pytest.approx(c)
    lo, hi = iv.normal_ci([c], [0.0])
    assert lo[0] == hi[0] == c


@pytest.mark.parametrize("b", [2, 10, 999, 10_000])
@pytest.mark.parametrize("level", [0.9, 0.95, 0.5])
def test_row_quantiles_match_numpy_linear_quantiles(b, level):
    rng = np.random.default_rng(b)
    s = rng.random((5, b))
    q = np.array([(1 - level) / 2, (1 + level) / 2])
    expected = np.quantile(s, q, axis=1)
    shared = _row_quantiles(s.copy(), np.broadcast_to(q, (5, 2)))
    per_row = _row_quantiles(s.copy(), np.array([q, q, q, q, [0.1, 0.2]]))
    assert np.allclose(shared, expected)
    assert np.allclose(np.array(per_row)[:, :4], expected[:, :4])
    assert np.allclose([per_row[0][4], per_row[1][4]], np.quantile(s[4], [0.1, 0.2]))


@pytest.mark.parametrize("level", [0.8, 0.9, 0.95, 0.99])
def test_z_value_is_scipys_normal_quantile_bit_for_bit(level: float) -> None:
    """The default level's z is a literal (no scipy import to open a store): scipy's value."""
    from scipy import special

    from hylo_analytics.stats.closed_form import z_value

    assert z_value(level) == float(special.ndtri(0.5 + level / 2))


def test_the_old_module_name_warns_and_gives_the_same_objects() -> None:
    import importlib
    import sys

    from hylo_analytics.stats import closed_form

    sys.modules.pop("hylo_analytics.stats.intervals", None)
    with pytest.warns(DeprecationWarning, match=r"renamed hylo_analytics\.stats\.closed_form"):
        old = importlib.import_module("hylo_analytics.stats.intervals")
    assert old.__all__ == closed_form.__all__
    for name in closed_form.__all__:
        assert getattr(old, name) is getattr(closed_form, name), name
