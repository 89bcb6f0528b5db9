"""The rows of a lm-eval batch: results runs with their samples or figures, orphan samples runs."""

from __future__ import annotations

from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa

from hylo_analytics._sql import query_sql
from hylo_analytics.ingest._counted import figure_rows
from hylo_analytics.ingest._files import SourceFile
from hylo_analytics.ingest._reader import Parsed
from hylo_analytics.ingest._report import Problem
from hylo_analytics.ingest.formats.lm_eval._samples import results_name, samples_name

if TYPE_CHECKING:
    from hylo_analytics.ingest.formats.lm_eval import _Plan

__all__ = ["build_rows"]

RESULTS_FORMAT, SAMPLES_FORMAT = "lm-eval/results", "lm-eval/samples"


def build_rows(
    con: duckdb.DuckDBPyConnection, plan: _Plan, bad_s: set[int], problems: list[Problem]
) -> Parsed:
    """Every table of the batch (``file_idx`` = position in ``plan.files``)."""
    con.execute("CREATE OR REPLACE TEMP TABLE _lm_f AS " + query_sql("ingest_lm_eval_figures"))
    runs_of = _run_table(plan, bad_s)
    con.register("_lm_run", runs_of)
    con.register("_lm_sf", _sample_files(plan, bad_s, runs_of))
    con.execute(
        "CREATE OR REPLACE TEMP TABLE _lm_covered AS " + query_sql("ingest_lm_eval_covered")
    )
    keyed_samples = con.sql(query_sql("ingest_lm_eval_sample_rows")).to_arrow_table()
    keyed_scores = con.sql(query_sql("ingest_lm_eval_score_rows")).to_arrow_table()
    fig_samples, fig_scores = figure_rows(
        con,
        """(SELECT r.batch_idx AS file_idx, r.run_id, f.task AS task_id, f.metric, f.value,
                   f.n, f.ord, f.direction
            FROM _lm_f AS f JOIN _lm_run AS r ON r.local_idx = f.file_idx
            WHERE f.vt IN ('DOUBLE', 'BIGINT', 'UBIGINT')
              AND NOT EXISTS (SELECT 1 FROM _lm_covered AS c WHERE c.run_id = r.run_id
                              AND c.task = f.task AND c.metric = f.metric))""",
    )
    samples = pa.concat_tables([keyed_samples, fig_samples], promote_options="permissive")
    con.register("_lm_samples", samples)
    runs = con.sql(query_sql("ingest_lm_eval_runs", results=RESULTS_FORMAT,
                             samples=SAMPLES_FORMAT)).to_arrow_table()  # fmt: skip
    partial = {str(r) for (r,) in con.execute(
        """SELECT DISTINCT r.run_id FROM _lm_sf AS s JOIN _lm_run AS r ON r.batch_idx = s.owner
           WHERE s.bad"""
    ).fetchall()}  # fmt: skip
    companions = _companions(plan, bad_s, runs_of)
    for name in ("_lm", "_lm_run", "_lm_sf", "_lm_samples"):
        con.unregister(name)
    for t in ("_lm_f", "_lm_s", "_lm_covered"):
        con.execute(f"DROP TABLE IF EXISTS {t}")
    scores = pa.concat_tables([keyed_scores, fig_scores], promote_options="permissive")
    side: list[tuple[SourceFile, str, str | None, str]] = [
        (sf, "companion", None, SAMPLES_FORMAT) for sf in plan.read_here
    ]
    return Parsed(runs, samples, scores, problems=problems, side_files=side,
                  partial_runs=partial, companions=companions)  # fmt: skip


def _run_table(plan: _Plan, bad_s: set[int]) -> pa.Table:
    """One row per run: a good results file, or an orphan samples file that is good."""
    rows: dict[str, list[object]] = {k: [] for k in ("local_idx", "batch_idx", "run_id", "agent",
                                                     "agent_from", "orphan_task", "created")}  # fmt: skip
    for local, (rid, agent, source) in plan.ids.items():
        named = results_name(plan.files[plan.res[local]].path)
        values: tuple[object, ...] = (local, plan.res[local], rid, agent, source, None,
                                      named[1] if named else None)  # fmt: skip
        for k, v in zip(rows, values, strict=True):
            rows[k].append(v)
    for s, (owner, at) in enumerate(zip(plan.owner, plan.batch_idx, strict=True)):
        if owner is not None or at is None or at in plan.outside_owner or s in bad_s:
            continue
        sf = plan.samples[s]
        agent = sf.path.parent.name.replace("__", "/") or "unknown"
        rid = f"lm-eval:{agent}:{plan.task[s]}:{sf.sha256[:12]}"
        sn = samples_name(sf.path)
        values = (None, at, rid, agent, "folder name", plan.task[s], sn[2] if sn else None)
        for k, v in zip(rows, values, strict=True):
            rows[k].append(v)
    return pa.table({**rows, "local_idx": pa.array(rows["local_idx"], pa.int64()),
                     "batch_idx": pa.array(rows["batch_idx"], pa.int32())})  # fmt: skip


def _sample_files(plan: _Plan, bad_s: set[int], runs: pa.Table) -> pa.Table:
    """One row per samples file: the batch idx of the run it belongs to (its results', or its
    own), its task, and whether it is bad."""
    orphan_of = {int(b): str(r) for b, r, t in zip(runs["batch_idx"].to_pylist(),
                 runs["run_id"].to_pylist(), runs["orphan_task"].to_pylist(), strict=True) if t}  # fmt: skip
    run_file = [o if o is not None else (a if a in orphan_of else None)
                for o, a in zip(plan.owner, plan.batch_idx, strict=True)]  # fmt: skip
    return pa.table({
        "sf": pa.array(range(len(plan.samples)), pa.int64()),
        "owner": pa.array(run_file, pa.int32()),
        "task": plan.task,
        "bad": [i in bad_s for i in range(len(plan.samples))],
    })  # fmt: skip


def _companions(plan: _Plan, bad_s: set[int], runs: pa.Table) -> dict[int, str | None]:
    """The batch's samples files that are another file's rows: good, with their results."""
    run_of_batch = dict(zip(runs["batch_idx"].to_pylist(), runs["run_id"].to_pylist(), strict=True))
    out: dict[int, str | None] = dict(plan.outside_owner)  # their results are not read here
    for s, (owner, at) in enumerate(zip(plan.owner, plan.batch_idx, strict=True)):
        if at is None:
            continue
        if s in bad_s:
            out.pop(at, None)  # rejected: quarantined with its lines
        elif owner is not None:
            out[at] = run_of_batch.get(owner)
    return out
