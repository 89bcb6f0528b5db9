"""The ingest driver: ``ingest_paths``, the one entry; files walked, skipped, read, committed.

The walk goes one way, a chunk at a time: find the files (:mod:`._walk`), skip those stored
unchanged (:mod:`._identity`), read and hash the rest (:mod:`._files`), pass each chunk through
the readers to its commits (:mod:`._chunk`), publish it whole. With workers or a shard the
same chunk step runs under a claim table instead (:mod:`._sharded`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from hylo_analytics.errors import InputNotFoundError
from hylo_analytics.ingest._chunk import ingest_chunk
from hylo_analytics.ingest._common import release_memory
from hylo_analytics.ingest._files import read_files
from hylo_analytics.ingest._identity import known_files, recorded_problems, stored_runs, to_read
from hylo_analytics.ingest._registry import log_suffixes, readers
from hylo_analytics.ingest._report import IngestReport, Problem
from hylo_analytics.ingest._sharded import ingest_sharded
from hylo_analytics.ingest._walk import chunks, discover

if TYPE_CHECKING:
    from hylo_analytics.store import ParquetStore, Tombstone

__all__ = ["CHUNK_BYTES", "ingest_paths"]

CHUNK_BYTES = 64 * 2**20  # of log files per commit (traces on top); two are in memory at once


def ingest_paths(
    store: ParquetStore,
    paths: Sequence[Path],
    *,
    strict: bool = False,
    progress: bool = True,
    chunk_bytes: int = CHUNK_BYTES,
    replace: bool = False,
    workers: int = 1,
    shard: tuple[int, int] | None = None,
) -> IngestReport:
    """Ingest files and folders into ``store``; see :meth:`Store.ingest`.

    ``workers`` > 1 or a ``shard`` ``(i, n)`` run the sharded ingest (:mod:`._sharded`).

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
        raise InputNotFoundError(
            f"no such file or folder: {', '.join(missing)} (nothing was ingested)"
        )
    if workers != 1 or shard is not None:
        return ingest_sharded(
            store,
            paths,
            strict=strict,
            progress=progress,
            chunk_bytes=chunk_bytes,
            replace=replace,
            workers=workers,
            shard=shard or (0, 1),
        )
    with store.lock():
        store.clean_staging()
        skipped: list[Problem] = []  # symlinked folders not followed: recorded, not silent
        roots: dict[Path, Path] = {}  # each file found in a folder: that folder, to stay in
        candidates = discover(
            list(paths), skipped=skipped, roots=roots, suffixes=log_suffixes(readers())
        )
        report, unchanged = _ingest_found(
            store, candidates, skipped, roots,
            strict=strict, progress=progress, chunk_bytes=chunk_bytes, replace=replace,
        )  # fmt: skip
    return report.merge(
        IngestReport(
            files_seen=len(candidates),
            files_unchanged=unchanged,
            seconds=time.perf_counter() - t0,
        )
    )


def _ingest_found(
    store: ParquetStore,
    candidates: list[Path],
    skipped: list[Problem],
    roots: dict[Path, Path],
    *,
    strict: bool,
    progress: bool,
    chunk_bytes: int,
    replace: bool,
) -> tuple[IngestReport, int]:
    """Ingest the files found, chunk by chunk, under the store lock; returns the report and
    how many were skipped unread (stored unchanged)."""
    known_logs, known_traces = known_files(store)
    stored = stored_runs(store)
    recorded = recorded_problems(store)
    todo, unchanged = to_read(candidates, known_logs, known_traces, replace=replace)
    from tqdm.std import tqdm  # text bar: tqdm.auto warns without ipywidgets

    bar = tqdm(total=len(todo), unit="file", desc="ingest", disable=not progress or not todo)
    con = store.cursor()  # the parse's connection, on the store's database (threads set)
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

    report = IngestReport()
    try:
        for chunk in chunks(todo, chunk_bytes) or ([[]] if skipped else []):
            tops = [roots.get(p) for p in chunk]
            files = list(read_files(chunk, roots=tops, on_done=bar.update))
            part = ingest_chunk(
                con, files, known_logs, known_traces, stored, recorded,
                strict=strict, replace_runs=replace, submit=submit, notes=skipped,
            )  # fmt: skip
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
    return report, unchanged
