"""Commit and publish: a batch written in a writer's staging folder, then named by a new manifest."""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import shutil
import socket
import uuid
from collections.abc import Mapping, Sequence
from contextlib import suppress
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from hylo_analytics import _schema
from hylo_analytics._sql import (
    duckdb_temp_directory,
)
from hylo_analytics.store import manifest as _manifest
from hylo_analytics.store import resolved as _resolved
from hylo_analytics.store.batches import (
    _BATCHES,
    _EMPTY_SEQ,
    _OWNER,
    _SEQ_LOCK,
    _STAGING,
    ROW_GROUP_ROWS,
    Tombstone,
    _check_utf8,
    _fsync_dir,
    _make_staging,
    _staged_names,
    _tombstone_table,
    _write_error,
    _write_parquet,
)
from hylo_analytics.store.compaction import Compacting
from hylo_analytics.store.lock import _process_start
from hylo_analytics.store.manifest import (
    SCHEMA_FINGERPRINT,
    Batch,
    Manifest,
)


class Committing(Compacting):
    """The store's writes: commit, publish, discard (see :class:`~hylo_analytics.store.ParquetStore`)."""

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
