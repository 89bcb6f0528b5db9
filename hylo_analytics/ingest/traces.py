"""hylo episode traces (``hylo.trace/v0.1``): resolve, read and parse every trace of a batch.

All trace files of a batch are joined into one buffer and split into lines with numpy (a
zero-copy Arrow string array); DuckDB parses every line once (``try(json_transform)``); the raw
line is kept as written. A trace path must stay inside its run folder: absolute paths, ``..``
that climbs out and symlinks leading out are refused. Format: ``docs/trace-format.md``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hylo_analytics.ingest._files import SourceFile, bad_utf8, read_files, split_lines
from hylo_analytics.ingest._report import Problem

__all__ = ["TRACE_FORMAT", "ParsedTraces", "TraceRef", "parse_traces", "resolve_traces"]

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

    Paths are checked as strings, then the real path of each distinct folder is taken once;
    a trace file that is itself a symlink is checked when it is read (see ``read_files``).
    """
    real_dirs: dict[Path, Path] = {}

    def real(d: Path) -> Path:
        if d not in real_dirs:
            real_dirs[d] = Path(os.path.realpath(d))
        return real_dirs[d]

    out: list[tuple[Path, Path] | str] = []
    for ref in refs:
        rel = ref.rel
        if os.path.isabs(rel) or rel.startswith("~"):
            out.append(f"trace path {rel!r} is absolute; it must be relative to the run folder")
            continue
        root = real(ref.log_path.parent)
        norm = os.path.normpath(rel)
        folder = real(root / os.path.dirname(norm)) if os.path.dirname(norm) else root
        if norm == ".." or norm.startswith("../") or not folder.is_relative_to(root):
            out.append(f"trace path {rel!r} escapes the run folder {str(root)!r}")
            continue
        out.append((folder / os.path.basename(norm), root))
    return out


_EVENT_STRUCT = (
    '{"type":"JSON","t":"JSON","reward":"DOUBLE","terminated":"BOOLEAN","truncated":"BOOLEAN",'
    '"info":{"success":"BOOLEAN"},"latency_ms":"DOUBLE","reason":"VARCHAR","status":"VARCHAR",'
    '"grader":"VARCHAR","name":"VARCHAR","value":"DOUBLE","explanation":"VARCHAR"}'
)


_VALID_EVENT = (
    "e IS NOT NULL AND json_type(e.type) = 'VARCHAR' "
    "AND coalesce(json_type(e.t), 'NULL') IN ('BIGINT', 'UBIGINT', 'NULL')"
)


@dataclass
class ParsedTraces:
    events: pa.Table
    problems: list[Problem]
    trace_status: dict[int, str]  # ref index -> ok | partial | bad | missing | refused
    files: list[SourceFile]  # the trace files read (for ingested_files)


_BATCH = 1000  # traces parsed per query: bounds memory, keeps the working set in cache


def parse_traces(
    con: duckdb.DuckDBPyConnection, refs: Sequence[TraceRef], *, threads: int = 4
) -> ParsedTraces:
    """Read every referenced trace file and parse their lines, a batch of traces per query."""
    if len(refs) <= _BATCH:
        return _parse_batch(con, refs, threads=threads)
    parts = [
        _parse_batch(con, refs[k : k + _BATCH], threads=threads)
        for k in range(0, len(refs), _BATCH)
    ]
    status = {
        k * _BATCH + i: st for k, part in enumerate(parts) for i, st in part.trace_status.items()
    }
    return ParsedTraces(
        pa.concat_tables([p.events for p in parts]),
        [q for p in parts for q in p.problems],
        status,
        [f for p in parts for f in p.files],
    )


def _parse_batch(
    con: duckdb.DuckDBPyConnection, refs: Sequence[TraceRef], *, threads: int = 4
) -> ParsedTraces:
    """Read every referenced trace file and parse all their lines in one query."""
    problems: list[Problem] = []
    status: dict[int, str] = {}
    resolved: list[tuple[int, Path, Path]] = []
    for i, (ref, res) in enumerate(zip(refs, resolve_traces(refs), strict=True)):
        if isinstance(res, str):
            status[i] = "refused"
            problems.append(
                Problem(str(ref.log_path), None, f"samples[{ref.sample_idx}].trace", res)
            )
        else:
            resolved.append((i, res[0], res[1]))
    files: list[SourceFile] = []
    chunks: list[bytes] = []
    owners: list[int] = []
    read = read_files(
        [t for _, t, _ in resolved], roots=[r for _, _, r in resolved], threads=threads
    )
    for (i, target, _), sf in zip(resolved, read, strict=True):
        ref = refs[i]
        if sf.refused:
            status[i] = "refused"
            problems.append(
                Problem(
                    str(ref.log_path),
                    None,
                    f"samples[{ref.sample_idx}].trace",
                    f"trace path {ref.rel!r} escapes the run folder: {sf.error}",
                )
            )
            continue
        if sf.error is not None:
            status[i] = "missing"
            problems.append(
                Problem(
                    str(ref.log_path),
                    None,
                    f"samples[{ref.sample_idx}].trace",
                    f"trace file {str(target)!r}: {sf.error}",
                )
            )
            continue
        pos = bad_utf8(sf.data)
        if pos is not None:
            status[i] = "bad"
            problems.append(Problem(str(target), pos[0], None, f"not UTF-8 (column {pos[1]})"))
            files.append(sf)
            continue
        files.append(sf)
        chunks.append(sf.data)
        owners.append(i)
    lines, file_index, line_number = split_lines(chunks)
    owners_arr = np.asarray(owners, dtype=np.int32)
    ref_idx = owners_arr[file_index] if len(owners) else np.zeros(0, np.int32)
    table = pa.table(
        {
            "pos": pa.array(np.arange(len(lines), dtype=np.int64)),
            "ref": pa.array(ref_idx),
            "idx": pa.array(line_number),
            "raw": lines,
        }
    )
    con.register("_lines", table)
    # One JSON parse per line; try() turns a malformed line into NULL instead of an error.
    # The raw text never goes through DuckDB: it is sliced from the Arrow array below.
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE _ev AS
        SELECT pos, ref, idx, e, coalesce({_VALID_EVENT}, false) AS valid
        FROM (SELECT pos, ref, idx, try(json_transform(raw, '{_EVENT_STRUCT}')) AS e FROM _lines)
        """
    )
    con.unregister("_lines")
    blank = pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(lines)), 0) if len(lines) else None
    last = dict(con.execute("SELECT ref, max(idx) FROM _ev GROUP BY ref").fetchall())
    for pos, ref_i, idx, ok, etype, ttype in con.execute(
        """SELECT pos, ref, idx, e IS NOT NULL, json_type(e.type), json_type(e.t) FROM _ev
           WHERE NOT valid ORDER BY ref, idx"""
    ).fetchall():
        if blank is not None and blank[pos].as_py():
            continue
        path = str(refs[ref_i].log_path.parent / refs[ref_i].rel)
        if not ok:
            truncated = idx == last[ref_i]
            why = (
                "truncated last line (kept the lines before it)"
                if truncated
                else "malformed JSON line"
            )
            problems.append(Problem(path, idx, None, why))
            status[ref_i] = "partial" if truncated and status.get(ref_i, "ok") == "ok" else "bad"
        elif etype is None:
            problems.append(Problem(path, idx, "type", "missing required field (expected string)"))
            status[ref_i] = "bad"
        else:
            fld, want = ("type", "string") if etype != "VARCHAR" else ("t", "integer")
            got = (etype if fld == "type" else ttype).lower()
            problems.append(Problem(path, idx, fld, f"expected {want}, got {got}"))
            status[ref_i] = "bad"
    typed = con.sql(
        """
        SELECT pos, idx,
               e.type->>'$' AS type, CAST(e.t AS BIGINT) AS t,
               e.reward AS reward, e.terminated AS terminated, e.truncated AS truncated,
               e.info.success AS success, e.latency_ms AS latency_ms,
               e.reason AS reason, e.status AS status, e.grader AS grader,
               e.name AS name, e.value AS value, e.explanation AS explanation
        FROM _ev
        WHERE valid
        """
    ).to_arrow_table()
    con.execute("DROP TABLE IF EXISTS _ev")
    pos = typed["pos"].combine_chunks()
    row_ref = pa.array(ref_idx).take(pos)
    events = typed.drop_columns(["pos"])
    per_ref = {
        "file_idx": pa.array([r.file_idx for r in refs], pa.int32()),
        "run_id": pa.array([r.run_id for r in refs], pa.string()),
        "key": pa.array([r.key for r in refs], pa.string()),
        "episode_id": pa.array([r.episode_id for r in refs], pa.string()),
    }
    for i, (col, values) in enumerate(per_ref.items()):
        events = events.add_column(i, col, values.take(row_ref))
    raw = pc.utf8_rtrim(lines, characters="\r\n") if len(lines) else pa.array([], pa.large_string())
    events = events.append_column("raw", raw.take(pos))
    for i in owners:
        status.setdefault(i, "ok")
    return ParsedTraces(events, problems, status, files)
