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

from hylo_analytics._harness import Errors
from hylo_analytics.aggregate._engine import aggregate_scores
from hylo_analytics.errors import InputError, SelectionError
from hylo_analytics.stats.closed_form import DEFAULT_LEVEL
from hylo_analytics.stats.methods import DEFAULT_RESAMPLES, DEFAULT_SEED, Seed
from hylo_analytics.stats.summaries import (
    ONE_RUN_NOTE,
    SingleRunError,
    probability_of_improvement_ci,
    summarize_tasks,
)

if TYPE_CHECKING:
    from hylo_analytics.metrics import MetricRegistry
    from hylo_analytics.store import ParquetStore

__all__ = ["TASK_COLUMNS", "TaskSummaries", "select_runs", "task_summaries"]

TASK_COLUMNS = ("benchmark_id", "split", "task_id")
CI_METHOD = "stratified bootstrap"
IMPROVEMENT_CI_METHOD = "stratified bootstrap (runs)"


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
) -> TaskSummaries:
    """The IQM and mean across tasks, performance profiles and P(X > Y) per ``by`` group.

    ``task``: the columns naming a task (those a frame lacks are dropped; a store has them
    all). ``runs``: run ids to keep (resolved already; :meth:`Store.summarize` resolves
    selectors). ``errors``, ``source``, ``registry``: as :func:`aggregate_scores`. ``taus``:
    the profile's thresholds (default 0, 0.02, ..., 1). A cell with no valid episode is left
    out. Intervals: see :mod:`hylo_analytics.stats.summaries`.
    """
    from hylo_analytics.store import unwrap_store

    scores = unwrap_store(scores)  # a Store (the facade) holds its ParquetStore
    by = list(dict.fromkeys(by))
    cells = _cells(scores, by, metric, runs, errors, task, source, registry, level)
    tasks = [c for c in cells.columns if c.startswith("_task_")]
    groups = cells.select(by).unique(maintain_order=True)
    summary, profiles, matrices = [], [], []
    for g in groups.iter_rows(named=True):  # a few policies: each is vectorized inside
        part = cells.filter(*(pl.col(c).eq_missing(v) for c, v in g.items()))
        n = part["n_valid"].to_numpy()
        k = np.rint(part["mean"].to_numpy() * n).astype(np.int64)
        at = np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n)
        values = (at < np.repeat(k, n)).astype(np.float64)
        s = summarize_tasks(values, n, taus=taus, level=level, n_resamples=n_resamples, seed=seed)
        counts = {
            "errors": ",".join(sorted(set(part["errors"].drop_nulls().to_list()))) or None,
            "n_tasks": part.select(tasks).n_unique(),
            "n_runs": part["run_id"].n_unique(),
            "n_episodes": int(n.sum()),
        }
        for stat, est, lo, hi in (
            ("iqm", s.iqm, s.iqm_low, s.iqm_high),
            ("mean", s.mean, s.mean_low, s.mean_high),
        ):
            summary.append({**g, "metric": metric, "statistic": stat, "estimate": est,
                            "ci_low": lo, "ci_high": hi, **counts})  # fmt: skip
        profiles.append(
            pl.DataFrame({"tau": s.taus, "fraction": s.profile, "ci_low": s.profile_low,
                          "ci_high": s.profile_high}).select(
                *(pl.lit(v).alias(c) for c, v in g.items()), pl.lit(metric).alias("metric"),
                pl.all(),
            )
        )  # fmt: skip
        matrices.append(
            (", ".join(str(v) for v in g.values()), part.select(*tasks, "run_id", "rate"))
        )
    frame = pl.DataFrame(summary, schema_overrides={c: cells.schema[c] for c in by})
    meta = {"ci_level": pl.lit(level), "ci_method": pl.lit(CI_METHOD)}
    return TaskSummaries(
        summary=frame.with_columns(**meta) if frame.height else frame,
        profiles=(pl.concat(profiles) if profiles else pl.DataFrame()).with_columns(**meta),
        improvement=_improvement(matrices, tasks, level, n_resamples, seed),
    )


def select_runs(store: ParquetStore, specs: str | Sequence[str]) -> list[str]:
    """Every run each of ``specs`` names: an id, a unique prefix, or a selector, which here
    may match several runs (``agent=pi05`` is pi05's runs on every suite)."""
    from hylo_analytics.store import RunSelectionError, _selector

    specs = [specs] if isinstance(specs, str) else list(specs)
    fields = store._run_fields()
    found: list[str] = []
    for spec in specs:
        if "=" not in spec:
            found += store.resolve_runs([spec])
            continue
        hits = fields.filter(_selector(spec))["run_id"].to_list()
        if not hits:
            raise RunSelectionError(
                f"no run matches {spec!r} (the store holds {fields.height} run(s): see "
                "'hylo-analytics runs'; select by agent=, version=, benchmark=, split=)"
            )
        found += hits
    return list(dict.fromkeys(found))


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
    groups: list[tuple[str, pl.DataFrame]],
    tasks: list[str],
    level: float,
    n_resamples: int,
    seed: Seed,
) -> pl.DataFrame:
    """P(X > Y) for every ordered pair of groups, on the tasks both have."""
    rows = []
    for x, cells_x in groups:
        for y, cells_y in groups:
            if x == y:
                continue
            common = (
                cells_x.select(tasks)
                .unique()
                .join(cells_y.select(tasks).unique(), on=tasks, nulls_equal=True)
            )
            mx, my = (_matrix(c.join(common, on=tasks, how="semi", nulls_equal=True), tasks)
                      for c in (cells_x, cells_y))  # fmt: skip
            row: dict[str, object] = {"x": x, "y": y, "n_tasks": common.height,
                                      "runs_x": None, "runs_y": None, "estimate": None,
                                      "ci_low": None, "ci_high": None, "note": None}  # fmt: skip
            if isinstance(mx, str) or isinstance(my, str):
                row["note"] = mx if isinstance(mx, str) else my
            elif common.height == 0:
                row["note"] = "no task in common"
            else:
                row["runs_x"], row["runs_y"] = mx.shape[0], my.shape[0]
                try:
                    est, lo, hi = probability_of_improvement_ci(
                        mx, my, level=level, n_resamples=n_resamples, seed=seed
                    )
                    row.update(estimate=est, ci_low=lo, ci_high=hi)
                except SingleRunError:
                    row["note"] = ONE_RUN_NOTE
            rows.append(row)
    schema = {"x": pl.String, "y": pl.String, "n_tasks": pl.Int64, "runs_x": pl.Int64,
              "runs_y": pl.Int64, "estimate": pl.Float64, "ci_low": pl.Float64,
              "ci_high": pl.Float64, "note": pl.String}  # fmt: skip
    return pl.DataFrame(rows, schema=schema).with_columns(
        statistic=pl.lit("probability_of_improvement"),
        ci_level=pl.lit(level),
        ci_method=pl.lit(IMPROVEMENT_CI_METHOD),
    )


def _matrix(cells: pl.DataFrame, tasks: list[str]) -> npt.NDArray[np.float64] | str:
    """The (runs, tasks) matrix of the cells' rates, or why they make none (unequal runs)."""
    cells = cells.sort([*tasks, "run_id"], nulls_last=True)
    per_task = cells.group_by(tasks, maintain_order=True).len()["len"].to_numpy()
    if len(per_task) and per_task.min() != per_task.max():
        return (
            f"the tasks have unequal numbers of runs ({int(per_task.min())} to "
            f"{int(per_task.max())}): P(X > Y) needs a runs x tasks matrix"
        )
    r = int(per_task[0]) if len(per_task) else 0
    rates = cells["rate"].to_numpy()
    return np.asarray(rates.reshape(-1, r).T if r else rates.reshape(0, 0), dtype=np.float64)
