"""lm-evaluation-harness ``--log_samples`` files: ``samples_<task>_<date>.jsonl``, read.

A line is one document under one filter: ``{doc_id, doc, target, arguments, resps,
filtered_resps, filter, metrics: [names], doc_hash, prompt_hash, target_hash, <metric>:
value, ...}``. A metric whose value is a number or a boolean is a per-sample score; one
whose value is a list (``micro_f1``'s ``[gold labels, predicted labels]``: a corpus metric
the harness aggregates later) is not, and its figure comes from the results file. The score
is named as the results file names it, ``<metric>,<filter>``, so the two agree.

The file's name says its task and run (``samples_<task>_<date>.jsonl`` beside
``results_<date>.json``, any prefix shared); :func:`names` reads it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import duckdb

from hylo_analytics._sql import query_sql
from hylo_analytics.ingest._files import SourceFile
from hylo_analytics.ingest._jsonl import load_jsonl
from hylo_analytics.ingest._report import Problem
from hylo_analytics.ingest._sqlcheck import Check, compile_checks

__all__ = ["parse_samples", "results_name", "samples_name", "sniff_samples"]

_DATE = r"\d{4}-\d{2}-\d{2}T\d{2}[-:]\d{2}[-:]\d{2}(?:\.\d+)?"
_SAMPLES = re.compile(rf"^(?P<prefix>.*?)samples_(?P<task>.+)_(?P<date>{_DATE})\.jsonl$")
_RESULTS = re.compile(rf"^(?P<prefix>.*?)results_(?P<date>{_DATE})\.json$")

_CHECKS = compile_checks(
    [
        Check("doc_id", "json_extract(raw, '$.doc_id')", ("BIGINT", "UBIGINT")),
        Check("filter", "json_extract(raw, '$.filter')", ("VARCHAR",), required=False),
        Check("metrics", "json_extract(raw, '$.metrics')", ("ARRAY",), required=False),
    ]
)


def sniff_samples(head: bytes, path: Path | None = None) -> bool:
    """The first line is a JSON object with a ``doc_id`` and the model's ``resps`` (or
    ``filtered_resps``)."""
    first = head.lstrip().split(b"\n", 1)[0]
    return (
        first.startswith(b"{")
        and b'"doc_id"' in first
        and (b'"resps"' in first or b'"filtered_resps"' in first)
    )


def samples_name(path: Path) -> tuple[str, str, str] | None:
    """``(prefix, task, date)`` of a samples file's name, or None."""
    m = _SAMPLES.match(path.name)
    return (m["prefix"], m["task"], m["date"]) if m else None


def results_name(path: Path) -> tuple[str, str] | None:
    """``(prefix, date)`` of a results file's name, or None."""
    m = _RESULTS.match(path.name)
    return (m["prefix"], m["date"]) if m else None


def parse_samples(
    con: duckdb.DuckDBPyConnection, files: Sequence[SourceFile]
) -> tuple[set[int], list[Problem]]:
    """Create ``_lm_s``: one row per (line, metric) of the files (``file_idx`` = position
    in ``files``); returns the files with a bad line and the problems (every one of them)."""
    bad, problems = load_jsonl(con, "_lm_lines", files)
    con.execute(
        "CREATE OR REPLACE TEMP TABLE _lm_s AS "
        + query_sql("ingest_lm_eval_samples", checks=_CHECKS)
    )
    found = con.execute(
        """SELECT file_idx, line, b.field, b.error FROM (
               SELECT DISTINCT file_idx, line, unnest(bad) AS b FROM _lm_s)
           UNION ALL
           SELECT file_idx, line, 'doc_id', 'doc_id ' || doc_id || ' under filter ' || filter
                  || ' is already on line ' || first_line
           FROM (SELECT file_idx, line, doc_id, filter,
                        min(line) OVER (PARTITION BY file_idx, doc_id, filter) AS first_line
                 FROM (SELECT DISTINCT file_idx, line, doc_id, filter FROM _lm_s
                       WHERE len(bad) = 0))
           WHERE line <> first_line
           ORDER BY 1, 2"""
    ).fetchall()
    for fi, line, fld, why in found:
        problems.append(Problem(str(files[fi].path), line, fld, why))
        bad.add(fi)
    con.execute("DROP TABLE IF EXISTS _lm_lines")
    return bad, problems
