"""Hall's skewness-corrected t interval (``stats.hall_ci``): golden values and invariants."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from hylo_analytics.aggregate import aggregate_scores
from hylo_analytics.stats import hall_ci


def _moments(x: np.ndarray) -> tuple[float, float, float, int]:
    return float(x.mean()), float(x.std(ddof=1)), float(stats.skew(x)), len(x)


def test_against_a_hand_computation() -> None:
    """x = 1, 2, 3, 10: mean 4, m2 = 50/4, m3 = 180/4, s = sqrt(50/3); Hall's cubic inverted
    the plain way, ((1 + 3a(u - b))^(1/3) - 1) / a."""
    n, mean, s = 4, 4.0, math.sqrt(50 / 3)
    gamma = 45 / 12.5**1.5
    a, b = gamma / (3 * math.sqrt(n)), gamma / (6 * math.sqrt(n))
    q = 3.182446305284263  # t(0.975; 3 df)

    def inverse(u: float) -> float:
        c = 1 + 3 * a * (u - b)  # negative for the upper bound here: the real cube root
        return (math.copysign(abs(c) ** (1 / 3), c) - 1) / a

    low, high = mean - s / 2 * inverse(q), mean - s / 2 * inverse(-q)
    got = hall_ci(*[[v] for v in _moments(np.array([1.0, 2.0, 3.0, 10.0]))])
    assert got[0][0] == pytest.approx(low, rel=1e-12) and got[0][0] == pytest.approx(-0.46254168)
    assert got[1][0] == pytest.approx(high, rel=1e-12) and got[1][0] == pytest.approx(26.51867588)


def test_without_skewness_it_is_the_t_interval_exactly() -> None:
    x = np.array([1.0, 2.0, 3.0, 5.0, 6.0, 7.0])  # symmetric: m3 is exactly 0
    mean, s, g, n = _moments(x)
    assert g == 0.0
    low, high = hall_ci([mean], [s], [g], [n])
    t_low, t_high = stats.t.interval(0.95, n - 1, loc=mean, scale=s / math.sqrt(n))
    assert low[0] == pytest.approx(t_low, rel=1e-15) and high[0] == pytest.approx(t_high, rel=1e-15)
    assert low[0] < mean < high[0]


def test_right_skew_moves_the_interval_up_and_mirroring_mirrors_it() -> None:
    x = np.random.default_rng(0).lognormal(0, 1, 40)
    mean, s, g, n = _moments(x)
    low, high = hall_ci([mean], [s], [g], [n])
    t_low, t_high = stats.t.interval(0.95, n - 1, loc=mean, scale=s / math.sqrt(n))
    assert t_low < low[0] and t_high < high[0] and high[0] - t_high > low[0] - t_low
    m_low, m_high = hall_ci(*[[v] for v in _moments(-x)])
    assert m_low[0] == pytest.approx(-high[0], rel=1e-12)
    assert m_high[0] == pytest.approx(-low[0], rel=1e-12)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=2, max_size=40))
def test_the_interval_holds_the_mean(values: list[float]) -> None:
    """|skewness| < sqrt(n) for any sample, so Hall's shift b = skewness / (6 sqrt(n)) stays
    below the quantile: the mean is always inside."""
    x = np.array(values)
    d = x - x.mean()
    m2, m3 = float(np.mean(d**2)), float(np.mean(d**3))
    mean, s = float(x.mean()), float(x.std(ddof=1))
    with np.errstate(divide="ignore", invalid="ignore"):
        g = np.float64(m3) / np.float64(m2) ** 1.5
    low, high = hall_ci([mean], [s], [g], [len(x)])
    assert low[0] <= mean <= high[0]


def test_degenerate_groups() -> None:
    low, high = hall_ci([2.0, 5.0, np.nan], [0.0, np.nan, np.nan], [np.nan] * 3, [5, 1, 0])
    assert (low[0], high[0]) == (2.0, 2.0)  # flat: the mean twice
    assert np.isnan(low[1:]).all() and np.isnan(high[1:]).all()  # one value, none


def test_skewed_means_keep_their_coverage() -> None:
    """Lognormal means at n = 20 (seeded, 4,000 replicates): t 0.87, Hall >= 0.91."""
    y = np.random.default_rng(5).lognormal(0, 1, (4000, 20))
    mean, s = y.mean(axis=1), y.std(axis=1, ddof=1)
    low, high = hall_ci(mean, s, stats.skew(y, axis=1), np.full(4000, 20))
    true = math.exp(0.5)
    hall = np.mean((low <= true) & (true <= high))
    q = stats.t.ppf(0.975, 19) * s / math.sqrt(20)
    t = np.mean((mean - q <= true) & (true <= mean + q))
    assert hall >= 0.91 and hall > t + 0.03


def test_aggregate_reads_its_moments_from_sql_as_numpy_computes_them() -> None:
    """``aggregate``'s default for a continuous metric: its skewness (computed in DuckDB) is
    scipy's, its bounds hall_ci's on numpy's moments."""
    rng = np.random.default_rng(3)
    groups = {"a": rng.lognormal(3, 1, 37), "b": rng.poisson(4, 25).astype(float)}
    frame = pl.DataFrame(
        {
            "run_id": [r for r, v in groups.items() for _ in v],
            "metric": "latency",
            "value": np.concatenate(list(groups.values())),
        }
    )
    out = aggregate_scores(frame).sort("run_id")
    assert out["ci_method"].to_list() == ["hall", "hall"]
    for row, x in zip(out.iter_rows(named=True), groups.values(), strict=True):
        low, high = hall_ci(*[[v] for v in _moments(x)])
        assert row["ci_low"] == pytest.approx(low[0], rel=1e-12)
        assert row["ci_high"] == pytest.approx(high[0], rel=1e-12)


def test_the_quantile_is_t_on_n_minus_one_degrees_of_freedom() -> None:
    n = np.array([2, 3, 20, 485, 10**6])
    for level in (0.9, 0.95):
        low, high = hall_ci(np.zeros(5), np.sqrt(n), np.zeros(5), n, level)
        assert np.array_equal(high, stats.t.ppf(0.5 + level / 2, n - 1))
        assert np.array_equal(low, -high)
