"""WorldFoundry metric results: JSONL, one ``MetricResult`` record per line.

A record is ``{sample_id, metric_id, raw_value, normalized_value, components, valid, coverage,
skip_reason, diagnostics, artifact_refs, judge_trace, schema_version}`` (see
``worldfoundry.evaluation.api.MetricResult``).

Identity, decided here (the records carry no run or model):

* **run_id**: the records' own ``run_id`` field when every line has the same one (an
  extension some pipelines add), else ``worldfoundry:<file stem>:<sha256[:12]>``;
  ``agent_name`` = the file stem (the usual ``<model>.jsonl`` naming), recorded in
  ``runs.extra`` as ``agent_name_from: "file name"``.
* **key** = ``sample_id`` as written, so the same sample pairs across models; ``task_id`` is
  the part before a ``#`` (the whole id when there is none) and ``seed`` the integer after it.

Scores (:func:`resolved_sql`, the one place this rule lives; the Metric protocol of
:mod:`hylo_analytics.scoring.metric` uses it too): ``value`` = ``normalized_value``, else a
numeric/boolean ``raw_value``; an invalid record's value is null (it abstains, with
``skip_reason`` or ``"invalid"``), and so is a valid one with no number (``"no numeric
value"``). Every MetricResult field is kept in its own ``scores`` column (``raw_value`` JSON as
written, ``normalized_value``, ``coverage``, ``components``, ``diagnostics``, ``artifact_refs``,
``judge_trace``); ``scorer_version`` is the record's ``schema_version``, and ``metadata``
holds ``valid`` / ``skip_reason`` as written (the columns hold the resolved ones), so
:meth:`MetricResult.from_score_row` gives back the record. A file with any bad line is
rejected whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

from hylo_analytics.ingest._files import SourceFile, bad_utf8, split_lines
from hylo_analytics.ingest._reader import Parsed, Reader
from hylo_analytics.ingest._report import Problem
from hylo_analytics.ingest._sqlcheck import JSON_TYPE_NAMES
from hylo_analytics.ingest.traces import lone_surrogate

__all__ = ["FORMAT", "READER", "parse", "resolved_sql", "sniff"]

FORMAT = "worldfoundry.metric_results"

_REC = (
    '{"sample_id":"JSON","metric_id":"VARCHAR","raw_value":"JSON","normalized_value":"DOUBLE",'
    '"components":"JSON","valid":"BOOLEAN","coverage":"DOUBLE","skip_reason":"VARCHAR",'
    '"diagnostics":"JSON","artifact_refs":"JSON","judge_trace":"JSON","schema_version":"VARCHAR",'
    '"run_id":"VARCHAR"}'
)


# "<field>=<value>" of a record's first non-finite value (NaN, Infinity, 1e999), or NULL
_NON_FINITE = """CASE
    WHEN NOT isfinite(r.normalized_value) THEN 'normalized_value=' || CAST(r.normalized_value AS VARCHAR)
    WHEN json_type(r.raw_value) = 'DOUBLE' AND NOT isfinite(CAST(r.raw_value AS DOUBLE))
    THEN 'raw_value=' || CAST(CAST(r.raw_value AS DOUBLE) AS VARCHAR)
    WHEN NOT isfinite(r.coverage) THEN 'coverage=' || CAST(r.coverage AS VARCHAR) END"""


# "<field>=<expected>=<got>" of a record's first field of the wrong JSON type, or NULL: a
# transform would read "yes" as true and 7 as a metric name, silently
_TYPES = (
    ("metric_id", ("VARCHAR",), "string"),
    ("valid", ("BOOLEAN", "NULL"), "boolean or null"),
    ("normalized_value", ("DOUBLE", "BIGINT", "UBIGINT", "NULL"), "number or null"),
    ("coverage", ("DOUBLE", "BIGINT", "UBIGINT", "NULL"), "number or null"),
    ("skip_reason", ("VARCHAR", "NULL"), "string or null"),
    ("run_id", ("VARCHAR", "NULL"), "string or null"),
    ("schema_version", ("VARCHAR", "NULL"), "string or null"),
    ("components", ("OBJECT", "NULL"), "object or null"),
    ("diagnostics", ("OBJECT", "NULL"), "object or null"),
    ("artifact_refs", ("OBJECT", "NULL"), "object or null"),
    ("judge_trace", ("OBJECT", "NULL"), "object or null"),
)
_WRONG_TYPE = (
    "CASE "
    + " ".join(
        f"WHEN json_type(raw, '$.{f}') NOT IN ({', '.join(repr(t) for t in ts)}) "
        f"THEN '{f}={want}=' || json_type(raw, '$.{f}')"
        for f, ts, want in _TYPES
    )
    + " END"
)


# a key given twice in a record (its value would be one of them, silently), or NULL
_DUP_KEY = "list_filter(keys, lambda x, i: list_position(keys, x) < i)[1]"


def sniff(head: bytes, path: Path | None = None) -> bool:
    """The first line is a JSON object with ``metric_id`` and ``sample_id``."""
    first = head.lstrip().split(b"\n", 1)[0]
    return first.startswith(b"{") and b'"metric_id"' in first and b'"sample_id"' in first


def parse(con: duckdb.DuckDBPyConnection, files: Sequence[SourceFile]) -> Parsed:
    """Every line of every file in one query."""
    problems: list[Problem] = []
    ok: list[int] = []
    for i, sf in enumerate(files):
        pos = bad_utf8(sf.data)
        if pos is not None:
            problems.append(Problem(str(sf.path), pos[0], None, f"not UTF-8 (column {pos[1]})"))
        else:
            ok.append(i)
    lines, file_index, line_number = split_lines([files[i].data for i in ok])
    owners = np.asarray(ok, dtype=np.int32)
    con.register(
        "_mr_lines",
        pa.table(
            {
                "file_idx": pa.array(owners[file_index] if len(ok) else np.zeros(0, np.int32)),
                "line": pa.array(line_number),
                "raw": lines,
            }
        ),
    )
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE _mr AS
            WITH l AS (
                SELECT file_idx, line, rtrim(raw, chr(10) || chr(13)) AS raw FROM _mr_lines
            ), t AS (
                SELECT file_idx, line, raw, try(json_type(raw)) AS jt
                FROM l WHERE length(trim(raw)) > 0
            )
            SELECT file_idx, line, jt IS NOT NULL AS ok,
                   CASE WHEN jt = 'OBJECT' THEN json_transform(raw, '{_REC}') END AS r,
                   json_keys(CASE WHEN jt = 'OBJECT' THEN raw END) AS keys,
                   CASE WHEN jt = 'OBJECT' THEN {_WRONG_TYPE} END AS wrong_type
            FROM t"""
    )
    con.unregister("_mr_lines")
    bad: set[int] = set()
    split_of: dict[int, list[bytes]] = {}  # the lines of files with a malformed line
    # every bad line of every file (no cap: a file is stored only if all of it passed)
    for fi, line, is_json, has_rec, sid, mid, nonfinite, dup_key, wrong in con.execute(
        f"""SELECT file_idx, line, ok, r IS NOT NULL, r.sample_id IS NOT NULL,
                  r.metric_id IS NOT NULL, {_NON_FINITE}, dup_key, wrong_type
           FROM (SELECT *, {_DUP_KEY} AS dup_key FROM _mr)
           WHERE NOT ok OR r IS NULL OR r.sample_id IS NULL OR r.metric_id IS NULL
                 OR {_NON_FINITE} IS NOT NULL OR dup_key IS NOT NULL OR wrong_type IS NOT NULL
           ORDER BY file_idx, line"""
    ).fetchall():
        bad.add(fi)
        path = str(files[fi].path)
        if not is_json:
            lines_of = split_of.setdefault(fi, files[fi].data.split(b"\n"))
            found = lone_surrogate(lines_of[line - 1]) if line <= len(lines_of) else None
            why = "malformed JSON line" if found is None else found[1]
            problems.append(Problem(path, line, None, why))
        elif not has_rec:
            problems.append(Problem(path, line, None, "expected a JSON object (a MetricResult)"))
        elif dup_key is not None:
            problems.append(
                Problem(
                    path,
                    line,
                    dup_key,
                    f"duplicate key {dup_key!r} in one object (which one counts is unclear)",
                )
            )
        elif wrong is not None:
            fld, want, got = wrong.split("=", 2)
            got = JSON_TYPE_NAMES.get(got, got.lower())
            problems.append(Problem(path, line, fld, f"expected {want}, got {got}"))
        elif not sid or not mid:
            fld = "sample_id" if not sid else "metric_id"
            problems.append(Problem(path, line, fld, "missing; every MetricResult names it"))
        else:
            fld, value = nonfinite.split("=", 1)
            problems.append(
                Problem(
                    path,
                    line,
                    fld,
                    f"non-finite number {value}: a value must be finite "
                    "(or null with valid false and a skip_reason)",
                )
            )
    ids: list[tuple[int, str, str]] = []
    own = dict(
        con.execute(
            """SELECT file_idx, CASE WHEN count(DISTINCT r.run_id) = 1
                                     AND count(r.run_id) = count(*) THEN any_value(r.run_id) END
               FROM _mr GROUP BY file_idx"""
        ).fetchall()
    )
    for fi in ok:
        if fi in bad or fi not in own:
            continue
        sf = files[fi]
        rid = own[fi] or f"worldfoundry:{sf.path.stem}:{sf.sha256[:12]}"
        ids.append((fi, rid, sf.path.stem))
    con.register(
        "_mr_ids",
        pa.table(
            {
                "file_idx": pa.array([i[0] for i in ids], pa.int32()),
                "run_id": [i[1] for i in ids],
                "agent": [i[2] for i in ids],
            }
        ),
    )
    con.execute(
        """CREATE OR REPLACE TEMP TABLE _mr_ok AS
           SELECT m.file_idx, i.run_id, m.line, r.*,
                  coalesce(r.sample_id->>'$', CAST(r.sample_id AS VARCHAR)) AS key
           FROM _mr AS m JOIN _mr_ids AS i USING (file_idx)"""
    )
    runs = con.sql(
        f"""
        SELECT i.file_idx, i.run_id, '{FORMAT}' AS source_format, i.agent AS agent_name,
               to_json({{'metrics': (SELECT list(DISTINCT metric_id ORDER BY metric_id)
                                     FROM _mr_ok AS o WHERE o.file_idx = i.file_idx)}}) AS results,
               'success' AS status,
               (SELECT count(DISTINCT key) FROM _mr_ok AS o WHERE o.file_idx = i.file_idx) AS n_samples,
               to_json({{'agent_name_from': 'file name'}}) AS extra
        FROM _mr_ids AS i ORDER BY i.file_idx
        """
    ).to_arrow_table()
    split = """split_part(key, '#', 1) AS task_id,
               CASE WHEN contains(key, '#') THEN TRY_CAST(split_part(key, '#', 2) AS BIGINT) END AS seed"""
    samples = con.sql(
        f"""
        WITH s AS (
            SELECT file_idx, run_id, key, min(line) AS first_line, bool_or(coalesce(valid, true)) AS any_valid
            FROM _mr_ok GROUP BY file_idx, run_id, key
        )
        SELECT file_idx, run_id, key, {split}, 1 AS epoch, key AS episode_id,
               CASE WHEN any_valid THEN 'scored' ELSE 'skipped' END AS status,
               'none' AS trace_status
        FROM s ORDER BY file_idx, first_line
        """
    ).to_arrow_table()
    scores = con.sql(
        resolved_sql(
            f"(SELECT *, {split}, 1 AS epoch, key AS episode_id FROM _mr_ok)",
            source="'evallog'",
            source_kind="'imported'",
            scorer_version="schema_version",
            order="file_idx, line",
            extra_cols="file_idx,",
        )
    ).to_arrow_table()
    con.unregister("_mr_ids")
    for t in ("_mr", "_mr_ok"):
        con.execute(f"DROP TABLE IF EXISTS {t}")
    return Parsed(runs, samples, scores, None, problems)


def resolved_sql(
    rel: str,
    *,
    source: str,
    source_kind: str,
    scorer_version: str,
    order: str,
    extra_cols: str = "",
    metadata: str = "NULL",
) -> str:
    """Score rows of MetricResult records: the value rule, and every field in its column.

    ``rel`` has the score id columns (run_id, key, task_id, seed, epoch, episode_id) and the
    record's fields (``raw_value`` and the mappings as JSON, ``valid`` / ``skip_reason`` as
    written); the other arguments are SQL expressions. ``metadata`` (a JSON object, or NULL)
    is merged with the as-written ``valid`` / ``skip_reason``.
    """
    return f"""
        WITH v AS (
            SELECT *, coalesce(valid, true) AS is_valid,
                   coalesce(normalized_value, CASE json_type(raw_value)
                       WHEN 'BOOLEAN' THEN CASE WHEN CAST(raw_value AS BOOLEAN) THEN 1.0 ELSE 0.0 END
                       WHEN 'BIGINT' THEN CAST(raw_value AS DOUBLE)
                       WHEN 'UBIGINT' THEN CAST(raw_value AS DOUBLE)
                       WHEN 'DOUBLE' THEN CAST(raw_value AS DOUBLE) END) AS v
            FROM {rel}
        )
        SELECT {extra_cols} run_id, key, task_id, seed, epoch, episode_id,
               metric_id AS metric,
               CASE WHEN is_valid THEN v END AS value,
               is_valid AND v IS NOT NULL AS valid,
               CASE WHEN NOT is_valid THEN coalesce(skip_reason, 'invalid')
                    WHEN v IS NULL THEN coalesce(skip_reason, 'no numeric value')
                    ELSE skip_reason END AS skip_reason,
               {source} AS source, {source_kind} AS source_kind,
               {scorer_version} AS scorer_version,
               CAST(json_merge_patch(coalesce(CAST({metadata} AS JSON), '{{}}'),
                    to_json({{'valid': valid, 'skip_reason': skip_reason}})) AS VARCHAR)
                   AS metadata,
               CAST(raw_value AS VARCHAR) AS raw_value,
               CAST(normalized_value AS DOUBLE) AS normalized_value,
               CAST(coalesce(coverage, 1.0) AS DOUBLE) AS coverage,
               CAST(components AS VARCHAR) AS components,
               CAST(diagnostics AS VARCHAR) AS diagnostics,
               CAST(artifact_refs AS VARCHAR) AS artifact_refs,
               CAST(judge_trace AS VARCHAR) AS judge_trace
        FROM v ORDER BY {order}
        """


READER = Reader(FORMAT, sniff, parse)
