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
import pyarrow.compute as pc
from tqdm.auto import tqdm

from hylo_analytics.ingest import hylo
from hylo_analytics.ingest._files import SourceFile, discover, read_files
from hylo_analytics.ingest._report import IngestError, IngestReport, Problem

if TYPE_CHECKING:
    from hylo_analytics.store import Store

__all__ = ["IngestError", "IngestReport", "Problem", "ingest_paths"]

_CHUNK_BYTES = 256 * 2**20  # of log files per commit; traces come on top


@dataclass(frozen=True)
class _Known:
    sha256: str
    size: int
    mtime_ns: int
    outcome: str
    run_id: str | None


def _known_files(store: Store) -> tuple[dict[str, _Known], dict[str, list[tuple[str, _Known]]]]:
    rows = store.con.execute(
        "SELECT path, sha256, size, mtime_ns, outcome, run_id, role FROM stg_ingested_files"
    ).fetchall()
    logs: dict[str, _Known] = {}
    traces: dict[str, list[tuple[str, _Known]]] = {}
    for path, sha, size, mtime, outcome, run_id, role in rows:
        k = _Known(sha, size, mtime, outcome, run_id)
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
    store: Store,
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
        bar = tqdm(total=len(todo), unit="file", desc="ingest", disable=not progress or not todo)
        con = duckdb.connect(":memory:")
        con.execute("SET threads TO 2")
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
    store: Store,
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
    hylo_files: list[SourceFile] = []
    file_rows: list[dict[str, object]] = []
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
            file_rows.append(_file_row(sf, "log", k.run_id, k.outcome, now, fmt=None))
            continue
        if hylo.sniff(sf.data[:4096]):
            hylo_files.append(sf)
        else:
            problems.append(
                Problem(
                    str(sf.path),
                    None,
                    None,
                    "unknown format: no reader recognises this file's content",
                )
            )
            file_rows.append(_file_row(sf, "log", None, "quarantined", now, fmt=None))
    if strict and problems:
        raise IngestError(problems[0])

    parsed = hylo.parse_evallogs(con, hylo_files)
    problems.extend(parsed.problems)
    if strict and parsed.problems:
        raise IngestError(parsed.problems[0])
    runs, samples, scores = parsed.runs, parsed.samples, parsed.scores

    # two files of one batch claiming one run_id: keep the first, quarantine the others
    run_ids = runs.column("run_id").to_pylist()
    file_of_run = runs.column("file_idx").to_pylist()
    seen: dict[str, int] = {}
    dup_files: set[int] = set()
    for rid, fi in zip(run_ids, file_of_run, strict=True):
        if rid in seen:
            dup_files.add(fi)
            problems.append(
                Problem(
                    str(hylo_files[fi].path),
                    None,
                    "run_id",
                    f"run_id {rid!r} is also in {str(hylo_files[seen[rid]].path)!r} in this ingest",
                )
            )
        else:
            seen[rid] = fi
    if strict and dup_files:
        raise IngestError(problems[-1])
    if dup_files:
        keep = pa.array(sorted(dup_files), pa.int32())
        runs = runs.filter(pc.invert(pc.is_in(runs["file_idx"], keep)))
        samples = samples.filter(pc.invert(pc.is_in(samples["file_idx"], keep)))
        scores = scores.filter(pc.invert(pc.is_in(scores["file_idx"], keep)))

    # traces
    has_trace = pc.is_valid(samples["trace"])
    ref_rows = samples.filter(has_trace)
    log_paths = [f.path for f in hylo_files]
    refs = [
        hylo.TraceRef(rid, key, ep, log_paths[fi], si, rel)
        for rid, key, ep, fi, si, rel in zip(
            *(
                ref_rows[c].to_pylist()
                for c in ("run_id", "key", "episode_id", "file_idx", "sample_idx", "trace")
            ),
            strict=True,
        )
    ]
    traces = hylo.parse_traces(con, refs)
    problems.extend(traces.problems)
    if strict and traces.problems:
        raise IngestError(traces.problems[0])

    status = np.full(samples.num_rows, "none", dtype=object)
    paths = np.full(samples.num_rows, None, dtype=object)
    positions = np.flatnonzero(has_trace.to_numpy(zero_copy_only=False))
    for j, ref in enumerate(refs):
        st = traces.trace_status.get(j, "ok")
        status[positions[j]] = st
        if st not in ("refused", "missing"):
            paths[positions[j]] = str(ref.log_path.parent / ref.rel)
    samples = samples.append_column("trace_status", pa.array(status, pa.string()))
    samples = samples.append_column("trace_path", pa.array(paths, pa.string()))
    partial_runs = {refs[j].run_id for j, s in traces.trace_status.items() if s != "ok"}

    # runs: provenance columns
    src = [hylo_files[i] for i in runs["file_idx"].to_pylist()]
    runs = (
        runs.append_column("source_path", pa.array([str(f.path) for f in src], pa.string()))
        .append_column("source_sha256", pa.array([f.sha256 for f in src], pa.string()))
        .append_column("ingested_at", pa.array([now] * runs.num_rows, pa.timestamp("us", tz="UTC")))
        .drop_columns(["file_idx"])
    )
    ok_files = set(runs["source_path"].to_pylist())
    run_of_path = dict(
        zip(runs["source_path"].to_pylist(), runs["run_id"].to_pylist(), strict=True)
    )
    for sf in hylo_files:
        rid = run_of_path.get(str(sf.path))
        outcome = "ingested" if str(sf.path) in ok_files else "quarantined"
        if rid in partial_runs:
            outcome = "partial"
        file_rows.append(_file_row(sf, "log", rid, outcome, now, fmt=hylo.FORMAT))
    trace_run = {str(r.log_path.parent / r.rel): r.run_id for r in refs}
    for sf in traces.files:
        rid = trace_run.get(str(sf.path))
        file_rows.append(_file_row(sf, "trace", rid, "ingested", now, fmt=hylo.TRACE_FORMAT))

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
    from hylo_analytics.store import Tombstone

    tombstones = [
        Tombstone(table, rid)
        for rid in runs["run_id"].to_pylist()
        for table in ("runs", "samples", "events", "scores")
    ]
    tables = {
        "runs": runs.drop_columns([c for c in runs.column_names if c not in _RUN_COLS]),
        "samples": samples.drop_columns(["file_idx", "sample_idx", "trace"]),
        "events": traces.events,
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
        events_added=traces.events.num_rows,
        scores_added=scores.num_rows,
        quarantined=len(problems),
        problems=tuple(problems),
        formats=((hylo.FORMAT, len(hylo_files)),) if hylo_files else (),
    )


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
