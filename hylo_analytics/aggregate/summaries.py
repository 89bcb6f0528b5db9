"""Across-task summaries of runs as frames: the IQM, performance profiles, P(X > Y).

A policy (a ``by`` group, default ``agent_name``) is scored on tasks (``benchmark_id``,
``split``, ``task_id``: LIBERO's four suites of ten tasks are forty tasks), possibly with
several runs (seeds) per task. Each (run, task) cell's rate comes from
:func:`~hylo_analytics.aggregate.aggregate_scores`, so the errors policy, the epoch reducer and
the valid denominators are the aggregate's own; the statistics are
:mod:`hylo_analytics.stats.summaries`. Only 0/1 metrics (rates) are summarized here: a cell is
its successes and episodes, which is all the episode bootstrap needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import polars as pl

from hylo_analytics import _progress
from hylo_analytics._harness import Errors
from hylo_analytics.aggregate._engine import aggregate_scores
from hylo_analytics.errors import InputError, SelectionError
from hylo_analytics.stats.closed_form import DEFAULT_LEVEL
from hylo_analytics.stats.methods import DEFAULT_RESAMPLES, DEFAULT_SEED, Seed
from hylo_analytics.stats.summaries import (
    ONE_RUN_NOTE,
    probability_of_improvement_cis,
    summarize_cells,
)

if TYPE_CHECKING:
    from hylo_analytics.metrics import MetricRegistry
    from hylo_analytics.store import ParquetStore

__all__ = ["TASK_COLUMNS", "TaskSummaries", "select_runs", "task_summaries"]

TASK_COLUMNS = ("benchmark_id", "split", "task_id")
CI_METHOD = "stratified bootstrap"
IMPROVEMENT_CI_METHOD = "stratified bootstrap (runs)"
#: The most groups whose every ordered pair gets a P(X > Y): 2,450 pairs (past it, the groups
#: of highest IQM; all 3,998,000 pairs of 2,000 policies would be read by nobody).
MAX_PAIRED_GROUPS = 50


@dataclass(frozen=True)
class TaskSummaries:
    """The three answers of :func:`task_summaries`, one frame each.

    ``summary``: one row per group and ``statistic`` (``iqm``, ``mean``) with ``estimate``,
    ``ci_low``, ``ci_high``, ``ci_level``, ``ci_method`` and the counts. ``profiles``: one
    row per group and ``tau``, the ``fraction`` of cells whose rate exceeds it and its band.
    ``improvement``: one row per ordered pair of groups ``x``, ``y``, P(X > Y) and its
    interval, or null with the reason in ``note`` (one run per task: see
    :data:`~hylo_analytics.stats.summaries.ONE_RUN_NOTE`).
    """

    summary: pl.DataFrame
    profiles: pl.DataFrame
    improvement: pl.DataFrame
    notes: tuple[str, ...] = ()


def task_summaries(
    scores: pl.DataFrame | pl.LazyFrame | ParquetStore,
    *,
    by: Sequence[str] = ("agent_name",),
    metric: str = "success",
    runs: Sequence[str] | None = None,
    errors: Errors | None = None,
    task: Sequence[str] = TASK_COLUMNS,
    taus: Sequence[float] | None = None,
    level: float = DEFAULT_LEVEL,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: Seed = DEFAULT_SEED,
    source: str | Sequence[str] | None = None,
    registry: MetricRegistry | None = None,
    progress: bool | None = None,
) -> TaskSummaries:
    """The IQM and mean across tasks, performance profiles and P(X > Y) per ``by`` group.

    ``task``: the columns naming a task (those a frame lacks are dropped; a store has them
    all). ``runs``: run ids to keep (resolved already; :meth:`Store.summarize` resolves
    selectors). ``errors``, ``source``, ``registry``: as :func:`aggregate_scores`. ``taus``:
    the profile's thresholds (default 0, 0.02, ..., 1). A cell with no valid episode is left
    out. Intervals: see :mod:`hylo_analytics.stats.summaries`; every group's at once, from
    one resample table (2,000 policies' 20,000 cells: a few hundred binomial draws).
    P(X > Y) is of every ordered pair when there are at most :data:`MAX_PAIRED_GROUPS`
    groups, else of those with the highest IQM (``notes`` says so). ``progress``: a bar
    on a terminal or in Jupyter (None: when one is watching).
    """
    from hylo_analytics.store import unwrap_store

    scores = unwrap_store(scores)  # a Store (the facade) holds its ParquetStore
    by = list(dict.fromkeys(by))
    with _progress.progress(3, "summarize", enabled=progress) as bar:
        bar.set_postfix_str("cells")
        cells = _cells(scores, by, metric, runs, errors, task, source, registry, level)
        bar.update()
        tasks = [c for c in cells.columns if c.startswith("_task_")]
        # every group at once: one resample table shared by all (stats.summarize_cells)
        cells = cells.with_columns(  # the cells come sorted by group: codes in that order
            _g=pl.struct(by).is_first_distinct().cum_sum().cast(pl.Int64) - 1
        )
        n = cells["n_valid"].to_numpy().astype(np.int64)
        k = np.rint(cells["mean"].to_numpy() * n).astype(np.int64)
        bar.set_postfix_str(f"{cells['_g'].n_unique():,} groups: bootstrap")
        many = summarize_cells(n, k, cells["_g"].to_numpy(), taus=taus, level=level,
                               n_resamples=n_resamples, seed=seed)  # fmt: skip
        bar.update()
        groups = _group_counts(cells, by, tasks)
        stats = [
            ("iqm", many.iqm, many.iqm_low, many.iqm_high),
            ("mean", many.mean, many.mean_low, many.mean_high),
        ]
        summary = pl.concat(
            [
                groups.with_columns(
                    metric=pl.lit(metric),
                    statistic=pl.lit(stat),
                    estimate=pl.Series(est),
                    ci_low=pl.Series(lo),
                    ci_high=pl.Series(hi),
                    _s=pl.lit(i),
                )
                for i, (stat, est, lo, hi) in enumerate(stats)
            ]
        ).sort("_g", "_s")
        summary = summary.select(*by, "metric", "statistic", "estimate", "ci_low", "ci_high",
                                 "errors", "n_tasks", "n_runs", "n_episodes")  # fmt: skip
        t = len(many.taus)
        profiles = groups.select(pl.col(by).repeat_by(t).explode()).with_columns(
            metric=pl.lit(metric),
            tau=pl.Series(np.tile(many.taus, len(groups))),
            fraction=pl.Series(many.profile.ravel()),
            ci_low=pl.Series(many.profile_low.ravel()),
            ci_high=pl.Series(many.profile_high.ravel()),
        )
        bar.set_postfix_str("P(X > Y)")
        improvement, notes = _improvement(cells, by, tasks, many.iqm, level, n_resamples, seed)
        bar.update()
    meta = {"ci_level": pl.lit(level), "ci_method": pl.lit(CI_METHOD)}
    return TaskSummaries(
        summary=summary.with_columns(**meta) if summary.height else summary,
        profiles=profiles.with_columns(**meta),
        improvement=improvement,
        notes=notes,
    )


def _group_counts(cells: pl.DataFrame, by: list[str], tasks: list[str]) -> pl.DataFrame:
    """Per group (``_g`` order): its errors policies, tasks, runs and episodes."""
    return (
        cells.group_by("_g", maintain_order=True)
        .agg(
            *(pl.col(c).first() for c in by),
            errors=pl.col("errors").drop_nulls().unique().sort().str.join(","),
            n_tasks=pl.struct(tasks).n_unique().cast(pl.Int64),
            n_runs=pl.col("run_id").n_unique().cast(pl.Int64),
            n_episodes=pl.col("n_valid").sum().cast(pl.Int64),
        )
        .with_columns(errors=pl.when(pl.col("errors") != "").then("errors"))
        .sort("_g")
    )


def select_runs(store: ParquetStore, specs: str | Sequence[str]) -> list[str]:
    """Every run each of ``specs`` names (an id, a unique prefix, or a selector naming every
    run it matches: ``agent=pi05`` is pi05's runs on every suite), in natural run order:
    :meth:`ParquetStore.select_runs <hylo_analytics.store.ParquetStore.select_runs>`."""
    return store.select_runs(specs)


def _cells(
    scores: pl.DataFrame | pl.LazyFrame | ParquetStore,
    by: list[str],
    metric: str,
    runs: Sequence[str] | None,
    errors: Errors | None,
    task: Sequence[str],
    source: str | Sequence[str] | None,
    registry: MetricRegistry | None,
    level: float,
) -> pl.DataFrame:
    """One row per (group, task, run): its valid episodes, rate and errors policy."""
    from hylo_analytics.store import ParquetStore

    if not isinstance(scores, ParquetStore):
        names = scores.collect_schema().names()
        task = [c for c in task if c in names]
        if not task:
            raise InputError(
                f"task_summaries: the scores have none of the task columns {task}; pass task= "
                "naming the column(s) that identify a task"
            )
    keys = list(dict.fromkeys([*by, *task, "run_id"]))
    agg = aggregate_scores(
        scores, keys, metrics=[metric], statistics=["mean"], level=level, runs=runs,
        errors=errors, source=source, registry=registry,
    )  # fmt: skip
    not_rate = agg.filter(pl.col("ci_method") != "wilson", pl.col("n_valid") > 0)
    if not_rate.height:
        raise InputError(
            f"task_summaries: metric {metric!r} is not 0/1 in {not_rate.height} (run, task) "
            "cell(s); the across-task summaries here are of rates (a 0/1 metric such as success)"
        )
    if not agg.height:
        raise SelectionError(
            f"task_summaries: no scores of metric {metric!r} in the runs selected; check the "
            "metric name and runs= (see 'hylo-analytics runs')"
        )
    renamed = {c: f"_task_{c}" for c in task}
    return (
        agg.filter(pl.col("n_valid") > 0)
        .with_columns(*(pl.col(c).alias(a) for c, a in renamed.items()), rate=pl.col("mean"))
        .sort([*by, *renamed.values(), "run_id"], nulls_last=True)
    )


def _improvement(
    cells: pl.DataFrame,
    by: list[str],
    tasks: list[str],
    iqm: npt.NDArray[np.float64],
    level: float,
    n_resamples: int,
    seed: Seed,
) -> tuple[pl.DataFrame, tuple[str, ...]]:
    """P(X > Y) for every ordered pair of groups (of the :data:`MAX_PAIRED_GROUPS` with the
    highest IQM when there are more), on the tasks both have, and the notes on what was
    left out. The pairs are computed together (:func:`~hylo_analytics.stats.summaries.
    probability_of_improvement_cis`), one call per set of tasks in common (usually one)."""
    label = pl.concat_str([pl.col(c).cast(pl.String).fill_null("None") for c in by],
                          separator=", ")  # fmt: skip
    counts = cells.group_by("_g", maintain_order=True).agg(label.first().alias("label"))
    n_groups = counts.height
    chosen = np.arange(n_groups)
    notes: tuple[str, ...] = ()
    if n_groups > MAX_PAIRED_GROUPS:
        chosen = np.sort(np.argsort(-np.nan_to_num(iqm, nan=-np.inf), kind="stable")[
            :MAX_PAIRED_GROUPS])  # fmt: skip
        notes = (
            f"P(X > Y) is shown for the {MAX_PAIRED_GROUPS} groups of highest IQM of "
            f"{n_groups:,} ({MAX_PAIRED_GROUPS * (MAX_PAIRED_GROUPS - 1):,} ordered pairs, "
            f"not {n_groups * (n_groups - 1):,}); summarize fewer runs for others",
        )
    part = cells.filter(pl.col("_g").is_in(chosen.tolist())).with_columns(
        _t=pl.struct(tasks).rank("dense").cast(pl.Int64) - 1
    )
    n_tasks = part["_t"].n_unique() if part.height else 0
    local = {int(g): i for i, g in enumerate(chosen.tolist())}
    present = np.zeros((len(chosen), n_tasks), dtype=bool)
    runs = np.zeros(len(chosen), dtype=np.int64)
    uneven: list[str | None] = [None] * len(chosen)
    mats: list[npt.NDArray[np.float64]] = []
    for (g,), rows in part.sort("_g", "_t", "run_id").group_by("_g", maintain_order=True):
        i = local[int(g)]  # a loop over at most MAX_PAIRED_GROUPS groups, to lay them out
        per_task = rows.group_by("_t", maintain_order=True).len()["len"].to_numpy()
        present[i, rows["_t"].unique().to_numpy()] = True
        mat = np.full((int(per_task.max()), n_tasks), np.nan)
        if per_task.min() != per_task.max():
            uneven[i] = (
                f"the tasks have unequal numbers of runs ({int(per_task.min())} to "
                f"{int(per_task.max())}): P(X > Y) needs a runs x tasks matrix"
            )
        else:
            runs[i] = int(per_task[0])
            cols = rows["_t"].unique(maintain_order=True).to_numpy()
            mat[:, cols] = rows["rate"].to_numpy().reshape(len(cols), -1).T
        mats.append(mat)
    x, y = np.nonzero(~np.eye(len(chosen), dtype=bool))
    common = present[x] & present[y]
    n_common = common.sum(axis=1)
    note = np.full(len(x), None, dtype=object)
    bad = np.asarray(uneven, dtype=object)
    note = np.where(bad[y] != None, bad[y], note)  # noqa: E711 (elementwise)
    note = np.where(bad[x] != None, bad[x], note)  # noqa: E711
    note = np.where((note == None) & (n_common == 0), "no task in common", note)  # noqa: E711
    even = (bad[x] == None) & (bad[y] == None) & (n_common > 0)  # noqa: E711
    single = even & ((runs[x] < 2) | (runs[y] < 2))
    note = np.where(single, ONE_RUN_NOTE, note)
    est, lo, hi = (np.full(len(x), np.nan) for _ in range(3))
    todo = np.flatnonzero(even & ~single)
    if todo.size:
        sets, which = np.unique(common[todo], axis=0, return_inverse=True)
        for s, cols in enumerate(sets):  # one call per set of tasks in common
            pairs = todo[which.ravel() == s]
            got = probability_of_improvement_cis(
                [m[:, cols] for m in mats], x[pairs], y[pairs], level=level,
                n_resamples=n_resamples, seed=seed,
            )  # fmt: skip
            est[pairs], lo[pairs], hi[pairs] = got
    names = counts["label"].to_numpy()[chosen]
    out = pl.DataFrame(
        {
            "x": pl.Series(names[x].tolist(), dtype=pl.String),
            "y": pl.Series(names[y].tolist(), dtype=pl.String),
            "n_tasks": pl.Series(n_common, dtype=pl.Int64),
            "runs_x": pl.Series(runs[x], dtype=pl.Int64),
            "runs_y": pl.Series(runs[y], dtype=pl.Int64),
            "estimate": pl.Series(est, dtype=pl.Float64),
            "ci_low": pl.Series(lo, dtype=pl.Float64),
            "ci_high": pl.Series(hi, dtype=pl.Float64),
            "note": pl.Series(note.tolist(), dtype=pl.String),
            "_even": pl.Series(even),
        }
    )
    # the run counts are a pair's only where its two groups lay out as matrices
    return out.with_columns(
        pl.when("_even").then(pl.col("runs_x")).alias("runs_x"),
        pl.when("_even").then(pl.col("runs_y")).alias("runs_y"),
        pl.col("estimate", "ci_low", "ci_high").fill_nan(None),
        statistic=pl.lit("probability_of_improvement"),
        ci_level=pl.lit(level),
        ci_method=pl.lit(IMPROVEMENT_CI_METHOD),
    ).drop("_even"), notes
