"""The rows of a batch of Inspect log documents: DuckDB steps from JSON to runs, samples, scores.

Each step rejects whole logs (a log is stored only if all of it passed) and names why: a
``samples`` that is no array, no ``eval.task``, an epoch that is no integer, a sample repeated
in one epoch. The scorers' values become numbers as Inspect's ``value_to_float`` does.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import pyarrow as pa

from hylo_analytics.ingest._common import load_json_docs
from hylo_analytics.ingest._files import SourceFile
from hylo_analytics.ingest._reader import Parsed
from hylo_analytics.ingest._report import Problem
from hylo_analytics.ingest.traces import name_surrogates

__all__ = ["document_rows"]

EVAL_FORMAT = "inspect.eval"
JSON_FORMAT = "inspect.json"

# A score value as a number, from its JSON type ``t`` and its text ``s`` (``v->>'$'``), each
# computed once per value: every JSON function call re-parses the value.
_NUM_MACRO = """
CREATE OR REPLACE TEMP MACRO _insp_num_ts(t, s) AS CASE t
    WHEN 'VARCHAR' THEN CASE s
        WHEN 'C' THEN 1.0 WHEN 'P' THEN 0.5 WHEN 'I' THEN 0.0 WHEN 'N' THEN 0.0
        ELSE CASE lower(s)
            WHEN 'yes' THEN 1.0 WHEN 'true' THEN 1.0 WHEN 'no' THEN 0.0 WHEN 'false' THEN 0.0
            ELSE CASE WHEN isfinite(TRY_CAST(s AS DOUBLE)) THEN TRY_CAST(s AS DOUBLE) END
        END
    END
    WHEN 'BOOLEAN' THEN CASE WHEN s = 'true' THEN 1.0 ELSE 0.0 END
    WHEN 'BIGINT' THEN CAST(s AS DOUBLE) WHEN 'UBIGINT' THEN CAST(s AS DOUBLE)
    WHEN 'DOUBLE' THEN CASE WHEN isfinite(CAST(s AS DOUBLE)) THEN CAST(s AS DOUBLE) END
END;
CREATE OR REPLACE TEMP MACRO _insp_num(v) AS _insp_num_ts(json_type(v), v->>'$');
"""

# Only the summary fields of a sample are transformed: in a .json log the rest (messages,
# events) is skipped by the parser, never materialised.
_SCORE = "STRUCT(value JSON, answer JSON, explanation VARCHAR)"
_USAGE = (
    "STRUCT(input_tokens DOUBLE, output_tokens DOUBLE, input_tokens_cache_read DOUBLE, "
    "input_tokens_cache_write DOUBLE, reasoning_tokens DOUBLE)"
)
_SAMPLE = (
    f'{{"id":"JSON","epoch":"JSON","scores":"MAP(VARCHAR, {_SCORE})","model_usage":'
    f'"MAP(VARCHAR, {_USAGE})","error":"JSON","limit":"JSON","uuid":"VARCHAR",'
    '"total_time":"DOUBLE","working_time":"DOUBLE","completed":"BOOLEAN"}'
)
_DOC = (
    '{"version":"JSON","status":"VARCHAR","eval":"JSON","results":"JSON","stats":"JSON",'
    f'"error":"JSON","samples":[{_SAMPLE}]}}'
)
_TOKENS = (
    ("llm.tokens.input", "input_tokens"),
    ("llm.tokens.output", "output_tokens"),
    ("llm.tokens.cache_read", "input_tokens_cache_read"),
    ("llm.tokens.cache_write", "input_tokens_cache_write"),
    ("llm.tokens.reasoning", "reasoning_tokens"),
)

_TOKEN_ROWS = ",\n".join(
    f"{{'metric': '{m}', 'v': list_sum(list_transform(map_values(s.model_usage), "
    f"lambda u: u.{k}))}}"
    for m, k in _TOKENS
)

# one row per sample of the logs left, with its key, epoch and error
_SAMPLE_TABLE = """CREATE OR REPLACE TEMP TABLE _insp_s AS
            WITH u AS (
                SELECT file_idx,
                       coalesce(d.eval->>'$.eval_id', d.eval->>'$.task_id') AS run_id,
                       d.eval->>'$.task' AS task_id,
                       unnest(coalesce(d.samples, [])) AS s,
                       generate_subscripts(coalesce(d.samples, []), 1) - 1 AS sample_idx
                FROM _insp_d
            ), k AS (
                SELECT *, task_id || '#' || coalesce(s.id->>'$', CAST(s.id AS VARCHAR)) AS key,
                       coalesce(TRY_CAST(s.epoch AS BIGINT), 1) AS epoch,
                       CASE WHEN json_type(s.error) <> 'NULL'
                            THEN coalesce(s.error->>'$.message', s.error->>'$') END AS err
                FROM u
            )
            SELECT *, coalesce(s.uuid, key || '@' || CAST(epoch AS VARCHAR)) AS episode_id FROM k"""

_RUNS_SQL = """
        SELECT file_idx,
               coalesce(d.eval->>'$.eval_id', d.eval->>'$.task_id') AS run_id,
               CASE WHEN d.version IS NULL THEN 'inspect' END AS fmt_hint,
               d.eval->>'$.task' AS benchmark_id,
               CAST(d.eval->'$.task_version' AS VARCHAR) AS benchmark_version,
               d.eval->>'$.dataset.name' AS split,
               d.eval->>'$.model' AS agent_name,
               to_json({'model': d.eval->'$.model', 'model_args': d.eval->'$.model_args',
                        'model_generate_config': d.eval->'$.model_generate_config',
                        'solver': d.eval->'$.solver'}) AS agent_components,
               CAST(d.results AS VARCHAR) AS results,
               coalesce(d.status, 'started') AS status,
               d.eval->>'$.created' AS created,
               coalesce(len(d.samples), 0) AS n_samples,
               to_json({'eval_id': d.eval->'$.eval_id', 'inspect_run_id': d.eval->'$.run_id',
                        'task_id': d.eval->'$.task_id', 'task_args': d.eval->'$.task_args',
                        'epochs': d.eval->'$.config.epochs', 'log_version': d.version,
                        'stats': d.stats, 'error': d.error,
                        'llm.model.name': d.eval->>'$.model',
                        'llm.provider': split_part(d.eval->>'$.model', '/', 1)}) AS extra
        FROM _insp_d AS d
        ORDER BY file_idx
        """

_SAMPLES_SQL = """
        SELECT file_idx, run_id, key, task_id, epoch, episode_id,
               CASE WHEN err IS NOT NULL THEN 'error'
                    WHEN s.limit IS NOT NULL AND json_type(s.limit) <> 'NULL' THEN 'limit'
                    WHEN s.completed = false THEN 'incomplete'
                    ELSE 'completed' END AS status,
               'none' AS trace_status,
               to_json({'sample_id': s.id, 'uuid': s.uuid, 'total_time': s.total_time,
                        'working_time': s.working_time, 'error': err,
                        'limit': s.limit}) AS extra
        FROM _insp_s ORDER BY file_idx, sample_idx
        """

# the scorers' rows, then the token counts (``part`` 1), in one query: one plan fewer
_SCORES_SQL = f"""
        WITH kv AS (
            SELECT file_idx, sample_idx, unnest(map_entries(s.scores)) AS me
            FROM _insp_s WHERE s.scores IS NOT NULL
        ), flat AS (
            SELECT file_idx, sample_idx, me.key AS scorer, me.value.value AS v,
                   json_type(me.value.value) AS vt, me.value.explanation AS explanation,
                   to_json({{'answer': me.value.answer}}) AS meta
            FROM kv
        ), actual AS MATERIALIZED (
            SELECT file_idx, sample_idx, scorer AS metric, v, vt, explanation, meta
            FROM flat WHERE coalesce(vt, 'NULL') <> 'OBJECT'
            UNION ALL
            SELECT file_idx, sample_idx, scorer || '.' || e.key AS metric,
                   e.value AS v, json_type(e.value) AS vt, explanation, meta
            FROM (SELECT *, unnest(map_entries(json_transform(v, '"MAP(VARCHAR, JSON)"'))) AS e
                  FROM flat WHERE vt = 'OBJECT')
        ), seen AS (
            SELECT DISTINCT file_idx, metric FROM actual
        ), declared AS (
            SELECT file_idx,
                   CASE WHEN r.scorer IS NULL OR r.scorer = r.name THEN r.name
                        ELSE r.scorer || '.' || r.name END AS metric
            FROM (SELECT file_idx, unnest(from_json(d.results->'$.scores',
                         '[{{"name":"VARCHAR","scorer":"VARCHAR"}}]')) AS r FROM _insp_d)
            UNION
            SELECT file_idx, sc.name AS metric
            FROM (SELECT file_idx, unnest(from_json(d.eval->'$.scorers',
                         '[{{"name":"VARCHAR"}}]')) AS sc FROM _insp_d)
        ), expected AS (
            SELECT * FROM seen
            UNION
            SELECT * FROM declared AS d
            WHERE NOT EXISTS (SELECT 1 FROM seen AS s WHERE s.file_idx = d.file_idx
                              AND starts_with(s.metric, d.metric || '.'))
        ), missing AS (
            SELECT x.file_idx, x.sample_idx, e.metric
            FROM _insp_s AS x JOIN expected AS e USING (file_idx)
            ANTI JOIN actual AS a
              ON a.file_idx = x.file_idx AND a.sample_idx = x.sample_idx AND a.metric = e.metric
        ), u AS (
            SELECT file_idx, sample_idx, metric, v, vt, explanation, meta,
                   _insp_num_ts(vt, v->>'$') AS value FROM actual
            UNION ALL
            SELECT file_idx, sample_idx, metric, CAST(NULL AS JSON) AS v, NULL AS vt,
                   NULL AS explanation,
                   NULL AS meta, CAST(NULL AS DOUBLE) AS value
            FROM missing
        ), sc AS (
            SELECT 0 AS part, u.sample_idx, u.file_idx, x.run_id, x.key, x.task_id, x.epoch,
                   x.episode_id, u.metric, u.value, u.value IS NOT NULL AS valid,
                   CASE WHEN u.value IS NOT NULL THEN NULL
                        WHEN x.err IS NOT NULL THEN 'sample error: ' || left(x.err, 200)
                        WHEN u.v IS NULL OR u.vt = 'NULL' THEN 'unscored'
                        WHEN u.vt = 'DOUBLE' THEN 'non-finite value: ' || CAST(u.v AS VARCHAR)
                        ELSE 'non-numeric value: ' || left(CAST(u.v AS VARCHAR), 80)
                   END AS skip_reason,
                   u.explanation, 'evallog' AS source, 'imported' AS source_kind,
                   CASE WHEN u.meta <> '{{"answer":null}}' THEN u.meta END AS metadata
            FROM u JOIN _insp_s AS x USING (file_idx, sample_idx)
        ), t AS (
            SELECT file_idx, run_id, key, task_id, epoch, episode_id, sample_idx,
                   map_keys(s.model_usage) AS models, unnest([{_TOKEN_ROWS}]) AS m
            FROM _insp_s WHERE s.model_usage IS NOT NULL AND cardinality(s.model_usage) > 0
        ), both_parts AS (
            SELECT * FROM sc
            UNION ALL
            SELECT 1 AS part, sample_idx, file_idx, run_id, key, task_id, epoch, episode_id,
                   m.metric AS metric, CASE WHEN isfinite(m.v) THEN m.v END AS value,
                   isfinite(m.v) AS valid,
                   CASE WHEN NOT isfinite(m.v)
                        THEN 'non-finite token count: ' || CAST(m.v AS VARCHAR) END AS skip_reason,
                   NULL AS explanation, 'evallog' AS source, 'imported' AS source_kind,
                   to_json({{'models': models}}) AS metadata
            FROM t WHERE m.v IS NOT NULL
        )
        SELECT * EXCLUDE (part, sample_idx) FROM both_parts
        ORDER BY part, file_idx, sample_idx, metric
        """


def document_rows(
    con: duckdb.DuckDBPyConnection,
    files: Sequence[SourceFile],
    keep: list[int],
    docs: list[bytes],
    problems: list[Problem],
) -> Parsed:
    """Runs, samples and scores of the documents ``docs`` of ``files[keep]``; what is
    rejected is added to ``problems``."""
    _load(con, files, keep, docs, problems)
    _reject_not_inspect(con, files, problems)
    _reject_bad_epochs(con, files, problems)
    con.execute(_SAMPLE_TABLE)
    _reject_repeats(con, files, problems)
    runs = con.sql(_RUNS_SQL).to_arrow_table().drop_columns(["fmt_hint"])
    fmt = [
        EVAL_FORMAT if files[i].data.startswith(b"PK") else JSON_FORMAT for i in range(len(files))
    ]
    runs = runs.append_column(
        "source_format", pa.array([fmt[i] for i in runs["file_idx"].to_pylist()], pa.string())
    )
    samples = con.sql(_SAMPLES_SQL).to_arrow_table()
    scores = con.sql(_SCORES_SQL).to_arrow_table()
    for t in ("_insp_d", "_insp_s"):
        con.execute(f"DROP TABLE IF EXISTS {t}")
    return Parsed(runs, samples, scores, None, problems)


def _load(
    con: duckdb.DuckDBPyConnection,
    files: Sequence[SourceFile],
    keep: list[int],
    docs: list[bytes],
    problems: list[Problem],
) -> None:
    """The documents' summary fields as ``_insp_d`` (one row per log with ``samples``)."""
    sub = [files[i] for i in keep]
    orig = {"orig": pa.array(keep, pa.int32())}
    # one JSON parse per file when all are well-formed; probe them only when one is not
    _good, probs = load_json_docs(con, "_insp", sub, docs, extra=orig, probe=False)
    con.execute(_NUM_MACRO)
    transform = f"""CREATE OR REPLACE TEMP TABLE _insp_d AS
        SELECT orig AS file_idx, json_transform(raw, '{_DOC}') AS d FROM _insp"""
    try:
        con.execute(transform)
    except duckdb.Error:
        con.unregister("_insp")
        _good, probs = load_json_docs(con, "_insp", sub, docs, extra=orig, probe=True)
        con.execute(transform)
    problems.extend(
        name_surrogates(probs, {str(f.path): d for f, d in zip(sub, docs, strict=True)})
    )
    # ``samples`` that is not an array transforms to NULL: say so rather than a run of none
    # (the raw text is looked at only for the logs without samples: a second parse of every
    # log would cost a third of the reader)
    without = [
        r[0] for r in con.execute("SELECT file_idx FROM _insp_d WHERE d.samples IS NULL").fetchall()
    ]
    no_samples = (
        con.execute(
            """SELECT orig, json_type(raw, '$.samples') FROM _insp
               WHERE orig IN (SELECT unnest(?::INTEGER[]))
                 AND json_type(raw, '$.samples') NOT IN ('NULL', 'ARRAY')""",
            [without],
        ).fetchall()
        if without
        else []
    )
    for fi, kind in no_samples:
        problems.append(
            Problem(str(files[fi].path), None, "samples", f"expected an array, got {kind.lower()}")
        )
    if no_samples:
        bad = ", ".join(str(fi) for fi, _ in no_samples)
        con.execute(f"DELETE FROM _insp_d WHERE file_idx IN ({bad})")
    con.unregister("_insp")


def _reject_not_inspect(
    con: duckdb.DuckDBPyConnection, files: Sequence[SourceFile], problems: list[Problem]
) -> None:
    """Logs without ``eval`` or ``eval.task``: no Inspect log."""
    not_inspect = con.execute(
        """SELECT file_idx, d.eval IS NOT NULL, d.eval->>'$.task' IS NOT NULL
           FROM _insp_d WHERE d.eval IS NULL OR d.eval->>'$.task' IS NULL"""
    ).fetchall()
    for fi, has_eval, _has_task in not_inspect:
        field = "eval" if not has_eval else "eval.task"
        problems.append(
            Problem(str(files[fi].path), None, field, "missing; expected an Inspect log")
        )
    if not_inspect:
        con.execute("""DELETE FROM _insp_d WHERE d.eval IS NULL OR d.eval->>'$.task' IS NULL""")


def _reject_bad_epochs(
    con: duckdb.DuckDBPyConnection, files: Sequence[SourceFile], problems: list[Problem]
) -> None:
    """An epoch must be an integer that fits: never a silent epoch 1 (the log is rejected)."""
    bad_epochs = con.execute(
        """SELECT file_idx, i - 1, CAST(epoch AS VARCHAR)
           FROM (SELECT file_idx, generate_subscripts(d.samples, 1) AS i,
                        unnest(list_transform(d.samples, lambda s: s.epoch)) AS epoch FROM _insp_d)
           WHERE coalesce(json_type(epoch), 'NULL') <> 'NULL'
             AND TRY_CAST(epoch AS BIGINT) IS NULL
           ORDER BY file_idx, i"""
    ).fetchall()
    for fi, si, text in bad_epochs:
        problems.append(
            Problem(
                str(files[fi].path),
                None,
                f"samples[{si}].epoch",
                f"expected an integer that fits in 64 bits, got {text}",
            )
        )
    if bad_epochs:
        con.execute(
            "DELETE FROM _insp_d WHERE file_idx IN (SELECT unnest(?::INTEGER[]))",
            [sorted({r[0] for r in bad_epochs})],
        )


def _reject_repeats(
    con: duckdb.DuckDBPyConnection, files: Sequence[SourceFile], problems: list[Problem]
) -> None:
    """One sample per id and epoch: a second would be ambiguous in every join (log rejected)."""
    repeats = con.execute(
        """SELECT file_idx, sample_idx, key, epoch FROM (
               SELECT file_idx, sample_idx, key, epoch, row_number() OVER (
                   PARTITION BY file_idx, key, epoch ORDER BY sample_idx) AS nth
               FROM _insp_s)
           WHERE nth > 1 ORDER BY file_idx, sample_idx"""
    ).fetchall()
    for fi, si, key, epoch in repeats:
        problems.append(
            Problem(
                str(files[fi].path),
                None,
                f"samples[{si}].id",
                f"duplicate sample {key!r} in epoch {epoch}: already in this log",
            )
        )
    if repeats:
        gone = [sorted({r[0] for r in repeats})]
        for t in ("_insp_d", "_insp_s"):
            con.execute(f"DELETE FROM {t} WHERE file_idx IN (SELECT unnest(?::INTEGER[]))", gone)
