"""Per-task success rates shrunk toward their suite (small-n pooling), as a frame.

A run on a suite of 10-50 tasks with 10-50 episodes each has noisy per-task rates; the
suite's tasks inform each other through an empirical-Bayes beta-binomial prior
(:mod:`hylo_analytics.stats.shrinkage`). Each (run, task) cell's successes and valid episodes
come from :func:`~hylo_analytics.aggregate.aggregate_scores` (``by`` + suite + task, its
``n_valid`` and ``mean``), so the errors policy, the epoch reducer and the denominators are
the aggregate's own. Only 0/1 metrics are pooled: a beta-binomial is a model of successes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from hylo_analytics._harness import Errors
from hylo_analytics.aggregate._engine import aggregate_scores
from hylo_analytics.errors import InputError, SelectionError
from hylo_analytics.stats.closed_form import DEFAULT_LEVEL
from hylo_analytics.stats.methods import DEFAULT_SEED, Seed
from hylo_analytics.stats.shrinkage import DEFAULT_BOOTSTRAP, ShrinkInterval, shrink_rates

if TYPE_CHECKING:
    from hylo_analytics.metrics import MetricRegistry
    from hylo_analytics.store import ParquetStore

__all__ = ["SUITE_COLUMNS", "shrunk_rates"]

SUITE_COLUMNS = ("benchmark_id", "split")


def shrunk_rates(
    scores: pl.DataFrame | pl.LazyFrame | ParquetStore,
    *,
    by: Sequence[str] = ("run_id",),
    task: Sequence[str] = ("task_id",),
    suite: Sequence[str] = SUITE_COLUMNS,
    metric: str = "success",
    runs: Sequence[str] | None = None,
    errors: Errors | None = None,
    level: float = DEFAULT_LEVEL,
    interval: ShrinkInterval = "hierarchical",
    n_resamples: int = DEFAULT_BOOTSTRAP,
    seed: Seed = DEFAULT_SEED,
    source: str | Sequence[str] | None = None,
    registry: MetricRegistry | None = None,
) -> pl.DataFrame:
    """Each task's raw rate (Wilson interval) beside its rate shrunk toward its suite.

    One prior per ``by`` + ``suite`` group (a run on a suite), estimated from its tasks
    (``task`` columns); one row per group and task, in group order: the group, suite and task
    columns, ``metric``, ``k`` (successes), ``n`` (valid episodes), ``raw_rate, raw_lo,
    raw_hi``, ``shrunk_rate, shrunk_lo, shrunk_hi``, ``shrink_weight`` (the prior's share of
    the shrunk rate), ``prior_mean, prior_a, prior_b`` (null where the prior is a point mass),
    ``pooling`` (``partial``, ``complete``: no spread beyond binomial, every task at the
    pooled rate; ``none``: all-or-nothing tasks, nothing moved), ``n_tasks``, ``errors``,
    ``ci_level`` and ``ci_method`` (the shrunk interval's; the raw one is Wilson's).

    ``interval``: ``hierarchical`` (default), ``bootstrap`` (Laird-Louis, ``n_resamples``
    refits, ``seed``) or ``plain`` (:mod:`hylo_analytics.stats.shrinkage` says which covers:
    ``docs/statistics.md``). Columns a frame lacks are dropped from ``suite`` and ``task``
    (a store has them all). ``runs``, ``errors``, ``source``, ``registry``: as
    :func:`aggregate_scores`. A task with no valid episode is left out.
    """
    from hylo_analytics.store import unwrap_store

    scores = unwrap_store(scores)  # a Store (the facade) holds its ParquetStore
    by = list(dict.fromkeys(by))
    suite, task = _columns(scores, by, suite, task)
    cells = _cells(scores, [*by, *suite], task, metric, runs, errors, source, registry, level)
    groups = [*by, *suite]
    cells = cells.with_columns(
        _g=pl.struct(groups).is_first_distinct().cum_sum().cast(pl.Int64) - 1
        if groups
        else pl.lit(0, dtype=pl.Int64)
    )
    n = cells["n_valid"].to_numpy().astype(np.float64)
    k = np.rint(cells["mean"].to_numpy() * n)
    g = cells["_g"].to_numpy()
    out = shrink_rates(k, n, g, level=level, interval=interval, n_resamples=n_resamples,
                       seed=seed)  # fmt: skip
    fit = out.fit
    point = fit.pooling == "complete"
    prior_a = np.where(point, np.nan, fit.a)[g]
    prior_b = np.where(point, np.nan, fit.b)[g]
    return cells.select(
        *groups,
        *task,
        "metric",
        k=pl.Series(k.astype(np.int64)),
        n=pl.Series(n.astype(np.int64)),
        raw_rate=pl.Series(out.raw),
        raw_lo=pl.Series(out.raw_low),
        raw_hi=pl.Series(out.raw_high),
        shrunk_rate=pl.Series(out.shrunk),
        shrunk_lo=pl.Series(out.low),
        shrunk_hi=pl.Series(out.high),
        shrink_weight=pl.Series(out.weight),
        prior_mean=pl.Series(fit.mean[g]),
        prior_a=pl.Series(prior_a).fill_nan(None),
        prior_b=pl.Series(prior_b).fill_nan(None),
        pooling=pl.Series(fit.pooling[g].tolist(), dtype=pl.String),
        n_tasks=pl.Series(fit.n_tasks[g]),
        errors=pl.col("errors"),
        ci_level=pl.lit(level),
        ci_method=pl.lit(out.method),
    )


def _columns(
    scores: pl.DataFrame | pl.LazyFrame | ParquetStore,
    by: list[str],
    suite: Sequence[str],
    task: Sequence[str],
) -> tuple[list[str], list[str]]:
    """The suite and task columns there are (a frame may lack some; a store has them all),
    none repeated from ``by``."""
    from hylo_analytics.store import ParquetStore

    suite = [c for c in dict.fromkeys(suite) if c not in by]
    task = [c for c in dict.fromkeys(task) if c not in by and c not in suite]
    if not isinstance(scores, ParquetStore):
        names = scores.collect_schema().names()
        suite = [c for c in suite if c in names]
        missing = [c for c in task if c not in names]
        task = [c for c in task if c in names]
        if not task:
            raise InputError(
                f"shrink: the scores have none of the task columns {missing}; pass task= "
                "naming the column(s) that identify a task"
            )
    if not task:
        raise InputError("shrink: task= names no column beyond by= and suite=")
    return suite, task


def _cells(
    scores: pl.DataFrame | pl.LazyFrame | ParquetStore,
    groups: list[str],
    task: list[str],
    metric: str,
    runs: Sequence[str] | None,
    errors: Errors | None,
    source: str | Sequence[str] | None,
    registry: MetricRegistry | None,
    level: float,
) -> pl.DataFrame:
    """One row per (group, task): its valid episodes, rate and errors policy (the aggregate's
    rows; a 0/1 metric's interval there is Wilson's, anything else is refused)."""
    keys = list(dict.fromkeys([*groups, *task]))
    agg = aggregate_scores(
        scores, keys, metrics=[metric], statistics=["mean"], level=level, runs=runs,
        errors=errors, source=source, registry=registry,
    )  # fmt: skip
    not_rate = agg.filter(pl.col("ci_method") != "wilson", pl.col("n_valid") > 0)
    if not_rate.height:
        raise InputError(
            f"shrink: metric {metric!r} is not 0/1 in {not_rate.height} task(s); small-n "
            "pooling is of success rates (a beta-binomial model of successes): pass a 0/1 "
            "metric such as success"
        )
    agg = agg.filter(pl.col("n_valid") > 0)
    if not agg.height:
        raise SelectionError(
            f"shrink: no valid scores of metric {metric!r} in the runs selected; check the "
            "metric name and runs= (see 'hylo-analytics runs')"
        )
    return agg.sort(keys, nulls_last=True)
