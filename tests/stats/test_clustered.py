"""CR2 cluster-robust inference against statsmodels (CR1) and the matrix formulas (CR2, the
Bell-McCaffrey df, the pooled contrast), plus the invariants that pin its closed form."""

from __future__ import annotations

import numpy as np
import pytest
import statsmodels.api as sm
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from hylo_analytics.errors import InputError
from hylo_analytics.stats import (
    cluster_robust,
    cluster_robust_over,
    cluster_totals,
    mean_interval,
    paired_interval,
    pool_strata,
)


def _data(sizes: list[int], seed: int, icc: float = 0.4) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    g = np.repeat(np.arange(len(sizes)), sizes)
    y = np.sqrt(icc) * rng.normal(size=len(sizes))[g] + np.sqrt(1 - icc) * rng.normal(size=len(g))
    return y + rng.exponential(size=len(g)), g


def _matrix_cr2(
    y: np.ndarray, g: np.ndarray, x: np.ndarray | None = None, c: np.ndarray | None = None
) -> tuple[float, float]:
    """CR2 variance of ``c'beta`` and its Bell-McCaffrey df, by the textbook matrices:
    ``A_g = (I - H_gg)^(-1/2)``, ``V = c'(X'X)^-1 sum X_g' A_g e_g e_g' A_g X_g (X'X)^-1 c``,
    ``G_g = (I - H)_g' A_g X_g (X'X)^-1 c``, ``df = tr(G'G)^2 / tr((G'G)^2)``."""
    x = np.ones((len(y), 1)) if x is None else x
    c = np.ones(x.shape[1]) if c is None else c
    inv = np.linalg.inv(x.T @ x)
    h = x @ inv @ x.T
    e = y - h @ y
    resid = np.eye(len(y)) - h
    meat, cols = np.zeros((x.shape[1], x.shape[1])), []
    for label in np.unique(g):
        at = g == label
        w, v = np.linalg.eigh(np.eye(at.sum()) - h[np.ix_(at, at)])
        a = v @ np.diag(w**-0.5) @ v.T
        u = x[at].T @ a @ e[at]
        meat += np.outer(u, u)
        cols.append(resid[at].T @ a @ x[at] @ inv @ c)
    var = float(c @ inv @ meat @ inv @ c)
    m = np.column_stack(cols).T @ np.column_stack(cols)
    return var, float(np.trace(m) ** 2 / np.trace(m @ m))


def _fit(y: np.ndarray, g: np.ndarray, groups: np.ndarray | None = None):
    counts, sizes, sums = cluster_totals(y, g, groups)
    return cluster_robust(sizes, sums, counts)


CASES = [([3, 7, 1, 12, 5], 1), ([20] * 10, 2), ([5, 35, 12, 8], 3), ([2, 2, 40], 4)]


@pytest.mark.parametrize(("sizes", "seed"), CASES)
def test_cr1_matches_statsmodels_ols_cluster(sizes, seed):
    y, g = _data(sizes, seed)
    fit = _fit(y, g)
    # statsmodels' small-sample correction G/(G-1) * (N-1)/(N-K) is G/(G-1) at K = 1
    ref = sm.OLS(y, np.ones(len(y))).fit(cov_type="cluster", cov_kwds={"groups": g})
    assert fit.mean[0] == pytest.approx(ref.params[0], rel=1e-12)
    assert fit.se_cr1[0] == pytest.approx(ref.bse[0], rel=1e-10)
    assert fit.n_clusters[0] == len(sizes)


@pytest.mark.parametrize(("sizes", "seed"), CASES)
def test_cr2_and_its_df_match_the_matrix_formulas(sizes, seed):
    y, g = _data(sizes, seed)
    var, df = _matrix_cr2(y, g)
    fit = _fit(y, g)
    assert fit.se[0] == pytest.approx(np.sqrt(var), rel=1e-10)
    assert fit.df[0] == pytest.approx(df, rel=1e-10)
    lo, hi = fit.bounds(0.9)
    q = stats.t.ppf(0.95, df)
    assert (lo[0], hi[0]) == pytest.approx(
        (y.mean() - q * np.sqrt(var), y.mean() + q * np.sqrt(var))
    )
    t = y.mean() / np.sqrt(var)
    assert fit.p("greater")[0] == pytest.approx(stats.t.sf(t, df), rel=1e-9)
    assert fit.p("less", null=1.0)[0] == pytest.approx(
        stats.t.cdf((y.mean() - 1) / np.sqrt(var), df)
    )


def test_every_group_in_one_call_equals_each_alone():
    parts = [_data(s, seed) for s, seed in CASES]
    y = np.concatenate([p[0] for p in parts])
    g = np.concatenate([p[1] for p in parts])
    groups = np.repeat(np.arange(len(parts)), [len(p[0]) for p in parts])
    together = _fit(y, g, groups)
    for i, (yy, gg) in enumerate(parts):
        alone = _fit(yy, gg)
        assert together.se[i] == pytest.approx(alone.se[0], rel=1e-12)
        assert together.df[i] == pytest.approx(alone.df[0], rel=1e-12)


def test_equal_clusters_give_g_minus_1_df_and_cr2_equals_cr1():
    y, g = _data([8] * 6, 5)
    fit = _fit(y, g)
    assert fit.df[0] == pytest.approx(5.0)
    assert fit.se[0] == pytest.approx(fit.se_cr1[0], rel=1e-12)


def test_one_key_per_cluster_is_the_t_interval():
    y = np.random.default_rng(0).normal(size=15)
    fit = _fit(y, np.arange(15))
    assert fit.se[0] == pytest.approx(y.std(ddof=1) / np.sqrt(15), rel=1e-12)
    assert fit.df[0] == pytest.approx(14.0)
    lo, hi = fit.bounds(0.95)
    ref = stats.t.interval(0.95, 14, loc=y.mean(), scale=stats.sem(y))
    assert (lo[0], hi[0]) == pytest.approx(ref, rel=1e-10)


def test_one_cluster_has_no_interval_and_flat_values_a_point():
    fit = cluster_robust([4.0, 0.0], [2.0, 0.0], [1, 1])
    assert np.isnan(fit.se).all() and np.isnan(fit.bounds(0.95)[0]).all()
    assert fit.mean[0] == 0.5 and np.isnan(fit.mean[1])
    flat = _fit(np.full(6, 0.25), np.repeat([0, 1, 2], 2))
    assert flat.bounds(0.95) == (pytest.approx([0.25]), pytest.approx([0.25]))
    assert flat.p("greater")[0] == 0.0 and flat.p("greater", null=0.25)[0] == 0.5
    got = paired_interval("cr2", [0.95], [4.0], clusters=cluster_robust([4.0], [2.0], [1]))
    assert got.p_greater[0] == 1.0 and got.p_less[0] == 1.0  # no test: no evidence


def test_streamed_clusters_equal_the_ragged_layout():
    sizes = np.array([[3.0, 0.0, 5.0], [4.0, 6.0, 0.0], [0.0, 2.0, 7.0]])  # clusters x groups
    sums = np.array([[1.0, 0.0, -2.0], [3.0, -1.5, 0.0], [0.0, 0.5, 4.0]])
    streamed = cluster_robust_over(sizes.sum(0), sums.sum(0), zip(sizes, sums, strict=True))
    ragged = cluster_robust(sizes.T.ravel(), sums.T.ravel(), [3, 3, 3])
    for field in ("mean", "se", "df", "se_cr1"):
        assert getattr(streamed, field) == pytest.approx(getattr(ragged, field), rel=1e-12)
    assert streamed.n_clusters.tolist() == [2, 2, 2]


def test_pooled_strata_match_the_regression_on_suite_dummies():
    parts = [_data([4, 9, 6], 7), _data([10, 3, 3, 8], 8), _data([5, 5], 9)]
    y = np.concatenate([p[0] for p in parts])
    suite = np.repeat(np.arange(3), [len(p[0]) for p in parts])
    g = suite * 100 + np.concatenate([p[1] for p in parts])  # clusters nested in suites
    w = np.array([0.5, 0.3, 0.2])
    x = (suite[:, None] == np.arange(3)).astype(float)
    var, df = _matrix_cr2(y, g, x, w)
    pooled = pool_strata(_fit(y, g, suite), w)
    assert pooled.mean[0] == pytest.approx(
        sum(wi * p[0].mean() for wi, p in zip(w, parts, strict=True))
    )
    assert pooled.se[0] == pytest.approx(np.sqrt(var), rel=1e-10)
    assert pooled.df[0] == pytest.approx(df, rel=1e-10)
    assert pooled.n_clusters[0] == 9


def test_the_entry_points_name_and_need_the_fit():
    y, g = _data([5, 6, 7], 1)
    fit = _fit(y, g)
    got = paired_interval("cr2", [0.95, 0.9], [len(y)], clusters=fit)
    assert got.ci_method == "cr2" and got.test == "cr2 t"
    assert got.bounds[1][0][0] > got.bounds[0][0][0]
    assert mean_interval("cr2", [len(y)], level=0.9, clusters=fit)[0] == pytest.approx(
        got.bounds[1][0]
    )
    with pytest.raises(InputError, match="clusters="):
        paired_interval("cr2", [0.95], [3])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(1, 12), min_size=2, max_size=9),
    st.integers(0, 2**31),
    st.floats(-5, 5),
    st.floats(0.1, 10),
)
def test_invariants(sizes, seed, shift, scale):
    y, g = _data(sizes, seed)
    fit = _fit(y, g)
    moved = _fit(shift + scale * y, g)
    assert moved.mean[0] == pytest.approx(shift + scale * fit.mean[0], rel=1e-9, abs=1e-9)
    assert moved.se[0] == pytest.approx(scale * fit.se[0], rel=1e-9)
    assert moved.df[0] == pytest.approx(fit.df[0], rel=1e-12)  # the design's, not the data's
    assert 1 - 1e-9 <= fit.df[0] <= len(sizes) - 1 + 1e-9
    relabelled = _fit(y, (g * 7919) % 10007)  # cluster order and labels do not matter
    assert relabelled.se[0] == pytest.approx(fit.se[0], rel=1e-12)
    lo, hi = fit.bounds(0.95)
    assert lo[0] <= fit.mean[0] <= hi[0]
