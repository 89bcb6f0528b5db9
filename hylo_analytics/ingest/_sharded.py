"""The sharded ingest: worker processes sharing the claim table, and the worker loop.

``workers`` processes (this one finishing what they leave) claim a few files at a time from
:mod:`._claims`, parse them and write their batches unpublished in their own staging folder,
then take the store lock only to check and publish them (one manifest swap) and mark their
claims done. A killed worker's claims go to the others; re-running the command resumes: what
is published is skipped as unchanged. A worker process runs this module:
``python -m hylo_analytics.ingest._worker OPTIONS_JSON``.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from hylo_analytics.errors import InputError
from hylo_analytics.ingest._chunk import commit_held, ingest_chunk
from hylo_analytics.ingest._claims import (
    DIED,
    Claims,
    claim_files,
    job_id,
    lease_seconds,
    shard_of,
)
from hylo_analytics.ingest._files import read_files
from hylo_analytics.ingest._identity import (
    Known,
    known_files,
    moved,
    recorded_problems,
    stored_runs,
    to_read,
)
from hylo_analytics.ingest._registry import log_suffixes, readers
from hylo_analytics.ingest._report import IngestReport, Problem
from hylo_analytics.ingest._walk import discover

if TYPE_CHECKING:
    from subprocess import Popen

    from hylo_analytics.store import ParquetStore

__all__ = ["ingest_sharded", "work"]

log = logging.getLogger("hylo_analytics.ingest")


def ingest_sharded(
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
    """Ingest with ``workers`` processes sharing a claim table, over the files of ``shard``
    ``(i, n)``; see the module's docstring."""
    from tqdm.std import tqdm

    t0 = time.perf_counter()
    i, n = shard
    if not (isinstance(workers, int) and workers >= 1):
        raise InputError(f"workers must be a whole number >= 1, got {workers!r}")
    if not (n >= 1 and 0 <= i < n):
        raise InputError(f"shard must be i/N with 0 <= i < N, got {i}/{n}")
    skipped: list[Problem] = []
    candidates = discover(list(paths), skipped=skipped, suffixes=log_suffixes(readers()))
    if n > 1:
        candidates = [p for p in candidates if shard_of(p, n) == i]
        skipped = skipped if i == 0 else []  # recorded once, by shard 0
    known_logs, known_traces = known_files(store)
    todo, unchanged = to_read(candidates, known_logs, known_traces, replace=replace)
    store.ensure_on_disk()  # the first write: a store opened at an empty folder is made now
    claims = Claims(store.root, job_id(paths, n, i), lease=lease_seconds())
    claims.register(_sizes(todo))
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
            work(
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
        report = report.merge(_record_leftovers(store, claims, skipped, strict, replace))
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


def _sizes(todo: list[Path]) -> list[tuple[str, int, int | None]]:
    sizes: list[tuple[str, int, int | None]] = []
    for p in todo:
        try:
            st = p.stat()
            sizes.append((str(p), st.st_size, st.st_mtime_ns))
        except OSError:
            sizes.append((str(p), 0, None))
    return sizes


def _record_leftovers(
    store: ParquetStore, claims: Claims, skipped: list[Problem], strict: bool, replace: bool
) -> IngestReport:
    """Quarantine rows for the folders skipped and the files every worker died reading
    (unless a late worker stored one)."""
    notes = list(skipped)
    if died := [p for p, why in claims.failures() if why == DIED]:
        stored_files = known_files(store)[0]
        notes += [Problem(p, None, None, DIED) for p in died if p not in stored_files]
    if not notes:
        return IngestReport()
    with store.lock():
        con = duckdb.connect(":memory:")
        try:
            part = ingest_chunk(
                con, [], {}, {}, {}, recorded_problems(store),
                strict=strict, replace_runs=replace, notes=notes,
                submit=lambda t, s: commit_held(store, t, s),
            )  # fmt: skip
        finally:
            con.close()
        store.publish()
    return part


def _run_workers(
    store: ParquetStore,
    claims: Claims,
    workers: int,
    strict: bool,
    replace: bool,
    per_claim: int,
    chunk_bytes: int,
    bar: object,
) -> IngestReport:
    """Run ``workers`` worker processes to the end; one progress line from the claim table."""
    import pickle
    import subprocess
    import sys
    import tempfile

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
            cmd = [sys.executable, "-m", "hylo_analytics.ingest._worker", json.dumps(opts)]
            procs.append((subprocess.Popen(cmd), Path(str(opts["report"]))))
        _show_progress(claims, [p for p, _ in procs], bar)
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


def _show_progress(claims: Claims, procs: list[Popen[bytes]], bar: object) -> None:
    """Advance ``bar`` by the claims finished until every worker has ended."""
    start = sum(claims.counts().get(s, 0) for s in ("done", "failed"))
    shown = 0
    try:
        while any(p.poll() is None for p in procs):
            finished = sum(claims.counts().get(s, 0) for s in ("done", "failed")) - start
            if finished > shown:
                bar.update(finished - shown)  # type: ignore[attr-defined]
                shown = finished
            time.sleep(0.2)
    except BaseException:
        for p in procs:
            p.kill()
            p.wait()
        raise
    finished = sum(claims.counts().get(s, 0) for s in ("done", "failed")) - start
    bar.update(max(0, finished - shown))  # type: ignore[attr-defined]


def work(
    store: ParquetStore,
    claims: Claims,
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
        if not moved(store, touched, before, paths, known):
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
) -> tuple[IngestReport, dict[str, tuple[str, str]], dict[str, tuple[str, str]], dict[str, Known]]:
    known_logs, known_traces = known_files(store)
    stored = stored_runs(store)
    before = dict(stored)
    files = list(read_files(paths))
    part = ingest_chunk(
        con, files, known_logs, known_traces, stored, recorded_problems(store),
        strict=strict, replace_runs=replace, submit=lambda t, s: commit_held(store, t, s),
    )  # fmt: skip
    return part, before, stored, known_logs
