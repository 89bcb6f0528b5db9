"""hylo episode traces (``hylo.trace/v0.1``): resolve, read and parse traces, a batch at a time.

Traces are many small files, so nothing here costs a parser call per file: the files of a
batch (about ``batch_bytes`` of them, cut between runs when a run fits) are joined into one
buffer, split into lines with numpy (a zero-copy Arrow string array), and DuckDB parses every
line of the batch in one query (``try(json_transform)``). Only a batch with a bad line looks
at its bad lines again, to name the file, line and field. Each file's text is kept once
(``trace_files``), not a copy of each line per event: an event's raw line is its file's line. Peak memory follows the batch size,
not the input: :func:`iter_traces` yields one batch's events at a time. A trace path must stay
inside its run folder: absolute paths, ``..`` that climbs out and symlinks leading out are
refused. Format: ``docs/trace-format.md``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hylo_analytics._traces import compress_trace
from hylo_analytics.ingest._files import (
    SourceFile,
    bad_utf8,
    deep_lines,
    read_files,
    split_lines,
    too_deep,
)
from hylo_analytics.ingest._report import Problem
from hylo_analytics.ingest._sqlcheck import JSON_TYPE_NAMES

__all__ = [
    "TRACE_FORMAT",
    "ParsedTraces",
    "TraceBatch",
    "TraceRef",
    "iter_traces",
    "lone_surrogate",
    "name_surrogates",
    "parse_traces",
    "resolve_traces",
]

TRACE_FORMAT = "hylo.trace/v0.1"


@dataclass(frozen=True)
class TraceRef:
    """A sample's trace as the log names it, resolved against the log's folder."""

    run_id: str
    key: str
    episode_id: str
    log_path: Path
    sample_idx: int
    rel: str
    file_idx: int = -1


def resolve_traces(refs: Sequence[TraceRef]) -> list[tuple[Path, Path] | str]:
    """Each trace's ``(path, run root)``, or why it is refused (it escapes the run folder).

    Paths are checked as strings, then the real path of each distinct (run folder, trace
    folder) pair is taken and checked once, so a trace costs a few string operations; a
    trace file that is itself a symlink is checked when it is read (see ``read_files``).
    """
    roots: dict[Path, tuple[str, Path]] = {}  # by log path: its folder's real path
    folders: dict[tuple[str, str], str | None] = {}
    out: list[tuple[Path, Path] | str] = []
    for ref in refs:
        try:
            out.append(_resolve_one(ref, roots, folders))
        except Exception as exc:  # a path the OS cannot take (e.g. not encodable): refused
            out.append(f"trace path {ref.rel!r} cannot be resolved: {type(exc).__name__}: {exc}")
    return out


def _resolve_one(
    ref: TraceRef,
    roots: dict[Path, tuple[str, Path]],
    folders: dict[tuple[str, str], str | None],
) -> tuple[Path, Path] | str:
    rel = ref.rel
    if "\x00" in rel:
        return f"trace path {rel!r} contains a NUL byte"
    if os.path.isabs(rel) or rel.startswith("~"):
        return f"trace path {rel!r} is absolute; it must be relative to the run folder"
    if ref.log_path not in roots:
        real_root = os.path.realpath(ref.log_path.parent)
        roots[ref.log_path] = (real_root, Path(real_root))
    root, root_path = roots[ref.log_path]
    norm = os.path.normpath(rel)
    head, name = os.path.split(norm)
    if (root, head) not in folders:
        folder = os.path.realpath(os.path.join(root, head)) if head else root
        inside = folder == root or folder.startswith(root.rstrip("/") + "/")
        escapes = norm == ".." or norm.startswith("../") or not inside
        folders[(root, head)] = None if escapes else folder
    folder_real = folders[(root, head)]
    if folder_real is None or norm == "..":
        return f"trace path {rel!r} escapes the run folder {root!r}"
    return (Path(folder_real, name), root_path)


_EVENT_STRUCT = (
    '{"type":"JSON","t":"JSON","reward":"DOUBLE","terminated":"BOOLEAN","truncated":"BOOLEAN",'
    '"info":{"success":"BOOLEAN"},"latency_ms":"DOUBLE","reason":"VARCHAR","status":"VARCHAR",'
    '"grader":"VARCHAR","name":"VARCHAR","value":"DOUBLE","explanation":"VARCHAR"}'
)

_VALID_EVENT = (
    "e IS NOT NULL AND json_type(e.type) = 'VARCHAR' "
    "AND (coalesce(json_type(e.t), 'NULL') IN ('BIGINT', 'NULL') "
    "     OR (json_type(e.t) = 'UBIGINT' AND TRY_CAST(e.t AS BIGINT) IS NOT NULL)) "
    "AND coalesce(isfinite(e.reward) AND isfinite(e.latency_ms) AND isfinite(e.value), true)"
)
# the first number of a bad line that is not finite (NaN, Infinity, 1e999), as "field=value"
_NON_FINITE = (
    "CASE WHEN NOT isfinite(e.reward) THEN 'reward=' || CAST(e.reward AS VARCHAR) "
    "WHEN NOT isfinite(e.latency_ms) THEN 'latency_ms=' || CAST(e.latency_ms AS VARCHAR) "
    "WHEN NOT isfinite(e.value) THEN 'value=' || CAST(e.value AS VARCHAR) END"
)

# One parse per line, in line order (DuckDB keeps the insertion order of a projection).
# try() turns a malformed line into NULL instead of an error; the raw text never comes back
# from DuckDB: it is the input array itself.
_TYPED_SQL = f"""
SELECT coalesce({_VALID_EVENT}, false) AS valid,
       e.type->>'$' AS type, TRY_CAST(e.t AS BIGINT) AS t,
       e.reward AS reward, e.terminated AS terminated, e.truncated AS truncated,
       e.info.success AS success, e.latency_ms AS latency_ms,
       e.reason AS reason, e.status AS status, e.grader AS grader,
       e.name AS name, e.value AS value, e.explanation AS explanation
FROM (SELECT try(json_transform(raw, '{_EVENT_STRUCT}')) AS e FROM _trace_lines)
"""

# Only for the bad lines of a batch: what is wrong with each.
_WHY_SQL = f"""
SELECT e IS NOT NULL AS ok, json_type(e.type) AS etype, json_type(e.t) AS ttype,
       CAST(e.t AS VARCHAR) AS t, {_NON_FINITE} AS non_finite, jtype
FROM (SELECT try(json_transform(raw, '{_EVENT_STRUCT}')) AS e, try(json_type(raw)) AS jtype
      FROM _trace_bad)
"""

_BATCH_BYTES = 16 * 2**20  # of trace bytes per batch: bounds the memory of an ingest


@dataclass
class TraceBatch:
    """The traces ``refs[start:stop]`` parsed: their events, problems and statuses."""

    start: int
    stop: int
    events: pa.Table  # with file_idx, run_id, key, episode_id
    problems: list[Problem]
    status: dict[int, str]  # ref index -> ok | partial | bad | missing | refused
    files: list[tuple[int, SourceFile]]  # (ref index, file read without its bytes)
    # the files whose lines are events, each once: (run_id, path, sha256, size, n_lines,
    # data); an event's raw line is line ``idx`` of its file (``hylo_analytics._traces``)
    trace_files: pa.Table | None = None


@dataclass
class ParsedTraces:
    events: pa.Table
    problems: list[Problem]
    trace_status: dict[int, str]  # ref index -> ok | partial | bad | missing | refused
    files: list[SourceFile]  # the trace files read (for ingested_files)
    trace_files: pa.Table | None = None  # their text, once each (see TraceBatch)


def parse_traces(
    con: duckdb.DuckDBPyConnection, refs: Sequence[TraceRef], *, threads: int = 4
) -> ParsedTraces:
    """Every trace of ``refs`` at once (all in memory; :func:`iter_traces` streams)."""
    parts = list(iter_traces(con, refs, threads=threads))
    return ParsedTraces(
        pa.concat_tables([p.events for p in parts]) if parts else _empty_events(),
        [q for p in parts for q in p.problems],
        {i: st for p in parts for i, st in p.status.items()},
        [f for p in parts for _, f in p.files],
        _concat_files([p.trace_files for p in parts]),
    )


_Item = tuple[int, SourceFile | None, str | None]  # ref index, file read, why refused


def iter_traces(
    con: duckdb.DuckDBPyConnection,
    refs: Sequence[TraceRef],
    *,
    batch_bytes: int | None = None,
    threads: int = 4,
) -> Iterator[TraceBatch]:
    """Read and parse ``refs`` in order, about ``batch_bytes`` of trace files per batch.

    A batch is cut before the first trace of a run once it holds ``batch_bytes``, so a run
    whose traces fit in a batch is never split; a larger run is cut within at twice that.
    Files are read ahead in a thread pool (a bounded window) while DuckDB parses.
    """
    limit = batch_bytes or _BATCH_BYTES
    resolved = resolve_traces(refs)
    targets = [r for r in resolved if not isinstance(r, str)]
    read = iter(
        read_files(
            [t[0] for t in targets],
            roots=[t[1] for t in targets],
            threads=threads,
            group=64,
            ahead=1024,
        )
    )
    pending: list[_Item] = []
    size = 0
    start = 0
    for i, res in enumerate(resolved):
        new_run = refs[i].file_idx != refs[i - 1].file_idx
        if pending and size >= limit and (new_run or size >= 2 * limit):
            yield _parse_isolated(con, refs, start, pending)
            start, pending, size = i, [], 0
        if isinstance(res, str):
            pending.append((i, None, res))
            continue
        sf = next(read)
        pending.append((i, sf, None))
        size += sf.size
    if pending:
        yield _parse_isolated(con, refs, start, pending)


def _parse_isolated(
    con: duckdb.DuckDBPyConnection, refs: Sequence[TraceRef], start: int, items: list[_Item]
) -> TraceBatch:
    """:func:`_parse_batch`, retried trace by trace if it raises: one trace that breaks the
    parser is a problem of its own (status ``bad``), never the end of the ingest."""
    try:
        return _parse_batch(con, refs, start, items)
    except Exception:  # not KeyboardInterrupt / SystemExit
        pass
    parts: list[TraceBatch] = []
    failed: list[Problem] = []
    status: dict[int, str] = {}
    for item in items:
        try:
            parts.append(_parse_batch(con, refs, start, [item]))
        except Exception as exc:
            ref = refs[item[0]]
            text = " ".join(str(exc).split())
            text = text if len(text) <= 300 else text[:300] + "..."
            path = str(ref.log_path.parent / ref.rel)
            failed.append(
                Problem(path, None, None, f"trace reader failed: {type(exc).__name__}: {text}")
            )
            status[item[0]] = "bad"
    if not parts:
        parts.append(_parse_batch(con, refs, start, []))
    return TraceBatch(
        start,
        start + len(items),
        pa.concat_tables([p.events for p in parts]),
        [q for p in parts for q in p.problems] + failed,
        {**{i: st for p in parts for i, st in p.status.items()}, **status},
        [f for p in parts for f in p.files],
        _concat_files([p.trace_files for p in parts]),
    )


def _concat_files(tables: Sequence[pa.Table | None]) -> pa.Table:
    found = [t for t in tables if t is not None]
    return pa.concat_tables(found) if found else _empty_trace_files()


def _empty_trace_files() -> pa.Table:
    from hylo_analytics._schema import TRACE_FILES

    return pa.schema([f for f in TRACE_FILES if f.name != "batch_seq"]).empty_table()


def _trace_files(
    refs: Sequence[TraceRef],
    owners: list[int],
    chunks: list[bytes],
    shas: list[str],
    file_index: np.ndarray,
) -> pa.Table:
    """The trace files of a batch whose lines were parsed, each with its text (one copy)."""
    return pa.table(
        {
            "run_id": pa.array([refs[i].run_id for i in owners], pa.string()),
            "path": pa.array([str(refs[i].log_path.parent / refs[i].rel) for i in owners]),
            "sha256": pa.array(shas, pa.string()),
            "size": pa.array([len(c) for c in chunks], pa.int64()),
            "n_lines": pa.array(np.bincount(file_index, minlength=len(owners)), pa.int64()),
            "data": pa.array([compress_trace(c) for c in chunks], pa.binary()),
        }
    )


def _grade_lines(lines: pa.LargeStringArray, valid: pa.Array, kind: pa.ChunkedArray) -> pa.Array:
    """``raw`` of a batch's lines: the line of a grade event, null for every other.

    A grade line keeps its copy: the ``grades`` scorer, one of the defaults, reads its value's
    JSON type in SQL at every score, and grade lines are few (about one per graded episode);
    every other line is read from its file (``hylo_analytics._traces``)."""
    is_grade = pc.fill_null(pc.equal(kind, "grade"), False).combine_chunks()
    mask = pc.and_(valid, is_grade)
    at = np.flatnonzero(mask.to_numpy(zero_copy_only=False))
    empty = pa.nulls(len(lines), pa.string())
    if not len(at):
        return empty
    got = pc.utf8_rtrim(lines.take(pa.array(at)), characters="\r\n").cast(pa.string())
    return pc.replace_with_mask(empty, mask, got)


def _empty_events() -> pa.Table:
    from hylo_analytics._schema import EVENTS

    fields = [pa.field("file_idx", pa.int32())] + [f for f in EVENTS if f.name != "batch_seq"]
    return pa.schema(fields).empty_table()


def _parse_batch(
    con: duckdb.DuckDBPyConnection, refs: Sequence[TraceRef], start: int, items: list[_Item]
) -> TraceBatch:
    """Parse the trace files of one batch: one query over all their lines."""
    problems: list[Problem] = []
    status: dict[int, str] = {}
    files: list[tuple[int, SourceFile]] = []
    chunks: list[bytes] = []
    owners: list[int] = []
    shas: list[str] = []
    for i, sf, refused in items:
        ref = refs[i]
        where = f"samples[{ref.sample_idx}].trace"
        if refused is not None:
            status[i] = "refused"
            problems.append(Problem(str(ref.log_path), None, where, refused))
        elif sf is None:
            continue
        elif sf.refused:
            status[i] = "refused"
            problems.append(
                Problem(
                    str(ref.log_path),
                    None,
                    where,
                    f"trace path {ref.rel!r} escapes the run folder: {sf.error}",
                )
            )
        elif sf.error is not None:
            status[i] = "missing"
            problems.append(
                Problem(str(ref.log_path), None, where, f"trace file {str(sf.path)!r}: {sf.error}")
            )
        else:
            files.append((i, replace(sf, data=b"")))
            chunks.append(sf.data)
            owners.append(i)
            shas.append(sf.sha256)
    lines, file_index, line_number = split_lines(chunks)
    try:
        lines.validate(full=True)  # UTF-8 of the whole batch at once
    except pa.ArrowInvalid:
        keep = []
        for k, (i, data) in enumerate(zip(owners, chunks, strict=True)):
            pos = bad_utf8(data)
            if pos is None:
                keep.append(k)
                continue
            status[i] = "bad"
            path = str(files[k][1].path)
            problems.append(Problem(path, pos[0], None, f"not UTF-8 (column {pos[1]})"))
        chunks = [chunks[k] for k in keep]
        owners = [owners[k] for k in keep]
        shas = [shas[k] for k in keep]
        lines, file_index, line_number = split_lines(chunks)
    line_ref = np.asarray(owners, dtype=np.int32)[file_index]
    deep = deep_lines(lines)  # no line too deep for a recursive parser reaches the store
    con.register("_trace_lines", pa.table({"raw": lines}))
    try:
        typed = con.sql(_TYPED_SQL).to_arrow_table()
    finally:
        con.unregister("_trace_lines")
    valid = typed["valid"].combine_chunks()
    typed = typed.drop_columns(["valid"])
    files_table = _trace_files(refs, owners, chunks, shas, file_index)
    if deep:
        at = np.fromiter(deep, dtype=np.int64, count=len(deep))
        mask = valid.to_numpy(zero_copy_only=False).copy()
        mask[at] = False
        valid = pa.array(mask)
        for k in sorted(deep):
            ref_i = int(line_ref[k])
            path = str(refs[ref_i].log_path.parent / refs[ref_i].rel)
            idx = int(line_number[k])
            problems.append(Problem(path, idx, None, too_deep(idx, deep[k])))
            status[ref_i] = "bad"
    raw = _grade_lines(lines, valid, typed["type"])
    if valid.false_count:
        keep_mask = valid.to_numpy(zero_copy_only=False)
        not_deep = keep_mask.copy()
        if deep:
            not_deep[at] = True
        bad = np.flatnonzero(~not_deep)
        last = np.bincount(file_index, minlength=len(owners))  # each file's last line number
        problems.extend(
            _line_problems(con, refs, lines, bad, line_ref, line_number, file_index, last, status)
        )
        typed = typed.filter(valid)
        raw = raw.filter(valid)
        file_index = file_index[keep_mask]
        line_number = line_number[keep_mask]
    per_ref = {
        "file_idx": pa.array([refs[i].file_idx for i in owners], pa.int32()),
        "run_id": pa.array([refs[i].run_id for i in owners], pa.string()),
        "key": pa.array([refs[i].key for i in owners], pa.string()),
        "episode_id": pa.array([refs[i].episode_id for i in owners], pa.string()),
    }
    local = pa.array(file_index)  # a line's position among the batch's files
    events = typed.add_column(0, "idx", pa.array(line_number))
    for k, (col, values) in enumerate(per_ref.items()):
        events = events.add_column(k, col, values.take(local))
    # no copy of the line (but a grade's): trace_files holds the file once, a line is
    # (its file, idx)
    events = events.append_column("raw", raw)
    for i in owners:
        status.setdefault(i, "ok")
    return TraceBatch(start, start + len(items), events, problems, status, files, files_table)


# A high surrogate escape (\uD800-\uDBFF) not followed by a low one, or a low one not after
# a high one; an escape is a backslash after an even number of backslashes.
_SURROGATE = re.compile(
    rb"(?<!\\)((?:\\\\)*)\\u([dD][89abAB][0-9a-fA-F]{2})(?!\\u[dD][c-fC-F])"
    rb"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})(?<!\\)((?:\\\\)*)\\u([dD][c-fC-F][0-9a-fA-F]{2})"
)


def lone_surrogate(data: bytes) -> tuple[int, str] | None:
    """``(line, message)`` of the first lone surrogate escape (``"\\ud800"``) in JSON text.

    It is valid JSON syntax but no character: it has no UTF-8 form, so it can never be stored
    (JSON parsers that accept it hand back a string that poisons Parquet).
    """
    m = _SURROGATE.search(data)
    if m is None:
        return None
    at = m.start(2) if m.group(2) is not None else m.start(4)
    line = data.count(b"\n", 0, at) + 1
    col = at - (data.rfind(b"\n", 0, at) + 1)
    code = (m.group(2) or m.group(4)).decode()
    return line, (
        f"lone surrogate escape \\u{code} (column {col}): it is no character and cannot be "
        "stored as UTF-8"
    )


def name_surrogates(problems: list[Problem], data_of: dict[str, bytes]) -> list[Problem]:
    """Problems that say "malformed JSON" where the cause is a lone surrogate escape, saying so.

    The failure path only: Python's parser (which locates syntax errors) accepts the escape.
    """
    out = []
    for p in problems:
        data = data_of.get(p.path)
        if p.error.startswith("malformed JSON") and data is not None:
            found = lone_surrogate(data)
            if found is not None:
                p = Problem(p.path, found[0], p.field, found[1])
        out.append(p)
    return out


def _too_big(json_type: str | None, text: str | None) -> bool:
    """Whether a JSON value is an integer that does not fit in 64 bits."""
    if json_type not in ("UBIGINT", "DOUBLE") or text is None or not text.lstrip("-").isdigit():
        return False
    return not -(2**63) <= int(text) < 2**63


def _line_problems(
    con: duckdb.DuckDBPyConnection,
    refs: Sequence[TraceRef],
    lines: pa.LargeStringArray,
    bad: np.ndarray,
    line_ref: np.ndarray,
    line_number: np.ndarray,
    file_index: np.ndarray,
    last: np.ndarray,
    status: dict[int, str],
) -> list[Problem]:
    """What is wrong with each bad line of a batch (blank lines are skipped, not bad)."""
    bad_lines = lines.take(pa.array(bad))
    blank = pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(bad_lines)), 0).to_numpy(
        zero_copy_only=False
    )
    bad, bad_lines = bad[~blank], bad_lines.filter(pa.array(~blank))
    if not len(bad):
        return []
    con.register("_trace_bad", pa.table({"raw": bad_lines}))
    try:
        why = con.execute(_WHY_SQL).fetchall()
    finally:
        con.unregister("_trace_bad")
    order = np.lexsort((line_number[bad], line_ref[bad]))
    problems: list[Problem] = []
    for k in order:
        ok, etype, ttype, t_text, non_finite, jtype = why[k]
        pos = int(bad[k])
        ref_i, idx = int(line_ref[pos]), int(line_number[pos])
        path = str(refs[ref_i].log_path.parent / refs[ref_i].rel)
        surrogate = None if ok else lone_surrogate(lines[pos].as_py().encode())
        if surrogate is not None:
            problems.append(Problem(path, idx, None, surrogate[1]))
            status[ref_i] = "bad"
        elif not ok:
            truncated = idx == last[file_index[pos]]
            text = (
                "truncated last line (kept the lines before it)"
                if truncated
                else "malformed JSON line"
            )
            problems.append(Problem(path, idx, None, text))
            status[ref_i] = "partial" if truncated and status.get(ref_i, "ok") == "ok" else "bad"
        elif jtype != "OBJECT":
            got = JSON_TYPE_NAMES.get(jtype, str(jtype).lower())
            problems.append(
                Problem(path, idx, None, f"expected a JSON object (an event), got {got}")
            )
            status[ref_i] = "bad"
        elif etype is None:
            problems.append(Problem(path, idx, "type", "missing required field (expected string)"))
            status[ref_i] = "bad"
        elif etype == "VARCHAR" and _too_big(ttype, t_text):
            problems.append(Problem(path, idx, "t", f"integer {t_text} does not fit in 64 bits"))
            status[ref_i] = "bad"
        elif etype == "VARCHAR" and ttype in ("BIGINT", "UBIGINT", None) and non_finite:
            fld, value = non_finite.split("=", 1)
            text = f"non-finite number {value}: a value must be finite (or left out)"
            problems.append(Problem(path, idx, fld, text))
            status[ref_i] = "bad"
        else:
            fld, want = ("type", "string") if etype != "VARCHAR" else ("t", "integer")
            got = JSON_TYPE_NAMES.get(etype if fld == "type" else ttype, "?")
            problems.append(Problem(path, idx, fld, f"expected {want}, got {got}"))
            status[ref_i] = "bad"
    return problems
