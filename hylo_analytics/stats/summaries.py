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
    "CellSummaries",
    "SingleRunError",
    "TaskSummary",
    "binary_cell_resamples",
    "cell_resamples",
    "interquartile_mean",
    "performance_profile",
    "probability_of_improvement",
    "probability_of_improvement_ci",
    "summarize_cells",
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
    if len(n) and np.all((x == 0) | (x == 1)) and np.all(n > 0) and n.sum() == len(x):
        # 0/1 cells: the many-groups engine with one group (the same draws)
        starts = np.concatenate([[0], np.cumsum(n)[:-1]])
        k = np.add.reduceat(x, starts).astype(np.int64)
        many = summarize_cells(n, k, np.zeros(len(n), dtype=np.int64), taus=taus, level=level,
                               n_resamples=n_resamples, seed=seed)  # fmt: skip
        return TaskSummary(
            iqm=float(many.iqm[0]), iqm_low=float(many.iqm_low[0]),
            iqm_high=float(many.iqm_high[0]), mean=float(many.mean[0]),
            mean_low=float(many.mean_low[0]), mean_high=float(many.mean_high[0]),
            taus=many.taus, profile=many.profile[0], profile_low=many.profile_low[0],
            profile_high=many.profile_high[0], n_cells=len(n),
        )  # fmt: skip
    return _summarize_resampled(x, n, taus, level, n_resamples, seed)


def _summarize_resampled(
    x: FloatArray,
    n: npt.NDArray[np.int64],
    taus: ArrayLike | None,
    level: float,
    n_resamples: int,
    seed: Seed,
) -> TaskSummary:
    """:func:`summarize_tasks` of cells of any values: :func:`cell_resamples`, a loop over
    the cells (the 0/1 cells of a rate take :func:`summarize_cells` instead)."""
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
    est, low, high = probability_of_improvement_cis(
        [x, y], [0], [1], level=level, n_resamples=n_resamples, seed=seed
    )
    return float(est[0]), float(low[0]), float(high[0])


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


# --- many policies at once: one resample table shared by all, never a loop over them --------


@dataclass(frozen=True)
class CellSummaries:
    """:class:`TaskSummary` of many groups at once: every field an array over the groups
    (``profile`` and its bounds (groups, taus))."""

    iqm: FloatArray
    iqm_low: FloatArray
    iqm_high: FloatArray
    mean: FloatArray
    mean_low: FloatArray
    mean_high: FloatArray
    taus: FloatArray
    profile: FloatArray
    profile_low: FloatArray
    profile_high: FloatArray
    n_cells: npt.NDArray[np.int64]


def binary_cell_resamples(
    position: ArrayLike,
    n: ArrayLike,
    k: ArrayLike,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: Seed = DEFAULT_SEED,
) -> tuple[FloatArray, npt.NDArray[np.intp]]:
    """The resampled means of 0/1 cells (``k`` successes of ``n``), drawn once per distinct
    (position in its group, n, k): ``(table, row)``, cell ``c``'s resamples ``table[row[c]]``.

    These are :func:`cell_resamples`' draws exactly: a cell's resamples depend on its seed,
    spawned from ``seed`` by its position in its group, and on its counts. So 2,000 policies'
    20,000 cells cost a few hundred binomial draws of ``n_resamples``, and two policies'
    cells at one position with one record share their draws (common random numbers), as two
    calls of :func:`summarize_tasks` would give them.
    """
    ones, row, distinct = _binary_successes(position, n, k, n_resamples, seed)
    return ones / distinct[1][:, None], row


def _binary_successes(
    position: ArrayLike, n: ArrayLike, k: ArrayLike, n_resamples: int, seed: Seed
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.intp], npt.NDArray[np.int64]]:
    """:func:`binary_cell_resamples` as counts of successes (int32: a quarter of the means'
    memory; 14,000 distinct cells of 10,000 resamples are 0.56 GB, not 1.1), with the
    distinct (position, n, k) columns. The draw of each is ``_resample._discrete_means``'
    for the cell's two values: its generator seeded by the position's base and the counts
    largest first, one binomial of the larger class."""
    pos, nn, kk = (np.asarray(a, dtype=np.int64) for a in (position, n, k))
    if np.any(nn <= 0) or np.any((kk < 0) | (kk > nn)):
        raise InputError("cells need n > 0 episodes and 0 <= k <= n successes")
    distinct, row = np.unique(np.stack([pos, nn, kk]), axis=1, return_inverse=True)
    top = int(pos.max(initial=-1)) + 1
    seeds = np.random.default_rng(seed).integers(2**62, size=top)
    bases = [int(np.random.default_rng(int(s)).integers(2**62)) for s in seeds.tolist()]
    ones = np.empty((distinct.shape[1], n_resamples), dtype=np.int32)
    for j, (p, cells, wins) in enumerate(distinct.T.tolist()):  # distinct cells, not cells
        fails = cells - wins
        if wins == 0 or fails == 0:  # one value: every resample is the cell itself
            ones[j] = wins
            continue
        big_fails = fails >= wins  # the larger class is drawn (ties: the first value, 0)
        rng = np.random.default_rng([bases[p], *((fails, wins) if big_fails else (wins, fails))])
        drawn = rng.binomial(np.full(n_resamples, cells, dtype=np.int64),
                             (fails if big_fails else wins) / cells)  # fmt: skip
        ones[j] = cells - drawn if big_fails else drawn
    return ones, row.ravel(), distinct


def summarize_cells(
    n: ArrayLike,
    k: ArrayLike,
    group: ArrayLike,
    *,
    taus: ArrayLike | None = None,
    level: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: Seed = DEFAULT_SEED,
    max_bytes: int = 1 << 27,
) -> CellSummaries:
    """:func:`summarize_tasks` of every group at once: the cells are 0/1 (``k`` of ``n``),
    ``group`` codes 0..G-1 in order (a cell's position is its order within its group).

    The same numbers as one :func:`summarize_tasks` per group (its 0/1 cells, the same seed:
    the same resamples, their statistics summed in sorted order, so equal to the last bit or
    two), computed on groups of equal cell counts together, ``max_bytes`` of resamples at a
    time.
    """
    _check_level(level)
    nn, kk = np.asarray(n, dtype=np.int64), np.asarray(k, dtype=np.int64)
    g = np.asarray(group, dtype=np.int64)
    if len(g) and np.any(np.diff(g) < 0):
        raise InputError("summarize_cells: the cells must come grouped (group codes ascending)")
    sizes = np.bincount(g, minlength=int(g.max(initial=-1)) + 1)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    position = np.arange(len(g)) - starts[g]
    grid = np.linspace(0.0, 1.0, 51) if taus is None else _f(taus).ravel()
    ones, row, distinct = _binary_successes(position, nn, kk, n_resamples, seed)
    rates = kk / nn
    # every resampled mean as the rank of its value among the values it can take (j / n for
    # the cells' n: a few hundred), so one sort of small integers orders a group's cells for
    # the IQM and the profile at once, and how many taus a value clears is looked up
    sizes_n = np.unique(distinct[1])
    values, where = np.unique(
        np.concatenate([np.arange(m + 1) / m for m in sizes_n.tolist()]), return_inverse=True
    )
    start = np.concatenate([[0], np.cumsum(sizes_n + 1)[:-1]])
    small = np.int16 if len(values) < 2**15 else np.int32
    rank = where.astype(small)  # (n, j) -> the rank of j / n, at start[n] + j
    offset = start[np.searchsorted(sizes_n, distinct[1])].astype(np.int32)
    ones += offset[:, None]  # in place: no second table of int64 indices
    codes = rank[ones]
    del ones
    clears_of = np.searchsorted(grid, values, side="left").astype(np.int16)
    distinct_values = values
    n_groups, t = len(sizes), len(grid)
    out = {f: np.full(n_groups, np.nan) for f in ("iqm", "iqm_low", "iqm_high", "mean",
                                                  "mean_low", "mean_high")}  # fmt: skip
    prof = {f: np.full((n_groups, t), np.nan) for f in ("profile", "low", "high")}
    q = [(1 - level) / 2, (1 + level) / 2]
    for c in np.unique(sizes[sizes > 0]).tolist():  # groups of c cells, batched
        which = np.flatnonzero(sizes == c)
        cells = starts[which][:, None] + np.arange(c)[None, :]  # (groups, c) cell indices
        point = rates[cells]
        out["iqm"][which] = interquartile_mean(point, axis=1)
        out["mean"][which] = point.mean(axis=1)
        prof["profile"][which] = (point[:, :, None] > grid).mean(axis=1)
        cut = int(0.25 * c)  # scipy's trim_mean(x, 0.25): int(0.25 n) off each end
        step = max(1, max_bytes // (8 * c * n_resamples))
        for s in range(0, len(which), step):
            part = which[s : s + step]
            ordered = np.sort(codes[row[cells[s : s + step]]], axis=1)  # (g, c, B)
            boot = distinct_values[ordered]
            out["iqm_low"][part], out["iqm_high"][part] = np.quantile(
                boot[:, cut : c - cut].mean(axis=1), q, axis=1
            )
            out["mean_low"][part], out["mean_high"][part] = np.quantile(
                boot.mean(axis=1), q, axis=1
            )
            prof["low"][part], prof["high"][part] = _profile_bounds(clears_of[ordered], t, q)
    return CellSummaries(
        iqm=out["iqm"], iqm_low=out["iqm_low"], iqm_high=out["iqm_high"], mean=out["mean"],
        mean_low=out["mean_low"], mean_high=out["mean_high"], taus=grid,
        profile=prof["profile"], profile_low=prof["low"], profile_high=prof["high"],
        n_cells=sizes.astype(np.int64),
    )  # fmt: skip


def _profile_bounds(
    clears: npt.NDArray[np.int16], t: int, q: list[float]
) -> tuple[FloatArray, FloatArray]:
    """The ``q`` quantiles over resamples of each group's profile from ``clears`` (g, c, B):
    how many of the ``t`` taus each resampled cell mean is above, sorted along the cells
    (the order statistics). No (g, c, B, taus) array: the share of cells above a tau is at
    least m / c exactly when
    the m-th largest cell is above it, so one histogram per (group, order statistic) of how
    many taus each resample's order statistic clears gives every tau's distribution over the
    resamples; its quantiles are then read off as ``numpy.quantile`` (linear) reads them."""
    n_g, c, b = clears.shape
    flat = ((np.arange(n_g)[:, None, None] * c + np.arange(c)[None, :, None]) * (t + 1)) + clears
    hist = np.bincount(flat.ravel(), minlength=n_g * c * (t + 1)).reshape(n_g, c, t + 1)
    # above[g, i, tau]: resamples whose i-th smallest cell is above tau
    above = np.cumsum(hist[:, :, ::-1], axis=2)[:, :, ::-1][:, :, 1:]
    # at_least[g, m, tau]: resamples with at least m cells above tau (m = 0..c, then 0)
    at_least = np.concatenate(
        [np.full((n_g, 1, t), b), above[:, ::-1, :], np.zeros((n_g, 1, t), dtype=np.int64)],
        axis=1,
    )
    at_most = b - at_least[:, 1:, :]  # [g, m, tau]: resamples with at most m cells above
    bounds = []
    for quantile in q:
        virtual = b * quantile + (1 + quantile * -1) - 1  # numpy's linear virtual index
        lo = min(max(int(np.floor(virtual)), 0), b - 1)
        hi = min(lo + 1, b - 1)
        gamma = virtual - np.floor(virtual)
        v_lo = (at_most <= lo).sum(axis=1) / c  # the order statistics over the resamples
        v_hi = (at_most <= hi).sum(axis=1) / c
        diff = v_hi - v_lo
        bounds.append(v_hi - diff * (1 - gamma) if gamma >= 0.5 else v_lo + diff * gamma)
    return bounds[0], bounds[1]


def probability_of_improvement_cis(
    scores: list[ArrayLike],
    x: ArrayLike,
    y: ArrayLike,
    *,
    level: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: Seed = DEFAULT_SEED,
    max_bytes: int = 1 << 27,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """:func:`probability_of_improvement_ci` of every pair ``(scores[x[p]], scores[y[p]])``:
    ``(estimates, lows, highs)``, the same numbers as one call per pair.

    ``scores`` are (runs, tasks) matrices on the same tasks (columns). Pairs of the same run
    counts draw the same resample indices (one call per pair would: the draws depend only on
    the seed and the shapes), so they are drawn once and every pair of those counts is
    resampled by them at once: each task's resampled runs become a histogram over the task's
    distinct values, and X's wins over Y are one product of two histograms with the
    "greater than" matrix of the values (and one with "equal to", the ties), never a loop
    over the pairs.
    """
    _check_level(level)
    mats = [np.atleast_2d(_f(s)) for s in scores]
    xi, yi = np.asarray(x, dtype=np.int64), np.asarray(y, dtype=np.int64)
    tasks = {m.shape[1] for m in mats}
    if len(tasks) > 1 or 0 in tasks:
        raise InputError(f"scores must be (runs, tasks) on the same tasks, got {tasks} tasks")
    if any(mats[i].shape[0] < 2 for i in np.unique(np.concatenate([xi, yi])).tolist()):
        raise SingleRunError(ONE_RUN_NOTE)
    t = tasks.pop()
    values = [np.unique(np.concatenate([m[:, j] for m in mats])) for j in range(t)]
    width = max(len(v) for v in values)
    codes = [np.stack([np.searchsorted(values[j], m[:, j]) for j in range(t)], axis=1)
             for m in mats]  # fmt: skip
    greater = np.zeros((t, width, width))
    equal = np.zeros((t, width, width))
    for j, v in enumerate(values):  # a few tasks: the tasks' value tables
        greater[j, : len(v), : len(v)] = v[:, None] > v[None, :]
        equal[j, : len(v), : len(v)] = v[:, None] == v[None, :]
    est = np.empty(len(xi))
    boot = np.empty((len(xi), n_resamples))
    runs = np.array([m.shape[0] for m in mats])
    signature = np.stack([runs[xi], runs[yi]])
    for m, k in {tuple(s) for s in signature.T.tolist()}:
        which = np.flatnonzero((signature[0] == m) & (signature[1] == k))
        gx, gy = np.unique(xi[which]), np.unique(yi[which])
        cx = np.stack([codes[i] for i in gx.tolist()])  # (groups, m, t)
        cy = np.stack([codes[i] for i in gy.tolist()])
        rx, ry = np.searchsorted(gx, xi[which]), np.searchsorted(gy, yi[which])
        ident_x, ident_y = np.arange(m)[None, :, None], np.arange(k)[None, :, None]
        e = _improvements(cx, cy, ident_x.repeat(t, 2), ident_y.repeat(t, 2), greater, equal,
                          width)  # fmt: skip
        est[which] = e[rx, ry, 0]
        rng = np.random.default_rng(seed)
        block = max(1, 2**22 // (m * k * t))  # the draws of probability_of_improvement_ci
        step = max(1, min(block, max_bytes // (8 * (len(gx) * len(gy) * t + 1) * 2)))
        for b0 in range(0, n_resamples, block):
            b = min(block, n_resamples - b0)
            ix, iy = rng.integers(0, m, (b, m, t)), rng.integers(0, k, (b, k, t))
            for s in range(0, b, step):
                got = _improvements(cx, cy, ix[s : s + step], iy[s : s + step], greater,
                                    equal, width)  # fmt: skip
                boot[which, b0 + s : b0 + s + got.shape[2]] = got[rx, ry]
    low, high = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2], axis=1)
    return est, np.asarray(low), np.asarray(high)


def _improvements(
    cx: npt.NDArray[np.int64],
    cy: npt.NDArray[np.int64],
    ix: npt.NDArray[np.int64],
    iy: npt.NDArray[np.int64],
    greater: FloatArray,
    equal: FloatArray,
    width: int,
) -> FloatArray:
    """P(X > Y) of every (x group, y group) on each resample: (Gx, Gy, b).

    ``cx`` (Gx, m, t) the x groups' value codes, ``ix`` (b, m, t) the resampled runs (the
    same for every group). Per task: X's wins over Y = h_x' greater h_y with h the histograms
    of the resampled codes, as :func:`_improvement` counts them."""
    b, m, t = ix.shape
    k = iy.shape[1]

    def hist(codes: npt.NDArray[np.int64], idx: npt.NDArray[np.int64]) -> FloatArray:
        picked = np.take_along_axis(codes[:, None, :, :], idx[None], axis=2)  # (G, b, runs, t)
        g = codes.shape[0]
        cell = (np.arange(g * b).reshape(g, b, 1, 1) * t + np.arange(t)) * width + picked
        out = np.bincount(cell.ravel(), minlength=g * b * t * width)
        return out.reshape(g, b, t, width).astype(np.float64)

    hx, hy = hist(cx, ix), hist(cy, iy)
    # (b, t, Gx, width) @ (t, width, width) @ (b, t, width, Gy) -> (b, t, Gx, Gy)
    ax, ay = hx.transpose(1, 2, 0, 3), hy.transpose(1, 2, 3, 0)
    wins = (ax @ greater) @ ay
    ties = (ax @ equal) @ ay
    per_task = wins / (m * k) + 0.5 * (ties / (m * k))  # as _improvement's means
    return np.asarray(np.ascontiguousarray(per_task.transpose(2, 3, 0, 1)).mean(axis=3))
