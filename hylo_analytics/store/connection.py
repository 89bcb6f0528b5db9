"""The store's DuckDB connection and views over the published manifest, and its reads.

Opening a store binds the ``sql/`` views on the files the manifest names; another process's
publish is noticed by a ``stat`` per use and the raw views re-pointed, except inside
:meth:`~StoreConnection.snapshot`. The writing layers (lock, compaction, commit and publish)
build on this class; :class:`~hylo_analytics.store.ParquetStore` is all of them.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

import duckdb
import polars as pl
import pyarrow as pa

from hylo_analytics import _atomic, _schema
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
    InputError,
    StaleSnapshotError,
    StoreNotFoundError,
)
from hylo_analytics.store import catalog as _catalog
from hylo_analytics.store import manifest as _manifest
from hylo_analytics.store.batches import (
    _BATCHES,
    _EMPTY_SEQ,
    _STAGING,
    _fsync_dir,
    _stale_empty_tables,
    _typed_empty_sql,
    _write_error,
    _write_parquet,
)
from hylo_analytics.store.manifest import (
    Batch,
    Manifest,
    ManifestError,
)
from hylo_analytics.store.runs import FEW_RUNS, _resolve, _select, natural_order
from hylo_analytics.store.views import (
    FRIENDLY_NAMES,
    _ident,
    _metric_specs_sql,
    _path_literal,
    _quote,
)

log = logging.getLogger("hylo_analytics.store")

# what a selector matches on and what orders runs (store.runs: RUN_FIELDS, natural_order)
_RUN_FIELDS = (
    "run_id", "agent_name", "agent_version", "benchmark_id", "split", "source_format",
    "ingested_at",
)  # fmt: skip


class StoreConnection:
    """A folder of Parquet files with a DuckDB connection whose views read them (the read side).

    See :class:`~hylo_analytics.store.ParquetStore` for the arguments.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        threads: int | None = None,
        create: bool = True,
    ) -> None:
        self.root = Path(root).resolve()
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

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A new connection to this store's DuckDB instance, for a stage's own work (the
        ingest's parse): its temp tables and registered frames are its own, the settings
        (threads, memory limit, spill folder) the store's. Opening one costs microseconds,
        where a new in-memory database costs 15-20 ms (its catalog of functions is built)."""
        return self._con.cursor()

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
    def snapshot(self) -> Iterator[Self]:
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

    def batches(
        self,
        query: str,
        params: Sequence[Any] | Mapping[str, Any] | None = None,
        rows: int = 1 << 17,
    ) -> Iterator[pa.RecordBatch]:
        """Run ``query`` and yield its result as Arrow record batches of up to ``rows`` rows.

        For a result too large to hold twice (DuckDB's copy and the frame's): a ranking of
        2,000 policies reads a million rows and keeps each batch's columns as small codes.
        A stale plan is re-run as :meth:`sql` does, before any batch is yielded.
        """
        try:
            reader = self.con.sql(query, params=params).fetch_record_batch(rows)
        except duckdb.IOException as exc:
            self._raise_if_stale(exc)
            reader = self.con.sql(query, params=params).fetch_record_batch(rows)
        yield from reader

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
        """One row per run with its sample counts, in natural run order: by agent, version in
        natural version order (``2.3.0 < 2.294.0``, ``1.2.0-rc1 < 1.2.0``), benchmark and
        split, then newest ingest first and run id (:func:`~hylo_analytics.store.runs.natural_order`).
        """
        return natural_order(self.sql("SELECT * FROM mart_runs"))

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

    def select_runs(self, specs: str | Sequence[str], *, exclude: str | None = None) -> list[str]:
        """Every run ``specs`` name, in natural run order (that of :meth:`runs`), each once.

        A run id or a unique id prefix names its run (an unknown or ambiguous one is refused
        as :meth:`resolve_run` refuses it); a selector (``agent=octo-ft``, fields
        :data:`RUN_FIELDS`) names every run it matches, and matching none is an error naming
        the nearest ids. ``exclude``: a run the selectors' matches leave out (the parent of a
        comparison, so ``agent=octo-ft`` names its other runs); a selector that matches only
        it is an error. An id or prefix naming ``exclude`` is kept (the caller decides). One
        read of the runs table, however many runs the specs name.
        """
        specs = [specs] if isinstance(specs, str) else list(specs)
        if len(specs) < FEW_RUNS and not any("=" in s for s in specs):
            found = self.sql(  # a few run ids (the usual case): read those rows, not the table
                f"SELECT {', '.join(_RUN_FIELDS)} FROM stg_runs WHERE list_contains($ids, run_id)",
                {"ids": specs},
            )
            if found["run_id"].n_unique() == len(set(specs)):
                return natural_order(found)["run_id"].to_list()
        return _select(specs, self._run_fields(), exclude)

    def register(self, name: str, frame: pl.DataFrame | pl.LazyFrame | pa.Table) -> None:
        """Make ``frame`` queryable as ``name`` in :meth:`sql`, beside the store's views.

        For joining rows of your own (a list of episodes, labels) with the store in SQL. The
        frame is read where it lies, never written to the store, and lives as long as this
        object; registering a name again replaces the frame. The name of a view of the store
        is refused (the store's ``runs`` would be hidden).
        """
        _ident(name)
        if name.lower() in self._view_names():
            raise InputError(
                f"{name!r} is a view of the store; register the frame under another name"
            )
        if isinstance(frame, pl.LazyFrame):
            frame = frame.collect()
        if isinstance(frame, pl.DataFrame):
            frame = frame.to_arrow()
        self._con.register(name, frame)

    def unregister(self, name: str) -> None:
        """Forget a frame :meth:`register` made queryable (an unknown name is no error)."""
        if name.lower() not in self._view_names():
            self._con.unregister(_ident(name))

    def _view_names(self) -> set[str]:
        head = "CREATE OR REPLACE VIEW "
        return {
            st[len(head) :].split(None, 1)[0].lower()
            for st in self._statements
            if st.startswith(head)
        }

    def _run_fields(self) -> pl.DataFrame:
        """The runs table's naming fields, in natural run order."""
        return natural_order(self.sql(f"SELECT {', '.join(_RUN_FIELDS)} FROM stg_runs"))

    def data_version(self) -> int:
        """The newest published commit: it changes whenever the store's rows may have."""
        return max((b.seq for b in self._read_manifest().batches), default=_EMPTY_SEQ)

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

    def _publish(self, manifest: Manifest) -> None:
        _manifest.write_manifest(self.root, manifest)
        _fsync_dir(self.root)
        self._refresh()
        self._write_views_file()

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

    def _point_preferred(self, *, force: bool = False) -> None:
        """``int_scores_preferred`` on the materialized resolution, or on the rule itself when
        the published store is not resolved (an older version wrote it last): same rows.
        Always this connection's own view (``force``: create it even if its text is known)."""
        body = view_sql(PREFERRED_VIEW) if self.manifest.resolved else f"SELECT * FROM {RULE_VIEW}"
        stmt = f"CREATE OR REPLACE VIEW {PREFERRED_VIEW} AS\n{body}"
        head = f"CREATE OR REPLACE VIEW {PREFERRED_VIEW} AS"
        at = next(i for i, st in enumerate(self._statements) if st.startswith(head))
        if force or self._statements[at] != stmt:
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
        # batch 0 holds empty files only: a writer rewrites them to today's schemas, and a
        # stale one is typed in SQL below, so its fingerprint never asks for reconciliation
        # (binding ``union_by_name`` reads every file's schema: 2-4x the open of a large store)
        older = [b for b in self.manifest.batches if b.seq != _EMPTY_SEQ]
        by_name = "" if Manifest(tuple(older), 0).current_schemas else ", union_by_name = true"
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
        """The ``raw_*`` views and ``metric_specs`` here; the ``sql/`` views from the cached
        catalog (:mod:`~hylo_analytics.store.catalog`: bound when first read), or, without
        one, created and bound here."""
        local = [f"CREATE OR REPLACE VIEW {name} AS {body}" for name, body in self._raw_view_sql()]
        local.append(f"CREATE OR REPLACE VIEW metric_specs AS {_metric_specs_sql()}")
        for stmt in local:
            self._con.execute(stmt)
        friendly = [f"CREATE OR REPLACE VIEW {n} AS SELECT * FROM stg_{n}" for n in FRIENDLY_NAMES]
        typed = [
            f"CREATE OR REPLACE VIEW raw_{name} AS {_typed_empty_sql(name)}"
            for name in _schema.TABLES
        ]
        shared = _catalog.attach(self._con, [*typed, local[-1]], friendly)
        if shared is None:
            shared = load_views(self._con, prelude=local)
            for stmt in friendly:
                self._con.execute(stmt)
            shared += friendly
        self._statements = local + shared
        self._point_preferred(force=True)
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
