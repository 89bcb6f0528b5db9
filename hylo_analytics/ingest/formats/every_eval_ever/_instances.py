"""Every Eval Ever instance-level JSONL: one line per sample of one evaluation, as a run.

A line is ``{schema_version, evaluation_id, model_id, evaluation_name, sample_id, sample_hash,
interaction_type, input, output, interactions | messages, evaluation: {score, is_correct,
...}, token_usage, performance, error, metadata}`` (schema 0.2.0; 0.2.2 renames
``interactions`` to ``messages`` and makes ``sample_id`` a string: both are read).

The file is the run (its lines name their evaluation and model): ``run_id`` =
``eee:<evaluation_id>``, ``agent_name`` = ``model_id``, ``task_id`` = ``evaluation_name``,
``key`` = ``<evaluation_name>#<sample_id>``, so two models' instances of one dataset pair on
the sample (``seed`` = an integer sample id, else the line's index: an EvalLog export needs
one). Scores: ``score`` (``evaluation.score``), ``is_correct`` (0/1),
``llm.tokens.input`` / ``llm.tokens.output`` and ``latency_ms`` where recorded; an instance
with an ``error`` has status ``error`` and its score abstains with it. The
prompt and output text stay in the file (``extra`` keeps the sample hash, the reference and
the stop reason). Every line names one evaluation and one model; a line of the wrong shape
is a field error with its line, and the file is rejected whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import duckdb
import pyarrow as pa

from hylo_analytics._sql import query_sql
from hylo_analytics.ingest._files import SourceFile
from hylo_analytics.ingest._jsonl import load_jsonl
from hylo_analytics.ingest._report import Problem
from hylo_analytics.ingest._sqlcheck import Check, compile_checks

__all__ = ["FORMAT", "parse_instances", "sniff_instances"]

FORMAT = "every_eval_ever/instances"

_CHECKS = compile_checks(
    [
        Check("evaluation_id", "json_extract(raw, '$.evaluation_id')", ("VARCHAR",)),
        Check("model_id", "json_extract(raw, '$.model_id')", ("VARCHAR",)),
        Check("evaluation_name", "json_extract(raw, '$.evaluation_name')", ("VARCHAR",)),
        Check("sample_id", "json_extract(raw, '$.sample_id')", ("VARCHAR", "BIGINT", "UBIGINT")),
        Check("evaluation", "json_extract(raw, '$.evaluation')", ("OBJECT",)),
        Check("evaluation.score", "json_extract(raw, '$.evaluation.score')",
              ("DOUBLE", "BIGINT", "UBIGINT", "BOOLEAN"), required=False),
        Check("evaluation.is_correct", "json_extract(raw, '$.evaluation.is_correct')",
              ("BOOLEAN",), required=False),
        Check("token_usage.input_tokens", "json_extract(raw, '$.token_usage.input_tokens')",
              ("BIGINT", "UBIGINT"), required=False),
        Check("token_usage.output_tokens", "json_extract(raw, '$.token_usage.output_tokens')",
              ("BIGINT", "UBIGINT"), required=False),
        Check("performance.latency_ms", "json_extract(raw, '$.performance.latency_ms')",
              ("DOUBLE", "BIGINT", "UBIGINT"), required=False),
    ]
)  # fmt: skip


def sniff_instances(head: bytes, path: Path | None = None) -> bool:
    """The first line is a JSON object naming an ``evaluation_id``, a ``model_id`` and a
    ``sample_id``."""
    first = head.lstrip().split(b"\n", 1)[0]
    return first.startswith(b"{") and all(
        k in first for k in (b'"evaluation_id"', b'"model_id"', b'"sample_id"')
    )


def parse_instances(
    con: duckdb.DuckDBPyConnection, files: Sequence[SourceFile]
) -> tuple[pa.Table, pa.Table, pa.Table, list[Problem], dict[int, str]]:
    """The runs, samples and scores of instance files (``file_idx`` = position in
    ``files``), the problems, and each good file's run id."""
    bad, problems = load_jsonl(con, "_eee_lines", files)
    con.execute(
        "CREATE OR REPLACE TEMP TABLE _eee_i AS "
        + query_sql("ingest_eee_instances", checks=_CHECKS)
    )
    for fi, line, fld, why in con.execute(
        """SELECT file_idx, line, b.field, b.error FROM (
               SELECT file_idx, line, unnest(bad) AS b FROM _eee_i) ORDER BY 1, 2"""
    ).fetchall():
        problems.append(Problem(str(files[fi].path), line, fld, why))
        bad.add(fi)
    for fi, line, fld, why in con.execute(
        """WITH f AS (
               SELECT *, first(evaluation_id ORDER BY line) OVER w AS eid,
                      first(model_id ORDER BY line) OVER w AS mid,
                      row_number() OVER (PARTITION BY file_idx, evaluation_name, sample_id
                                         ORDER BY line) AS nth
               FROM _eee_i WINDOW w AS (PARTITION BY file_idx)
           )
           SELECT file_idx, line, CASE WHEN evaluation_id <> eid THEN 'evaluation_id'
                                       WHEN model_id <> mid THEN 'model_id' ELSE 'sample_id' END,
                  CASE WHEN evaluation_id <> eid
                       THEN 'a second evaluation in one file (line 1 names ' || eid || ')'
                       WHEN model_id <> mid
                       THEN 'a second model in one file (line 1 names ' || mid || ')'
                       ELSE 'duplicate sample ' || sample_id || ' of ' || evaluation_name END
           FROM f WHERE len(bad) = 0 AND (evaluation_id <> eid OR model_id <> mid OR nth > 1)
           ORDER BY 1, 2"""
    ).fetchall():
        problems.append(Problem(str(files[fi].path), line, fld, why))
        bad.add(fi)
    ids = dict(
        con.execute(
            """SELECT file_idx, 'eee:' || first(evaluation_id ORDER BY line) FROM _eee_i
               GROUP BY file_idx"""
        ).fetchall()
    )
    ids = {fi: rid for fi, rid in ids.items() if fi not in bad}
    empty = [i for i in range(len(files)) if i not in ids and i not in bad]
    for fi in empty:
        problems.append(Problem(str(files[fi].path), None, None, "no instance lines"))
    con.register(
        "_eee_ids",
        pa.table({"file_idx": pa.array(list(ids), pa.int32()), "run_id": list(ids.values())}),
    )
    runs = con.sql(
        f"""SELECT d.file_idx, d.run_id, '{FORMAT}' AS source_format,
                  CASE WHEN count(DISTINCT i.evaluation_name) = 1
                       THEN any_value(i.evaluation_name) END AS benchmark_id,
                  any_value(i.model_id) AS agent_name, 'success' AS status,
                  count(*) AS n_samples,
                  CAST(json_object('schema_version', any_value(i.schema_version),
                                   'evaluation_id', any_value(i.evaluation_id),
                                   'agent_name_from', 'model_id') AS VARCHAR) AS extra
           FROM _eee_ids AS d JOIN _eee_i AS i USING (file_idx)
           GROUP BY d.file_idx, d.run_id ORDER BY d.file_idx"""
    ).to_arrow_table()
    samples = con.sql(
        """SELECT i.file_idx, d.run_id, i.evaluation_name || '#' || i.sample_id AS key,
                  i.evaluation_name AS task_id,
                  coalesce(TRY_CAST(i.sample_id AS BIGINT), i.line - 1) AS seed, 1 AS epoch,
                  i.evaluation_name || '#' || i.sample_id AS episode_id,
                  CASE WHEN i.error IS NOT NULL THEN 'error' WHEN i.is_correct = 1 THEN 'success'
                       WHEN i.is_correct = 0 THEN 'failure' ELSE 'scored' END AS status,
                  'none' AS trace_status,
                  CAST(json_merge_patch(i.extra, json_object('error', i.error)) AS VARCHAR)
                      AS extra
           FROM _eee_i AS i JOIN _eee_ids AS d USING (file_idx) ORDER BY i.file_idx, i.line"""
    ).to_arrow_table()
    scores = con.sql(query_sql("ingest_eee_instance_rows")).to_arrow_table()
    con.unregister("_eee_ids")
    for t in ("_eee_lines", "_eee_i"):
        con.execute(f"DROP TABLE IF EXISTS {t}")
    return runs, samples, scores, problems, ids
