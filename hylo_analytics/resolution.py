"""The one score resolution: the value of metric M for an episode, read from the store.

The rule lives in SQL, in the view ``int_scores_preferred`` (and the macro ``score_rank``), and
every reader (``aggregate``, ``compare``, policies, derivers, export, the report, charts, the
``mart_*`` views) reads it through this module or the view itself:

1. a valid value beats an abstention;
2. among values, re-scored (``score``) > ``derived`` > ``observation`` (grades) > ``imported``
   (the log's own), then source name;
3. among abstentions, ``imported`` > ``observation`` > ``derived`` > ``score``: the log's own
   reason is kept over a re-scorer's "no trace".

``int_key_scores`` reduces the epochs of a key by their mean (the key is the unit of
analysis). Asking for one ``source`` reads that source's rows through the same view (the rule
then has one candidate per episode), so a source-specific answer is normalized the same way.
Filters (runs, metrics, sources) are applied to ``stg_scores`` before the view's window, which
is exact because the view partitions by run and metric.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal

import polars as pl
import pyarrow as pa

from hylo_analytics._sql import PREFERRED_VIEW, scores_overlay, view_query
from hylo_analytics.store import FEW_RUNS, ParquetStore, pinned

__all__ = [
    "EPISODE_VIEW",
    "KEY_VIEW",
    "preferred_query",
    "preferred_scores",
    "success_metric",
]

EPISODE_VIEW = PREFERRED_VIEW
KEY_VIEW = "int_key_scores"


def preferred_query(
    view: str = EPISODE_VIEW,
    *,
    runs: bool = False,
    metrics: bool = False,
    sources: bool = False,
    pending: str | None = None,
    semantic_names: bool = False,
) -> str:
    """The SQL of ``view`` over filtered (or overlaid) scores.

    The filters read the parameters ``$runs``, ``$metrics`` and ``$sources`` (lists);
    ``pending`` names a registered relation of score rows not committed yet, read as if
    committed (a dry run). With ``semantic_names`` a row whose metadata names a
    ``semantic_type`` is also a candidate under that name (``money.cost`` for a derived
    ``request_cost``), resolved by the same rule against the rows stored under it.

    Runs and metrics filter the resolution the store materialized (the filter reaches the
    Parquet scan: a question about k runs reads their row groups); a source, pending rows or
    semantic names evaluate the rule itself (``int_scores_resolution``) over the candidate
    rows asked for, which is exact because the rule partitions by run and metric.
    """
    where = [
        cond
        for flag, cond in (
            (runs, "list_contains($runs, run_id)"),
            # Not list_contains: DuckDB rewrites a constant list of more than a few names
            # into a join whose estimate then flips the tombstone join onto the store's rows
            # (7 names: 7 s at 10M samples, 0.6 s so); the runs' filter must stay an IN
            # list, which reaches the Parquet scan's row-group statistics.
            (metrics, "list_position($metrics, metric) is not null"),
            (sources, "list_position($sources, source) is not null"),
        )
        if flag
    ]
    if not (sources or pending or semantic_names):
        if not where:
            return f"SELECT * FROM {view}"
        resolved = f"select * from main.{EPISODE_VIEW} where {' and '.join(where)}"
        return resolved if view == EPISODE_VIEW else view_query(view, {EPISODE_VIEW: resolved})
    base = f"({scores_overlay(pending)})" if pending else "main.stg_scores"
    if semantic_names:
        named = "json_extract_string(metadata, '$.semantic_type')"
        base = (
            f"(select * from {base} union all by name select * replace ({named} as metric) "
            f"from {base} where {named} is not null and {named} <> metric)"
        )
    scores = f"select * from {base} as s" + (f" where {' and '.join(where)}" if where else "")
    overrides = {"stg_scores": scores}
    if runs:
        overrides["stg_samples"] = (
            "select * from main.stg_samples where list_contains($runs, run_id)"
        )
    return view_query(view, overrides)  # the views over the rule (_sql.MATERIALIZED)


def run_filter(store: ParquetStore, runs: Sequence[str] | None) -> list[str] | None:
    """``runs`` as a filter for :func:`preferred_query`, or None when they hold every run of
    the store: the filter would keep every row, and a list of thousands of run ids costs more
    than the scan (DuckDB probes each row against it and its estimate then flips the
    tombstone join onto the store's rows: 20,000 runs at 10M samples, 5 s against 0.8 s)."""
    if runs is None:
        return None
    asked = list(runs)
    if len(asked) < FEW_RUNS:  # few runs: the filter reaches the scan's row groups, keep it
        return asked
    every = store.sql("select run_id from stg_runs")["run_id"]
    return None if every.is_in(asked).all() else asked


@contextmanager
def registered(store: ParquetStore, table: pa.Table | None) -> Iterator[str | None]:
    """``table`` registered on the store's connection under a fresh name for the block."""
    if table is None or table.num_rows == 0:
        yield None
        return
    name = f"_pending_scores_{uuid.uuid4().hex[:8]}"
    store.con.register(name, table)
    try:
        yield name
    finally:
        store.con.unregister(name)


@pinned
def preferred_scores(
    store: ParquetStore,
    *,
    runs: Sequence[str] | None = None,
    metrics: Sequence[str] | None = None,
    source: str | Sequence[str] | None = None,
    level: Literal["episode", "key"] = "episode",
    pending: pa.Table | None = None,
    semantic_names: bool = False,
    columns: Sequence[str] | None = None,
) -> pl.DataFrame:
    """The resolved scores: one row per (run, key, epoch, metric), or per key with ``level="key"``.

    ``source`` reads only that source (or those sources) instead of resolving across all;
    ``columns`` reads only those columns (the scan reads no others).
    """
    params: dict[str, Any] = {}
    if runs is not None:
        params["runs"] = list(runs)
    if metrics is not None:
        params["metrics"] = list(metrics)
    if source is not None:
        params["sources"] = [source] if isinstance(source, str) else list(source)
    view = EPISODE_VIEW if level == "episode" else KEY_VIEW
    with registered(store, pending) as rel:
        query = preferred_query(
            view,
            runs=runs is not None,
            metrics=metrics is not None,
            sources=source is not None,
            pending=rel,
            semantic_names=semantic_names,
        )
        if columns is not None:
            query = f"select {', '.join(columns)} from ({query})"
        return store.sql(query, params or None)


@pinned
def success_metric(store: ParquetStore, runs: Sequence[str]) -> str | None:
    """The metric that is the success of every one of ``runs``, or None when they differ.

    The rule is the view ``int_success_metric`` (``success``; an inspect-robots run without it
    reads ``success_at_end``), so a comparison of two inspect-robots trials asks for the same
    metric the success marts report.
    """
    found = store.sql(
        "select run_id, metric from int_success_metric where list_contains($runs, run_id)",
        {"runs": list(runs)},
    )
    metrics = set(found["metric"].to_list())
    if found.height != len(set(runs)) or len(metrics) != 1:
        return None
    return str(metrics.pop())


@pinned
def runs_without(
    store: ParquetStore, metrics: Sequence[str], runs: Sequence[str] | None = None
) -> pl.DataFrame:
    """The runs (of ``runs``, default every run) with no resolved score of any of
    ``metrics``, each with the metrics it has (``run_id``, ``metrics``): what a question on
    ``metrics`` leaves out, so it can say so (an inspect-robots run names its success
    ``success_at_end``)."""
    where = "" if runs is None else "WHERE list_contains($runs, r.run_id)"
    params: dict[str, Any] = {"metrics": list(metrics)}
    if runs is not None:
        params["runs"] = list(runs)
    return store.sql(
        "SELECT r.run_id, string_agg(DISTINCT s.metric, ', ' ORDER BY s.metric) AS metrics "
        "FROM stg_runs AS r LEFT JOIN int_scores_preferred AS s ON s.run_id = r.run_id "
        f"{where} GROUP BY r.run_id "
        "HAVING count(*) FILTER (WHERE list_contains($metrics, s.metric)) = 0 ORDER BY r.run_id",
        params,
    )
