"""The Parquet store: persistence only, one module per concern.

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
demand). Rows are never rewritten in place: a later commit *supersedes* a run's rows by writing
tombstones, and the ``stg_*`` views keep only the rows no later tombstone covers. This is what
makes re-ingesting a changed EvalLog, or re-scoring a run, atomic.

The modules, each a layer of :class:`ParquetStore` or the helpers one uses:

- :mod:`.manifest`: which batch folders are the store, published by one ``rename``;
- :mod:`.batches`: a batch's files, tombstones, staging folders, write errors;
- :mod:`.runs`: naming runs by id, prefix or ``field=value`` selector;
- :mod:`.views` and :mod:`.connection`: the DuckDB connection and the views, the reads;
- :mod:`.lock`: the writer lock and whether a writer still lives;
- :mod:`.compaction`: leveled merging and garbage collection of retired batches;
- :mod:`.publish`: commit and publish (with :mod:`.resolved`, the score resolution written
  at publish);
- :mod:`.parquet`: :class:`ParquetStore`, :func:`pinned`, :func:`commit_scores`.

The package imports no later stage. The pipeline's verbs (ingest, score, aggregate, compare,
report) are those of :class:`hylo_analytics.api.Store`, a facade over a :class:`ParquetStore`
that sits above every stage; :func:`hylo_analytics.open_store` returns one.
"""

from __future__ import annotations

from hylo_analytics.errors import (
    RunSelectionError,
    StaleSnapshotError,
    StoreLockedError,
    StoreNotFoundError,
    StoreWriteError,
)
from hylo_analytics.store.batches import ROW_GROUP_ROWS, Tombstone, _staged_names
from hylo_analytics.store.compaction import COMPACT_AT, CompactionReport, compact_at
from hylo_analytics.store.lock import (
    _process_start,
    lock_timeout_from_env,
    process_alive,
    stale_seconds,
)
from hylo_analytics.store.manifest import ManifestError, StoreError
from hylo_analytics.store.parquet import (
    ParquetStore,
    as_parquet,
    commit_scores,
    pinned,
    unwrap_store,
)
from hylo_analytics.store.runs import FEW_RUNS, RUN_FIELDS, _selector
from hylo_analytics.store.views import FRIENDLY_NAMES, _metric_specs_sql

__all__ = [
    "COMPACT_AT",
    "FEW_RUNS",
    "FRIENDLY_NAMES",
    "ROW_GROUP_ROWS",
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
    "_metric_specs_sql",
    "_process_start",
    "_selector",
    "_staged_names",
    "as_parquet",
    "commit_scores",
    "compact_at",
    "lock_timeout_from_env",
    "pinned",
    "process_alive",
    "stale_seconds",
    "unwrap_store",
]
