"""inspect-robots logs (``version: 1``: ``eval / results / stats / samples``).

Each sample is a scene tried for several epochs: ``epochs`` holds one ``{metric: value}`` per
epoch, ``reduced`` the per-scene reduction, ``operator_judgements`` one entry per epoch.

Identity, decided here: ``run_id = "inspect-robots:<policy>:<task>:<sha256[:12]>"`` (the log
carries no id of its own); ``key = "<task>#<scene_id>"``, ``epoch`` = 1-based position in
``epochs``; ``seed`` = the run's ``eval.seed``. A sample with status ``error`` abstains: one
null score per metric the run knows (its ``results.metrics`` and any epoch's keys; when it
knows none, as in a run that faulted before any step, ``success_at_end``: inspect-robots' own
per-trial metric, which its successful logs report, so a faulted trial pairs with them and
counts in ``mart_success_rates``), with ``skip_reason = "sample error: <error>"``. Operator
judgements and the reduced scores go into the sample's ``extra`` JSON. ``agent_version`` is
the policy's version when the log names one (``eval.policy_version``,
``eval.policy_config.version``, ...), else null; the harness's ``inspect_robots_version`` goes
to the run's ``extra`` as ``harness_version``.
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

__all__ = ["FORMAT", "READER", "parse", "sniff"]

FORMAT = "inspect-robots/v1"
# The agent's version is the policy's own, where the log names one; never the harness's
# (``eval.inspect_robots_version``, kept as ``harness_version`` in the run's ``extra``, as
# vla-eval's is). A log that names none leaves it null.
_AGENT_VERSION = ", ".join(
    f"d.d.eval->>'$.{path}'"
    for path in (
        "policy_version",
        "policy_config.version",
        "policy_config.policy_version",
        "policy_config.model_version",
        "model_version",
        "agent_version",
    )
)
FALLBACK_METRIC = "success_at_end"

_DOC = (
    '{"version":"JSON","status":"VARCHAR","error":"VARCHAR","eval":"JSON","results":"JSON",'
    '"stats":"JSON","samples":[{"scene_id":"VARCHAR","instruction":"VARCHAR",'
    '"status":"VARCHAR","error":"VARCHAR","epochs":["JSON"],"operator_judgements":"JSON",'
    '"reduced":"JSON"}]}'
)


def sniff(head: bytes, path: Path | None = None) -> bool:
    """A JSON object with an ``inspect_robots_version`` in its first bytes."""
    h = head.lstrip()
    return h.startswith(b"{") and b'"inspect_robots_version"' in h


def parse(con: duckdb.DuckDBPyConnection, files: Sequence[SourceFile]) -> Parsed:
    """Runs, scene x epoch samples and per-epoch scores of many logs in a few queries."""
    _good, problems = load_json_docs(con, "_ir", files)
    problems = name_surrogates(problems, {str(f.path): f.data for f in files})
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE _ir_d AS
            SELECT file_idx, json_transform(raw, '{_DOC}') AS d FROM _ir"""
    )
    con.unregister("_ir")
    ids: list[tuple[int, str]] = []
    for fi, version, policy, task, has_samples, bad_seed in con.execute(
        """SELECT file_idx, CAST(d.version AS VARCHAR), d.eval->>'$.policy', d.eval->>'$.task',
                  d.samples IS NOT NULL,
                  CASE WHEN coalesce(json_type(d.eval->'$.seed'), 'NULL') <> 'NULL'
                        AND TRY_CAST(d.eval->>'$.seed' AS BIGINT) IS NULL
                       THEN CAST(d.eval->'$.seed' AS VARCHAR) END
           FROM _ir_d ORDER BY file_idx"""
    ).fetchall():
        path = str(files[fi].path)
        if version != "1":
            problems.append(
                Problem(path, None, "version", f"unknown version {version}; expected 1")
            )
        elif task is None or not has_samples:
            what = "eval.task" if task is None else "samples"
            why = shape_error(
                files[fi].data, what.split("."), "a string" if task is None else "an array",
                "an inspect-robots log",
            )  # fmt: skip
            problems.append(Problem(path, None, what, why))
        elif bad_seed is not None:  # never a silent null seed
            problems.append(
                Problem(
                    path,
                    None,
                    "eval.seed",
                    f"expected an integer that fits in 64 bits, got {bad_seed}",
                )
            )
        else:
            ids.append((fi, f"inspect-robots:{policy}:{task}:{files[fi].sha256[:12]}"))
    con.register(
        "_ir_ids",
        pa.table(
            {"file_idx": pa.array([i[0] for i in ids], pa.int32()), "run_id": [i[1] for i in ids]}
        ),
    )
    con.execute(
        """CREATE OR REPLACE TEMP TABLE _ir_s AS
           WITH s AS (
               SELECT i.file_idx, i.run_id, d.d.eval->>'$.task' AS task_id,
                      TRY_CAST(d.d.eval->>'$.seed' AS BIGINT) AS seed,
                      unnest(d.d.samples) AS s, generate_subscripts(d.d.samples, 1) - 1 AS sample_idx
               FROM _ir_d AS d JOIN _ir_ids AS i USING (file_idx)
           )
           SELECT file_idx, run_id, task_id, seed, sample_idx, s,
                  unnest(generate_series(1, greatest(len(coalesce(s.epochs, [])), 1))) AS epoch
           FROM s"""
    )
    runs = con.sql(
        f"""
        WITH n AS (SELECT file_idx, count(*) AS n FROM _ir_s GROUP BY file_idx)
        SELECT i.file_idx, i.run_id, '{FORMAT}' AS source_format,
               d.d.eval->>'$.task' AS benchmark_id,
               d.d.eval->>'$.policy' AS agent_name,
               coalesce({_AGENT_VERSION}) AS agent_version,
               CAST(d.d.eval->'$.policy_config' AS VARCHAR) AS agent_components,
               CAST(d.d.results AS VARCHAR) AS results,
               d.d.status AS status,
               d.d.eval->>'$.created' AS created,
               coalesce(n.n, 0) AS n_samples,
               to_json({{'harness_version': d.d.eval->>'$.inspect_robots_version',
                         'eval': d.d.eval, 'stats': d.d.stats, 'error': d.d.error}}) AS extra
        FROM _ir_d AS d JOIN _ir_ids AS i USING (file_idx) LEFT JOIN n USING (file_idx)
        ORDER BY i.file_idx
        """
    ).to_arrow_table()
    samples = con.sql(
        """
        SELECT file_idx, run_id, task_id || '#' || s.scene_id AS key, task_id, seed, epoch,
               run_id || '/' || s.scene_id || '/' || CAST(epoch AS VARCHAR) AS episode_id,
               s.status AS status, 'none' AS trace_status,
               to_json({'scene_id': s.scene_id, 'instruction': s.instruction, 'error': s.error,
                        'operator_judgement': json_extract(s.operator_judgements,
                                                           '$[' || CAST(epoch - 1 AS VARCHAR) || ']'),
                        'reduced': s.reduced}) AS extra
        FROM _ir_s ORDER BY file_idx, sample_idx, epoch
        """
    ).to_arrow_table()
    scores = con.sql(
        f"""
        WITH ep AS (
            SELECT *, s.epochs[epoch] AS ej FROM _ir_s
        ), kv AS (
            SELECT file_idx, run_id, task_id, seed, epoch, sample_idx, s,
                   unnest(map_entries(json_transform(ej, '"MAP(VARCHAR, JSON)"'))) AS me
            FROM ep WHERE json_type(ej) = 'OBJECT'
        ), known AS (
            SELECT DISTINCT file_idx, me.key AS metric FROM kv
            UNION
            SELECT d.file_idx, unnest(json_keys(d.d.results->'$.metrics')) FROM _ir_d AS d
        ), known_any AS (
            SELECT i.file_idx, coalesce(k.metric, '{FALLBACK_METRIC}') AS metric
            FROM _ir_ids AS i LEFT JOIN known AS k USING (file_idx)
        ), ok AS (
            SELECT file_idx, run_id, task_id, seed, epoch, sample_idx, s, me.key AS metric,
                   CASE json_type(me.value)
                       WHEN 'BOOLEAN' THEN CASE WHEN CAST(me.value AS BOOLEAN) THEN 1.0 ELSE 0.0 END
                       WHEN 'BIGINT' THEN CAST(me.value AS DOUBLE)
                       WHEN 'UBIGINT' THEN CAST(me.value AS DOUBLE)
                       WHEN 'DOUBLE' THEN CASE WHEN isfinite(CAST(me.value AS DOUBLE))
                                               THEN CAST(me.value AS DOUBLE) END
                   END AS value,
                   CASE WHEN me.value IS NULL OR json_type(me.value) = 'NULL' THEN 'unscored'
                        WHEN json_type(me.value) NOT IN ('BOOLEAN', 'BIGINT', 'UBIGINT', 'DOUBLE')
                        THEN 'non-numeric value: ' || left(CAST(me.value AS VARCHAR), 80)
                        WHEN NOT isfinite(CAST(me.value AS DOUBLE))
                        THEN 'non-finite value: ' || CAST(me.value AS VARCHAR) END AS skip_reason
            FROM kv WHERE s.status IS DISTINCT FROM 'error'
        ), err AS (
            SELECT e.file_idx, e.run_id, e.task_id, e.seed, e.epoch, e.sample_idx, e.s, k.metric,
                   CAST(NULL AS DOUBLE) AS value,
                   'sample error: ' || coalesce(e.s.error, 'unknown') AS skip_reason
            FROM _ir_s AS e JOIN known_any AS k USING (file_idx)
            WHERE e.s.status = 'error'
        ), u AS (SELECT * FROM ok UNION ALL SELECT * FROM err)
        SELECT file_idx, run_id, task_id || '#' || s.scene_id AS key, task_id, seed, epoch,
               run_id || '/' || s.scene_id || '/' || CAST(epoch AS VARCHAR) AS episode_id,
               metric, value, value IS NOT NULL AS valid, skip_reason,
               'evallog' AS source, 'imported' AS source_kind
        FROM u ORDER BY file_idx, sample_idx, epoch, metric
        """
    ).to_arrow_table()
    con.unregister("_ir_ids")
    for t in ("_ir_d", "_ir_s"):
        con.execute(f"DROP TABLE IF EXISTS {t}")
    return Parsed(runs, samples, scores, None, problems)


READER = Reader(FORMAT, sniff, parse)
