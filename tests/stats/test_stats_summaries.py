"""Across-task summaries: golden values by hand and against rliable, and interval invariants.

rliable is a dev-only dependency. Its ``metrics`` module (``aggregate_iqm``,
``probability_of_improvement``) is the golden source here; its ``library`` module (the
bootstrap, ``run_score_deviation``) imports ``arch<8``, which fails under pandas 3, so the
profile's golden is rliable's one-line definition ``np.mean(scores > tau)`` and its
bootstrap is written out below, resample by resample, on rliable's own statistic.
"""

from __future__ import annotations

import numpy as np
import pytest
from rliable import metrics as rly
from scipy import stats

from hylo_analytics.stats.summaries import (
    SingleRunError,
    cell_resamples,
    interquartile_mean,
    performance_profile,
    probability_of_improvement,
    probability_of_improvement_ci,
    summarize_tasks,
)


def test_iqm_by_hand_and_against_rliable():
    # 8 values: the lowest and highest 2 are cut, the mean of 2, 3, 4, 5 is left
    assert interquartile_mean(np.arange(8.0)) == 3.5
    rng = np.random.default_rng(0)
    for shape in [(1, 40), (3, 10), (5, 7)]:
        scores = rng.integers(0, 51, shape) / 50
        assert float(interquartile_mean(scores)) == pytest.approx(
            rly.aggregate_iqm(scores), abs=1e-15
        )
    rows = rng.random((6, 9))
    assert np.allclose(interquartile_mean(rows, axis=0), stats.trim_mean(rows, 0.25, axis=0))


def test_profile_by_hand_and_as_rliable_defines_it():
    taus = np.array([0.0, 0.5, 0.9])
    assert performance_profile([0.1, 0.5, 0.5, 0.9], taus).tolist() == [1.0, 0.25, 0.0]
    scores = np.random.default_rng(1).integers(0, 11, (3, 12)) / 10
    grid = np.linspace(0, 1, 21)
    # rliable.library.run_score_deviation(scores, tau) is np.mean(scores > tau)
    assert performance_profile(scores, grid).tolist() == [np.mean(scores > t) for t in grid]


def test_probability_of_improvement_by_hand():
    x = np.array([[1.0, 0.0], [0.0, 0.0]])  # (runs, tasks)
    y = np.array([[0.0, 0.0], [0.0, 1.0]])
    # task 0: X {1, 0} vs Y {0, 0}: 2 wins + 2 ties / 4 = 3/4; task 1: 2 ties, 2 losses = 1/4
    assert probability_of_improvement(x, y) == 0.5
    assert probability_of_improvement(y, x) == 0.5
    assert probability_of_improvement(x + 2, y) == 1.0


@pytest.mark.parametrize("seed", range(5))
def test_probability_of_improvement_against_rliable(seed):
    rng = np.random.default_rng(seed)
    tasks = int(rng.integers(1, 12))
    # rates of 10 episodes: many ties, as real success rates have
    x = rng.integers(0, 11, (int(rng.integers(2, 6)), tasks)) / 10
    y = rng.integers(0, 11, (int(rng.integers(2, 6)), tasks)) / 10
    expected = rly.probability_of_improvement(x, y)
    assert probability_of_improvement(x, y) == pytest.approx(expected, abs=1e-14)
    assert probability_of_improvement(x, y) + probability_of_improvement(y, x) == pytest.approx(1)


def test_one_run_per_task_is_refused_with_the_reason():
    x, y = np.array([[0.9, 0.5, 1.0]]), np.array([[0.8, 0.5, 0.7], [0.1, 0.2, 0.3]])
    for call in (probability_of_improvement, probability_of_improvement_ci):
        with pytest.raises(SingleRunError, match="function of the rate"):
            call(x, y)
    with pytest.raises(ValueError, match="same tasks"):
        probability_of_improvement(np.ones((2, 3)), np.ones((2, 4)))


def _rliable_poi_interval(x, y, reps, level, seed):
    """rliable's StratifiedIndependentBootstrap written out, resample by resample: in each
    task the runs of X and of Y are drawn independently (here from the draws
    ``probability_of_improvement_ci`` makes with ``seed``), rliable's own statistic is
    computed on each resample, and the percentile interval taken."""
    rng = np.random.default_rng(seed)
    (m, t), k = x.shape, len(y)
    pick_x, pick_y = rng.integers(0, m, (reps, m, t)), rng.integers(0, k, (reps, k, t))
    boot = []
    for b in range(reps):
        xs = np.stack([x[pick_x[b, :, j], j] for j in range(t)], axis=1)
        ys = np.stack([y[pick_y[b, :, j], j] for j in range(t)], axis=1)
        boot.append(rly.probability_of_improvement(xs, ys))
    return np.quantile(boot, [(1 - level) / 2, (1 + level) / 2])


def test_probability_of_improvement_interval_is_rliables_bootstrap():
    rng = np.random.default_rng(7)
    x = np.clip(rng.normal(0.6, 0.15, (5, 4)), 0, 1)
    y = np.clip(rng.normal(0.5, 0.15, (4, 4)), 0, 1)
    est, lo, hi = probability_of_improvement_ci(x, y, n_resamples=200, level=0.9, seed=3)
    assert est == pytest.approx(rly.probability_of_improvement(x, y), abs=1e-14)
    assert (lo, hi) == pytest.approx(tuple(_rliable_poi_interval(x, y, 200, 0.9, 3)), abs=1e-12)
    assert lo <= est <= hi
    again = probability_of_improvement_ci(x, y, n_resamples=200, level=0.9, seed=3)
    assert again == (est, lo, hi)


def test_cells_are_resampled_independently_and_binomially():
    values = np.tile(np.r_[np.ones(8), np.zeros(2)], 3)  # three equal cells of 10
    boot = cell_resamples(values, [10, 10, 10], n_resamples=4000, seed=0)
    assert boot.shape == (3, 4000)
    # equal cells do not share draws (bootstrap_means would give them the same ones)
    assert abs(np.corrcoef(boot)[0, 1]) < 0.08 and abs(np.corrcoef(boot)[1, 2]) < 0.08
    assert boot.mean(axis=1) == pytest.approx([0.8] * 3, abs=0.01)
    assert boot.var(axis=1) == pytest.approx([0.8 * 0.2 / 10] * 3, rel=0.1)
    assert np.array_equal(boot, cell_resamples(values, [10, 10, 10], n_resamples=4000, seed=0))


def _cells(rates, n):
    """0/1 episodes of cells of ``n`` with the given success rates, back to back."""
    k = np.rint(np.asarray(rates) * n).astype(int)
    return np.concatenate([np.r_[np.ones(kk), np.zeros(n - kk)] for kk in k]), [n] * len(k)


def test_summary_against_an_independent_episode_bootstrap():
    rates = np.array([0.2, 0.5, 0.6, 0.7, 0.7, 0.8, 0.9, 0.95, 1.0, 1.0])
    values, sizes = _cells(rates, 20)
    s = summarize_tasks(values, sizes, n_resamples=4000, seed=1)
    assert s.iqm == pytest.approx(stats.trim_mean(rates, 0.25))
    assert s.mean == pytest.approx(rates.mean())
    assert s.n_cells == 10 and s.taus[0] == 0 and s.taus[-1] == 1 and len(s.taus) == 51
    # reference: a binomial per task and resample, the IQM of each resample
    rng = np.random.default_rng(5)
    boot = rng.binomial(20, rates[:, None], (10, 4000)) / 20
    ref = np.quantile(stats.trim_mean(boot, 0.25, axis=0), [0.025, 0.975])
    assert (s.iqm_low, s.iqm_high) == pytest.approx(tuple(ref), abs=0.01)
    ref_mean = np.quantile(boot.mean(axis=0), [0.025, 0.975])
    assert (s.mean_low, s.mean_high) == pytest.approx(tuple(ref_mean), abs=0.01)
    assert s.iqm_low <= s.iqm <= s.iqm_high and s.mean_low <= s.mean <= s.mean_high
    prof = np.quantile(performance_profile(boot, s.taus, axis=0), [0.025, 0.975], axis=0)
    assert np.abs(s.profile_low - prof[0]).max() <= 0.1 + 1e-12
    assert np.abs(s.profile_high - prof[1]).max() <= 0.1 + 1e-12


def test_summary_invariants():
    values, sizes = _cells([0.0, 0.3, 0.5, 1.0, 1.0], 10)
    s = summarize_tasks(values, sizes, taus=[0.0, 0.25, 0.5, 0.75, 1.0], level=0.9,
                        n_resamples=1000, seed=2)  # fmt: skip
    assert s.profile.tolist() == [0.8, 0.8, 0.4, 0.4, 0.0]
    assert np.all(np.diff(s.profile) <= 0) and np.all(s.profile_low <= s.profile_high)
    assert np.all((s.profile_low >= 0) & (s.profile_high <= 1))
    # a task at 1.0 (or 0.0) resamples to itself: every cell flat gives zero width
    flat = summarize_tasks(*_cells([1.0, 1.0, 0.0, 1.0], 5), n_resamples=200)
    assert (flat.iqm, flat.iqm_low, flat.iqm_high) == (1.0, 1.0, 1.0)
    assert (flat.mean, flat.mean_low, flat.mean_high) == (0.75, 0.75, 0.75)
    a, b = (summarize_tasks(values, sizes, n_resamples=300, seed=4) for _ in range(2))
    assert (a.iqm_low, a.iqm_high) == (b.iqm_low, b.iqm_high)
    with pytest.raises(ValueError, match="level"):
        summarize_tasks(values, sizes, level=1.5)


def test_many_groups_at_once_equal_one_group_at_a_time():
    """summarize_cells over 40 groups of 3-30 cells (one resample table) gives each group
    exactly the numbers of the per-cell path of summarize_tasks on that group alone
    (the same resamples; IQM and mean summed in sorted order, so to the last bits)."""
    from hylo_analytics.stats.summaries import _summarize_resampled, summarize_cells

    rng = np.random.default_rng(11)
    sizes = rng.integers(3, 31, 40)
    n = rng.integers(4, 41, sizes.sum())
    k = np.floor(rng.random(sizes.sum()) * (n + 1)).astype(int)
    group = np.repeat(np.arange(40), sizes)
    many = summarize_cells(n, k, group, n_resamples=1500, seed=9, level=0.9)
    start = 0
    for g, c in enumerate(sizes.tolist()):
        nn, kk = n[start : start + c], k[start : start + c]
        start += c
        values = np.concatenate(
            [np.r_[np.ones(b), np.zeros(a - b)] for a, b in zip(nn, kk, strict=True)]
        )
        one = _summarize_resampled(values, nn, None, 0.9, 1500, 9)
        for f in ("iqm", "iqm_low", "iqm_high", "mean", "mean_low", "mean_high"):
            # the same resamples; their sums in sorted order: equal to the last bits
            assert getattr(many, f)[g] == pytest.approx(getattr(one, f), rel=1e-13), (g, f)
        for f in ("profile", "profile_low", "profile_high"):
            assert np.array_equal(getattr(many, f)[g], getattr(one, f)), (g, f)
    assert many.n_cells.tolist() == sizes.tolist()


def test_many_pairs_at_once_equal_one_pair_at_a_time():
    """probability_of_improvement_cis over every ordered pair of six groups (3 or 4 runs):
    each pair's estimate and interval are probability_of_improvement_ci's, bit for bit."""
    from hylo_analytics.stats.summaries import probability_of_improvement_cis

    rng = np.random.default_rng(1)
    mats = [
        np.round(np.clip(rng.normal(0.5 + 0.05 * i, 0.15, (int(rng.choice([3, 4])), 6)), 0, 1), 2)
        for i in range(6)
    ]
    x, y = np.nonzero(~np.eye(6, dtype=bool))
    est, lo, hi = probability_of_improvement_cis(mats, x, y, n_resamples=800, level=0.9, seed=3)
    for p, (i, j) in enumerate(zip(x.tolist(), y.tolist(), strict=True)):
        want = probability_of_improvement_ci(mats[i], mats[j], n_resamples=800, level=0.9, seed=3)
        assert (est[p], lo[p], hi[p]) == want
    with pytest.raises(SingleRunError):
        probability_of_improvement_cis([mats[0], mats[1][:1]], [0], [1])
