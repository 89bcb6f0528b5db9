"""Paired-proportion intervals: published golden values, invariants, and a stratified bootstrap
whose variance is the stratified variance."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hylo_analytics.stats import bootstrap_ci, bootstrap_means
from hylo_analytics.stats.paired import newcombe_ci, tango_ci, tango_p

# Fagerland, Lydersen & Laake, Statistical Analysis of Contingency Tables (2017), ch. 8:
# complete response before and after consolidation therapy (Cavo et al. 2012),
# table [[59, 6], [16, 80]], difference (6 - 16) / 161 = -0.0621; the values as printed by
# their R package contingencytables (tests/testthat/test-ch8.R).
CAVO = {"a": 59, "b": 6, "c": 16, "d": 80}


def test_tango_matches_the_published_example() -> None:
    lo, hi = tango_ci(CAVO["b"], CAVO["c"], 161)
    assert (round(float(lo), 4), round(float(hi), 4)) == (-0.1240, -0.0054)


def test_newcombe_matches_the_published_example() -> None:
    lo, hi = newcombe_ci(**CAVO)
    assert (round(float(lo), 4), round(float(hi), 4)) == (-0.1186, -0.0046)


def test_ties_keep_an_honest_width() -> None:
    """Three tied pairs are not evidence of "no change": the interval stays wide."""
    lo, hi = tango_ci(0, 0, 3)
    assert lo < -0.5 and hi > 0.5 and lo == pytest.approx(-hi)
    _, hi20 = tango_ci(0, 0, 20)
    assert 0 < hi20 < hi


def test_boundaries_are_exact() -> None:
    lo, hi = tango_ci([5, 0], [0, 5], [5, 5])
    assert hi[0] == 1.0 and lo[1] == -1.0
    assert np.isnan(tango_ci(0, 0, 0)[0])


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 60), st.integers(0, 60), st.integers(0, 60))
def test_interval_contains_the_estimate_and_inverts_the_test(b: int, c: int, ties: int) -> None:
    n = b + c + ties
    if n == 0:
        return
    lo, hi = tango_ci(b, c, n)
    est = (b - c) / n
    assert -1 <= lo <= est <= hi <= 1
    # at each bound the one-sided score test sits at alpha / 2 (away from the boundaries)
    if lo > -1 + 1e-9:
        assert tango_p(b, c, n, lo, "greater") == pytest.approx(0.025, abs=1e-6)
    if hi < 1 - 1e-9:
        assert tango_p(b, c, n, hi, "less") == pytest.approx(0.025, abs=1e-6)


def test_stratified_bootstrap_has_the_stratified_variance() -> None:
    """10 tasks at 45/50: strata never share draws, so the interval is the stratified one."""
    x = np.tile(np.r_[np.ones(45), np.zeros(5)], 10)
    lo, hi = bootstrap_ci(x, [500], strata_sizes=[50] * 10, seed=0)
    half = 1.959964 * np.sqrt(10 * 0.9 * 0.1 / 50) / 10  # sum_s (1/S)^2 p(1-p)/n_s
    assert lo[0] == pytest.approx(0.9 - half, abs=0.004)
    assert hi[0] == pytest.approx(0.9 + half, abs=0.004)
    y = np.random.default_rng(1).lognormal(size=500)
    means = next(bootstrap_means(y, [500], strata_sizes=[50] * 10, n_resamples=4000, seed=0))[2]
    var = sum(np.var(y[i * 50 : (i + 1) * 50]) / 50 for i in range(10)) / 100
    assert means.var() == pytest.approx(var, rel=0.08)


def test_many_tables_are_solved_once_each_with_the_same_bounds() -> None:
    """Thousands of rows (a ranking's pairs) share their tables: the interval and p of each
    row are those of its table solved alone, bit for bit."""
    from hylo_analytics.stats.paired import _tango_ci, _tango_p, tango_ci, tango_p

    rng = np.random.default_rng(0)
    n = rng.integers(0, 60, 20_000).astype(float)
    b = np.floor(rng.random(20_000) * (n + 1))
    c = np.floor(rng.random(20_000) * (n - b + 1))
    lo, hi = tango_ci(b, c, n, 0.95)
    want_lo, want_hi = _tango_ci(b, c, n, 0.95)
    assert np.array_equal(lo, want_lo, equal_nan=True)
    assert np.array_equal(hi, want_hi, equal_nan=True)
    p = tango_p(b, c, n, 0.05, "less")
    assert np.array_equal(p, _tango_p(b, c, n, np.full(n.shape, 0.05), "less"), equal_nan=True)
    # a hypothesis per row is solved row by row
    d0 = rng.uniform(-0.2, 0.2, 20_000)
    assert np.array_equal(tango_p(b, c, n, d0), _tango_p(b, c, n, d0, "greater"), equal_nan=True)
