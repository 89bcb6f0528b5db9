"""The Parquet store and its DuckDB connection.

Layout::

    <store>/batches/<seq>/<table>.parquet   one folder per commit, written whole
    <store>/manifest.json                   the batch folders that are the store (published)
    <store>/_staging/                       commits being written (ignored by readers)
    <store>/views.sql                       the views, for the plain ``duckdb`` shell
    <store>/.lock                           one writer at a time

A commit is written to ``_staging``, moved into ``batches`` with one ``rename`` and published
by a new manifest (another ``rename``), so a reader (or a process killed mid-write) never sees
half of it: readers read the files the manifest names. Commits merge by levels: more than
:data:`COMPACT_AT` batches of one level merge into one of the next (rows, history and
``batch_seq`` kept), so 1,000 small ingests read about as fast as one (``compact`` merges all on
demand). Rows are never rewritten in place: a
later commit *supersedes* a run's rows by writing tombstones, and the ``stg_*`` views keep only
the rows no later tombstone covers. This is what makes re-ingesting a changed EvalLog, or
re-scoring a run, atomic.

This module is persistence only and imports no later stage. The pipeline's verbs (ingest,
score, aggregate, compare, report) are methods of :class:`hylo_analytics.api.Store`, a
subclass that sits above every stage; :func:`hylo_analytics.open_store` returns one.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import difflib
import errno
import fcntl
import functools
import json
import logging
import os
import re
import shutil
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hylo_analytics import _atomic, _manifest, _resolved, _schema
from hylo_analytics._manifest import SCHEMA_FINGERPRINT, Batch, Manifest, ManifestError, StoreError
from hylo_analytics._sql import (
    PREFERRED_VIEW,
    RULE_VIEW,
    duckdb_memory_limit,
    duckdb_temp_directory,
    duckdb_threads,
    load_views,
    view_sql,
)
from hylo_analytics._traces import register_trace_text
from hylo_analytics.errors import (
    RunSelectionError,
    StaleSnapshotError,
    StoreLockedError,
    StoreNotFoundError,
    StoreWriteError,
)
from hylo_analytics.metrics import default_registry

__all__ = [
    "COMPACT_AT",
    "RUN_FIELDS",
    "CompactionReport",
    "ManifestError",
    "ParquetStore",
    "RunSelectionError",
    "StaleSnapshotError",
    "StoreError",
    "StoreLockedError",
    "StoreNotFoundError",
    "StoreWriteError",
    "Tombstone",
    "commit_scores",
    "pinned",
]

# Up to this many runs a run filter is a list of ids (it reaches the scan's row groups); from
# here on a list can cost more than the scan, and readers check whether it names every run.
FEW_RUNS = 64

# The natural names are the current rows; raw history keeps its ``raw_`` prefix.
FRIENDLY_NAMES = (
    "runs", "samples", "events", "scores", "quarantine", "ingested_files", "policy_results",
    "comparisons", "resolved_scores", "trace_files",
)  # fmt: skip


log = logging.getLogger(__name__)


_BATCHES = "batches"
_STAGING = "_staging"
_EMPTY_SEQ = 0
_LOCK = ".lock"
_HOLDER = ".lock.json"  # who holds the lock: written after acquiring, for the waiters' message
_LOCK_POLL = 0.05
_SEQ_LOCK = ".seq.lock"  # held for the moment a writer takes a batch number
_OWNER = "owner.json"  # in a writer's staging folder: who writes there


def stale_seconds() -> float:
    """Seconds without a heartbeat after which another host's staging folder is a dead
    writer's (``HYLO_ANALYTICS_STALE_SECONDS``, default 600)."""
    env = os.environ.get("HYLO_ANALYTICS_STALE_SECONDS", "").strip()
    try:
        return float(env) if env else 600.0
    except ValueError:
        raise ValueError(
            f"HYLO_ANALYTICS_STALE_SECONDS must be a number of seconds, got {env!r}"
        ) from None


def _age(path: Path) -> float:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return float("inf")


def process_alive(host: str, pid: int, start: str | None) -> bool | None:
    """Whether the process ``pid`` (started at ``start``) of ``host`` still runs; ``None``
    when that cannot be told from here (another host)."""
    if host != socket.gethostname():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, another user's
    return start is None or _process_start(pid) in (None, start)


def _stale_owner(path: Path) -> bool:
    """A writer's staging folder whose writer is gone (see :meth:`ParquetStore.clean_staging`)."""
    try:
        info = json.loads((path / _OWNER).read_text())
        alive = process_alive(str(info["host"]), int(info["pid"]), info.get("start"))
    except (OSError, ValueError, KeyError, TypeError):
        return _age(path) > stale_seconds()
    if alive is None:
        return _age(path / _OWNER) > stale_seconds()
    return not alive


def lock_timeout_from_env() -> float | None:
    """``HYLO_ANALYTICS_LOCK_TIMEOUT`` seconds (unset or empty: wait for as long as it takes)."""
    env = os.environ.get("HYLO_ANALYTICS_LOCK_TIMEOUT", "").strip()
    if not env:
        return None
    try:
        value = float(env)
    except ValueError:
        value = -1.0
    if not value >= 0:  # also NaN
        raise ValueError(
            f"HYLO_ANALYTICS_LOCK_TIMEOUT must be a number of seconds >= 0, got {env!r}"
        )
    return value


def compact_at() -> int:
    """Batches of one level past which a commit merges them (``HYLO_ANALYTICS_COMPACT_AT``).

    0 turns automatic compaction off.
    """
    env = os.environ.get("HYLO_ANALYTICS_COMPACT_AT", "").strip()
    if env:
        if not env.isdigit():
            raise ValueError(f"HYLO_ANALYTICS_COMPACT_AT must be a whole number, got {env!r}")
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


@dataclass(frozen=True)
class Tombstone:
    """Rows of ``table`` for ``run_id`` (and ``source``, when given) in earlier commits are dead."""

    table: str
    run_id: str
    source: str | None = None


class ParquetStore:
    """A folder of Parquet files with a DuckDB connection whose views read them.

    ``threads``: DuckDB's thread count (default: ``HYLO_ANALYTICS_THREADS``, else every core).
    Opening a store writes nothing (it may be read-only): what is missing is made in memory,
    and on disk by the first writer. A folder that holds no store (``create=True``) reads as
    an empty store and nothing is created on disk until the first write (an ingest, a commit):
    a typo in a path never leaves an empty store behind. ``create=False`` opens an existing
    store only (:class:`StoreNotFoundError` otherwise). ``lock_timeout``: seconds a write waits for another writer before
    :class:`StoreLockedError` (default ``HYLO_ANALYTICS_LOCK_TIMEOUT``, else no limit).
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        threads: int | None = None,
        create: bool = True,
        lock_timeout: float | None = None,
    ) -> None:
        self.root = Path(root).resolve()
        self.lock_timeout = lock_timeout if lock_timeout is not None else lock_timeout_from_env()
        if not (self.root / _BATCHES).is_dir() and not create:
            raise StoreNotFoundError(
                f"no store at {self.root} (ingest into it first: "
                f"hylo-analytics ingest PATH --store {root})"
            )
        # tables whose empty file in batch 0 is missing or of older schemas (read-only stores,
        # and a store not yet on disk: it reads as empty until its first write makes it)
        self._stale_empty = _stale_empty_tables(self.root / _BATCHES / f"{_EMPTY_SEQ:020d}")
        self._con = duckdb.connect(":memory:")
        register_trace_text(self._con)  # a trace file's text, for the readers of raw lines
        self.threads = threads or duckdb_threads()
        self._con.execute(f"SET threads TO {int(self.threads)}")
        self._con.execute("SET parquet_metadata_cache = true")
        # bounded: a question over a large store spills to disk rather than exhaust the machine
        self._con.execute(f"SET memory_limit = '{duckdb_memory_limit()}'")
        self._con.execute(f"SET temp_directory = '{_quote(duckdb_temp_directory())}'")
        self._statements: list[str] = []
        self._held: list[Batch] = []  # written, not yet published (commit(publish=False))
        self._resolver: duckdb.DuckDBPyConnection | None = None  # resolves at publish
        self._owner_id = uuid.uuid4().hex[:12]  # names this writer's staging folder
        self._pins = 0  # open snapshot() blocks: the views stay on one manifest meanwhile
        self._pins_lock = threading.Lock()  # a server's threads pin and unpin concurrently
        # the stamp before the manifest: a publish in between is then noticed by ``con``
        self._stamp: tuple[int, int, int] | None = _manifest.stamp(self.root, self.root / _BATCHES)
        self.manifest = self._read_published()
        self._create_views(write=False)

    @property
    def exists(self) -> bool:
        """Whether the store is on disk: a store opened at a folder that holds none (with
        ``create=True``) reads as empty and is made by its first write."""
        return (self.root / _BATCHES).is_dir()

    def ensure_on_disk(self) -> None:
        """Make the store's folders if it is not on disk yet (the first write does)."""
        if self.exists:
            return
        try:
            (self.root / _BATCHES).mkdir(parents=True, exist_ok=True)
            self._ensure_empty_batch()  # made whole now, as a store opened after this finds it
        except OSError as exc:
            raise _write_error(exc, f"creating the store {self.root}") from exc
        self._refresh()
        self._write_views_file()

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The DuckDB connection, its ``raw_*`` views on the newest published manifest.

        Another process may commit or compact at any time: a ``stat`` of the manifest per use
        notices it, and the raw views are re-pointed before the query runs, except inside
        :meth:`snapshot`, where every query reads the state the snapshot began with.
        """
        if not self._pins and _manifest.stamp(self.root, self.root / _BATCHES) != self._stamp:
            self._refresh()
        return self._con

    @contextmanager
    def snapshot(self) -> Iterator[ParquetStore]:
        """Pin one published state for an operation that runs several queries.

        A compare, an aggregate or a report reads the runs, then the scores, then the
        metadata: without a pin a commit landing between two of those reads would mix two
        states in one answer. Inside the block the views are not re-pointed at newer
        manifests (this process's own commits still show); blocks nest. A snapshot held past
        the retirement period may find its files collected: :class:`StaleSnapshotError`.
        """
        with self._pins_lock:
            if not self._pins:
                self.con  # noqa: B018 -- refresh once, at the operation's start
            self._pins += 1
        try:
            yield self
        finally:
            with self._pins_lock:
                self._pins -= 1

    # -- reading -------------------------------------------------------------------------

    def sql(
        self, query: str, params: Sequence[Any] | Mapping[str, Any] | None = None
    ) -> pl.DataFrame:
        """Run ``query`` against the store's views and return a polars frame.

        A query planned on a manifest whose retired files a later writer then collected (it
        ran, or its snapshot was held, past :data:`~hylo_analytics._manifest.RETIRE_SECONDS`)
        is re-run on the newest manifest; inside :meth:`snapshot` that would mix two states,
        so it raises :class:`StaleSnapshotError` instead. Never rows of a partial file list.
        """
        try:
            frame: pl.DataFrame = self.con.sql(query, params=params).pl()
        except duckdb.IOException as exc:
            self._raise_if_stale(exc)
            frame = self.con.sql(query, params=params).pl()
        return frame

    def _raise_if_stale(self, exc: duckdb.IOException) -> None:
        """Re-raise ``exc`` unless its cause is collected batch folders; then refresh (or,
        with a snapshot pinned, raise :class:`StaleSnapshotError`)."""
        gone = [
            b.name for b in self.manifest.batches if not (self.root / _BATCHES / b.name).is_dir()
        ]
        if not gone:
            raise exc
        if self._pins:
            raise StaleSnapshotError(
                f"{self.root}: the store changed under this snapshot and the batches it reads "
                f"({', '.join(gone[:3])}) were collected, retired more than "
                f"{_manifest.RETIRE_SECONDS:.0f} s ago; run the operation again"
            ) from exc
        self._refresh()

    def table(self, name: str) -> pl.LazyFrame:
        """The current rows of a table (``runs``, ``samples``, ...) or any view, lazily."""
        view = f"stg_{name}" if name in _schema.SCHEMAS else name
        lazy: pl.LazyFrame = self.con.sql(f"SELECT * FROM {_ident(view)}").pl(lazy=True)
        return lazy

    def runs(self) -> pl.DataFrame:
        """One row per run with its sample counts, newest first."""
        return self.sql("SELECT * FROM mart_runs ORDER BY ingested_at DESC, run_id")

    def resolve_run(self, spec: str) -> str:
        """The one run ``spec`` names: a run id, a unique id prefix, or a selector.

        A selector is ``field=value`` pairs joined by commas, each field one of
        :data:`RUN_FIELDS` (``agent=xvla,benchmark=libero_spatial``; ``benchmark`` also
        matches the split, the name a suite usually goes by). No match or several are errors
        that list what the store holds.
        """
        return self.resolve_runs([spec])[0]

    def resolve_runs(self, specs: Sequence[str]) -> list[str]:
        """Each of ``specs`` resolved by :meth:`resolve_run`, in order, without repeats.

        One read of the runs table for all of them (a compare of 1,000 candidates names
        1,000 runs).
        """
        if len(specs) < FEW_RUNS:  # a few run ids (the usual case): read those rows, not the table
            found = self.sql(
                "SELECT run_id FROM stg_runs WHERE list_contains($ids, run_id)",
                {"ids": list(specs)},
            )["run_id"]
            if found.n_unique() == len(set(specs)):
                return list(dict.fromkeys(specs))
        runs = self._run_fields()
        ids = frozenset(runs["run_id"].to_list())
        return list(dict.fromkeys(_resolve(spec, runs, ids) for spec in specs))

    def _run_fields(self) -> pl.DataFrame:
        return self.sql(
            "SELECT run_id, agent_name, agent_version, benchmark_id, split, source_format "
            "FROM stg_runs ORDER BY run_id"
        )

    # -- writing -------------------------------------------------------------------------

    @contextmanager
    def lock(self, timeout: float | None = None, *, quiet: bool = False) -> Iterator[None]:
        """Hold the store's writer lock; another writer holding it is waited for.

        The wait is announced once (a ``logging`` warning naming the holder, shown on stderr
        in a terminal and in Jupyter) and lasts at most ``timeout`` seconds (default
        :attr:`lock_timeout`), then :class:`StoreLockedError`. ``flock``: a killed holder
        releases the lock with its last file descriptor. ``quiet``: no warning (workers of one
        sharded ingest wait for each other's publish as a matter of course).
        """
        timeout = self.lock_timeout if timeout is None else timeout
        self.ensure_on_disk()  # a store opened at an empty folder is made by its first writer
        path = self.root / _LOCK
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as exc:
            raise _write_error(exc, "locking the store", prep="at") from exc
        try:
            _acquire(fd, self.root, timeout, quiet=quiet)
            try:
                _write_holder(self.root)
                if self._stale_empty:  # what a read-only open made in memory, now on disk
                    try:
                        self._ensure_empty_batch()
                    except OSError as exc:
                        raise _write_error(exc, "writing the empty batch 0") from exc
                    self._refresh()
                _ = self.con  # the newest manifest's views, before writing them out
                self._write_views_file()
                yield
            finally:
                _clear_holder(self.root)
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    @contextmanager
    def lock_timeout_for(self, timeout: float | None) -> Iterator[None]:
        """:attr:`lock_timeout` set to ``timeout`` (None: unchanged) for one call's writes."""
        before = self.lock_timeout
        if timeout is not None:
            self.lock_timeout = timeout
        try:
            yield
        finally:
            self.lock_timeout = before

    def commit(
        self,
        tables: Mapping[str, pa.Table],
        tombstones: Sequence[Tombstone] = (),
        *,
        publish: bool = True,
    ) -> int:
        """Write one batch atomically and return its sequence number.

        Call with :meth:`lock` held, except with ``publish=False``: several workers write
        their batches at once, each in its own staging folder, and take the lock only to
        :meth:`publish`. Every table is conformed to its declared schema and stamped with the
        batch's ``batch_seq``. With ``publish=False`` the batch is written but readers do not
        see it until :meth:`publish` publishes it with every other batch held back so far, in
        one manifest: a large write in bounded memory, seen whole.
        """
        _check_utf8(tables)
        self.ensure_on_disk()
        manifest = self._read_manifest()
        if not (self.root / _manifest.FILE).exists():
            # a store older than the manifest lists its folders: publish that list first, so
            # the new folder stays unseen until its own manifest names it
            _manifest.write_manifest(self.root, manifest)
        seq, staging = self._reserve_seq(manifest)
        try:
            if tombstones:
                tables = {**tables, "tombstones": _tombstone_table(tombstones)}
            for name, table in tables.items():
                if table.num_rows == 0:
                    continue
                if "batch_seq" in table.column_names:
                    table = table.drop_columns("batch_seq")
                stamped = table.append_column(
                    "batch_seq", pa.repeat(pa.scalar(seq, pa.int64()), table.num_rows)
                )
                _write_parquet(_schema.conform(stamped, name), staging / f"{name}.parquet")
            _fsync_dir(staging)
            # whole, still unpublished: in this writer's own staging folder until publish
            os.replace(staging, staging.with_suffix(""))
        except OSError as exc:
            shutil.rmtree(staging, ignore_errors=True)
            self._drop_owner_if_idle()
            raise _write_error(exc, f"writing batch {seq}", staging) from exc
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            self._drop_owner_if_idle()
            raise
        self._held.append(Batch(f"{seq:020d}", seq, SCHEMA_FINGERPRINT))
        if publish:
            self.publish()
        return seq

    def discard(self) -> None:
        """Remove the batches written with ``publish=False`` and not published (a failed write)."""
        for batch in self._held:  # staged, or moved by a publish that then failed
            shutil.rmtree(self._owner_dir() / batch.name, ignore_errors=True)
            shutil.rmtree(self.root / _BATCHES / batch.name, ignore_errors=True)
        self._held.clear()
        self._drop_owner_if_idle()

    def publish(self) -> None:
        """Publish the batches written with ``publish=False`` (with the lock held), then merge.

        Each held folder moves into ``batches`` (a killed publish leaves unlisted folders
        there, collected under the lock), then one new manifest names them all.
        """
        if not self._held:
            return
        self._resolve_held()
        owner = self._owner_dir()
        for batch in self._held:
            src = owner / batch.name
            if src.is_dir():  # written by this process, moved once
                try:
                    os.rename(src, self.root / _BATCHES / batch.name)
                except OSError as exc:
                    raise _write_error(exc, f"publishing batch {batch.seq}", src) from exc
        _fsync_dir(self.root / _BATCHES)
        manifest = self._read_manifest()
        for batch in self._held:
            manifest = manifest.with_batch(batch)
        self._publish(dataclasses.replace(manifest, resolved=True))
        self._held.clear()
        self._drop_owner_if_idle()
        self._merge_levels()

    def _resolve_held(self) -> None:
        """Write the resolved scores of the runs the held batches touch into the last of them.

        Called under the lock, before the held batches are published: the rule
        (``int_scores_resolution``) is evaluated over the published batches plus the held
        ones, i.e. the store as the new manifest will show it, for the touched runs only (for
        every run when the store was not resolved yet: a store written by an older version).
        The rows and a tombstone per run for its older rows go into the newest held batch
        (still unseen), so new scores and their resolution are published by one manifest.
        """
        manifest = self._read_manifest()
        owner = self._owner_dir()
        held = [
            owner / b.name if (owner / b.name).is_dir() else self.root / _BATCHES / b.name
            for b in self._held
        ]
        runs = _resolved.touched_runs(held) if manifest.resolved else None
        if runs is not None and not runs:
            return
        folders = [self.root / _BATCHES / b.name for b in manifest.batches] + held
        last, seq = held[-1], self._held[-1].seq
        reconcile = not all(
            b.schema == SCHEMA_FINGERPRINT for b in (*manifest.batches, *self._held)
        )
        work = last / f".resolve-{uuid.uuid4().hex[:8]}"
        try:
            if self._resolver is None:
                spill = Path(f"{duckdb_temp_directory()}-publish-{self._owner_id}")
                self._resolver = _resolved.connection(self.threads, spill)
            superseded = (
                sorted(runs)
                if runs is not None
                else _resolved.every_run(self._resolver, folders, reconcile=reconcile)
            )
            work.mkdir()
            # the tombstones first, whole: the resolution then reads the batch as it will be
            stones = _tombstone_table([Tombstone(_resolved.TABLE, r) for r in superseded])
            stones = _schema.conform(
                stones.append_column(
                    "batch_seq", pa.repeat(pa.scalar(seq, pa.int64()), stones.num_rows)
                ),
                "tombstones",
            )
            if (last / "tombstones.parquet").exists():
                stones = pa.concat_tables([pq.read_table(last / "tombstones.parquet"), stones])
            if stones.num_rows:
                _write_parquet(stones, work / "tombstones.parquet")
                os.replace(work / "tombstones.parquet", last / "tombstones.parquet")
            _resolved.write_resolved(
                self._resolver,
                folders,
                runs,
                seq,
                work,
                reconcile=reconcile,
                row_group_rows=ROW_GROUP_ROWS,
            )
            for path in work.glob("*.parquet"):
                os.replace(path, last / path.name)
            _fsync_dir(last)
        except (OSError, duckdb.IOException) as exc:
            raise _write_error(exc, f"resolving the scores of batch {seq}", last) from exc
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def heartbeat(self) -> None:
        """Say this writer's staging folder is in use (its ``owner.json`` mtime, read by
        :meth:`clean_staging` of writers on other hosts, which cannot see our pid)."""
        with suppress(OSError):
            os.utime(self._owner_dir() / _OWNER)

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

    def data_version(self) -> int:
        """The newest published commit: it changes whenever the store's rows may have."""
        return max((b.seq for b in self._read_manifest().batches), default=_EMPTY_SEQ)

    # -- internals -----------------------------------------------------------------------

    def _read_manifest(self) -> Manifest:
        return _manifest.read_manifest(self.root, self.root / _BATCHES)

    def _read_published(self) -> Manifest:
        """The newest manifest, re-read if one it names was collected meanwhile.

        A manifest read just before a writer published a newer one and collected batches it
        retired long ago names a folder that is gone (a :class:`ManifestError`): it is read
        again, and only a manifest that keeps naming a missing folder is an error.
        """
        for attempt in range(3):
            try:
                return self._read_manifest()
            except ManifestError:
                if attempt == 2:
                    raise
                time.sleep(0.01 * (attempt + 1))
        raise AssertionError("unreachable")

    def _reserve_seq(self, manifest: Manifest) -> tuple[int, Path]:
        """A sequence number no other writer holds, with its staging folder (``<seq>.tmp``).

        Writers commit without the store lock, so numbers are handed out under a short lock
        of their own: the next after the manifest's, every folder in ``batches`` (a killed
        publish may hold one) and every writer's unpublished batches.
        """
        fd = os.open(self.root / _SEQ_LOCK, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            # staging first: a batch published meanwhile moved into batches, listed second
            names = _staged_names(self.root / _STAGING)
            names += [p.name for p in (self.root / _BATCHES).iterdir()]
            seqs = [int(n) for n in names if n.isdigit()]
            seq = max(manifest.next_seq, max(seqs, default=_EMPTY_SEQ) + 1)
            staging = self._owner_dir(create=f"writing batch {seq}") / f"{seq:020d}.tmp"
            _make_staging(staging, f"writing batch {seq}")
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
        return seq, staging

    def _owner_dir(self, *, create: str = "") -> Path:
        """This writer's staging folder, ``_staging/w-<id>`` with an ``owner.json`` naming the
        process (made whole by a rename, so a folder without one is never a live writer's)."""
        path = self.root / _STAGING / f"w-{self._owner_id}"
        if create and not path.is_dir():
            tmp = self.root / _STAGING / f".w-{self._owner_id}.tmp"
            try:
                tmp.mkdir(parents=True, exist_ok=True)
                info = {
                    "pid": os.getpid(),
                    "start": _process_start(os.getpid()),
                    "host": socket.gethostname(),
                }
                (tmp / _OWNER).write_text(json.dumps(info))
                os.replace(tmp, path)
            except OSError as exc:
                shutil.rmtree(tmp, ignore_errors=True)
                raise _write_error(exc, create, tmp) from exc
        return path

    def _drop_owner_if_idle(self) -> None:
        if not self._held:
            shutil.rmtree(self._owner_dir(), ignore_errors=True)

    def _publish(self, manifest: Manifest) -> None:
        _manifest.write_manifest(self.root, manifest)
        _fsync_dir(self.root)
        self._refresh()
        self._write_views_file()

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

    def _refresh(self) -> None:
        """Point the ``raw_*`` views at the files of the newest manifest."""
        self._stamp = _manifest.stamp(self.root, self.root / _BATCHES)
        self.manifest = self._read_published()
        raw = [f"CREATE OR REPLACE VIEW {n} AS {body}" for n, body in self._raw_view_sql()]
        for stmt in raw:
            self._con.execute(stmt)
        if self._statements:
            self._statements = raw + self._statements[len(raw) :]
            self._point_preferred()

    def _point_preferred(self) -> None:
        """``int_scores_preferred`` on the materialized resolution, or on the rule itself when
        the published store is not resolved (an older version wrote it last): same rows."""
        body = view_sql(PREFERRED_VIEW) if self.manifest.resolved else f"SELECT * FROM {RULE_VIEW}"
        stmt = f"CREATE OR REPLACE VIEW {PREFERRED_VIEW} AS\n{body}"
        head = f"CREATE OR REPLACE VIEW {PREFERRED_VIEW} AS"
        at = next(i for i, st in enumerate(self._statements) if st.startswith(head))
        if self._statements[at] != stmt:
            self._con.execute(stmt)
            self._statements[at] = stmt

    def _ensure_empty_batch(self) -> None:
        # An empty file per table keeps every file list non-empty, so views bind on a new store.
        # (rewritten when a table's schema changed, so the batch always has today's schemas)
        empty_dir = self.root / _BATCHES / f"{_EMPTY_SEQ:020d}"
        missing = sorted(_stale_empty_tables(empty_dir))
        if not missing:
            self._stale_empty = frozenset()
            return
        tmp = self.root / _STAGING / f"empty-{uuid.uuid4().hex[:8]}"
        tmp.mkdir(parents=True)
        for name in _schema.TABLES:
            _write_parquet(_schema.empty(name), tmp / f"{name}.parquet")
        empty_dir.mkdir(exist_ok=True)
        for name in missing:
            os.replace(tmp / f"{name}.parquet", empty_dir / f"{name}.parquet")
        shutil.rmtree(tmp, ignore_errors=True)
        self._stale_empty = frozenset()

    def _raw_view_sql(self) -> list[tuple[str, str]]:
        """``raw_<table>``: the table's files in the published batches, oldest first.

        Files written with today's schemas are read as they are; a store holding batches of
        older schemas reconciles columns by name until it is compacted.
        """
        by_name = "" if self.manifest.current_schemas else ", union_by_name = true"
        out = []
        for name in _schema.TABLES:
            stale = name in self._stale_empty  # batch 0 lacks today's empty file: typed in SQL
            files = [
                self.root / _BATCHES / b.name / f"{name}.parquet"
                for b in self.manifest.batches
                if not (stale and b.seq == _EMPTY_SEQ)
            ]
            listed = ", ".join(_path_literal(f) for f in files if f.exists())
            if not stale:
                out.append((f"raw_{name}", f"SELECT * FROM read_parquet([{listed}]{by_name})"))
                continue
            empty = _typed_empty_sql(name)
            if listed:
                cols = ", ".join(f'"{f}"' for f in _schema.SCHEMAS[name].names)
                empty = (
                    f"SELECT {cols} FROM (SELECT * FROM read_parquet([{listed}], "
                    f"union_by_name = true) UNION ALL BY NAME {empty})"
                )
            out.append((f"raw_{name}", empty))
        return out

    def _create_views(self, *, write: bool) -> None:
        statements = [
            f"CREATE OR REPLACE VIEW {name} AS {body}" for name, body in self._raw_view_sql()
        ]
        statements.append(f"CREATE OR REPLACE VIEW metric_specs AS {_metric_specs_sql()}")
        statements += load_views(self._con, prelude=statements)
        for name in FRIENDLY_NAMES:
            stmt = f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM stg_{name}"
            self._con.execute(stmt)
            statements.append(stmt)
        self._statements = statements
        self._point_preferred()
        if write:  # an existing store's copy is brought up to date by its next writer
            self._write_views_file()

    def _write_views_file(self) -> None:
        """``views.sql`` for the plain ``duckdb`` shell, when it changed and can be written.

        A convenience copy of the views, written by writers (opening an existing store writes
        nothing): a full disk leaves the old one, the store itself is unaffected.
        """
        path = self.root / "views.sql"
        text = ";\n".join(self._statements) + ";\n"
        try:
            if path.read_text() == text:
                return
        except (OSError, UnicodeDecodeError):
            pass
        try:
            _atomic.write_text(path, text)
        except OSError as exc:
            log.debug("views.sql of %s not updated: %s", self.root, exc)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.root)!r})"


def _metric_specs_sql() -> str:
    """The MetricSpec registry as rows, so SQL views share Python's metric directions.

    One row per name a metric answers to (its id and each alias), with the canonical id.
    """
    reg = default_registry()

    def lit(v: object) -> str:
        if v is None:
            return "NULL"
        if isinstance(v, bool):
            return "true" if v else "false"
        return "'" + str(v).replace("'", "''") + "'"

    rows = []
    for name, mid in sorted(reg.alias_map().items()):
        spec = reg.get(mid)
        cells = (name, mid, spec.display_name, spec.output_unit, spec.higher_is_better, spec.kind)
        rows.append("(" + ", ".join(lit(c) for c in cells) + ")")
    return (
        "SELECT * FROM (VALUES " + ", ".join(rows) + ") AS t(metric, metric_id, display_name, "
        "unit, higher_is_better, kind)"
    )


def _resolve(spec: str, runs: pl.DataFrame, ids: frozenset[str] | None = None) -> str:
    """The rule of :meth:`ParquetStore.resolve_run` over the runs table ``runs`` (ids ``ids``)."""
    if spec in (ids if ids is not None else frozenset(runs["run_id"].to_list())):
        return spec
    if "=" in spec:
        hits = runs.filter(_selector(spec))
    else:
        hits = runs.filter(pl.col("run_id").str.starts_with(spec))
    if hits.height == 1:
        return str(hits["run_id"].item())
    if hits.height == 0:
        known = runs["run_id"].to_list()
        near = difflib.get_close_matches(spec, known, n=3, cutoff=0.4)
        hint = f"; did you mean {', '.join(near)}?" if near else ""
        raise RunSelectionError(
            f"no run matches {spec!r}{hint} (the store holds {len(known)} run(s): "
            "see 'hylo-analytics runs'; select by agent=, version=, benchmark=, split=)"
        )
    listed = ", ".join(
        f"{r['run_id']} (agent {r['agent_name']}, version {r['agent_version']}, "
        f"benchmark {r['benchmark_id']}, split {r['split']})"
        for r in hits.head(5).iter_rows(named=True)
    )
    raise RunSelectionError(
        f"{spec!r} matches {hits.height} runs, add a field to pick one: {listed}"
    )


RUN_FIELDS: dict[str, tuple[str, ...]] = {
    "run": ("run_id",),
    "agent": ("agent_name",),
    "version": ("agent_version",),
    "benchmark": ("benchmark_id", "split"),
    "split": ("split",),
    "format": ("source_format",),
}


def _selector(spec: str) -> pl.Expr:
    cond = pl.lit(True)
    for part in spec.split(","):
        field, sep, value = part.partition("=")
        field, value = field.strip(), value.strip()
        if not sep or field not in RUN_FIELDS or not value:
            raise ValueError(
                f"run selector {spec!r}: expected field=value pairs joined by commas, fields "
                f"{', '.join(RUN_FIELDS)}; got {part.strip()!r}"
            )
        cond &= pl.any_horizontal(pl.col(c) == value for c in RUN_FIELDS[field])
    return cond


_P = ParamSpec("_P")
_R = TypeVar("_R")


def pinned(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """Run ``fn`` on one :meth:`~ParquetStore.snapshot` of its first argument (when a store).

    For the public reads that run several queries for one answer (compare, aggregate, a
    report, score computation): each then answers from one committed state. Not for a
    writer's own reads: those must start after it holds the lock, not before.
    """

    @functools.wraps(fn)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        if args and isinstance(args[0], ParquetStore):
            with args[0].snapshot():
                return fn(*args, **kwargs)
        return fn(*args, **kwargs)

    return wrapper


def commit_scores(store: ParquetStore, scores: pa.Table) -> int:
    """Commit score rows, superseding each (run, source) they cover; returns the batch seq.

    Re-deriving replaces the earlier derived rows of the same runs, so there are no duplicates.
    """
    pairs = pl.from_arrow(scores.select(["run_id", "source"]))
    assert isinstance(pairs, pl.DataFrame)
    stones = [Tombstone("scores", r, s) for r, s in pairs.unique().sort("run_id").rows()]
    with store.lock():
        return store.commit({"scores": scores}, tombstones=stones)


def _stale_empty_tables(empty_dir: Path) -> frozenset[str]:
    return frozenset(n for n in _schema.TABLES if not _has_schema(empty_dir / f"{n}.parquet", n))


def _typed_empty_sql(name: str) -> str:
    return f"SELECT {_schema.duckdb_columns(name, set())} WHERE false"


def _has_schema(path: Path, name: str) -> bool:
    try:
        found = pq.read_schema(path)
    except (FileNotFoundError, pa.ArrowInvalid):
        return False
    return bool(found.remove_metadata().equals(_schema.SCHEMAS[name].remove_metadata()))


def _tombstone_table(tombstones: Sequence[Tombstone]) -> pa.Table:
    return pa.table(
        {
            "table_name": [t.table for t in tombstones],
            "run_id": [t.run_id for t in tombstones],
            "source": [t.source for t in tombstones],
        }
    )


# Free text and JSON: a dictionary would only be built to be thrown away.
_NO_DICTIONARY = {
    "raw",
    "extra",
    "results",
    "metadata",
    "explanation",
    "agent_components",
    "error",
}


# Small enough that a run's rows span few groups, large enough that a group's footer is cheap.
ROW_GROUP_ROWS = 65_536


def _check_utf8(tables: Mapping[str, pa.Table]) -> None:
    """Refuse a commit holding a string that is not valid UTF-8, before anything is written.

    The readers validate their input; this is the last line of defence, because one bad
    string in a Parquet file makes every later query of the store fail. Only string columns
    are checked (a full validation of the other columns costs as much again and cannot fail
    in this way).
    """
    for name, table in tables.items():
        for field, column in zip(table.schema, table.columns, strict=True):
            if not (pa.types.is_string(field.type) or pa.types.is_large_string(field.type)):
                continue
            try:
                column.validate(full=True)
            except pa.ArrowInvalid as exc:
                raise ValueError(
                    f"refusing to commit table {name!r}: column {field.name!r} holds a string "
                    f"that is not valid UTF-8 ({exc}); nothing was written"
                ) from None


def _write_parquet(table: pa.Table, path: Path) -> None:
    """Write ``table`` with each run's rows together, in run order, in 64Ki-row groups.

    Readers ask for a few runs of thousands: with the runs contiguous and sorted, each row
    group's min/max statistics on ``run_id`` let DuckDB skip every group of other runs (a
    two-run compare over 1,000 runs reads 4 MB instead of every column of the file).
    """
    dictionary = [
        f.name for f in table.schema if pa.types.is_string(f.type) and f.name not in _NO_DICTIONARY
    ]
    pq.write_table(
        _runs_in_order(table),
        path,
        # a trace file's bytes are one zstd frame already (trace_files.data)
        compression={f.name: "none" if f.name == "data" else "zstd" for f in table.schema},
        compression_level={f.name: 1 for f in table.schema if f.name != "data"},
        use_dictionary=dictionary,
        row_group_size=ROW_GROUP_ROWS,
    )


def _runs_in_order(table: pa.Table) -> pa.Table:
    """``table`` with its rows grouped by ``run_id`` in sorted order, rows of a run as they were.

    Writers emit a run's rows together, so this moves whole slices (zero-copy) rather than
    taking rows one by one: a stable sort of the run segments, not of the rows.
    """
    if "run_id" not in table.column_names or table.num_rows < 2:
        return table
    ends = pc.run_end_encode(table.column("run_id").combine_chunks(), run_end_type=pa.int64())
    run_ends = ends.run_ends.to_numpy()
    values = ends.values
    if len(run_ends) == 1:
        return table
    order = np.argsort(
        np.asarray(values.fill_null("").to_numpy(zero_copy_only=False)), kind="stable"
    )
    if np.all(order[1:] > order[:-1]):
        return table
    starts = np.concatenate([[0], run_ends[:-1]])
    slices = [table.slice(int(starts[i]), int(run_ends[i] - starts[i])) for i in order]
    return pa.concat_tables(slices)


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
            con.execute(
                f"COPY (SELECT {cols} FROM {src} ORDER BY {order}) TO '{_quote(target.as_posix())}' "
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


def _count(con: duckdb.DuckDBPyConnection, relation: str) -> int:
    row = con.execute(f"SELECT count(*) FROM {relation}").fetchone()
    return int(row[0]) if row else 0


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _staged_names(staging: Path) -> list[str]:
    """The batch names in every writer's staging folder (``w-*/<seq>``, ``<seq>.tmp``).

    Other writers remove their folder after a publish while this one lists them, so a folder
    gone between the listing and its reading is skipped (``Path.glob`` raised there).
    """
    try:
        owners = [e.path for e in os.scandir(staging) if e.name.startswith("w-")]
    except FileNotFoundError:
        return []
    names: list[str] = []
    for owner in owners:
        try:
            names += [n.partition(".")[0] for n in os.listdir(owner)]
        except (FileNotFoundError, NotADirectoryError):
            continue
    return names


def _make_staging(staging: Path, doing: str) -> None:
    try:
        staging.mkdir(parents=True)
    except OSError as exc:
        raise _write_error(exc, doing, staging) from exc


def _write_error(
    exc: BaseException,
    doing: str,
    path: Path | None = None,
    *,
    what: str = "nothing",
    prep: str = "to",
) -> StoreWriteError:
    """The clear message of a failed write: why, doing what, where, and that nothing changed.

    ``what``: what was not published (a commit publishes nothing; a compaction its merge).
    """
    code = getattr(exc, "errno", None)
    if code:
        why = os.strerror(code).lower()
    else:  # pyarrow and DuckDB raise without an errno: their text says it
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    where = getattr(exc, "filename", None) or path
    at = f" {prep} {where}" if where else ""
    if what == "nothing":
        outcome = "nothing was published, the store is unchanged"
    else:
        outcome = f"{what} was not published, the store reads as before"
    hint = ""
    if code in (errno.EACCES, errno.EPERM, errno.EROFS):
        hint = " (the store can still be queried; writing needs write permission)"
    elif code == errno.ENOSPC:
        hint = " (free some space and run it again)"
    return StoreWriteError(f"{why} while {doing}{at}; {outcome}{hint}")


def _process_start(pid: int) -> str | None:
    """The start time of ``pid`` in clock ticks since boot (tells a reused pid from the holder)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[19]


def _write_holder(root: Path) -> None:
    """Record who holds the lock (temp file then rename: a waiter never reads half of it)."""
    info = {
        "pid": os.getpid(),
        "start": _process_start(os.getpid()),
        "host": socket.gethostname(),
        "command": " ".join(sys.argv)[:200] or sys.executable,
        "since": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
    }
    with suppress(OSError):  # advisory: the lock itself is held
        _atomic.write_text(root / _HOLDER, json.dumps(info))


def _clear_holder(root: Path) -> None:
    with suppress(OSError):
        (root / _HOLDER).unlink(missing_ok=True)


def _holder(root: Path) -> str:
    """Who holds the lock, as the waiting message names it.

    A record left by a killed holder (its pid gone, or reused by another process) names no one.
    """
    unknown = "another process (it has not recorded itself yet)"
    try:
        info = json.loads((root / _HOLDER).read_text())
        pid, host = int(info["pid"]), str(info["host"])
    except (OSError, ValueError, KeyError, TypeError):
        return unknown
    if host == socket.gethostname():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return unknown
        except PermissionError:
            pass  # alive, another user's
        start = info.get("start")
        if start is not None and _process_start(pid) not in (None, start):
            return unknown
    return f"pid {pid} ({host}, {info.get('command')}) since {info.get('since')}"


def _acquire(fd: int, root: Path, timeout: float | None, *, quiet: bool = False) -> None:
    """Take the lock on ``fd``: at once, or after saying once who holds it and waiting."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        pass
    limit = "" if timeout is None else f" (for up to {timeout:g} s)"
    if not quiet:
        log.warning("store %s is locked by %s; waiting%s...", root, _holder(root), limit)
    if timeout is None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(_LOCK_POLL, left))
    raise StoreLockedError(
        f"store {root} is still locked by {_holder(root)} after waiting {timeout:g} s; "
        "nothing was written (wait longer with --lock-timeout / HYLO_ANALYTICS_LOCK_TIMEOUT, "
        "or without one to wait for as long as it takes)"
    )


def _quote(text: str) -> str:
    return text.replace("'", "''")


def _path_literal(path: Path) -> str:
    """``path`` as a SQL string DuckDB reads as that one file, never as a glob pattern.

    DuckDB expands ``*``, ``?`` and ``[`` in every path it reads, even in a list of files: a
    store at ``a[1]`` would read its sibling ``a1``. Each becomes a one-character class.
    """
    return "'" + _quote(_GLOB_CHARS.sub(r"[\g<0>]", path.as_posix())) + "'"


_GLOB_CHARS = re.compile(r"[*?\[]")


def _ident(name: str) -> str:
    if not name.replace("_", "").isalnum():
        raise ValueError(f"not a table or view name: {name!r}")
    return name
