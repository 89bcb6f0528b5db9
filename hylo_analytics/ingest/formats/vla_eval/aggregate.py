"""vla-evaluation-harness's current export: ``<benchmark>_aggregate.json`` (``vla-eval export``).

Layout (``vla_eval/results/export.py``, ``_build_aggregate``): ``{benchmark, mode,
harness_version, created_at, tasks: [{task, episodes: [{sid, eid, episode_id, metrics: {...},
steps, elapsed_sec, <task context>, failure_reason?, failure_detail?}], num_episodes,
num_errors?, avg_steps, mean_<metric>}], config, eval_id, server_info?, render?, partial?,
shard?: {id, total}, seed?, metric_keys?, mean_<metric>, num_episodes_total, num_errors}``.
The per-step recordings it writes beside it (``<benchmark>/task0000_ep0000_success.jsonl``)
are not read (no reader claims them: each is an unknown-format quarantine row).

Identity, decided here:

* **agent**: ``server_info.model_server`` (the model server's class, which the server names
  in its HELLO), else the folder the file is in; ``runs.extra.agent_name_from`` says which.
* **run_id**: ``vla-eval:<agent>:<benchmark>:<sha256[:12]>``; **benchmark_id** the file's
  ``benchmark``; a ``partial`` export (a shard, or a run cut short) has status ``partial``.
* **key**: ``<task>#<k>``, ``k`` the start state: the episode's ``episode_idx`` (its task
  context) else its ``episode_id``, also its ``seed``: the merged results' key, so an
  export pairs with a merged file of the same suite.

An episode with a ``failure_reason`` (an infra error: timeout, connection lost) never
reached an outcome: status ``error``, every value abstains with ``harness error: <reason>``.
The harness records it as ``success: false`` and counts it in its means
(``_build_task_result``: "All episodes count toward metrics equally"; since 2026-04-05, after
a day of excluding them), so its runs' errors convention is ``failure``
(:data:`hylo_analytics._harness.FAILURE_FORMATS`): the default rate is the file's
``mean_success``, and ``errors="exclude"`` leaves the errored episodes out.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import duckdb
import pyarrow as pa

from hylo_analytics._sql import query_sql
from hylo_analytics.ingest._common import load_json_docs
from hylo_analytics.ingest._files import SourceFile
from hylo_analytics.ingest._locate import field_line
from hylo_analytics.ingest._reader import Parsed, Reader
from hylo_analytics.ingest._report import Problem
from hylo_analytics.ingest.traces import name_surrogates

__all__ = ["FORMAT", "READER", "parse", "sniff"]

FORMAT = "vla-eval/aggregate"


def sniff(head: bytes, path: Path | None = None) -> bool:
    """A JSON object naming a ``harness_version`` whose ``tasks`` hold episodes with the
    orchestrator's ``sid`` / ``eid`` (the merged results' episodes have neither)."""
    h = head.lstrip()
    return (
        h.startswith(b"{")
        and b'"harness_version"' in h
        and b'"tasks"' in h
        and b'"sid"' in h
        and b'"eid"' in h
    )


def parse(con: duckdb.DuckDBPyConnection, files: Sequence[SourceFile]) -> Parsed:
    """All episodes of all files in a few queries."""
    _good, problems = load_json_docs(con, "_vag", files)
    problems = name_surrogates(problems, {str(f.path): f.data for f in files})
    con.execute(
        "CREATE OR REPLACE TEMP TABLE _vag_raw AS " + query_sql("ingest_vla_aggregate_episodes")
    )
    con.execute(
        "CREATE OR REPLACE TEMP TABLE _vag_ep AS " + query_sql("ingest_vla_aggregate_checked")
    )
    bad = _problems(con, files, problems)
    ids = []
    for fi, bench, server in con.execute(
        "SELECT file_idx, raw ->> '$.benchmark', raw ->> '$.server_info.model_server' FROM _vag "
        "ORDER BY 1"
    ).fetchall():
        if fi in bad:
            continue
        sf = files[fi]
        agent, source = (server, "server_info.model_server") if server else (
            sf.path.parent.name, "folder name")  # fmt: skip
        ids.append((fi, f"vla-eval:{agent}:{bench}:{sf.sha256[:12]}", agent, source))
    con.register(
        "_vag_ids",
        pa.table(
            {
                "file_idx": pa.array([i[0] for i in ids], pa.int32()),
                "run_id": [i[1] for i in ids],
                "agent": [i[2] for i in ids],
                "agent_from": [i[3] for i in ids],
            }
        ),
    )
    runs = con.sql(query_sql("ingest_vla_aggregate_runs", format=FORMAT)).to_arrow_table()
    samples = con.sql(
        """SELECT DISTINCT ON (e.file_idx, e.task_idx, e.ep_idx)
                  e.file_idx, i.run_id, e.key, e.task AS task_id, e.k AS seed, 1 AS epoch,
                  e.key AS episode_id,
                  CASE WHEN e.failure_reason IS NOT NULL THEN 'error'
                       WHEN json_extract(e.e, '$.metrics.success') = 'true' THEN 'success'
                       WHEN json_extract(e.e, '$.metrics.success') = 'false' THEN 'failure'
                       ELSE 'scored' END AS status,
                  'none' AS trace_status,
                  CAST(json_object('sid', e.sid, 'eid', e.eid, 'episode_id', e.episode_ref,
                                   'failure_reason', e.failure_reason,
                                   'failure_detail', e.failure_detail) AS VARCHAR) AS extra
           FROM _vag_ep AS e JOIN _vag_ids AS i USING (file_idx)
           ORDER BY e.file_idx, e.task_idx, e.ep_idx"""
    ).to_arrow_table()
    scores = con.sql(query_sql("ingest_vla_aggregate_scores")).to_arrow_table()
    for name in ("_vag", "_vag_ids"):
        con.unregister(name)
    for t in ("_vag_raw", "_vag_ep"):
        con.execute(f"DROP TABLE IF EXISTS {t}")
    return Parsed(runs, samples, scores, problems=problems)


def _problems(
    con: duckdb.DuckDBPyConnection, files: Sequence[SourceFile], problems: list[Problem]
) -> set[int]:
    """Every problem of every file (no cap: a file is stored only if all of it passed);
    returns the files that have one."""
    bad: set[int] = set()
    found = con.execute(
        """SELECT file_idx, 'benchmark', 'a string', json_type(raw, '$.benchmark') FROM _vag
           WHERE json_type(raw, '$.benchmark') IS DISTINCT FROM 'VARCHAR'
           UNION ALL
           SELECT file_idx, 'tasks', 'an array', json_type(raw, '$.tasks') FROM _vag
           WHERE json_type(raw, '$.tasks') IS DISTINCT FROM 'ARRAY'
           UNION ALL
           SELECT a.file_idx, 'tasks[' || t.key || '].episodes', 'an array',
                  json_type(t.value, '$.episodes')
           FROM _vag AS a, json_each(a.raw, '$.tasks') AS t
           WHERE json_type(a.raw, '$.tasks') = 'ARRAY'
             AND json_type(t.value, '$.episodes') IS DISTINCT FROM 'ARRAY'
           ORDER BY 1, 2"""
    ).fetchall()
    shape = [
        (fi, fld, f"expected {want}, got {_TYPE.get(got, 'nothing') if got else 'nothing'}")
        for fi, fld, want, got in found
    ]
    rows = con.execute(
        """SELECT DISTINCT file_idx, task_idx, ep_idx, bad[1], bad[2] FROM _vag_ep
           WHERE bad IS NOT NULL ORDER BY 1, 2, 3, 4"""
    ).fetchall()
    for fi, fld, why in [*shape, *((r[0], r[3], r[4]) for r in rows)]:
        sf = files[fi]
        problems.append(Problem(str(sf.path), field_line(sf.data, fld), fld, why))
        bad.add(fi)
    return bad


_TYPE = {"OBJECT": "an object", "ARRAY": "an array", "VARCHAR": "a string", "BOOLEAN": "a boolean",
         "BIGINT": "an integer", "UBIGINT": "an integer", "DOUBLE": "a number", "NULL": "null"}  # fmt: skip


READER = Reader(FORMAT, sniff, parse)
