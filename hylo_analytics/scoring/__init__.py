"""The scoring engine: scorers as SQL / column expressions over every episode at once.

A scorer is a pure function of an episode's trace and its sample record, giving a score or an
abstention (``value`` null, ``valid`` false, ``skip_reason`` saying why). Here each scorer is
evaluated for all episodes of all selected runs in one query (or one polars expression), and
its rows go to the ``scores`` table with ``source = "scorer:<name>"``, ``source_kind = "score"``.
Grade events (judgements written into the trace by a Grader: a VLM judge, an operator) become
rows with ``source = "grade:<grader>"``, ``source_kind = "observation"``.

Built-in scorers (see :mod:`hylo_analytics.scoring._builtin` for the abstention rules):

- ``success``: the episode's ``end.status == "success"``;
- ``success_once`` / ``success_at_end``: any step's / the last step's ``info.success``, with
  ManiSkill's meaning. inspect-robots uses ``success_at_end`` for something else (a score
  reduced from the operator's end-of-episode judgement); ours is ManiSkill's;
- ``steps``, ``safety_interventions`` (counts of step / intervention events), ``return`` (sum
  of step rewards), ``latency_p95`` (95th percentile of step ``latency_ms``).

Re-scoring (:meth:`Store.score`) commits the new rows with a tombstone per (run, source), so a
re-run replaces that scorer's earlier rows and never duplicates them. Which of several sources
answers for a metric is decided by the view ``int_scores_preferred`` (documented there).
"""

from __future__ import annotations

import itertools
import os
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from hylo_analytics import _schema
from hylo_analytics._sql import query_sql, view_query, view_sql
from hylo_analytics.errors import InputError, SelectionError
from hylo_analytics.scoring._actions import ExpectedActionScorer, expected_action_rows
from hylo_analytics.scoring._builtin import BUILTINS, GRADES, builtin_sql, grades_sql
from hylo_analytics.scoring._common import RESULT_COLUMNS, ScorerDeclaration, id_list
from hylo_analytics.scoring._declarative import (
    DeclarativeScorer,
    declarative_rows,
    load_scorers,
    parse_scorers,
)
from hylo_analytics.scoring._python import (
    EpisodeScorer,
    ScoringCall,
    VectorizedScorer,
    episode_rows,
    vectorized_rows,
)
from hylo_analytics.scoring._report import ScorerSummary, ScoringError, ScoringReport
from hylo_analytics.scoring.metric_protocol import (
    METRIC_RESULT_COLUMNS,
    MetricScorer,
    as_metric_scorer,
    is_metric,
    metric_rows,
)
from hylo_analytics.store import pinned

if TYPE_CHECKING:
    from hylo_analytics.store import ParquetStore

__all__ = [
    "BUILTIN_SCORERS",
    "DeclarativeScorer",
    "EpisodeScorer",
    "ExpectedActionScorer",
    "Scorer",
    "ScorerDeclaration",
    "ScorerSummary",
    "ScoringCall",
    "ScoringError",
    "ScoringReport",
    "VectorizedScorer",
    "compute_scores",
    "load_scorers",
    "parse_scorers",
    "score_store",
]

BUILTIN_SCORERS: tuple[str, ...] = (*BUILTINS, GRADES)

Scorer = (
    str | DeclarativeScorer | ExpectedActionScorer | VectorizedScorer | EpisodeScorer | MetricScorer
)
# a WorldFoundry Metric (see hylo_analytics.scoring.metric_protocol) is wrapped into a MetricScorer
ScorersArg = (
    Sequence[Scorer | Mapping[str, Any] | Any] | Mapping[str, Any] | str | os.PathLike[str] | None
)

_MAX_LISTED_ERRORS = 20


def _resolve(scorers: ScorersArg) -> list[Scorer]:
    """Built-in names, scorer objects, declaration mappings or YAML paths -> scorers."""
    if scorers is None:
        return list(BUILTIN_SCORERS)
    if isinstance(scorers, Mapping):
        return list(load_scorers(scorers))
    if isinstance(scorers, os.PathLike) or (
        isinstance(scorers, str) and scorers not in BUILTIN_SCORERS
    ):
        return list(load_scorers(scorers))
    if isinstance(scorers, str):
        return [scorers]
    out: list[Scorer] = []
    for s in scorers:
        if isinstance(s, Mapping):
            out.extend(load_scorers(s))
        elif isinstance(s, str) and s not in BUILTIN_SCORERS:
            raise SelectionError(
                f"unknown built-in scorer {s!r}; known: {', '.join(BUILTIN_SCORERS)}"
            )
        elif not isinstance(s, str | DeclarativeScorer | VectorizedScorer | EpisodeScorer) and (
            is_metric(s)
        ):
            out.append(as_metric_scorer(s))
        else:
            out.append(s)
    sources = [_source(s) for s in out]
    dup = sorted({x for x in sources if sources.count(x) > 1})
    if dup:
        raise InputError(f"two scorers write the same source: {dup}")
    return out


def _source(s: Scorer) -> str:
    return "grade:*" if s == GRADES else f"scorer:{s}" if isinstance(s, str) else s.source


@pinned
def compute_scores(
    store: ParquetStore, scorers: ScorersArg = None, runs: Sequence[str] | None = None
) -> tuple[pa.Table, list[str], dict[str, float], list[Scorer]]:
    """Evaluate ``scorers`` over the stored episodes of ``runs``; nothing is written.

    Returns the rows (``RESULT_COLUMNS``, with ``is_error``), the runs scored, seconds per
    source, and the resolved scorers.
    """
    resolved = _resolve(scorers)
    con = store.con
    if runs is None:
        run_ids = [
            r[0] for r in con.execute("select run_id from stg_runs order by run_id").fetchall()
        ]
    else:
        run_ids = store.resolve_runs(runs)  # ids, unique prefixes or selectors
    tag = uuid.uuid4().hex[:8]
    runs_rel, ep_rel, rec_rel = f"_score_runs_{tag}", f"_score_ep_{tag}", f"_score_rec_{tag}"
    id_list(con, runs_rel, run_ids)
    parts: list[pa.Table] = []
    seconds: dict[str, float] = {}
    try:
        # a parameter list (not a semi-join on the relation): the filter reaches the scans of
        # samples and events, so scoring one run reads that run's row groups, not the store's
        if runs is not None:
            con.execute(
                f"create temp table {ep_rel} as select * from int_episode_stats "
                "where list_contains($runs, run_id)",
                {"runs": run_ids},
            )
        else:
            _episode_stats_in_chunks(con, ep_rel, run_ids)
        names = [s for s in resolved if isinstance(s, str) and s in BUILTINS]
        if names:
            # A run with no trace at all has nothing to re-score: a built-in would only write
            # "no trace" abstentions beside the log's own scores. Such runs are left alone.
            t0 = time.perf_counter()
            traced = (
                f"(select * from {ep_rel} where run_id in "
                f"(select run_id from {ep_rel} group by run_id having bool_or(has_trace)))"
            )
            parts.append(con.sql(builtin_sql(names, traced)).to_arrow_table())
            seconds.update({f"scorer:{n}": (time.perf_counter() - t0) / len(names) for n in names})
        if GRADES in resolved:
            t0 = time.perf_counter()
            grades = con.sql(
                grades_sql(runs is not None), params=None if runs is None else {"runs": run_ids}
            )
            parts.append(grades.to_arrow_table())
            seconds["grade:*"] = time.perf_counter() - t0
        episodes: pl.DataFrame | None = None
        for s in resolved:
            if isinstance(s, str):
                continue
            t0 = time.perf_counter()
            if isinstance(s, DeclarativeScorer | ExpectedActionScorer):
                if not _exists(con, rec_rel):
                    con.execute(
                        f"create temp table {rec_rel} as "
                        + query_sql("scoring_record", runs=runs_rel, episodes=ep_rel)
                    )
                if isinstance(s, DeclarativeScorer):
                    parts.append(declarative_rows(con, s, rec_rel))
                else:
                    parts.append(expected_action_rows(con, s, rec_rel, runs_rel))
            else:
                if episodes is None:
                    episodes = con.sql(f"select * from {ep_rel}").pl()
                if isinstance(s, VectorizedScorer):
                    parts.append(vectorized_rows(s, episodes))
                elif isinstance(s, MetricScorer):
                    parts.append(metric_rows(con, s, episodes, runs_rel))
                else:
                    parts.append(episode_rows(con, s, episodes, runs_rel))
            seconds[s.source] = time.perf_counter() - t0
    finally:
        con.unregister(runs_rel)
        con.execute(f"drop table if exists {ep_rel}")
        con.execute(f"drop table if exists {rec_rel}")
    cols = [c for c in RESULT_COLUMNS if c != "is_error"] + list(METRIC_RESULT_COLUMNS)
    schema = pa.schema([_schema.SCORES.field(c) for c in cols] + [pa.field("is_error", pa.bool_())])

    def full(p: pa.Table) -> pa.Table:  # only MetricResult rows fill those columns
        for f in schema:
            if f.name not in p.column_names:
                p = p.append_column(f.name, pa.nulls(p.num_rows, f.type))
        return p.select(schema.names).cast(schema)

    rows = pa.concat_tables([full(p) for p in parts]) if parts else schema.empty_table()
    return rows, run_ids, seconds, resolved


_EPISODES_PER_QUERY = 4096  # 2.8M trace events in 20,000 episodes: peak 775 -> ~490 MiB


def _episode_stats_in_chunks(con: Any, table: str, run_ids: Sequence[str]) -> None:
    """``int_episode_stats`` of every run into ``table``, about :data:`_EPISODES_PER_QUERY`
    episodes per query: the reduction of a chunk's events (a percentile keeps each latency
    of its group) is all a query holds. ``run_ids``: every run, in SQL order; the chunks
    are consecutive ranges of run id (compared at the scans, where a range prunes row
    groups; the first and last open-ended, so every row of the store is in one chunk)."""
    counts = dict(con.execute("select run_id, count(*) from stg_samples group by 1").fetchall())
    bounds: list[str] = []  # the last run of each chunk but the last
    size, prev = 0, ""
    for run in run_ids:
        n = int(counts.get(run, 0))
        if size and size + n > _EPISODES_PER_QUERY:
            bounds.append(prev)
            size = 0
        size += n
        prev = run
    if not bounds:
        con.execute(f"create temp table {table} as select * from int_episode_stats")
        return
    edges = [None, *bounds, None]
    for i, (lo, hi) in enumerate(itertools.pairwise(edges)):
        where = " and ".join(
            ([] if lo is None else ["run_id > $lo"]) + ([] if hi is None else ["run_id <= $hi"])
        )
        if hi is None:
            where = f"({where} or run_id is null)"
        ranged = {n: f"select * from ({view_sql(n)}) where {where}" for n in _EPISODE_INPUTS}
        head = f"create temp table {table} as " if i == 0 else f"insert into {table} "
        params = {k: v for k, v in (("lo", lo), ("hi", hi)) if v is not None}
        con.execute(head + view_query("int_episode_stats", ranged), params)


_EPISODE_INPUTS = ("stg_samples", "stg_events")  # what int_episode_stats reads


def _exists(con: Any, name: str) -> bool:
    rows = con.execute("select 1 from duckdb_tables() where table_name = ?", [name]).fetchall()
    return bool(rows)


def score_store(
    store: ParquetStore,
    scorers: ScorersArg = None,
    runs: Sequence[str] | None = None,
    *,
    write: bool = True,
) -> ScoringReport:
    """Score ``runs`` (default: all) with ``scorers`` (default: built-ins and grades) and commit.

    Each (run, source) scored gets a tombstone, so earlier rows of that scorer are replaced.
    A required scorer's error rows mark their run failed in the report; nothing raises
    halfway and every row is committed. ``write=False`` (a dry run) commits nothing; the rows
    are in the report's ``rows``.
    """
    from hylo_analytics.store import as_parquet

    store = as_parquet(store)  # a Store (the facade) holds its ParquetStore
    from hylo_analytics.store import Tombstone

    t0 = time.perf_counter()
    if not write:
        rows, run_ids, seconds, resolved = compute_scores(store, scorers, runs)
        report = _report(rows, run_ids, seconds, resolved, None, time.perf_counter() - t0)
        untraced = _untraced(store, run_ids) if _uses_traces(resolved) else ()
        return replace(report, rows_written=0, rows=_committed(rows), untraced_runs=untraced)
    with store.lock():
        rows, run_ids, seconds, resolved = compute_scores(store, scorers, runs)
        sources = set(pc.unique(rows.column("source")).to_pylist())
        if GRADES in resolved:  # grade sources that vanished must be superseded too
            sources |= {
                r[0]
                for r in store.con.execute(
                    "select distinct source from stg_scores where source like 'grade:%'"
                ).fetchall()
            }
        sources |= {_source(s) for s in resolved if s != GRADES}
        untraced = _untraced(store, run_ids) if _uses_traces(resolved) else ()
        builtin = {f"scorer:{n}" for n in BUILTINS}
        # an untraced run keeps whatever built-in rows it has: none were computed for it
        tombstones = [
            Tombstone("scores", r, s)
            for r in run_ids
            for s in sorted(sources)
            if not (r in untraced and s in builtin)
        ]
        seq = store.commit({"scores": _committed(rows)}, tombstones)
    report = _report(rows, run_ids, seconds, resolved, seq, time.perf_counter() - t0)
    return replace(report, rows=_committed(rows), untraced_runs=untraced)


def _uses_traces(resolved: list[Scorer]) -> bool:
    return any(isinstance(s, str) and s in BUILTINS for s in resolved)


def _untraced(store: ParquetStore, run_ids: list[str]) -> tuple[str, ...]:
    """The runs none of whose samples has a usable trace (what the built-ins skip)."""
    rows = store.sql(
        "select run_id from stg_samples where list_contains($runs, run_id) group by run_id "
        "having not bool_or(coalesce(trace_status in ('ok', 'partial'), false)) order by 1",
        {"runs": run_ids},
    )
    return tuple(rows["run_id"].to_list())


def _committed(rows: pa.Table) -> pa.Table:
    """The rows as the scores table holds them (``is_error`` dropped)."""
    return _schema.conform(rows.drop_columns(["is_error"]), "scores")


def _report(
    rows: pa.Table,
    run_ids: list[str],
    seconds: dict[str, float],
    resolved: list[Scorer],
    seq: int | None,
    elapsed: float,
) -> ScoringReport:
    df = pl.from_arrow(rows)
    assert isinstance(df, pl.DataFrame)
    optional = {_source(s): (not isinstance(s, str) and s.declaration.optional) for s in resolved}
    df = df.with_columns(
        pl.when(pl.col("source").str.starts_with("grade:"))
        .then(pl.lit("grade:*"))
        .otherwise(pl.col("source"))
        .alias("group")
    )
    counts = (
        df.group_by("source", "group")
        .agg(
            pl.len().alias("rows"),
            pl.col("valid").sum().alias("valid"),
            (~pl.col("valid") & ~pl.col("is_error")).sum().alias("abstained"),
            pl.col("is_error").sum().alias("errors"),
        )
        .sort("source")
    )
    summaries = tuple(
        ScorerSummary(
            r["source"],
            optional.get(r["group"], False),
            r["rows"],
            r["valid"],
            r["abstained"],
            r["errors"],
            seconds.get(r["group"], 0.0),
        )
        for r in counts.iter_rows(named=True)
    )
    required_errors = df.filter(
        pl.col("is_error") & ~pl.col("group").replace_strict(optional, default=False)
    )
    failed = required_errors.group_by("run_id").agg(pl.col("source").unique().sort()).sort("run_id")
    listed = df.filter(pl.col("is_error")).head(_MAX_LISTED_ERRORS)
    return ScoringReport(
        runs=tuple(run_ids),
        scorers=summaries,
        failed_runs={r: tuple(s) for r, s in failed.iter_rows()},
        errors=tuple(
            ScoringError(r["source"], r["run_id"], r["key"], r["skip_reason"])
            for r in listed.iter_rows(named=True)
        ),
        rows_written=rows.num_rows,
        batch_seq=seq,
        seconds=elapsed,
    )
