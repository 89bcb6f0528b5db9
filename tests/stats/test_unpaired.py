"""The Miettinen-Nurminen interval and test of two independent rates, against scipy's
optimizer of the restricted likelihood, statsmodels' pooled score test and invariants."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize, stats
from statsmodels.stats import proportion as sm_proportion

from hylo_analytics.stats.unpaired import score_diff_ci, score_diff_p

TABLES = [(31, 50, 20, 50), (7, 34, 1, 34), (5, 8, 7, 9), (45, 200, 60, 210), (1, 30, 0, 40),
          (99, 100, 100, 100), (12, 15, 3, 40), (0, 10, 1, 12), (10, 10, 0, 10), (0, 5, 5, 5),
          (0, 10, 0, 12), (3, 3, 3, 3)]  # fmt: skip


def _restricted(k1: int, n1: int, k2: int, n2: int, d: float) -> tuple[float, float]:
    """The rates maximizing the likelihood under ``p1 - p2 = d``, by scipy's optimizer."""

    def nll(p2: float) -> float:
        p1 = p2 + d
        with np.errstate(divide="ignore"):
            terms = [k1 * np.log(p1), (n1 - k1) * np.log1p(-p1), k2 * np.log(p2),
                     (n2 - k2) * np.log1p(-p2)]  # fmt: skip
        return -float(sum(t for t, c in zip(terms, (k1, n1 - k1, k2, n2 - k2), strict=False) if c))

    lo, hi = max(0.0, -d), min(1.0, 1.0 - d)
    got = optimize.minimize_scalar(nll, bounds=(lo, hi), method="bounded",
                                   options={"xatol": 1e-13})  # fmt: skip
    return got.x + d, got.x


def _statistic(k1: int, n1: int, k2: int, n2: int, d: float) -> float:
    r1, r2 = _restricted(k1, n1, k2, n2, d)
    n = n1 + n2
    var = (r1 * (1 - r1) / n1 + r2 * (1 - r2) / n2) * n / (n - 1)
    return float((k1 / n1 - k2 / n2 - d) / np.sqrt(var))


def _reference_ci(k1: int, n1: int, k2: int, n2: int, level: float) -> tuple[float, float]:
    z = stats.norm.ppf(0.5 + level / 2)
    diff = k1 / n1 - k2 / n2
    eps = 1e-9
    low = (-1.0 if diff <= -1 + eps else
           optimize.brentq(lambda d: _statistic(k1, n1, k2, n2, d) - z, -1 + eps,
                           min(diff, 1 - eps), xtol=1e-13))  # fmt: skip
    high = (1.0 if diff >= 1 - eps else
            optimize.brentq(lambda d: _statistic(k1, n1, k2, n2, d) + z, max(diff, -1 + eps),
                            1 - eps, xtol=1e-13))  # fmt: skip
    return low, high


@pytest.mark.parametrize("table", TABLES)
@pytest.mark.parametrize("level", [0.95, 0.9])
def test_interval_inverts_the_score_test_of_the_restricted_mle(table, level):
    low, high = score_diff_ci(*table, level)
    ref = _reference_ci(*table, level)
    assert float(low) == pytest.approx(ref[0], abs=2e-7)
    assert float(high) == pytest.approx(ref[1], abs=2e-7)


@pytest.mark.parametrize("table", TABLES)
@pytest.mark.parametrize("d0", [-0.3, -0.05, 0.1, 0.25])
def test_one_sided_p_at_any_difference_matches_the_reference_statistic(table, d0):
    k1, n1, k2, n2 = table
    if not (max(0.0, -d0) < min(1.0, 1.0 - d0)):
        return
    t = _statistic(k1, n1, k2, n2, d0)
    assert float(score_diff_p(*table, d0, "greater")) == pytest.approx(stats.norm.sf(t), abs=1e-7)
    assert float(score_diff_p(*table, d0, "less")) == pytest.approx(stats.norm.cdf(t), abs=1e-7)


@pytest.mark.parametrize("table", [t for t in TABLES if 0 < t[0] + t[2] < t[1] + t[3]])
def test_p_of_no_difference_is_statsmodels_pooled_score_test(table):
    # at delta = 0 statsmodels takes the pooled rate, untouched by its cubic (issue #10269)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for alt, ours in (("larger", "greater"), ("smaller", "less")):
            ref = sm_proportion.test_proportions_2indep(*table, method="score", compare="diff",
                                          alternative=alt, correction=True).pvalue  # fmt: skip
            assert float(score_diff_p(*table, 0.0, ours)) == pytest.approx(ref, rel=1e-10)


def test_boundaries_and_empty_sides():
    low, high = score_diff_ci([10, 0, 0, 3], [10, 5, 10, 0], [0, 5, 0, 1], [10, 5, 12, 2])
    assert high[0] == 1.0 and low[0] > 0.5  # all vs none
    assert low[1] == -1.0 and -0.6 < high[1] < -0.3
    assert low[2] < 0 < high[2]  # none on both sides still leaves a width
    assert np.isnan(low[3]) and np.isnan(high[3])  # a side with no sample
    assert np.isnan(score_diff_p(3, 0, 1, 2))
    # a pooled rate of 0 or 1 carries no evidence either way (statsmodels gives nan there)
    assert float(score_diff_p(0, 10, 0, 12)) == float(score_diff_p(3, 3, 3, 3)) == 0.5


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 60), st.integers(1, 60), st.data())
def test_invariants(n1, n2, data):
    k1, k2 = data.draw(st.integers(0, n1)), data.draw(st.integers(0, n2))
    low, high = score_diff_ci(k1, n1, k2, n2, 0.95)
    m_low, m_high = score_diff_ci(k2, n2, k1, n1, 0.95)  # the mirror
    assert float(low) == pytest.approx(-float(m_high), abs=1e-9)
    assert float(high) == pytest.approx(-float(m_low), abs=1e-9)
    diff = k1 / n1 - k2 / n2
    assert -1.0 <= low <= diff + 1e-12 and diff - 1e-12 <= high <= 1.0
    wide_low, wide_high = score_diff_ci(k1, n1, k2, n2, 0.99)
    assert wide_low <= low + 1e-12 and high <= wide_high + 1e-12
    # the interval and the test say the same thing: 0 left out iff one side rejects
    up, down = float(score_diff_p(k1, n1, k2, n2)), float(score_diff_p(k1, n1, k2, n2, 0, "less"))
    if abs(float(low)) > 1e-6:
        assert (float(low) > 0) == (up < 0.025)
    if abs(float(high)) > 1e-6:
        assert (float(high) < 0) == (down < 0.025)
