"""Ingest: source files in, store commits out.

The orchestration is format-neutral: find files, skip the ones already stored unchanged (by
size and mtime first, then by content hash), read the rest in a thread pool, hand each to the
reader that recognises its content, and commit each chunk as one atomic batch that supersedes
earlier rows of the same runs. Bad input becomes quarantine rows; ``strict=True`` raises.
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hylo_analytics.ingest import hylo, inspect, inspect_robots, metric_results, vla_eval
from hylo_analytics.ingest._common import release_memory
from hylo_analytics.ingest._files import (
    MAX_DOC_BYTES,
    SourceFile,
    deep_json,
    discover,
    read_files,
    too_deep,
)
from hylo_analytics.ingest._reader import (
    SNIFF_BYTES,
    Parsed,
    Reader,
    drop_duplicate_runs,
    remap_file_idx,
)
from hylo_analytics.ingest._report import IngestError, IngestReport, Problem
from hylo_analytics.ingest.traces import TRACE_FORMAT, TraceBatch, TraceRef, iter_traces
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


log = logging.getLogger(__name__)

_CHUNK_BYTES = 64 * 2**20  # of log files per commit (traces on top); two are in memory at once


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
    replace: bool = False,
    workers: int = 1,
    shard: tuple[int, int] | None = None,
) -> IngestReport:
    """Ingest files and folders into ``store``; see :meth:`Store.ingest`.

    ``workers`` > 1 or a ``shard`` ``(i, n)`` run the sharded ingest (:func:`_ingest_sharded`).

    Each chunk of about ``chunk_bytes`` of log files (and their traces) is published at once:
    its commits (a batch of trace files each, so memory follows the batch, not the input) are
    written unpublished and named by one new manifest after the last, so readers see a chunk
    whole or not at all, and a killed process loses at most the chunks in flight (one parsing,
    one writing), which the next ingest redoes.
    """
    from hylo_analytics.store import as_parquet

    store = as_parquet(store)  # a Store (the facade) holds its ParquetStore
    t0 = time.perf_counter()
    missing = [str(p) for p in paths if not Path(p).exists()]
    if missing:
        raise FileNotFoundError(
            f"no such file or folder: {', '.join(missing)} (nothing was ingested)"
        )
    if workers != 1 or shard is not None:
        return _ingest_sharded(
            store,
            paths,
            strict=strict,
            progress=progress,
            chunk_bytes=chunk_bytes,
            replace=replace,
            workers=workers,
            shard=shard or (0, 1),
        )
    report = IngestReport()
    with store.lock():
        store.clean_staging()
        skipped: list[Problem] = []  # symlinked folders not followed: recorded, not silent
        roots: dict[Path, Path] = {}  # each file found in a folder: that folder, to stay in
        candidates = discover(list(paths), skipped=skipped, roots=roots)
        known_logs, known_traces = _known_files(store)
        stored = _stored_runs(store)
        recorded = _recorded_problems(store)
        todo, unchanged = _to_read(candidates, known_logs, known_traces, replace=replace)
        from tqdm.std import tqdm  # text bar: tqdm.auto warns without ipywidgets

        bar = tqdm(total=len(todo), unit="file", desc="ingest", disable=not progress or not todo)
        con = duckdb.connect(":memory:")
        con.execute(f"SET threads TO {int(store.threads)}")
        # One commit in flight while the next batch is read and parsed (Parquet writing releases
        # the GIL, so it runs beside the parse); commits stay in order, at most two in memory.
        writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ingest-commit")
        pending: list[Future[object]] = []

        def submit(tables: dict[str, pa.Table], tombstones: list[Tombstone]) -> None:
            if pending:
                pending.pop().result()
            release_memory()  # the parse's freed buffers, before the Parquet writer's own
            pending.append(writer.submit(store.commit, tables, tombstones, publish=False))

        def publish() -> None:  # a chunk's commits are seen together, after its last one
            if pending:
                pending.pop().result()
            release_memory()  # the chunk's buffers, before the publish's own query takes memory
            pending.append(writer.submit(store.publish))

        try:
            for chunk in _chunks(todo, chunk_bytes) or ([[]] if skipped else []):
                tops = [roots.get(p) for p in chunk]
                files = list(read_files(chunk, roots=tops, on_done=bar.update))
                part = _ingest_chunk(
                    con,
                    files,
                    known_logs,
                    known_traces,
                    stored,
                    recorded,
                    strict=strict,
                    replace_runs=replace,
                    submit=submit,
                    notes=skipped,
                )
                skipped = []
                del files
                publish()
                report = report.merge(part)
            if pending:
                pending.pop().result()
        except BaseException:
            writer.shutdown(wait=True)
            store.discard()  # a chunk's unpublished commits: never half of it
            raise
        finally:
            writer.shutdown(wait=True)
            bar.close()
            con.close()
    return report.merge(
        IngestReport(
            files_seen=len(candidates),
            files_unchanged=unchanged,
            seconds=time.perf_counter() - t0,
        )
    )


def _to_read(
    candidates: list[Path],
    known_logs: dict[str, _Known],
    known_traces: dict[str, list[tuple[str, _Known]]],
    *,
    replace: bool,
) -> tuple[list[Path], int]:
    """The files to read (not stored unchanged by size and mtime) and how many are skipped."""
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
            and not (replace and k.outcome == "quarantined")  # may be a claimed run_id
            and _traces_unchanged(known_traces.get(k.run_id or "", []))
        ):
            unchanged += 1
        else:
            todo.append(p)
    return todo, unchanged


def lease_seconds() -> float:
    """Seconds a worker's claims are held without a heartbeat (``HYLO_ANALYTICS_CLAIM_LEASE``,
    default 60); a worker renews them every third of it."""
    env = os.environ.get("HYLO_ANALYTICS_CLAIM_LEASE", "").strip()
    try:
        value = float(env) if env else 60.0
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ValueError(f"HYLO_ANALYTICS_CLAIM_LEASE must be a number of seconds > 0, got {env!r}")
    return value


def claim_files(todo: int, workers: int) -> int:
    """Files per claim: ``HYLO_ANALYTICS_CLAIM_FILES``, else about two claims per worker (at
    most 1,000 files). Smaller claims lose less to a dead worker and cost a publish each."""
    env = os.environ.get("HYLO_ANALYTICS_CLAIM_FILES", "").strip()
    if not env:
        return max(1, min(1000, -(-todo // (workers * 2))))
    if not env.isdigit() or int(env) < 1:
        raise ValueError(f"HYLO_ANALYTICS_CLAIM_FILES must be a whole number >= 1, got {env!r}")
    return int(env)


def _ingest_sharded(
    store: ParquetStore,
    paths: Sequence[Path],
    *,
    strict: bool,
    progress: bool,
    chunk_bytes: int,
    replace: bool,
    workers: int,
    shard: tuple[int, int],
) -> IngestReport:
    """Ingest with ``workers`` processes (this one finishing what they leave) sharing a claim
    table, over the files of ``shard`` ``(i, n)``; see :mod:`hylo_analytics.ingest._claims`.

    Each worker claims a few files, parses them and writes their batches unpublished in its
    own staging folder, then takes the store lock only to check and publish them (one
    manifest swap) and marks its claims done. A killed worker's claims go to the others;
    re-running the command resumes: what is published is skipped as unchanged.
    """
    from tqdm.std import tqdm

    from hylo_analytics.ingest._claims import DIED, Claims, job_id, shard_of

    t0 = time.perf_counter()
    i, n = shard
    if not (isinstance(workers, int) and workers >= 1):
        raise ValueError(f"workers must be a whole number >= 1, got {workers!r}")
    if not (n >= 1 and 0 <= i < n):
        raise ValueError(f"shard must be i/N with 0 <= i < N, got {i}/{n}")
    skipped: list[Problem] = []
    candidates = discover(list(paths), skipped=skipped)
    if n > 1:
        candidates = [p for p in candidates if shard_of(p, n) == i]
        skipped = skipped if i == 0 else []  # recorded once, by shard 0
    known_logs, known_traces = _known_files(store)
    todo, unchanged = _to_read(candidates, known_logs, known_traces, replace=replace)
    store.ensure_on_disk()  # the first write: a store opened at an empty folder is made now
    claims = Claims(store.root, job_id(paths, n, i), lease=lease_seconds())
    sizes: list[tuple[str, int, int | None]] = []
    for p in todo:
        try:
            st = p.stat()
            sizes.append((str(p), st.st_size, st.st_mtime_ns))
        except OSError:
            sizes.append((str(p), 0, None))
    claims.register(sizes)
    per_claim = claim_files(len(todo), workers)
    bar = tqdm(total=len(todo), unit="file", desc="ingest", disable=not progress or not todo)
    report = IngestReport()
    try:
        if workers > 1 and claims.counts().get("pending"):  # else nothing to start them for
            report = _run_workers(
                store, claims, workers, strict, replace, per_claim, chunk_bytes, bar
            )
        # what is left (a killed worker's files, claims of an earlier run): this process
        report = report.merge(
            _work(
                store,
                claims,
                strict=strict,
                replace=replace,
                files=per_claim,
                size=chunk_bytes,
                wait=True,
                on_done=bar.update,
            )
        )
        # files every worker died reading: quarantine rows (unless a late worker stored one)
        notes = list(skipped)
        if died := [p for p, why in claims.failures() if why == DIED]:
            stored_files = _known_files(store)[0]
            notes += [Problem(p, None, None, DIED) for p in died if p not in stored_files]
        if notes:
            with store.lock():
                con = duckdb.connect(":memory:")
                try:
                    part = _ingest_chunk(
                        con, [], {}, {}, {}, _recorded_problems(store),
                        strict=strict, replace_runs=replace, notes=notes,
                        submit=lambda t, s: _commit_held(store, t, s),
                    )  # fmt: skip
                finally:
                    con.close()
                store.publish()
            report = report.merge(part)
    finally:
        bar.close()
        claims.close()
    return report.merge(
        IngestReport(
            files_seen=len(candidates),
            files_unchanged=unchanged,
            seconds=time.perf_counter() - t0,
        )
    )


def _commit_held(store: ParquetStore, tables: dict[str, pa.Table], stones: list[Tombstone]) -> None:
    store.commit(tables, stones, publish=False)


def _run_workers(
    store: ParquetStore,
    claims: object,
    workers: int,
    strict: bool,
    replace: bool,
    per_claim: int,
    chunk_bytes: int,
    bar: object,
) -> IngestReport:
    """Run ``workers`` worker processes to the end; one progress line from the claim table."""
    import json
    import pickle
    import subprocess
    import sys
    import tempfile

    from hylo_analytics.ingest._claims import Claims

    assert isinstance(claims, Claims)
    report = IngestReport()
    errors: list[BaseException] = []
    with tempfile.TemporaryDirectory(prefix="hylo-ingest-") as tmp:
        procs = []
        for k in range(workers):
            opts = {
                "root": str(store.root),
                "job": claims.job,
                "lease": claims.lease,
                "threads": max(1, int(store.threads) // workers),
                "strict": strict,
                "replace": replace,
                "files": per_claim,
                "size": chunk_bytes,
                "parent": os.getpid(),
                "report": str(Path(tmp) / f"worker-{k}.pickle"),
            }
            cmd = [sys.executable, "-m", "hylo_analytics.ingest._claims", json.dumps(opts)]
            procs.append((subprocess.Popen(cmd), Path(str(opts["report"]))))
        start = sum(claims.counts().get(s, 0) for s in ("done", "failed"))
        shown = 0
        try:
            while any(p.poll() is None for p, _ in procs):
                finished = sum(claims.counts().get(s, 0) for s in ("done", "failed")) - start
                if finished > shown:
                    bar.update(finished - shown)  # type: ignore[attr-defined]
                    shown = finished
                time.sleep(0.2)
        except BaseException:
            for p, _ in procs:
                p.kill()
                p.wait()
            raise
        finished = sum(claims.counts().get(s, 0) for s in ("done", "failed")) - start
        bar.update(max(0, finished - shown))  # type: ignore[attr-defined]
        for p, out in procs:
            if not out.exists():  # killed: its claims are freed, this process takes them
                log.warning("ingest worker pid %d ended with code %s", p.pid, p.returncode)
                continue
            result = pickle.loads(out.read_bytes())
            if isinstance(result, BaseException):
                errors.append(result)
            else:
                report = report.merge(result)
    if errors:
        raise errors[0]
    return report


def _work(
    store: ParquetStore,
    claims: object,
    *,
    strict: bool,
    replace: bool,
    files: int,
    size: int,
    wait: bool,
    parent: int | None = None,
    on_done: Callable[[int], object] | None = None,
) -> IngestReport:
    """One worker: claim, parse, publish, mark done, until nothing is left to claim.

    ``wait``: also wait for the leases other workers hold to expire (a killed worker's, on
    another host) and take them. ``parent``: the pid that started this worker; if it dies,
    so does the worker (its claims and staging folder are then a dead worker's).
    """
    import threading

    from hylo_analytics.ingest._claims import Claims

    assert isinstance(claims, Claims)
    worker = claims.join()
    stop = threading.Event()

    def beat() -> None:  # own connection: sqlite3 connections stay in their thread
        mine = Claims(claims.path.parent, claims.job, lease=claims.lease)
        try:
            while not stop.wait(claims.lease / 3):
                if parent is not None and os.getppid() != parent:
                    os._exit(1)  # orphaned: end as a killed worker would
                mine.renew(worker)
                store.heartbeat()
        finally:
            mine.close()

    beater = threading.Thread(target=beat, name="ingest-heartbeat", daemon=True)
    beater.start()
    report = IngestReport()
    con = duckdb.connect(":memory:")
    con.execute(f"SET threads TO {int(store.threads)}")
    try:
        while True:
            claimed = claims.claim(worker, files=files, size=size)
            if not claimed:
                expiry = claims.next_expiry() if wait else None
                if expiry is None:
                    break
                time.sleep(min(max(expiry - time.time(), 0.05), 1.0))
                continue
            try:
                part = _ingest_claimed(
                    store, con, [Path(p) for p in claimed], strict=strict, replace=replace
                )
            except Exception as exc:
                store.discard()
                claims.finish(worker, claimed, "failed", f"{type(exc).__name__}: {exc}")
                raise
            claims.finish(worker, claimed, "done")
            report = report.merge(part)
            if on_done is not None:
                on_done(len(claimed))
    finally:
        stop.set()
        beater.join()
        con.close()
        store.discard()
        claims.release(worker)
    return report


def _ingest_claimed(
    store: ParquetStore,
    con: duckdb.DuckDBPyConnection,
    paths: list[Path],
    *,
    strict: bool,
    replace: bool,
) -> IngestReport:
    """Parse ``paths`` and write their batches unlocked; publish them under the lock.

    The parse decided against the store as it was (runs stored from other files, the files'
    last rows). If another writer published one of those runs or files meanwhile (two files
    of one run_id in two workers), the batches are dropped and the files done again under
    the lock, exactly as a single ingest would: the dedupe by file and run still holds.
    """
    part, before, after, known = _parse_claimed(store, con, paths, strict=strict, replace=replace)
    touched = sorted(r for r in after.keys() | before.keys() if after.get(r) != before.get(r))
    with store.lock(quiet=True):
        store.clean_staging()  # only dead writers' folders: live workers keep theirs
        if not _moved(store, touched, before, paths, known):
            store.publish()
            return part
        store.discard()
        part, *_ = _parse_claimed(store, con, paths, strict=strict, replace=replace)
        store.publish()
        return part


def _parse_claimed(
    store: ParquetStore,
    con: duckdb.DuckDBPyConnection,
    paths: list[Path],
    *,
    strict: bool,
    replace: bool,
) -> tuple[IngestReport, dict[str, tuple[str, str]], dict[str, tuple[str, str]], dict[str, _Known]]:
    known_logs, known_traces = _known_files(store)
    stored = _stored_runs(store)
    before = dict(stored)
    files = list(read_files(paths))
    part = _ingest_chunk(
        con, files, known_logs, known_traces, stored, _recorded_problems(store),
        strict=strict, replace_runs=replace, submit=lambda t, s: _commit_held(store, t, s),
    )  # fmt: skip
    return part, before, stored, known_logs


def _moved(
    store: ParquetStore,
    run_ids: list[str],
    before: dict[str, tuple[str, str]],
    paths: list[Path],
    known: dict[str, _Known],
) -> bool:
    """Whether a run or file a parse decided on was published by another writer since."""
    now = {
        rid: (path, sha)
        for rid, path, sha in store.con.execute(
            "SELECT run_id, source_path, source_sha256 FROM stg_runs "
            "WHERE list_contains(?, run_id)",
            [run_ids],
        ).fetchall()
    }
    if any(now.get(r) != before.get(r) for r in run_ids):
        return True
    rows = store.con.execute(
        "SELECT path, sha256, outcome, run_id FROM stg_ingested_files "
        "WHERE role = 'log' AND list_contains(?, path)",
        [[str(p) for p in paths]],
    ).fetchall()
    seen = {path: (sha, outcome, rid) for path, sha, outcome, rid in rows}
    was = {
        str(p): (k.sha256, k.outcome, k.run_id)
        for p in paths
        if (k := known.get(str(p))) is not None
    }
    return seen != was


def _ingest_chunk(
    con: duckdb.DuckDBPyConnection,
    files: list[SourceFile],
    known_logs: dict[str, _Known],
    known_traces: dict[str, list[tuple[str, _Known]]],
    stored: dict[str, tuple[str, str]],
    recorded: set[_ProblemKey],
    *,
    strict: bool,
    replace_runs: bool,
    submit: Callable[[dict[str, pa.Table], list[Tombstone]], None],
    notes: Sequence[Problem] = (),
) -> IngestReport:
    """Parse one chunk and hand each of its commits (tables, tombstones) to ``submit``.

    ``stored`` maps each stored run_id to its ``(source_path, source_sha256)``; the chunk's
    runs are added to it. ``recorded`` are the quarantine rows stored (and committed by this
    ingest): a problem already recorded for the same file content is not stored again.
    ``notes`` are problems found before reading (folders skipped), committed with it.
    """
    now = datetime.now(UTC)
    problems: list[Problem] = list(notes)
    unchanged = 0
    file_rows: list[dict[str, object]] = []
    # the files each reader claimed, as positions in ``claimed``
    claimed: list[SourceFile] = []
    fmt_of: list[str] = []
    by_reader: dict[object, list[int]] = {}  # by parse function: formats sharing one are one batch
    # bounded JSON, checked before any parser sees the bytes (zips: member by member)
    plain = [i for i, sf in enumerate(files) if sf.error is None and sf.data[:2] != b"PK"]
    deep = deep_json([files[i].data for i in plain])
    unsafe: dict[int, tuple[int | None, str]] = {
        i: (None, f"JSON file of {files[i].size} bytes, over the limit of {MAX_DOC_BYTES} bytes")
        for i in plain
        if files[i].size > MAX_DOC_BYTES
    }
    unsafe.update((plain[j], (at[0], too_deep(*at))) for j, at in deep.items())
    for n, sf in enumerate(files):
        k = known_logs.get(str(sf.path))
        if sf.error is not None:
            problems.append(Problem(str(sf.path), None, None, sf.error))
            continue
        if (
            k is not None
            and k.sha256 == sf.sha256
            and k.outcome != "partial"
            and not (replace_runs and k.outcome == "quarantined")
            and _traces_unchanged(known_traces.get(k.run_id or "", []))
        ):
            unchanged += 1  # touched, not changed: remember the new mtime
            file_rows.append(_file_row(sf, "log", k.run_id, k.outcome, now, fmt=k.format))
            continue
        reader = detect(sf.data[:SNIFF_BYTES], sf.path)
        if n in unsafe:  # never offered to a parser
            line, why = unsafe[n]
            problems.append(Problem(str(sf.path), line, None, why))
            fmt = reader.format_of(sf.data[:SNIFF_BYTES]) if reader is not None else None
            file_rows.append(_file_row(sf, "log", None, "quarantined", now, fmt=fmt))
            continue
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
        by_reader.setdefault(reader.parse, []).append(len(claimed))
        claimed.append(sf)
        fmt_of.append(reader.format_of(sf.data[:SNIFF_BYTES]))
    if strict and problems:
        raise IngestError(problems[0])

    parts: list[Parsed] = []
    refs: list[TraceRef] = []
    pieces: list[tuple[list[int], Parsed]] = []
    for parse in dict.fromkeys(r.parse for r in READERS):
        read, failed = _parse_isolated(con, parse, claimed, fmt_of, by_reader.get(parse, []))
        if strict and failed:
            raise IngestError(failed[0])
        problems.extend(failed)
        pieces += read
    for idx, part in pieces:
        if strict and part.problems:
            raise IngestError(part.problems[0])
        mapping = np.asarray(idx, dtype=np.int32)
        part.runs = remap_file_idx(part.runs, mapping)
        part.samples = remap_file_idx(part.samples, mapping)
        part.scores = remap_file_idx(part.scores, mapping)
        part.events = remap_file_idx(part.events, mapping)
        if part.traces:
            offset = pa.scalar(len(refs), pa.int32())
            pos = part.samples.column_names.index("trace_ref")
            shifted = pc.add(part.samples["trace_ref"], offset)
            part.samples = part.samples.set_column(pos, "trace_ref", shifted)
            refs += [replace(r, file_idx=int(mapping[r.file_idx])) for r in part.traces]
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
    # a run stored from another file: replaced only when asked (``replace``)
    merged, taken = _claimed_elsewhere(merged, claimed, stored, replace=replace_runs)
    dups += taken
    problems.extend(dups)
    if strict and dups:
        raise IngestError(dups[0])
    runs, samples, scores, events = merged.runs, merged.samples, merged.scores, merged.events
    assert events is not None
    partial_runs = set().union(*(p.partial_runs for p in parts)) if parts else set()
    if dups and refs:  # the traces of a dropped run are never read
        alive = set(runs["file_idx"].to_pylist())
        keep = np.fromiter((r.file_idx in alive for r in refs), bool, count=len(refs))
        new_pos = (np.cumsum(keep) - 1).astype(np.int32)
        pos = samples.column_names.index("trace_ref")
        ref_col = samples["trace_ref"].combine_chunks()
        moved = pa.array(new_pos).take(pc.fill_null(ref_col, 0))
        samples = samples.set_column(pos, "trace_ref", pc.if_else(ref_col.is_valid(), moved, None))
        refs = [r for r, k in zip(refs, keep, strict=True) if k]

    # runs: provenance columns
    file_idx = runs["file_idx"].to_pylist()
    src = [claimed[i] for i in file_idx]
    for name, col in (
        ("source_path", pa.array([str(f.path) for f in src], pa.string())),
        ("source_sha256", pa.array([f.sha256 for f in src], pa.string())),
        ("ingested_at", pa.array([now] * runs.num_rows, pa.timestamp("us", tz="UTC"))),
    ):
        runs = runs.set_column(runs.column_names.index(name), name, col)
    run_of_file = dict(zip(file_idx, runs["run_id"].to_pylist(), strict=True))
    stones_of: dict[int, list[Tombstone]] = {}
    for i, rid in run_of_file.items():
        stones_of[i] = [Tombstone(table, rid) for table in _RUN_TABLES]
        # a changed file whose run_id changed (ids derived from content) replaces its old run,
        # unless that run is stored from another file now
        path = str(claimed[i].path)
        k = known_logs.get(path)
        old = k.run_id if k is not None else None
        if old and old != rid and stored.get(old, (path,))[0] == path:
            stones_of[i] += [Tombstone(table, old) for table in _RUN_TABLES]
            stored.pop(old, None)
        stored[rid] = (path, claimed[i].sha256)
    # a log's format is the one its run was read as (ingested_files.format = runs.source_format):
    # one reader reads both hylo versions, and a v0.2 log is no v0.1 log
    for i, fmt in zip(file_idx, runs["source_format"].to_pylist(), strict=True):
        fmt_of[i] = fmt or fmt_of[i]
    formats: dict[str, int] = {}
    for i, sf in enumerate(claimed):
        if i not in run_of_file:  # rejected: recorded with the chunk's first commit
            file_rows.append(_file_row(sf, "log", None, "quarantined", now, fmt=fmt_of[i]))
        formats[fmt_of[i]] = formats.get(fmt_of[i], 0) + 1

    chunk = _Chunk(
        claimed, fmt_of, runs, samples, scores, refs, run_of_file, stones_of,
        partial_runs, {str(f.path): f.sha256 for f in files}, now, recorded,
    )  # fmt: skip
    if not refs:
        submit(
            *chunk.commit_tables(
                events, problems, file_rows, done=set(run_of_file), started=set(run_of_file)
            )
        )
    else:
        traced = {r.file_idx for r in refs}
        untraced = set(run_of_file) - traced
        batches = iter_traces(con, refs, threads=4)
        if strict:  # every trace checked before anything is stored: one commit
            every = list(batches)
            bad = [q for b in every for q in b.problems]
            if bad:
                raise IngestError(bad[0])
            batches = iter([_merge_batches(every)])
        first = True
        seen: set[int] = set()  # runs whose tombstones are committed
        remaining = Counter(r.file_idx for r in refs)
        # each commit is written (``submit``: one in flight) while the next batch is parsed
        for batch in batches:
            chunk.take(batch)
            ev = _concat([batch.events], "events")
            done = set()
            for r in refs[batch.start : batch.stop]:
                remaining[r.file_idx] -= 1
                if not remaining[r.file_idx]:
                    done.add(r.file_idx)
            started = {r.file_idx for r in refs[batch.start : batch.stop]} - seen
            seen |= started
            batch_problems, rows = batch.problems, []
            if first:
                ev = pa.concat_tables([events, ev]) if events.num_rows else ev
                done |= untraced
                started |= untraced
                batch_problems, rows = problems + batch.problems, file_rows
                first = False
            submit(
                *chunk.commit_tables(
                    ev, batch_problems, rows, done=done, started=started, files=batch.trace_files
                )
            )
    return IngestReport(
        files_read=len(files),
        files_unchanged=unchanged,
        runs_added=runs.num_rows,
        samples_added=samples.num_rows,
        events_added=chunk.events_added,
        scores_added=scores.num_rows,
        quarantined=len(chunk.problems),
        problems=tuple(chunk.problems),
        formats=tuple(sorted(formats.items())),
        file_formats=tuple(
            (str(r["path"]), r["format"])  # type: ignore[misc]
            for r in [*file_rows, *chunk.log_rows]
            if r["role"] == "log"
        ),
    )


_RUN_TABLES = ("runs", "samples", "events", "scores", "trace_files")


def _parse_isolated(
    con: duckdb.DuckDBPyConnection,
    parse: Callable[[duckdb.DuckDBPyConnection, Sequence[SourceFile]], Parsed],
    claimed: list[SourceFile],
    fmt_of: list[str],
    idx: list[int],
) -> tuple[list[tuple[list[int], Parsed]], list[Problem]]:
    """``parse`` the files ``claimed[idx]`` as one batch; if it raises, split and retry.

    One file's failure (a parser error, RecursionError, MemoryError, ...) must not lose the
    files beside it: a failed batch is halved until the failing files are alone, and each of
    those is a problem. The good path stays one call. Returns the parsed pieces in file order
    (the files' positions in ``claimed`` with their rows) and the problems.
    """
    pieces: list[tuple[list[int], Parsed]] = []
    failed: list[Problem] = []
    todo = [idx] if idx else []
    while todo:
        part = todo.pop()
        try:
            pieces.append((part, parse(con, [claimed[i] for i in part])))
        except Exception as exc:  # not KeyboardInterrupt / SystemExit: those end the ingest
            if len(part) > 1:
                half = len(part) // 2
                todo += [part[half:], part[:half]]
                continue
            text = " ".join(str(exc).split())
            text = text if len(text) <= 300 else text[:300] + "..."
            why = f"{fmt_of[part[0]]} reader failed: {type(exc).__name__}: {text}"
            failed.append(Problem(str(claimed[part[0]].path), None, None, why))
    pieces.sort(key=lambda p: p[0][0])
    return pieces, failed


_ProblemKey = tuple[str, int | None, str | None, str, str | None]  # path, line, field, error, sha


def _recorded_problems(store: ParquetStore) -> set[_ProblemKey]:
    """The quarantine rows stored, as keys (one set per ingest: quarantine rows are few)."""
    rows = store.con.execute(
        "SELECT path, line, field, error, sha256 FROM stg_quarantine"
    ).fetchall()
    return {(p, ln, f, e, sha) for p, ln, f, e, sha in rows}


def _stored_runs(store: ParquetStore) -> dict[str, tuple[str, str]]:
    """Each stored run_id's ``(source_path, source_sha256)``."""
    rows = store.con.execute("SELECT run_id, source_path, source_sha256 FROM stg_runs").fetchall()
    return {rid: (path, sha) for rid, path, sha in rows}


def _claimed_elsewhere(
    merged: Parsed,
    claimed: list[SourceFile],
    stored: dict[str, tuple[str, str]],
    *,
    replace: bool,
) -> tuple[Parsed, list[Problem]]:
    """Drop the runs whose run_id is stored from another file; each becomes a problem.

    Re-ingesting a file (same path) replaces its run, as documented; so does the same
    content at another path (a moved or copied file: the run is the same). Another file
    with other content replaces a stored run only with ``replace``: silently, it would be
    one run overwritten by an unrelated one.
    """
    if replace or not stored or not merged.runs.num_rows:
        return merged, []
    problems: list[Problem] = []
    drop: list[int] = []
    for rid, fi in zip(
        merged.runs["run_id"].to_pylist(), merged.runs["file_idx"].to_pylist(), strict=True
    ):
        old = stored.get(rid)
        sf = claimed[fi]
        if old is None or old[0] == str(sf.path) or old[1] == sf.sha256:
            continue
        drop.append(fi)
        problems.append(
            Problem(
                str(sf.path),
                None,
                "run_id",
                f"run_id {rid!r} is already stored from {old[0]!r}; "
                "pass replace=True / --replace to replace it",
            )
        )
    if not drop:
        return merged, []
    gone = pa.array(drop, pa.int32())

    def keep(t: pa.Table) -> pa.Table:
        return t.filter(pc.invert(pc.is_in(t["file_idx"], gone)))

    events = merged.events
    return (
        Parsed(
            keep(merged.runs),
            keep(merged.samples),
            keep(merged.scores),
            None if events is None else keep(events),
        ),
        problems,
    )


class _Chunk:
    """A chunk's parsed logs, committed run by run as their traces are read.

    Each commit holds a batch of trace events and the runs whose last trace is in it (runs,
    samples, scores, ingested_files), with the tombstones of the runs whose first trace is in
    it. A run whose traces fit in one batch is therefore one atomic commit; a larger run's
    events come in several, its metadata with the last one, so a killed ingest leaves no run
    row and no ingested_files row for it, and the next ingest redoes it whole.
    """

    def __init__(
        self,
        claimed: list[SourceFile],
        fmt_of: list[str],
        runs: pa.Table,
        samples: pa.Table,
        scores: pa.Table,
        refs: list[TraceRef],
        run_of_file: dict[int, str],
        stones_of: dict[int, list[Tombstone]],
        partial_runs: set[str],
        sha_of: dict[str, str],
        now: datetime,
        recorded: set[_ProblemKey],
    ) -> None:
        self.claimed, self.fmt_of, self.now = claimed, fmt_of, now
        self.runs, self.samples, self.scores, self.refs = runs, samples, scores, refs
        self.run_of_file, self.stones_of = run_of_file, stones_of
        self.partial_runs, self.sha_of = set(partial_runs), sha_of
        self.recorded = recorded
        self.status = np.full(len(refs), None, dtype=object)
        self.paths = np.full(len(refs), None, dtype=object)
        self.trace_rows: dict[int, list[dict[str, object]]] = {}
        self.problems: list[Problem] = []
        self.log_rows: list[dict[str, object]] = []
        self.events_added = 0
        self.files_kept: set[tuple[str, str]] = set()  # (run_id, path) in trace_files

    def take(self, batch: TraceBatch) -> None:
        """Remember a parsed batch's statuses and trace files (committed with their runs)."""
        for i, st in batch.status.items():
            ref = self.refs[i]
            self.status[i] = st
            if st not in ("refused", "missing"):
                self.paths[i] = str(ref.log_path.parent / ref.rel)
            if st != "ok":
                self.partial_runs.add(ref.run_id)
        for i, sf in batch.files:
            fi = self.refs[i].file_idx
            rid = self.run_of_file.get(fi)
            row = _file_row(sf, "trace", rid, "ingested", self.now, fmt=TRACE_FORMAT)
            self.trace_rows.setdefault(fi, []).append(row)

    def commit_tables(
        self,
        events: pa.Table,
        problems: list[Problem],
        file_rows: list[dict[str, object]],
        *,
        done: set[int],
        started: set[int],
        files: pa.Table | None = None,
    ) -> tuple[dict[str, pa.Table], list[Tombstone]]:
        """The commit of ``events`` with the runs of the files ``done`` and the tombstones of
        ``started`` (written by the caller's writer thread)."""
        tombstones = [t for i in sorted(started) for t in self.stones_of.get(i, [])]
        sel = pa.array(sorted(done), pa.int32())
        runs = _rows_of(self.runs, sel)
        samples = self._samples(_rows_of(self.samples, sel))
        scores = _rows_of(self.scores, sel)
        rows = list(file_rows)
        for i in sorted(done):
            rid = self.run_of_file.get(i)
            if rid is None:
                continue
            outcome = "partial" if rid in self.partial_runs else "ingested"
            row = _file_row(self.claimed[i], "log", rid, outcome, self.now, fmt=self.fmt_of[i])
            self.log_rows.append(row)
            rows.append(row)
            rows += self.trace_rows.pop(i, [])
        # a problem stored before for the same content (an unchanged file re-read because
        # a trace is missing, or with ``replace``) is not stored twice
        new = []
        for p in problems:
            key = (p.path, p.line, p.field, p.error, self.sha_of.get(p.path))
            if key not in self.recorded:
                self.recorded.add(key)
                new.append(p)
        quarantine = pa.table(
            {
                "path": [p.path for p in new],
                "line": pa.array([p.line for p in new], pa.int64()),
                "field": [p.field for p in new],
                "error": [p.error for p in new],
                "sha256": [self.sha_of.get(p.path) for p in new],
                "ingested_at": pa.array([self.now] * len(new), pa.timestamp("us", tz="UTC")),
            }
        )
        tables = {
            "runs": runs.drop_columns([c for c in runs.column_names if c not in _RUN_COLS]),
            "samples": samples.drop_columns(["file_idx", "trace_ref"]),
            "events": events.drop_columns(["file_idx"]),
            "scores": scores.drop_columns(["file_idx"]),
            "quarantine": quarantine,
            "ingested_files": pa.Table.from_pylist(rows, schema=_file_schema()) if rows else None,
            "trace_files": self._new_files(files),
        }
        self.problems += problems
        self.events_added += events.num_rows
        return {k: v for k, v in tables.items() if v is not None}, tombstones

    def _new_files(self, files: pa.Table | None) -> pa.Table | None:
        """The trace files not kept yet for their run (two samples may name one file)."""
        if files is None or not files.num_rows:
            return None
        keys = list(zip(files["run_id"].to_pylist(), files["path"].to_pylist(), strict=True))
        keep = []
        for k in keys:
            keep.append(k not in self.files_kept)
            self.files_kept.add(k)
        return files if all(keep) else files.filter(pa.array(keep))

    def _samples(self, samples: pa.Table) -> pa.Table:
        """Samples with the status and path of their trace, once it has been read."""
        ref = samples["trace_ref"].combine_chunks()
        if not len(self.refs) or not ref.null_count < len(ref):  # no sample here has a trace
            at = samples.column_names.index("trace_status")
            return samples.set_column(
                at, "trace_status", pc.fill_null(samples["trace_status"], "none")
            )
        has = ref.is_valid()
        at = pc.fill_null(ref, 0).to_numpy(zero_copy_only=False)
        status = pc.if_else(has, pa.array(self.status[at], pa.string()), samples["trace_status"])
        path = pc.if_else(has, pa.array(self.paths[at], pa.string()), samples["trace_path"])
        samples = samples.set_column(
            samples.column_names.index("trace_status"), "trace_status", pc.fill_null(status, "none")
        )
        return samples.set_column(samples.column_names.index("trace_path"), "trace_path", path)


def _rows_of(table: pa.Table, files: pa.Array) -> pa.Table:
    """The rows of ``table`` from ``files`` (by ``file_idx``); the table itself, not a copy,
    when that is every row (a chunk without traces: one huge log must not be held twice)."""
    mask = pc.is_in(table["file_idx"], files)
    if pc.sum(mask).as_py() == table.num_rows:  # no nulls: file_idx is never null
        return table
    return table.filter(mask)


def _merge_batches(batches: list[TraceBatch]) -> TraceBatch:
    return TraceBatch(
        batches[0].start if batches else 0,
        batches[-1].stop if batches else 0,
        pa.concat_tables([b.events for b in batches]),
        [q for b in batches for q in b.problems],
        {i: st for b in batches for i, st in b.status.items()},
        [f for b in batches for f in b.files],
        pa.concat_tables([b.trace_files for b in batches if b.trace_files is not None])
        if any(b.trace_files is not None for b in batches)
        else None,
    )


def _concat(tables: list[pa.Table], name: str) -> pa.Table:
    """Fit each reader's table to the store schema (plus ``file_idx``) and stack them."""
    from hylo_analytics import _schema

    fitted = []
    for t in tables:
        fi = t["file_idx"]
        ref = t["trace_ref"] if "trace_ref" in t.column_names else pa.nulls(t.num_rows, pa.int32())
        body = t.drop_columns([c for c in t.column_names if c in ("file_idx", "trace_ref")])
        body = _schema.conform(body, name).drop_columns(["batch_seq"])
        if name == "runs":
            body = _with_errors_policy(body)
        body = body.append_column("file_idx", fi.cast(pa.int32()))
        if name == "samples":  # the position of the sample's trace in the chunk's refs
            body = body.append_column("trace_ref", ref.cast(pa.int32()))
        fitted.append(body)
    if not fitted:
        empty = _schema.empty(name).drop_columns(["batch_seq"])
        empty = empty.append_column("file_idx", pa.array([], pa.int32()))
        if name == "samples":
            empty = empty.append_column("trace_ref", pa.array([], pa.int32()))
        return empty
    return pa.concat_tables(fitted) if len(fitted) > 1 else fitted[0]


def _with_errors_policy(runs: pa.Table) -> pa.Table:
    """Each run's errors convention: the log's own (an exported run keeps its harness's),
    else the one of the format that wrote it (:func:`hylo_analytics._harness.default_errors`)."""
    import pyarrow.compute as pc

    from hylo_analytics._harness import FAILURE_FORMATS

    failing = pc.is_in(runs["source_format"], value_set=pa.array(FAILURE_FORMATS, pa.string()))
    derived = pc.if_else(pc.fill_null(failing, False), "failure", "exclude")
    given = runs["errors_policy"]
    at = runs.schema.get_field_index("errors_policy")
    return runs.set_column(at, "errors_policy", pc.coalesce(given, derived))


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
    "episodes_per_task",
    "max_steps",
    "benchmark_upstream",
    "agent_name",
    "agent_version",
    "agent_components",
    "parent_run_id",
    "results",
    "status",
    "created",
    "errors_policy",
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
