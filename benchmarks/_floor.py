"""The floor of issue 26's questions: plain DuckDB over a store's Parquet files, no hylo code.

Each floor reads ``<store>/manifest.json`` only to list the batch files, then answers one
question with a hand-written query that computes what hylo_analytics computes, so the ratio
``hylo / floor`` is the engine's overhead over reading the same bytes.

The floors rest on two facts of the synthetic benchmark store, checked (untimed) before each
timed query by :func:`check`, which raises when either fails:

- **one source per episode**: the logs' own scores (``imported``) only, so the one score
  resolution (``int_scores_preferred``) has one candidate per (run, key, epoch, metric) and the
  floor reads the current score rows directly (after the tombstone filter, which is applied);
- **one epoch per key**: a key's score is its one episode's (``int_key_scores`` reduces epochs
  by their mean; with one epoch the mean is the value), and every run is of one benchmark and
  split (``int_paired`` pairs only those).

A store re-scored from traces (``Store.score``) breaks the first: its scorers write a row per
episode, an abstention where there is no trace. The benchmark re-scores a copy instead.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from statistics import NormalDist
from typing import Any

from _measure import reset_peak

LEVEL = 0.95  # hylo's DEFAULT_LEVEL: the mart's ci_level and Wilson's coverage
Z = NormalDist().inv_cdf(0.5 + LEVEL / 2)
# the metric registry's lower-is-better metrics (``metric_specs``), written out by hand
MINIMIZED = ("steps", "safety_interventions", "latency_p95")
QUESTIONS = ("aggregate", "compare", "mart_aggregate", "mart_compare")


def files(store: Path, table: str) -> str:
    """A ``read_parquet`` of ``table``'s files in the batches ``manifest.json`` lists."""
    manifest = json.loads((store / "manifest.json").read_text())
    paths = [store / "batches" / b["name"] / f"{table}.parquet" for b in manifest["batches"]]
    listed = ", ".join(f"'{p}'" for p in paths if p.exists())
    return f"read_parquet([{listed}], union_by_name = true)"


def current(store: Path, table: str, columns: str, where: str = "true") -> str:
    """The rows of ``table`` no tombstone supersedes (the store's rule), ``where`` at the scan.

    A row is current when its batch is not older than the newest tombstone of its run (a null
    source: every source) or, for scores, of its run and source.
    """
    tomb = f"{files(store, 'tombstones')} where table_name = '{table}'"
    joins = f"""left join (select run_id, max(batch_seq) as dead from {tomb} and source is null
            group by run_id) as r on r.run_id = s.run_id"""
    alive = "(r.dead is null or s.batch_seq >= r.dead)"
    if table == "scores":
        joins += f"""
        left join (select run_id, source, max(batch_seq) as dead from {tomb}
            and source is not null group by run_id, source) as d
            on d.run_id = s.run_id and d.source = s.source"""
        alive += " and (d.dead is null or s.batch_seq >= d.dead)"
    return f"""
        select {columns}
        from (select * from {files(store, table)} where {where}) as s
        {joins}
        where {alive}"""


def _scores(store: Path, where: str = "true") -> str:
    cols = (
        "s.run_id, s.key, s.task_id, s.epoch, s.metric, s.source, s.skip_reason, "
        "coalesce(s.value is not null and not isnan(s.value) and coalesce(s.valid, true), false)"
        " as ok, s.value as raw"
    )
    return current(store, "scores", cols, where)


def _runs_filter(runs: Sequence[str] | None) -> str:
    if runs is None:
        return "true"
    return "run_id in (" + ", ".join(f"'{r}'" for r in runs) + ")"


def check(con: Any, store: Path, runs: Sequence[str] | None = None) -> None:
    """Raise unless every (run, key, metric) has one current score row and one benchmark."""
    dup = con.execute(
        f"""select count(*), any_value(run_id), any_value(key), any_value(metric) from (
            select run_id, key, metric from ({_scores(store, _runs_filter(runs))})
            group by all having count(*) > 1)"""
    ).fetchone()
    if dup[0]:
        raise SystemExit(
            f"floor: {dup[0]} (run, key, metric) with several score rows (sources or epochs), "
            f"e.g. {dup[1:]}; the floor reads one score per key (a store never re-scored)"
        )
    kinds = con.execute(
        f"select count(distinct (benchmark_id, split)) from {files(store, 'runs')}"
    ).fetchone()[0]
    if kinds > 1:
        raise SystemExit(f"floor: {kinds} (benchmark, split) in the store; the floor needs one")


def aggregate_sql(store: Path, runs: Sequence[str] | None = None) -> str:
    """Per (run, metric) of success and steps: counts, mean, std, stderr, Wilson for 0/1."""
    return f"""
    with scores as ({_scores(store, "metric in ('success', 'steps') and " + _runs_filter(runs))}),
    counts as (
        select run_id, metric,
            count(*) as n_total,
            count(*) filter (where ok) as n_valid,
            avg(raw) filter (where ok) as mean,
            stddev_samp(raw) filter (where ok) as std,
            sum(raw) filter (where ok) as k,
            bool_and(raw in (0, 1) or not ok) as binary_here
        from scores group by run_id, metric
    ),
    final as (
        select run_id, metric, n_total, n_valid, mean, std, std / sqrt(n_valid) as stderr,
            bool_and(binary_here) over (partition by metric) as is_binary,
            k, cast(n_valid as double) as n
        from counts
    )
    select run_id, metric, n_total, n_valid, mean, std, stderr,
        case when is_binary and n > 0 then
            case when k <= 0 then 0.0 else greatest(0.0, least(1.0,
            (k / n + {Z} * {Z} / (2 * n)
             - {Z} * sqrt((k / n) * (1 - k / n) / n + {Z} * {Z} / (4.0 * n * n)))
            / (1 + {Z} * {Z} / n))) end end as ci_low,
        case when is_binary and n > 0 then
            case when k >= n then 1.0 else greatest(0.0, least(1.0,
            (k / n + {Z} * {Z} / (2 * n)
             + {Z} * sqrt((k / n) * (1 - k / n) / n + {Z} * {Z} / (4.0 * n * n)))
            / (1 + {Z} * {Z} / n))) end end as ci_high
    from final"""


def compare_sql(store: Path, candidates: Sequence[str] | None, parent: str) -> str:
    """Every candidate against ``parent`` on success, paired on key: one overall row each."""
    runs = None if candidates is None else [*candidates, parent]
    where = "metric = 'success' and " + _runs_filter(runs)
    return f"""
    with scores as (
        select run_id, key, case when ok then raw end as v from ({_scores(store, where)})
    ),
    par as (select key, v as pv from scores where run_id = '{parent}'),
    pairs as (
        select c.run_id as candidate, c.v, p.pv
        from scores as c inner join par as p on p.key = c.key
        where c.run_id <> '{parent}'
    )
    select candidate,
        count(*) filter (where v is not null and pv is not null) as n_pairs,
        count(*) filter (where v > pv) as candidate_wins,
        count(*) filter (where v < pv) as parent_wins,
        count(*) filter (where v = pv) as ties,
        count(*) filter (where v is null or pv is null) as n_dropped,
        avg(v - pv) as mean_diff
    from pairs group by candidate"""


def mart_aggregate_sql(store: Path) -> str:
    """The columns of ``mart_aggregate_run``: every metric of every run."""
    samples = current(store, "samples", "s.run_id, s.key, s.epoch", "status = 'error'")
    return f"""
    with scores as ({_scores(store)}),
    keys as (
        select run_id, metric, case when ok then raw end as value, ok as valid, key, epoch,
            case when not ok then coalesce(skip_reason, case when raw is null
                then 'abstained' when isnan(raw) then 'nan' else 'invalid' end) end
                as skip_reason
        from scores
    ),
    abstained as (select * from keys where not valid),
    errors as (
        -- an abstention is errored when its sample errored: only abstentions are joined
        select a.run_id, a.metric, count(*) as n_errors
        from abstained as a inner join ({samples}) as m
            on m.run_id = a.run_id and m.key = a.key and m.epoch is not distinct from a.epoch
        group by a.run_id, a.metric
    ),
    kinds as (
        select metric, bool_and(value in (0, 1) or value is null) as is_binary
        from keys group by metric
    ),
    counts as (
        select k.run_id, k.metric, count(*) as n_total, count(value) as n_valid,
            count(*) - count(value) as n_skipped, avg(value) as mean,
            stddev_samp(value) as std, sum(value) as k
        from keys as k group by k.run_id, k.metric
    ),
    reasons as (
        select run_id, metric, list({{'reason': skip_reason, 'count': n}} order by skip_reason)
            as skip_breakdown
        from (select run_id, metric, skip_reason, count(*) as n from abstained group by all)
        group by run_id, metric
    ),
    joined as (
        select c.*, k.is_binary, cast(c.n_valid as double) as n,
            coalesce(e.n_errors, 0) as n_errors, coalesce(r.skip_breakdown, []) as skip_breakdown
        from counts as c inner join kinds as k on k.metric = c.metric
        left join errors as e on e.run_id = c.run_id and e.metric = c.metric
        left join reasons as r on r.run_id = c.run_id and r.metric = c.metric
    )
    select run_id, metric, n_total, n_valid, n_skipped, n_errors, skip_breakdown,
        n_valid / n_total as coverage, mean,
        std, std / sqrt(n_valid) as stderr, is_binary,
        case when is_binary and n > 0 then
            case when k <= 0 then 0.0 else greatest(0.0, least(1.0,
            (k / n + {Z} * {Z} / (2 * n)
             - {Z} * sqrt((k / n) * (1 - k / n) / n + {Z} * {Z} / (4.0 * n * n)))
            / (1 + {Z} * {Z} / n))) end end as wilson_low,
        case when is_binary and n > 0 then
            case when k >= n then 1.0 else greatest(0.0, least(1.0,
            (k / n + {Z} * {Z} / (2 * n)
             + {Z} * sqrt((k / n) * (1 - k / n) / n + {Z} * {Z} / (4.0 * n * n)))
            / (1 + {Z} * {Z} / n))) end end as wilson_high,
        {LEVEL} as ci_level
    from joined"""


def mart_compare_sql(store: Path, candidate: str, parent: str) -> str:
    """``mart_compare``'s rows of one pair (overall and per task), reading those 2 runs only."""
    where = _runs_filter([candidate, parent])
    minimized = ", ".join(f"'{m}'" for m in MINIMIZED)
    return f"""
    with scores as (
        select run_id, key, task_id, metric, case when ok then raw end as v
        from ({_scores(store, where)})
    ),
    paired as (
        select c.key, c.task_id, c.metric, c.v - p.v as diff,
            case when c.v is null or p.v is null then 'dropped'
                when (c.v - p.v) * (case when c.metric in ({minimized}) then -1 else 1 end) > 0
                    then 'candidate'
                when (c.v - p.v) * (case when c.metric in ({minimized}) then -1 else 1 end) < 0
                    then 'parent'
                else 'tie' end as outcome
        from scores as c inner join scores as p
            on p.run_id = '{parent}' and p.key = c.key and p.metric = c.metric
        where c.run_id = '{candidate}'
    )
    select '{candidate}' as candidate, '{parent}' as parent, metric,
        case when grouping(task_id) = 1 then 'overall' else 'task_id' end as level, task_id,
        count(*) filter (where outcome <> 'dropped') as n_pairs,
        count(*) filter (where outcome = 'candidate') as candidate_wins,
        count(*) filter (where outcome = 'parent') as parent_wins,
        count(*) filter (where outcome = 'tie') as ties,
        count(*) filter (where outcome = 'dropped') as n_dropped,
        avg(diff) filter (where outcome <> 'dropped') as mean_diff
    from paired group by grouping sets ((metric), (metric, task_id))"""


def run(question: str, store: Path, ids: Sequence[str], timed_open: bool = False) -> dict[str, Any]:
    """Answer ``question`` on ``store`` (runs ``ids``, the first the parent): seconds, table.

    ``timed_open``: the connection and the listing of files count (as a fresh process's
    first query does on the hylo side).
    """
    import duckdb

    queries = {
        "aggregate": lambda: aggregate_sql(store),
        "compare": lambda: compare_sql(store, None, ids[0]),
        "mart_aggregate": lambda: mart_aggregate_sql(store),
        "mart_compare": lambda: mart_compare_sql(store, ids[-1], ids[0]),
    }
    check_runs = [ids[0], ids[-1]] if question == "mart_compare" else None
    with duckdb.connect() as checking:  # the store's shape, checked apart: not the answer's cost
        check(checking, store, check_runs)
    reset_peak()
    t = time.perf_counter()
    con = duckdb.connect()
    if not timed_open:
        t = time.perf_counter()
    table = con.sql(queries[question]()).to_arrow_table()
    return {"seconds": time.perf_counter() - t, "table": table}


def run_ids(store: Path) -> list[str]:
    """The store's run ids in order (as ``SELECT run_id FROM runs ORDER BY run_id``)."""
    import duckdb

    with duckdb.connect() as con:
        rows = con.execute(
            f"select distinct run_id from ({current(store, 'runs', 's.run_id')}) order by 1"
        ).fetchall()
    return [r[0] for r in rows]


# what each question's answers must agree on: keys, exact columns, float columns
AGREE: dict[str, tuple[list[str], list[str], list[str]]] = {
    "aggregate": (["run_id", "metric"], ["n_total", "n_valid"], ["mean", "std", "stderr"]),
    "compare": (
        ["candidate"],
        ["n_pairs", "candidate_wins", "parent_wins", "ties", "n_dropped"],
        ["mean_diff"],
    ),
    "mart_aggregate": (
        ["run_id", "metric"],
        ["n_total", "n_valid", "n_skipped", "n_errors", "is_binary", "skip_breakdown"],
        ["coverage", "mean", "std", "stderr", "wilson_low",
         "wilson_high", "ci_level"],
    ),
    "mart_compare": (
        ["candidate", "parent", "metric", "level", "task_id"],
        ["n_pairs", "candidate_wins", "parent_wins", "ties", "n_dropped"],
        ["mean_diff"],
    ),
}  # fmt: skip


def disagreement(question: str, hylo: Path, other: Path) -> str | None:
    """Where two answers to ``question`` (Parquet files) differ, or None when they agree.

    Counts must be equal, floats within 1e-9 (relative); every row of either side is
    compared. A Wilson bound is compared on 0/1 metrics (``ci_low`` / ``ci_high`` of the
    aggregate's ``success``): its other metrics' intervals are bootstraps.
    """
    import polars as pl

    keys, exact, approx = AGREE[question]
    a, b = pl.read_parquet(hylo), pl.read_parquet(other)
    if question == "compare":
        a = a.filter(level="overall", metric="success")
    if question == "aggregate":
        a, b = (
            f.with_columns(
                [pl.when(pl.col("metric") == "success").then(pl.col(c)).alias(c)
                 for c in ("ci_low", "ci_high")]
            )
            for f in (a, b)
        )  # fmt: skip
        approx = [*approx, "ci_low", "ci_high"]
    cols = [*keys, *exact, *approx]
    if a.height != b.height:
        return f"{a.height} rows against {b.height}"
    j = a.select(cols).join(
        b.select(cols), on=keys, how="full", nulls_equal=True, suffix="_o", coalesce=True
    )
    for c in cols:
        if c in keys:
            continue
        x, y = pl.col(c), pl.col(f"{c}_o")
        if c in exact:
            bad = ~x.eq_missing(y)
        else:
            bad = ~(((x - y).abs() <= 1e-9 * (1 + y.abs())) | (x.is_null() & y.is_null()))
        wrong = j.filter(bad)
        if wrong.height:
            row = wrong.row(0, named=True)
            return (
                f"{wrong.height} of {j.height} rows differ in {c}, e.g. "
                f"{ {k: row[k] for k in keys} }: {row[c]!r} against {row[f'{c}_o']!r}"
            )
    return None
