"""Compaction: batches of one level merge into one of the next, rows and history kept."""

from __future__ import annotations

import itertools
import os
import shutil
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hylo_analytics import _schema
from hylo_analytics.errors import ConfigError
from hylo_analytics.store import manifest as _manifest
from hylo_analytics.store.batches import (
    _BATCHES,
    _EMPTY_SEQ,
    _STAGING,
    ROW_GROUP_ROWS,
    _fsync_dir,
    _make_staging,
    _write_error,
)
from hylo_analytics.store.lock import Locking, _age, _stale_owner, stale_seconds
from hylo_analytics.store.manifest import (
    SCHEMA_FINGERPRINT,
    Batch,
    Manifest,
)
from hylo_analytics.store.views import _path_literal, _quote


def compact_at() -> int:
    """Batches of one level past which a commit merges them (``HYLO_ANALYTICS_COMPACT_AT``).

    0 turns automatic compaction off.
    """
    env = os.environ.get("HYLO_ANALYTICS_COMPACT_AT", "").strip()
    if env:
        if not env.isdigit():
            raise ConfigError("", f"HYLO_ANALYTICS_COMPACT_AT must be a whole number, got {env!r}")
        return int(env)
    return COMPACT_AT


# Leveled merging: more than 4 commits merge into one level-1 batch, more than 4 of those into
# a level-2 batch, ... so 1,000 ingests leave at most 4 batches per level (~8 in all), and each
# row is rewritten about log5(commits) times: a query opens few files and an ingest stays cheap.
COMPACT_AT = 4


@dataclass(frozen=True)
class CompactionReport:
    """What a compaction merged: row counts per table are checked equal before publishing."""

    batches_before: int
    batches_after: int
    rows: Mapping[str, int]
    seconds: float

    def __str__(self) -> str:
        total = sum(self.rows.values())
        return (
            f"compacted {self.batches_before} batches into {self.batches_after} "
            f"({total:,} rows kept, every count checked) in {self.seconds:.2f} s"
        )


class Compacting(Locking):
    """The store's merging and garbage collection (see :class:`~hylo_analytics.store.ParquetStore`)."""

    def compact(self) -> CompactionReport:
        """Merge every batch into one (call with :meth:`lock` held); nothing is dropped.

        Each table's rows of every batch are rewritten into one file, runs in order, each row
        keeping its ``batch_seq``, so tombstones and history read exactly as before. The row
        count of every table is checked equal before the new manifest is published; a process
        killed mid-way leaves the old batches published and an unlisted folder, removed later.
        """
        manifest = self._read_manifest()
        merged = [b for b in manifest.batches if b.seq != _EMPTY_SEQ]
        return self._merge(manifest, merged, max((b.level for b in merged), default=0) + 1)

    def _merge_levels(self) -> None:
        """Merge the batches of any level that holds more than :func:`compact_at` of them."""
        limit = compact_at()
        while limit:
            manifest = self._read_manifest()
            levels: dict[int, list[Batch]] = {}
            for b in manifest.batches:
                if b.seq != _EMPTY_SEQ:
                    levels.setdefault(b.level, []).append(b)
            full = [lv for lv, bs in sorted(levels.items()) if len(bs) > limit]
            if not full:
                return
            self._merge(manifest, levels[full[0]], full[0] + 1)

    def _merge(self, manifest: Manifest, merged: list[Batch], level: int) -> CompactionReport:
        t0 = time.perf_counter()
        before = len(manifest.batches)
        if len(merged) < 2:
            return CompactionReport(before, before, {}, time.perf_counter() - t0)
        newest = max(b.seq for b in merged)
        name = f"{newest:020d}.c{uuid.uuid4().hex[:8]}"
        staging = self.root / _STAGING / name
        _make_staging(staging, f"compacting {len(merged)} batches")
        try:
            rows = _merge_batches(
                [self.root / _BATCHES / b.name for b in merged],
                staging,
                reconcile=not all(b.schema == SCHEMA_FINGERPRINT for b in merged),
                threads=self.threads,
            )
            _fsync_dir(staging)
            os.rename(staging, self.root / _BATCHES / name)
            _fsync_dir(self.root / _BATCHES)
        except (OSError, duckdb.IOException) as exc:
            shutil.rmtree(staging, ignore_errors=True)
            raise _write_error(
                exc, f"compacting {len(merged)} batches", staging, what="the merged batch"
            ) from exc
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        self._publish(manifest.merged(merged, Batch(name, newest, SCHEMA_FINGERPRINT, level)))
        self._collect_garbage()
        return CompactionReport(before, len(self.manifest.batches), rows, time.perf_counter() - t0)

    def clean_staging(self) -> None:
        """Remove what killed writers left behind (call with the lock held).

        Half-written commits in ``_staging``, published folders no manifest names (a commit
        that died before it was published) and batches retired by a compaction long enough
        ago that no query can still be reading them. A writer's own staging folder
        (``_staging/w-*``, which holds its unpublished batches) is removed only when that
        writer is gone: its process ended (same host), or its heartbeat is older than
        :func:`stale_seconds` (another host). Everything else in ``_staging`` is written
        under the lock, so it is a dead writer's.
        """
        staging = self.root / _STAGING
        if staging.is_dir():
            for path in staging.iterdir():
                if path.name.startswith("w-") and not _stale_owner(path):
                    continue
                if path.name.startswith(".w-") and _age(path) < stale_seconds():
                    continue  # an owner folder being made
                shutil.rmtree(path, ignore_errors=True)
        self._collect_garbage()

    def _collect_garbage(self) -> None:
        manifest = self._read_manifest()
        if not (self.root / _manifest.FILE).exists():
            return  # a store older than the manifest: every folder is the store
        listed = {b.name for b in manifest.batches} | {b.name for b in self._held}
        now = time.time()
        young = {n for n, at in manifest.retired if now - at < _manifest.RETIRE_SECONDS}
        gone = set()
        for path in (self.root / _BATCHES).iterdir():
            if path.name not in listed and path.name not in young:
                shutil.rmtree(path, ignore_errors=True)
                gone.add(path.name)
        if any(n in gone for n, _ in manifest.retired):
            _manifest.write_manifest(self.root, manifest.without_retired(gone))
            self._refresh()


def _merge_batches(
    folders: Sequence[Path], out: Path, *, reconcile: bool, threads: int
) -> dict[str, int]:
    """Write each table of ``folders`` as one file in ``out``; return the rows per table.

    DuckDB streams the copy (spilling to ``out``'s temp folder past 1 GB), so memory stays
    bounded whatever the store's size. Rows are ordered by run, then by the commit and the
    place they had, and cast to the declared schema (older files' missing columns are null).
    A count that differs after the copy aborts the compaction before anything is published.
    """
    con = duckdb.connect(":memory:")
    con.execute(f"SET threads TO {int(threads)}")
    con.execute("SET memory_limit = '1GB'")
    con.execute(f"SET temp_directory = '{_quote((out / '.tmp').as_posix())}'")
    rows: dict[str, int] = {}
    try:
        for name, schema in _schema.SCHEMAS.items():
            files = [f / f"{name}.parquet" for f in folders if (f / f"{name}.parquet").exists()]
            if not files:
                continue
            listed = "[" + ", ".join(_path_literal(f) for f in files) + "]"
            before = _count(
                con, f"read_parquet({listed}{', union_by_name = true' if reconcile else ''})"
            )
            if before == 0:
                continue
            presorted = None if reconcile or "run_id" not in schema.names else _in_run_order(files)
            if presorted is not None:  # already in the order below: a streaming copy, no sort
                listed = "[" + ", ".join(_path_literal(f) for f in presorted) + "]"
            src = (
                f"read_parquet({listed}, filename = true, file_row_number = true"
                f"{', union_by_name = true' if reconcile else ''})"
            )
            present = {r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {src}").fetchall()}
            cols = _schema.duckdb_columns(name, present)
            order = "batch_seq, filename, file_row_number"
            if "run_id" in schema.names:
                order = "run_id, " + order
            target = out / f"{name}.parquet"
            ordered = "" if presorted is not None else f" ORDER BY {order}"
            con.execute(
                f"COPY (SELECT {cols} FROM {src}{ordered}) TO '{_quote(target.as_posix())}' "
                f"(FORMAT parquet, COMPRESSION zstd, COMPRESSION_LEVEL 1, "
                f"ROW_GROUP_SIZE {ROW_GROUP_ROWS})"
            )
            after = _count(con, f"read_parquet({_path_literal(target)})")
            if after != before:
                raise RuntimeError(
                    f"compaction of {name}: {before} rows in, {after} rows out; nothing published"
                )
            rows[name] = after
    finally:
        con.close()
        shutil.rmtree(out / ".tmp", ignore_errors=True)
    return rows


def _in_run_order(files: Sequence[Path]) -> list[Path] | None:
    """``files`` in an order whose concatenation is already sorted as a merge sorts (by run,
    then batch, file and row), or None when none is.

    True when each file holds its runs in sorted, contiguous segments with no null run id
    (as every writer leaves them: commits move whole runs into order, merges sort) and no run
    is in two files: the files then follow each other by their first run, and each run's
    rows come from one file in their stored order. A merge of commits that each ingested
    other runs (the common case) is then a streaming copy; the sort it replaces held up to
    1 GB (2.8M trace events). Checked from the ``run_id`` column alone, a row group at a time.
    """
    spans: list[tuple[str, str, Path]] = []
    for path in files:
        reader = pq.ParquetFile(path)
        first: str | None = None
        last: str | None = None
        for i in range(reader.num_row_groups):
            col = reader.read_row_group(i, columns=["run_id"]).column(0)
            if col.null_count:
                return None
            runs = pc.run_end_encode(col.combine_chunks()).values.to_pylist()
            if last is not None and runs and runs[0] < last:
                return None
            if any(b <= a for a, b in itertools.pairwise(runs)):
                return None  # out of order, or a run in two segments
            if runs:
                first = runs[0] if first is None else first
                last = runs[-1]
        if first is not None and last is not None:
            spans.append((first, last, path))
    spans.sort(key=lambda s: s[0])
    if any(b[0] <= a[1] for a, b in itertools.pairwise(spans)):
        return None  # a run in two files: its rows interleave by batch
    return [path for _, _, path in spans]


def _count(con: duckdb.DuckDBPyConnection, relation: str) -> int:
    row = con.execute(f"SELECT count(*) FROM {relation}").fetchone()
    return int(row[0]) if row else 0
