"""Helpers the JSON readers share: decoding checks and whole-file problems."""

from __future__ import annotations

import functools
import json
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from hylo_analytics.ingest._files import SourceFile, bad_utf8, deep_json, too_deep
from hylo_analytics.ingest._reader import json_strings
from hylo_analytics.ingest._report import Problem
from hylo_analytics.ingest.traces import lone_surrogate

__all__ = [
    "json_problem",
    "load_json_docs",
    "loads_deep",
    "release_memory",
    "shape_error",
    "syntax_problem",
]


def json_problem(sf: SourceFile, data: bytes | None = None, *, line: int | None = 1) -> Problem:
    """Why a file's JSON document cannot be read as an object (the rare, slow path).

    Looked for in this order, each with its own message: nesting too deep (never handed to
    the recursive parser), malformed JSON, not UTF-8, a lone surrogate escape, a duplicate
    key, not an object. ``line`` is the problem's line when no position is known.
    """
    path, data = str(sf.path), sf.data if data is None else data
    deep = deep_json([data])
    if deep:
        return Problem(path, deep[0][0], None, too_deep(*deep[0]))
    dup: list[str] = []

    def pairs(items: list[tuple[str, object]]) -> dict[str, object]:
        out = dict(items)
        if len(out) < len(items) and not dup:
            seen: set[str] = set()
            for k, _ in items:
                if k in seen:
                    dup.append(k)
                    break
                seen.add(k)
        return out

    try:
        doc = json.loads(data, object_pairs_hook=pairs)
    except json.JSONDecodeError as exc:
        return Problem(path, exc.lineno, None, f"malformed JSON: {exc.msg} (column {exc.colno})")
    except UnicodeDecodeError as exc:
        return Problem(path, None, None, f"not UTF-8: {exc.reason}")
    except RecursionError:  # below our depth limit but above this interpreter's
        return Problem(path, None, None, "JSON nested too deep for the parser")
    lone = lone_surrogate(data)
    if lone is not None:
        return Problem(path, lone[0], None, lone[1])
    if dup:
        why = f"duplicate key {dup[0]!r} in one object (which one counts is unclear)"
        return Problem(path, None, dup[0], why)  # as the readers' own checks say it
    if not isinstance(doc, dict):
        kind = {list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
            type(doc), "number"
        )
        return Problem(path, line, None, f"expected a JSON object, got {kind}")
    return Problem(path, line, None, "a JSON object the reader cannot read")


_KIND = {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
         int: "an integer", float: "a number", type(None): "null"}  # fmt: skip


def shape_error(data: bytes, path: Sequence[str], expected: str, what: str) -> str:
    """Why a required field at ``path`` failed, for one rejected document (the failure path).

    A transform reads a field of the wrong type as absent; the user should be told which it
    was: "missing; expected <what>" or "expected <expected>, got a string".
    """
    try:
        node: object = json.loads(data)
    except (ValueError, RecursionError):
        return f"missing; expected {what}"
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return f"missing; expected {what}"
        node = node[key]
    return f"expected {expected}, got {_KIND.get(type(node), type(node).__name__)}"


def syntax_problem(sf: SourceFile, data: bytes | None = None) -> Problem:
    """Where a file's JSON is malformed (line and column), as a :class:`Problem`."""
    return json_problem(sf, data, line=None)


_PROBE = (
    "SELECT file_idx, json_valid(raw), CASE WHEN json_valid(raw) THEN json_type(raw) END "
    "FROM _probe ORDER BY file_idx"
)


def _probe_one_by_one(
    con: duckdb.DuckDBPyConnection, table: pa.Table
) -> list[tuple[int, bool, str | None]]:
    """The probe file by file (the failure path): a file it raises on is not valid."""
    out: list[tuple[int, bool, str | None]] = []
    for k in range(table.num_rows):
        con.register("_probe", table.slice(k, 1))
        try:
            out += con.execute(_PROBE).fetchall()
        except duckdb.Error:
            out.append((table["file_idx"][k].as_py(), False, None))
    return out


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
        try:
            verdict = con.execute(_PROBE).fetchall()
        except duckdb.Error:  # json_valid raises on some input (a lone surrogate escape)
            verdict = _probe_one_by_one(con, table)
        finally:
            con.unregister("_probe")
    else:
        verdict = [(i, True, "OBJECT") for i in utf8_ok]
    good: list[int] = []
    for i, ok, kind in verdict:
        if not ok or kind is None:
            problems.append(json_problem(files[i], data[i], line=None))
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


def _resident() -> int | None:
    """This process's resident bytes (``/proc/self/statm``), or None where there is no /proc."""
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


@functools.cache
def _malloc_trim() -> Callable[[int], object] | None:
    """glibc's ``malloc_trim``, looked up once (``find_library`` runs ``ldconfig``)."""
    import ctypes
    import ctypes.util

    libc = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(libc).malloc_trim if libc else None
    except (OSError, AttributeError):  # not glibc: nothing to trim
        return None


def release_memory(above_mib: int = 512) -> None:
    """Give freed memory back to the system when the process holds more than ``above_mib``.

    Arrow's allocator and the C heap keep freed pages for reuse: after a huge file is parsed
    (hundreds of MB of buffers, all freed) the process would hold them while the commit
    writes Parquet and the publish's DuckDB query takes memory of its own. Below the
    threshold (every ordinary batch) this costs one read of ``/proc/self/statm``. No
    ``gc.collect()``: the parsers' buffers are freed by reference counting (the 100 MB line
    of ``benchmarks/bench_huge_line.py`` peaks at the same RSS without it), and a full
    collection of a big process's heap (a notebook, a test worker) took 0.1-0.5 s per batch.
    """
    resident = _resident()
    if resident is not None and resident < above_mib * 2**20:
        return
    pa.default_memory_pool().release_unused()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def loads_deep(data: bytes, **hooks: Any) -> Any:
    """``json.loads(data, **hooks)`` for a document of any depth up to ``MAX_JSON_DEPTH``.

    Python's parser recurses per level and stops near 1,000 (RecursionError), while the depth
    limit (checked before any parser) may be set higher: a document 2,000 deep must still be
    walked, or a non-finite number beside the nesting would reach the store as a null. Such
    a document is parsed again in a thread with a stack sized for the limit and the
    recursion limit raised for that while.
    """
    import sys

    from hylo_analytics.ingest._files import MAX_JSON_DEPTH

    try:
        return json.loads(data, **hooks)
    except RecursionError:
        pass
    out: list[Any] = []
    errors: list[BaseException] = []

    def parse() -> None:
        try:
            out.append(json.loads(data, **hooks))
        except BaseException as exc:  # handed to the caller's thread
            errors.append(exc)

    with _DEEP_PARSE:
        old_limit, old_stack = sys.getrecursionlimit(), threading.stack_size()
        sys.setrecursionlimit(max(old_limit, 2 * MAX_JSON_DEPTH + 1_000))
        threading.stack_size(min(max(MAX_JSON_DEPTH * 4096, 32 << 20), 1 << 30))
        try:
            worker = threading.Thread(target=parse, name="deep-json")
            worker.start()
            worker.join()
        finally:
            threading.stack_size(old_stack)
            sys.setrecursionlimit(old_limit)
    if errors:
        raise errors[0]
    return out[0]


_DEEP_PARSE = threading.Lock()  # the recursion limit is the process's: one deep parse at a time
