"""JSON Lines files as one table of objects, every bad line a problem with its line number.

The JSONL readers (Every Eval Ever instances, lm-eval samples) share the first step: every
line of every file of a batch split without a Python loop (:func:`._files.split_lines`),
typed by one query, and each line that is not UTF-8, not JSON, not an object or repeats a key
named by file and line. What is left is a table ``(file_idx, line, raw)`` of the objects for
the reader's own checks.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import numpy as np
import pyarrow as pa

from hylo_analytics.ingest._files import SourceFile, bad_utf8, split_lines
from hylo_analytics.ingest._report import Problem
from hylo_analytics.ingest.traces import lone_surrogate

__all__ = ["load_jsonl"]

# a key given twice in an object (its value would be one of them, silently), or NULL
_DUP_KEY = "list_filter(keys, lambda x, i: list_position(keys, x) < i)[1]"


def load_jsonl(
    con: duckdb.DuckDBPyConnection, name: str, files: Sequence[SourceFile]
) -> tuple[set[int], list[Problem]]:
    """Create the temp table ``name`` ``(file_idx, line, raw JSON)`` of the files' object
    lines; returns the files with a bad line (their lines are left in: the caller drops the
    file whole) and the problems."""
    problems: list[Problem] = []
    bad: set[int] = set()
    ok: list[int] = []
    for i, sf in enumerate(files):
        pos = bad_utf8(sf.data)
        if pos is not None:
            problems.append(Problem(str(sf.path), pos[0], None, f"not UTF-8 (column {pos[1]})"))
            bad.add(i)
        else:
            ok.append(i)
    lines, file_index, line_number = split_lines([files[i].data for i in ok])
    owners = np.asarray(ok, dtype=np.int32)
    owner = owners[file_index] if len(ok) else np.zeros(0, np.int32)
    # (a file nested too deep never reaches a reader: the chunk refuses it first)
    con.register(
        "_jl_lines",
        pa.table({"file_idx": pa.array(owner), "line": pa.array(line_number), "raw": lines}),
    )
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE {name} AS
            WITH l AS (
                SELECT file_idx, line, rtrim(raw, chr(10) || chr(13)) AS raw FROM _jl_lines
            ), t AS (
                SELECT file_idx, line, raw, try(json_type(raw)) AS jt
                FROM l WHERE length(trim(raw)) > 0
            )
            SELECT file_idx, line, jt,
                   CASE WHEN jt = 'OBJECT' THEN CAST(raw AS JSON) END AS raw,
                   CASE WHEN jt = 'OBJECT' THEN json_keys(raw) END AS keys
            FROM t"""
    )
    con.unregister("_jl_lines")
    found = con.execute(
        f"""SELECT file_idx, line, jt, dup FROM (SELECT *, {_DUP_KEY} AS dup FROM {name})
            WHERE jt IS NULL OR jt <> 'OBJECT' OR dup IS NOT NULL ORDER BY file_idx, line"""
    ).fetchall()
    split_of: dict[int, list[bytes]] = {}
    for fi, line, jt, dup in found:
        bad.add(fi)
        path = str(files[fi].path)
        if jt is None:
            lines_of = split_of.setdefault(fi, files[fi].data.split(b"\n"))
            lone = lone_surrogate(lines_of[line - 1]) if line <= len(lines_of) else None
            problems.append(
                Problem(path, line, None, "malformed JSON line" if lone is None else lone[1])
            )
        elif jt != "OBJECT":
            problems.append(Problem(path, line, None, f"expected a JSON object, got {jt.lower()}"))
        else:
            why = f"duplicate key {dup!r} in one object (which one counts is unclear)"
            problems.append(Problem(path, line, dup, why))
    return bad, problems
