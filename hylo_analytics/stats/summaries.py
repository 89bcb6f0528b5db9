"""Across-task summaries beyond the mean: IQM, performance profiles, probability of improvement.

These are rliable's (Agarwal et al. 2021, "Deep RL at the Edge of the Statistical Precipice"),
on its data convention: a policy's score is a set of cells, one per (run, task), each the mean
of its episodes (a runs x tasks matrix when every task has the same runs). The mean across
tasks is dominated by a few outlier tasks and the median ignores half of them; the IQM and
the profile show the middle and the whole distribution.

The intervals of the IQM, the mean and the profile are a stratified bootstrap: episodes are
resampled within each cell (so each task keeps its episode count) and the statistic is
recomputed on every resample, all resamples at once. The probability of improvement is
resampled as rliable does: runs within each task, independently for the two policies.

Parameters are named as everywhere in :mod:`hylo_analytics.stats` (``level``,
``n_resamples``, ``seed``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from hylo_analytics._lazy import LazyModule
from hylo_analytics.errors import InputError, SingleRunError
from hylo_analytics.stats.bootstrap import bootstrap_means
from hylo_analytics.stats.closed_form import _check_level, _f
from hylo_analytics.stats.methods import DEFAULT_RESAMPLES, DEFAULT_SEED, Seed

if TYPE_CHECKING:
    from scipy import stats
else:  # scipy is imported on first use
    stats = LazyModule("scipy.stats")

__all__ = [
    "ONE_RUN_NOTE",
    "SingleRunError",
    "TaskSummary",
    "cell_resamples",
    "interquartile_mean",
    "performance_profile",
    "probability_of_improvement",
    "probability_of_improvement_ci",
    "summarize_tasks",
]

FloatArray = npt.NDArray[np.float64]
ArrayLike = npt.ArrayLike

ONE_RUN_NOTE = (
    "P(X > Y) needs several runs (seeds) of each policy per task: with one run per task each "
    "task's term is 1, 0 or 1/2 by the sign of its rate difference, so the figure is only the "
    "share of tasks on which X's rate is higher (ties half), a function of the rate "
    "differences and not a probability over runs; compare the runs pairwise instead"
)


def interquartile_mean(scores: ArrayLike, axis: int | None = None) -> FloatArray:
    """The mean of the middle 50 % of ``scores`` (``scipy.stats.trim_mean(x, 0.25)``).

    With ``axis=None`` all cells count (rliable's ``aggregate_iqm`` over runs x tasks); an
    axis gives one IQM per row or column (the resamples of a bootstrap, all at once).
    """
    return np.asarray(stats.trim_mean(_f(scores), 0.25, axis=axis), dtype=np.float64)


def performance_profile(scores: ArrayLike, taus: ArrayLike, axis: int | None = None) -> FloatArray:
    """The share of cells whose score exceeds each tau (strictly, as rliable's
    ``run_score_deviation``): one value per tau, shape ``taus.shape`` (with ``axis``, the
    share along that axis, with the taus as the last dimension)."""
    x, t = _f(scores), _f(taus)
    if axis is None:
        return np.asarray((x.ravel()[:, None] > t.ravel()[None, :]).mean(axis=0))
    return np.asarray((np.expand_dims(x, -1) > t).mean(axis=axis))


def cell_resamples(
    values: ArrayLike,
    sizes: ArrayLike,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: Seed = DEFAULT_SEED,
) -> FloatArray:
    """Each cell's mean over its resampled episodes, shape (cells, ``n_resamples``).

    The cells are laid out back to back in ``values`` (``sizes[c]`` each). They are resampled
    independently: :func:`~hylo_analytics.stats.bootstrap.bootstrap_means` gives groups with
    equal values the same draws (common random numbers, right for per-group intervals,
    wrong for a statistic of several groups), so each cell is its own call with its own seed,
    spawned from ``seed``; a loop over cells (tasks), each vectorized over the resamples.
    A 0/1 cell costs its ``n_resamples`` binomial draws (about 5 ms at 10,000); a cell of
    other values pays the engine's per-call cost of its shared weights (about 0.1 s).
    """
    x = _f(values)
    n = np.asarray(sizes, dtype=np.int64)
    if np.any(n <= 0) or n.sum() != len(x):
        raise InputError("sizes must be positive and sum to len(values)")
    seeds = np.random.default_rng(seed).integers(2**62, size=len(n))
    starts = np.concatenate([[0], np.cumsum(n)[:-1]])
    out = np.empty((len(n), n_resamples))
    for c, (start, size) in enumerate(zip(starts.tolist(), n.tolist(), strict=True)):
        chunks = bootstrap_means(
            x[start : start + size], [size], n_resamples=n_resamples, seed=int(seeds[c])
        )
        out[c] = next(iter(chunks))[2][0]
    return out


@dataclass(frozen=True)
class TaskSummary:
    """One policy's summaries across its cells, each with its stratified bootstrap interval.

    ``profile`` (and its bounds) has one value per ``taus``; ``n_cells`` counts the cells.
    """

    iqm: float
    iqm_low: float
    iqm_high: float
    mean: float
    mean_low: float
    mean_high: float
    taus: FloatArray
    profile: FloatArray
    profile_low: FloatArray
    profile_high: FloatArray
    n_cells: int


def summarize_tasks(
    values: ArrayLike,
    sizes: ArrayLike,
    *,
    taus: ArrayLike | None = None,
    level: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: Seed = DEFAULT_SEED,
) -> TaskSummary:
    """The IQM, the mean and the performance profile of cells ``sizes`` of ``values``.

    A cell's score is the mean of its values (a task's success rate); the intervals are
    percentile intervals of the statistic recomputed on each resample of
    :func:`cell_resamples`. ``taus`` defaults to 0, 0.02, ..., 1 (rates).
    """
    _check_level(level)
    x, n = _f(values), np.asarray(sizes, dtype=np.int64)
    grid = np.linspace(0.0, 1.0, 51) if taus is None else _f(taus).ravel()
    starts = np.concatenate([[0], np.cumsum(n)[:-1]])
    cells = np.add.reduceat(x, starts) / n if len(n) else np.zeros(0)
    boot = cell_resamples(x, n, n_resamples=n_resamples, seed=seed)
    q = [(1 - level) / 2, (1 + level) / 2]
    iqm_lo, iqm_hi = np.quantile(interquartile_mean(boot, axis=0), q)
    mean_lo, mean_hi = np.quantile(boot.mean(axis=0), q)
    prof_lo, prof_hi = np.quantile(performance_profile(boot, grid, axis=0), q, axis=0)
    return TaskSummary(
        iqm=float(interquartile_mean(cells)),
        iqm_low=float(iqm_lo),
        iqm_high=float(iqm_hi),
        mean=float(cells.mean()),
        mean_low=float(mean_lo),
        mean_high=float(mean_hi),
        taus=grid,
        profile=performance_profile(cells, grid),
        profile_low=np.asarray(prof_lo),
        profile_high=np.asarray(prof_hi),
        n_cells=len(n),
    )


def probability_of_improvement(scores_x: ArrayLike, scores_y: ArrayLike) -> float:
    """rliable's P(X > Y): for each task, the share of (run of X, run of Y) pairs in which
    X scores higher (ties half: the Mann-Whitney U over ``m * n``), averaged over tasks.

    ``scores_x`` is (runs of X, tasks), ``scores_y`` (runs of Y, tasks), the same tasks in the
    same columns. One run of either per task is refused (:class:`SingleRunError`).
    """
    x, y = _runs_by_task(scores_x, scores_y)
    return float(_improvement(x[None], y[None])[0])


def probability_of_improvement_ci(
    scores_x: ArrayLike,
    scores_y: ArrayLike,
    *,
    level: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: Seed = DEFAULT_SEED,
) -> tuple[float, float, float]:
    """``(estimate, low, high)``: :func:`probability_of_improvement` with rliable's interval.

    rliable's ``StratifiedIndependentBootstrap``: within each task the runs of X and of Y are
    resampled independently, the statistic recomputed, and the percentile interval taken.
    """
    _check_level(level)
    x, y = _runs_by_task(scores_x, scores_y)
    rng = np.random.default_rng(seed)
    (m, t), k = x.shape, y.shape[0]
    block = max(1, 2**22 // (m * k * t))  # resamples per block: a few tens of MB at most
    boot = np.empty(n_resamples)
    for b0 in range(0, n_resamples, block):
        b = min(block, n_resamples - b0)
        xs = np.take_along_axis(x[None], rng.integers(0, m, (b, m, t)), axis=1)
        ys = np.take_along_axis(y[None], rng.integers(0, k, (b, k, t)), axis=1)
        boot[b0 : b0 + b] = _improvement(xs, ys)
    low, high = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2])
    return float(_improvement(x[None], y[None])[0]), float(low), float(high)


def _runs_by_task(scores_x: ArrayLike, scores_y: ArrayLike) -> tuple[FloatArray, FloatArray]:
    x, y = np.atleast_2d(_f(scores_x)), np.atleast_2d(_f(scores_y))
    if x.shape[1] != y.shape[1] or x.shape[1] == 0:
        raise InputError(
            f"scores_x and scores_y must be (runs, tasks) on the same tasks, got {x.shape} "
            f"and {y.shape}"
        )
    if x.shape[0] < 2 or y.shape[0] < 2:
        raise SingleRunError(ONE_RUN_NOTE)
    return x, y


def _improvement(x: FloatArray, y: FloatArray) -> FloatArray:
    """P(X > Y) of each resample: ``x`` (B, m, T), ``y`` (B, n, T) -> (B,)."""
    a, b = x[:, :, None, :], y[:, None, :, :]
    per_task = (a > b).mean(axis=(1, 2)) + 0.5 * (a == b).mean(axis=(1, 2))
    return np.asarray(per_task.mean(axis=1))
