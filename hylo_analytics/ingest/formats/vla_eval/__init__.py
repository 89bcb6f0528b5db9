"""vla-evaluation-harness merged results (``BenchmarkResult`` JSON); the export in :mod:`.aggregate`.

Layout: ``{benchmark, mode, harness_version, overall_success_rate?, config?, merge_info?,
tasks: [{task, success_rate, avg_steps, episodes: [{task, episode_id, success, steps,
elapsed_sec, failure_reason?}]}]}``.

Identity, decided here:

* **agent**: the file does not name the policy; the file name does (``pi05_libero_spatial.json``
  → ``pi05``): the stem, minus a trailing ``_<config.subname>`` when present. Recorded in
  ``runs.extra`` as ``agent_name_from: "file name"``.
* **run_id**: ``vla-eval:<agent>:<benchmark>:<sha256[:12]>``: policy + benchmark + the first
  12 hex digits of the file's SHA-256. Two result files of one policy and suite stay two runs;
  a file that changes gets a new id, and the orchestrator supersedes the path's old run.
* **key**: ``<task>#<k>`` where ``k`` is the start-state index from ``episode_id``
  ``"<task>_ep<k>"`` (also stored as ``seed``), so one task + start state pairs up across
  policies (the harness seeds start states identically per index).

An episode with a ``failure_reason`` and no ``steps`` never ran to an outcome: a harness error
(status ``error``), distinct from a policy failure. Its ``success``/``steps``/``elapsed_sec``
scores abstain (null) with ``skip_reason = "harness error: <reason>"``. vla-eval's own rates
count such an episode as a failure, so that is the default errors policy of its runs
(:mod:`hylo_analytics._harness`): the default rate is the file's ``overall_success_rate``;
``errors="exclude"`` leaves them out, and ``mart_success_rates`` shows both.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import duckdb
import pyarrow as pa

from hylo_analytics.ingest._common import load_json_docs, shape_error
from hylo_analytics.ingest._files import SourceFile
from hylo_analytics.ingest._reader import Parsed, Reader
from hylo_analytics.ingest._report import Problem
from hylo_analytics.ingest.traces import name_surrogates

__all__ = [
    "AGGREGATE_READER",
    "FORMAT",
    "READER",
    "agent_from_filename",
    "aggregate",
    "parse",
    "sniff",
]

FORMAT = "vla-eval"

_DOC = (
    '{"benchmark":"VARCHAR","mode":"VARCHAR","harness_version":"VARCHAR",'
    '"overall_success_rate":"DOUBLE","config":"JSON","merge_info":"JSON",'
    '"tasks":[{"task":"VARCHAR","success_rate":"DOUBLE","avg_steps":"DOUBLE",'
    '"episodes":[{"task":"VARCHAR","episode_id":"VARCHAR","success":"BOOLEAN",'
    '"steps":"DOUBLE","elapsed_sec":"DOUBLE","failure_reason":"VARCHAR"}]}]}'
)


def sniff(head: bytes, path: Path | None = None) -> bool:
    """A JSON object naming a ``harness_version`` and a ``tasks`` list near its top."""
    h = head.lstrip()
    return h.startswith(b"{") and b'"harness_version"' in h and b'"tasks"' in h


def agent_from_filename(path: Path, subname: str | None) -> str:
    """The policy name: the file stem minus a trailing ``_<suite>``."""
    stem = path.stem
    if subname and stem.endswith("_" + subname) and len(stem) > len(subname) + 1:
        return stem[: -len(subname) - 1]
    return stem


def parse(con: duckdb.DuckDBPyConnection, files: Sequence[SourceFile]) -> Parsed:
    """All episodes of all files in a few queries."""
    _good, problems = load_json_docs(con, "_vla", files)
    problems = name_surrogates(problems, {str(f.path): f.data for f in files})
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE _vla_d AS
            SELECT file_idx, json_transform(raw, '{_DOC}') AS d FROM _vla"""
    )
    con.unregister("_vla")
    meta = con.execute(
        """SELECT file_idx, d.benchmark, d.config->>'$.subname', d.tasks IS NULL
           FROM _vla_d ORDER BY file_idx"""
    ).fetchall()
    bad: set[int] = set()
    ids: list[tuple[int, str, str]] = []
    for fi, bench, subname, no_tasks in meta:
        sf = files[fi]
        if bench is None or no_tasks:
            bad.add(fi)
            what = "benchmark" if bench is None else "tasks"
            expected = "a string" if bench is None else "an array"
            why = shape_error(sf.data, [what], expected, "vla-eval results")
            problems.append(Problem(str(sf.path), None, what, why))
            continue
        agent = agent_from_filename(sf.path, subname)
        ids.append((fi, f"vla-eval:{agent}:{bench}:{sf.sha256[:12]}", agent))
    con.register(
        "_vla_ids",
        pa.table(
            {
                "file_idx": pa.array([i[0] for i in ids], pa.int32()),
                "run_id": [i[1] for i in ids],
                "agent": [i[2] for i in ids],
            }
        ),
    )
    con.execute(
        """CREATE OR REPLACE TEMP TABLE _vla_ep AS
           WITH t AS (
               SELECT i.file_idx, i.run_id, unnest(d.d.tasks) AS t,
                      generate_subscripts(d.d.tasks, 1) - 1 AS task_idx
               FROM _vla_d AS d JOIN _vla_ids AS i USING (file_idx)
           ), e AS (
               SELECT file_idx, run_id, task_idx, t.task AS task, unnest(t.episodes) AS e,
                      generate_subscripts(t.episodes, 1) - 1 AS ep_idx
               FROM t
           )
           SELECT file_idx, run_id, task_idx, ep_idx, coalesce(e.task, task) AS task_id,
                  e.episode_id,
                  TRY_CAST(regexp_extract(e.episode_id, '_ep([0-9]+)$', 1) AS BIGINT) AS k,
                  e.success, e.steps, e.elapsed_sec, e.failure_reason,
                  e.failure_reason IS NOT NULL AND e.steps IS NULL AS harness_error
           FROM e"""
    )
    # every bad episode of every file (no cap: a file is stored only if all of it passed)
    for fi, ti, ei, ep, bad_ids, steps, elapsed, repeat in con.execute(
        """WITH e AS (
               SELECT *, row_number() OVER (PARTITION BY file_idx, task_id, k
                                            ORDER BY task_idx, ep_idx) AS nth
               FROM _vla_ep
           )
           SELECT file_idx, task_idx, ep_idx, episode_id, k IS NULL OR task_id IS NULL,
                  CASE WHEN NOT isfinite(steps) THEN CAST(steps AS VARCHAR) END,
                  CASE WHEN NOT isfinite(elapsed_sec) THEN CAST(elapsed_sec AS VARCHAR) END,
                  k IS NOT NULL AND task_id IS NOT NULL AND nth > 1
           FROM e
           WHERE k IS NULL OR task_id IS NULL OR NOT isfinite(steps) OR NOT isfinite(elapsed_sec)
              OR (k IS NOT NULL AND task_id IS NOT NULL AND nth > 1)
           ORDER BY file_idx, task_idx, ep_idx"""
    ).fetchall():
        bad.add(fi)
        where = f"tasks[{ti}].episodes[{ei}]"
        path = str(files[fi].path)
        if bad_ids:
            problems.append(
                Problem(
                    path,
                    None,
                    f"{where}.episode_id",
                    f"episode_id {ep!r} is not '<task>_ep<start state index>'",
                )
            )
        elif repeat:  # one sample per key: a second would be ambiguous in every join
            problems.append(
                Problem(
                    path,
                    None,
                    f"{where}.episode_id",
                    f"duplicate episode {ep!r}: its sample key is already in this file",
                )
            )
        for name, value in (("steps", steps), ("elapsed_sec", elapsed)):
            if value is not None:
                problems.append(Problem(path, None, f"{where}.{name}", _non_finite(value)))
    bad_list = [sorted(bad)]
    not_bad = "file_idx NOT IN (SELECT unnest(?::INTEGER[]))"
    runs = con.sql(
        f"""
        WITH n AS (SELECT file_idx, count(*) AS n FROM _vla_ep GROUP BY file_idx)
        SELECT i.file_idx, i.run_id, '{FORMAT}' AS source_format,
               d.d.benchmark AS benchmark_id,
               d.d.config->>'$.subname' AS split,
               i.agent AS agent_name,
               to_json({{'overall_success_rate': d.d.overall_success_rate,
                         'tasks': list_transform(d.d.tasks, lambda t: {{
                             'task': t.task, 'success_rate': t.success_rate,
                             'avg_steps': t.avg_steps}})}}) AS results,
               'success' AS status,
               coalesce(n.n, 0) AS n_samples,
               to_json({{'mode': d.d.mode, 'harness_version': d.d.harness_version,
                         'config': d.d.config, 'merge_info': d.d.merge_info,
                         'agent_name_from': 'file name'}}) AS extra
        FROM _vla_d AS d JOIN _vla_ids AS i USING (file_idx) LEFT JOIN n USING (file_idx)
        WHERE {not_bad.replace("file_idx", "i.file_idx")}
        ORDER BY i.file_idx
        """,
        params=bad_list,
    ).to_arrow_table()
    samples = con.sql(
        f"""
        SELECT file_idx, run_id, task_id || '#' || CAST(k AS VARCHAR) AS key, task_id,
               k AS seed, 1 AS epoch, episode_id,
               CASE WHEN harness_error THEN 'error'
                    WHEN success THEN 'success' ELSE 'failure' END AS status,
               'none' AS trace_status,
               CASE WHEN failure_reason IS NOT NULL OR elapsed_sec IS NOT NULL
                    THEN json_object('failure_reason', failure_reason,
                                     'elapsed_sec', elapsed_sec) END AS extra
        FROM _vla_ep WHERE {not_bad}
        ORDER BY file_idx, task_idx, ep_idx
        """,
        params=bad_list,
    ).to_arrow_table()
    scores = con.sql(
        f"""
        WITH ep AS (SELECT * FROM _vla_ep WHERE {not_bad}),
        m AS (
            SELECT *, unnest([
                {{'metric': 'success', 'v': CAST(success AS DOUBLE)}},
                {{'metric': 'steps', 'v': steps}},
                {{'metric': 'elapsed_sec', 'v': elapsed_sec}}]) AS m
            FROM ep
        )
        SELECT file_idx, run_id, task_id || '#' || CAST(k AS VARCHAR) AS key, task_id,
               k AS seed, 1 AS epoch, episode_id, m.metric AS metric,
               CASE WHEN harness_error THEN NULL ELSE m.v END AS value,
               NOT harness_error AND m.v IS NOT NULL AS valid,
               CASE WHEN harness_error THEN 'harness error: ' || failure_reason
                    WHEN m.v IS NULL THEN 'not recorded' END AS skip_reason,
               CASE WHEN failure_reason IS NOT NULL AND NOT harness_error
                    THEN 'failure_reason: ' || failure_reason END AS explanation,
               'evallog' AS source, 'imported' AS source_kind
        FROM m
        ORDER BY file_idx, task_idx, ep_idx, metric
        """,
        params=bad_list,
    ).to_arrow_table()
    con.unregister("_vla_ids")
    for t in ("_vla_d", "_vla_ep"):
        con.execute(f"DROP TABLE IF EXISTS {t}")
    return Parsed(runs, samples, scores, None, problems)


def _non_finite(value: str) -> str:
    return f"non-finite number {value}: a value must be finite (or null when not recorded)"


READER = Reader(FORMAT, sniff, parse)

# the current export (``<benchmark>_aggregate.json``), read by its own module
from hylo_analytics.ingest.formats.vla_eval import aggregate as aggregate  # noqa: E402

AGGREGATE_READER = aggregate.READER
