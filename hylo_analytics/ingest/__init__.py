"""Ingest: source files in, store commits out.

The orchestration is format-neutral: find files, skip the ones already stored unchanged (by
size and mtime first, then by content hash), read the rest in a thread pool, hand each to the
reader that recognises its content, and commit each chunk as one atomic batch that supersedes
earlier rows of the same runs. Bad input becomes quarantine rows; ``strict=True`` raises.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import numpy as np
import pyarrow as pa

from hylo_analytics.ingest import hylo, inspect, inspect_robots, metric_results, vla_eval
from hylo_analytics.ingest._files import SourceFile, discover, read_files
from hylo_analytics.ingest._reader import (
    SNIFF_BYTES,
    Parsed,
    Reader,
    drop_duplicate_runs,
    remap_file_idx,
)
from hylo_analytics.ingest._report import IngestError, IngestReport, Problem
from hylo_analytics.store import Tombstone

if TYPE_CHECKING:
    from hylo_analytics.store import ParquetStore

__all__ = ["READERS", "IngestError", "IngestReport", "Problem", "Reader", "detect", "ingest_paths"]

# Asked in order; the first whose ``sniff`` accepts a file's first bytes reads it.
READERS: tuple[Reader, ...] = (
    hylo.READER,
    inspect.EVAL_READER,
    inspect.JSON_READER,
    inspect_robots.READER,
    vla_eval.READER,
    metric_results.READER,
)


def detect(head: bytes, path: Path) -> Reader | None:
    """The reader for a file whose content starts with ``head``, or ``None``."""
    for reader in READERS:
        if reader.sniff(head, path):
            return reader
    return None


_CHUNK_BYTES = 256 * 2**20  # of log files per commit; traces come on top


@dataclass(frozen=True)
class _Known:
    sha256: str
    size: int
    mtime_ns: int
    outcome: str
    run_id: str | None
    format: str | None = None


def _known_files(
    store: ParquetStore,
) -> tuple[dict[str, _Known], dict[str, list[tuple[str, _Known]]]]:
    rows = store.con.execute(
        "SELECT path, sha256, size, mtime_ns, outcome, run_id, role, format FROM stg_ingested_files"
    ).fetchall()
    logs: dict[str, _Known] = {}
    traces: dict[str, list[tuple[str, _Known]]] = {}
    for path, sha, size, mtime, outcome, run_id, role, fmt in rows:
        k = _Known(sha, size, mtime, outcome, run_id, fmt)
        if role == "trace":
            traces.setdefault(run_id, []).append((path, k))
        else:
            logs[path] = k
    return logs, traces


def _traces_unchanged(entries: list[tuple[str, _Known]]) -> bool:
    for path, k in entries:
        try:
            st = os.stat(path)
        except OSError:
            return False
        if st.st_size != k.size or st.st_mtime_ns != k.mtime_ns:
            return False
    return True


def _chunks(paths: list[Path], limit: int) -> list[list[Path]]:
    out: list[list[Path]] = [[]]
    size = 0
    for p in paths:
        try:
            n = p.stat().st_size
        except OSError:
            n = 0
        if out[-1] and size + n > limit:
            out.append([])
            size = 0
        out[-1].append(p)
        size += n
    return [c for c in out if c]


def ingest_paths(
    store: ParquetStore,
    paths: Sequence[Path],
    *,
    strict: bool = False,
    progress: bool = True,
    chunk_bytes: int = _CHUNK_BYTES,
) -> IngestReport:
    """Ingest files and folders into ``store``; see :meth:`Store.ingest`.

    Each chunk of about ``chunk_bytes`` of log files is one atomic commit, so a killed process
    loses at most the chunk in flight, and the next ingest redoes exactly that.
    """
    t0 = time.perf_counter()
    missing = [str(p) for p in paths if not Path(p).exists()]
    if missing:
        raise FileNotFoundError(
            f"no such file or folder: {', '.join(missing)} (nothing was ingested)"
        )
    report = IngestReport()
    with store.lock():
        store.clean_staging()
        candidates = discover(list(paths))
        known_logs, known_traces = _known_files(store)
        todo: list[Path] = []
        unchanged = 0
        for p in candidates:
            k = known_logs.get(str(p))
            try:
                st = p.stat()
            except OSError:
                todo.append(p)  # reported as unreadable by the reader
                continue
            if (
                k is not None
                and k.size == st.st_size
                and k.mtime_ns == st.st_mtime_ns
                and k.outcome != "partial"
                and _traces_unchanged(known_traces.get(k.run_id or "", []))
            ):
                unchanged += 1
            else:
                todo.append(p)
        from tqdm.std import tqdm  # text bar: tqdm.auto warns without ipywidgets

        bar = tqdm(total=len(todo), unit="file", desc="ingest", disable=not progress or not todo)
        con = duckdb.connect(":memory:")
        con.execute(f"SET threads TO {int(store.threads)}")
        try:
            for chunk in _chunks(todo, chunk_bytes):
                files = list(read_files(chunk, on_done=bar.update))
                part = _ingest_chunk(store, con, files, known_logs, known_traces, strict=strict)
                report = report.merge(part)
        finally:
            bar.close()
            con.close()
    return report.merge(
        IngestReport(
            files_seen=len(candidates),
            files_unchanged=unchanged,
            seconds=time.perf_counter() - t0,
        )
    )


def _ingest_chunk(
    store: ParquetStore,
    con: duckdb.DuckDBPyConnection,
    files: list[SourceFile],
    known_logs: dict[str, _Known],
    known_traces: dict[str, list[tuple[str, _Known]]],
    *,
    strict: bool,
) -> IngestReport:
    now = datetime.now(UTC)
    problems: list[Problem] = []
    unchanged = 0
    file_rows: list[dict[str, object]] = []
    # the files each reader claimed, as positions in ``claimed``
    claimed: list[SourceFile] = []
    fmt_of: list[str] = []
    by_reader: dict[str, list[int]] = {}
    for sf in files:
        k = known_logs.get(str(sf.path))
        if sf.error is not None:
            problems.append(Problem(str(sf.path), None, None, sf.error))
            continue
        if (
            k is not None
            and k.sha256 == sf.sha256
            and k.outcome != "partial"
            and _traces_unchanged(known_traces.get(k.run_id or "", []))
        ):
            unchanged += 1  # touched, not changed: remember the new mtime
            file_rows.append(_file_row(sf, "log", k.run_id, k.outcome, now, fmt=k.format))
            continue
        reader = detect(sf.data[:SNIFF_BYTES], sf.path)
        if reader is None:
            problems.append(
                Problem(
                    str(sf.path),
                    None,
                    None,
                    "unknown format: no reader recognises this file's content "
                    f"(known formats: {', '.join(r.format for r in READERS)})",
                )
            )
            file_rows.append(_file_row(sf, "log", None, "quarantined", now, fmt=None))
            continue
        by_reader.setdefault(reader.format, []).append(len(claimed))
        claimed.append(sf)
        fmt_of.append(reader.format)
    if strict and problems:
        raise IngestError(problems[0])

    parts: list[Parsed] = []
    for reader in READERS:
        idx = by_reader.get(reader.format)
        if not idx:
            continue
        part = reader.parse(con, [claimed[i] for i in idx])
        if strict and part.problems:
            raise IngestError(part.problems[0])
        mapping = np.asarray(idx, dtype=np.int32)
        part.runs = remap_file_idx(part.runs, mapping)
        part.samples = remap_file_idx(part.samples, mapping)
        part.scores = remap_file_idx(part.scores, mapping)
        part.events = remap_file_idx(part.events, mapping)
        parts.append(part)
        problems.extend(part.problems)
    merged = Parsed(
        _concat([p.runs for p in parts], "runs"),
        _concat([p.samples for p in parts], "samples"),
        _concat([p.scores for p in parts], "scores"),
        _concat([p.events for p in parts if p.events is not None], "events"),
    )
    # a run claimed by files of two formats: keep the first file
    merged, dups = drop_duplicate_runs(merged, [str(f.path) for f in claimed])
    problems.extend(dups)
    if strict and dups:
        raise IngestError(dups[0])
    runs, samples, scores, events = merged.runs, merged.samples, merged.scores, merged.events
    assert events is not None
    partial_runs = set().union(*(p.partial_runs for p in parts)) if parts else set()

    # runs: provenance columns
    file_idx = runs["file_idx"].to_pylist()
    src = [claimed[i] for i in file_idx]
    for name, col in (
        ("source_path", pa.array([str(f.path) for f in src], pa.string())),
        ("source_sha256", pa.array([f.sha256 for f in src], pa.string())),
        ("ingested_at", pa.array([now] * runs.num_rows, pa.timestamp("us", tz="UTC"))),
    ):
        runs = runs.set_column(runs.column_names.index(name), name, col)
    runs = runs.drop_columns(["file_idx"])
    run_of_file = dict(zip(file_idx, runs["run_id"].to_pylist(), strict=True))
    tombstones = [
        Tombstone(table, rid)
        for rid in runs["run_id"].to_pylist()
        for table in ("runs", "samples", "events", "scores")
    ]
    formats: dict[str, int] = {}
    for i, sf in enumerate(claimed):
        rid = run_of_file.get(i)
        outcome = "ingested" if rid is not None else "quarantined"
        if rid in partial_runs:
            outcome = "partial"
        file_rows.append(_file_row(sf, "log", rid, outcome, now, fmt=fmt_of[i]))
        formats[fmt_of[i]] = formats.get(fmt_of[i], 0) + 1
        # a changed file whose run_id changed (ids derived from content) replaces its old run
        k = known_logs.get(str(sf.path))
        if rid is not None and k is not None and k.run_id and k.run_id != rid:
            tombstones += [
                Tombstone(table, k.run_id) for table in ("runs", "samples", "events", "scores")
            ]
    for p in parts:
        for sf, role, rid, fmt in p.side_files:
            file_rows.append(_file_row(sf, role, rid, "ingested", now, fmt=fmt))

    sha_of = {str(f.path): f.sha256 for f in files}
    quarantine = pa.table(
        {
            "path": [p.path for p in problems],
            "line": pa.array([p.line for p in problems], pa.int64()),
            "field": [p.field for p in problems],
            "error": [p.error for p in problems],
            "sha256": [sha_of.get(p.path) for p in problems],
            "ingested_at": pa.array([now] * len(problems), pa.timestamp("us", tz="UTC")),
        }
    )
    tables = {
        "runs": runs.drop_columns([c for c in runs.column_names if c not in _RUN_COLS]),
        "samples": samples.drop_columns(["file_idx"]),
        "events": events.drop_columns(["file_idx"]),
        "scores": scores.drop_columns(["file_idx"]),
        "quarantine": quarantine,
        "ingested_files": pa.Table.from_pylist(file_rows, schema=_file_schema())
        if file_rows
        else None,
    }
    store.commit({k: v for k, v in tables.items() if v is not None}, tombstones)
    return IngestReport(
        files_read=len(files),
        files_unchanged=unchanged,
        runs_added=runs.num_rows,
        samples_added=samples.num_rows,
        events_added=events.num_rows,
        scores_added=scores.num_rows,
        quarantined=len(problems),
        problems=tuple(problems),
        formats=tuple(sorted(formats.items())),
        file_formats=tuple(
            (str(r["path"]), r["format"])  # type: ignore[misc]
            for r in file_rows
            if r["role"] == "log"
        ),
    )


def _concat(tables: list[pa.Table], name: str) -> pa.Table:
    """Fit each reader's table to the store schema (plus ``file_idx``) and stack them."""
    from hylo_analytics import _schema

    fitted = []
    for t in tables:
        fi = t["file_idx"]
        body = t.drop_columns([c for c in t.column_names if c == "file_idx"])
        body = _schema.conform(body, name).drop_columns(["batch_seq"])
        fitted.append(body.append_column("file_idx", fi.cast(pa.int32())))
    if not fitted:
        empty = _schema.empty(name).drop_columns(["batch_seq"])
        return empty.append_column("file_idx", pa.array([], pa.int32()))
    return pa.concat_tables(fitted) if len(fitted) > 1 else fitted[0]


_RUN_COLS = {
    "run_id",
    "source_format",
    "source_path",
    "source_sha256",
    "benchmark_id",
    "benchmark_version",
    "benchmark_digest",
    "split",
    "requires_privileged",
    "agent_name",
    "agent_version",
    "agent_components",
    "results",
    "status",
    "created",
    "n_samples",
    "extra",
    "ingested_at",
}


def _file_schema() -> pa.Schema:
    from hylo_analytics._schema import INGESTED_FILES

    return pa.schema([f for f in INGESTED_FILES if f.name != "batch_seq"])


def _file_row(
    sf: SourceFile, role: str, run_id: str | None, outcome: str, now: datetime, *, fmt: str | None
) -> dict[str, object]:
    return {
        "path": str(sf.path),
        "sha256": sf.sha256,
        "size": sf.size,
        "mtime_ns": sf.mtime_ns,
        "format": fmt,
        "role": role,
        "run_id": run_id,
        "outcome": outcome,
        "ingested_at": now,
    }
