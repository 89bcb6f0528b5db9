"""Helpers the JSON readers share: decoding checks and whole-file problems."""

from __future__ import annotations

import json
from collections.abc import Sequence

import duckdb
import pyarrow as pa

from hylo_analytics.ingest._files import SourceFile, bad_utf8
from hylo_analytics.ingest._reader import json_strings
from hylo_analytics.ingest._report import Problem

__all__ = ["load_json_docs", "syntax_problem"]


def syntax_problem(sf: SourceFile, data: bytes | None = None) -> Problem:
    """Where a file's JSON is malformed (line and column), as a :class:`Problem`."""
    try:
        json.loads(sf.data if data is None else data)
    except json.JSONDecodeError as exc:
        return Problem(
            str(sf.path), exc.lineno, None, f"malformed JSON: {exc.msg} (column {exc.colno})"
        )
    except UnicodeDecodeError as exc:
        return Problem(str(sf.path), None, None, f"not UTF-8: {exc.reason}")
    return Problem(str(sf.path), None, None, "malformed JSON")


def load_json_docs(
    con: duckdb.DuckDBPyConnection,
    name: str,
    files: Sequence[SourceFile],
    docs: Sequence[bytes] | None = None,
    *,
    extra: dict[str, pa.Array] | None = None,
    probe: bool = True,
) -> tuple[list[int], list[Problem]]:
    """Register ``name`` as a table ``(file_idx, raw, ...extra)`` of the files' valid JSON objects.

    Files that are not UTF-8, not JSON, or not an object become problems; their indices are
    left out. Returns ``(good file indices, problems)``. With ``probe=False`` the JSON is not
    checked here (one parse fewer): the caller's query fails on a bad file and should then
    call again with ``probe=True`` to find it.
    """
    data = list(docs) if docs is not None else [f.data for f in files]
    problems: list[Problem] = []
    utf8_ok: list[int] = []
    for i, (sf, d) in enumerate(zip(files, data, strict=True)):
        pos = bad_utf8(d)
        if pos is not None:
            problems.append(Problem(str(sf.path), pos[0], None, f"not UTF-8 (column {pos[1]})"))
        else:
            utf8_ok.append(i)
    if probe:
        table = pa.table(
            {
                "file_idx": pa.array(utf8_ok, pa.int32()),
                "raw": json_strings([data[i] for i in utf8_ok]),
            }
        )
        con.register("_probe", table)
        verdict = con.execute(
            "SELECT file_idx, json_valid(raw), CASE WHEN json_valid(raw) THEN json_type(raw) END "
            "FROM _probe ORDER BY file_idx"
        ).fetchall()
        con.unregister("_probe")
    else:
        verdict = [(i, True, "OBJECT") for i in utf8_ok]
    good: list[int] = []
    for i, ok, kind in verdict:
        if not ok:
            problems.append(syntax_problem(files[i], data[i]))
        elif kind != "OBJECT":
            problems.append(
                Problem(str(files[i].path), 1, None, f"expected a JSON object, got {kind.lower()}")
            )
        else:
            good.append(i)
    cols: dict[str, pa.Array] = {
        "file_idx": pa.array(good, pa.int32()),
        "raw": json_strings([data[i] for i in good]),
    }
    for k, arr in (extra or {}).items():
        cols[k] = arr.take(pa.array(good, pa.int32()))
    con.register(name, pa.table(cols))
    return good, problems
