"""The studentized bootstrap: the t interval on symmetric data, coverage on skewed data."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from hylo_analytics.stats import bootstrap_ci


def test_on_normal_data_it_is_the_t_interval() -> None:
    x = np.random.default_rng(0).normal(10, 3, 40)
    lo, hi = bootstrap_ci(x, [40], method="studentized", n_resamples=20_000, seed=1)
    t_lo, t_hi = stats.t.interval(0.95, 39, loc=x.mean(), scale=stats.sem(x))
    width = t_hi - t_lo
    assert lo[0] == pytest.approx(t_lo, abs=0.06 * width)
    assert hi[0] == pytest.approx(t_hi, abs=0.06 * width)


def test_skewed_means_keep_their_coverage() -> None:
    """Lognormal means at n = 20: percentile 0.86, studentized >= 0.91 (seeded)."""
    rng = np.random.default_rng(5)
    reps, n = 1000, 20
    y = rng.lognormal(0, 1, (reps, n))
    true = np.exp(0.5)
    cover = {}
    for method in ("percentile", "studentized"):
        lo, hi = bootstrap_ci(y.ravel(), np.full(reps, n), method=method, n_resamples=1000, seed=2)  # type: ignore[arg-type]
        cover[method] = np.mean((lo <= true) & (true <= hi))
    assert cover["studentized"] >= 0.91
    assert cover["studentized"] > cover["percentile"] + 0.03


def test_groups_are_independent_of_each_other_and_flat_groups_are_points() -> None:
    x = np.random.default_rng(3).exponential(size=30)
    alone = bootstrap_ci(x, [30], method="studentized", n_resamples=2000, seed=4)
    both = bootstrap_ci(
        np.r_[np.full(5, 2.0), x], [5, 30], method="studentized", n_resamples=2000, seed=4
    )
    assert (both[0][0], both[1][0]) == (2.0, 2.0)
    assert both[0][1] == pytest.approx(alone[0][0]) and both[1][1] == pytest.approx(alone[1][0])
    with pytest.raises(ValueError, match="not stratified"):
        bootstrap_ci(x, [30], method="studentized", strata_sizes=[15, 15])
