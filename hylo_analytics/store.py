"""The Parquet store and its DuckDB connection.

Layout::

    <store>/batches/<seq>/<table>.parquet   one folder per commit, written whole
    <store>/_staging/                       commits being written (ignored by readers)
    <store>/views.sql                       the views, for the plain ``duckdb`` shell
    <store>/.lock                           one writer at a time

A commit is written to ``_staging`` and moved into ``batches`` with one ``rename``, so a reader
(or a process killed mid-write) never sees half of it. Rows are never rewritten in place: a
later commit *supersedes* a run's rows by writing tombstones, and the ``stg_*`` views keep only
the rows no later tombstone covers. This is what makes re-ingesting a changed EvalLog, or
re-scoring a run, atomic.

This module is persistence only and imports no later stage. The pipeline's verbs (ingest,
score, aggregate, compare, report) are methods of :class:`hylo_analytics.api.Store`, a
subclass that sits above every stage; :func:`hylo_analytics.open_store` returns one.
"""

from __future__ import annotations

import difflib
import fcntl
import os
import shutil
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hylo_analytics import _schema
from hylo_analytics._sql import duckdb_threads, load_views
from hylo_analytics.metrics import default_registry

__all__ = [
    "RUN_FIELDS",
    "ParquetStore",
    "RunSelectionError",
    "StoreNotFoundError",
    "Tombstone",
    "commit_scores",
]

# The natural names are the current rows; raw history keeps its ``raw_`` prefix.
FRIENDLY_NAMES = (
    "runs", "samples", "events", "scores", "quarantine", "ingested_files", "policy_results",
)  # fmt: skip


class RunSelectionError(ValueError):
    """A run id or selector names no run, or several."""


class StoreNotFoundError(FileNotFoundError):
    """A command that reads a store was pointed at a folder that holds none."""


_BATCHES = "batches"
_STAGING = "_staging"
_EMPTY_SEQ = 0


@dataclass(frozen=True)
class Tombstone:
    """Rows of ``table`` for ``run_id`` (and ``source``, when given) in earlier commits are dead."""

    table: str
    run_id: str
    source: str | None = None


class ParquetStore:
    """A folder of Parquet files with a DuckDB connection whose views read them.

    ``threads``: DuckDB's thread count (default: ``HYLO_ANALYTICS_THREADS``, else every core).
    ``create=False`` opens an existing store only (:class:`StoreNotFoundError` otherwise), so a
    typo in a path never leaves an empty store behind.
    """

    def __init__(
        self, root: str | os.PathLike[str], *, threads: int | None = None, create: bool = True
    ) -> None:
        self.root = Path(root).resolve()
        if not create and not (self.root / _BATCHES).is_dir():
            raise StoreNotFoundError(
                f"no store at {self.root} (ingest into it first: "
                f"hylo-analytics ingest PATH --store {root})"
            )
        (self.root / _BATCHES).mkdir(parents=True, exist_ok=True)
        self._ensure_empty_batch()
        self.con = duckdb.connect(":memory:")
        self.threads = threads or duckdb_threads()
        self.con.execute(f"SET threads TO {int(self.threads)}")
        self._create_views()

    # -- reading -------------------------------------------------------------------------

    def sql(
        self, query: str, params: Sequence[Any] | Mapping[str, Any] | None = None
    ) -> pl.DataFrame:
        """Run ``query`` against the store's views and return a polars frame."""
        frame: pl.DataFrame = self.con.sql(query, params=params).pl()
        return frame

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
        runs = self.sql(
            "SELECT run_id, agent_name, agent_version, benchmark_id, split, source_format "
            "FROM stg_runs ORDER BY run_id"
        )
        ids = runs["run_id"].to_list()
        if spec in ids:
            return spec
        if "=" in spec:
            hits = runs.filter(_selector(spec))
        else:
            hits = runs.filter(pl.col("run_id").str.starts_with(spec))
        if hits.height == 1:
            return str(hits["run_id"].item())
        if hits.height == 0:
            near = difflib.get_close_matches(spec, ids, n=3, cutoff=0.4)
            hint = f"; did you mean {', '.join(near)}?" if near else ""
            raise RunSelectionError(
                f"no run matches {spec!r}{hint} (the store holds {len(ids)} run(s): "
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

    def resolve_runs(self, specs: Sequence[str]) -> list[str]:
        """Each of ``specs`` resolved by :meth:`resolve_run`, in order, without repeats."""
        return list(dict.fromkeys(self.resolve_run(spec) for spec in specs))

    # -- writing -------------------------------------------------------------------------

    @contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the store's writer lock (blocks while another process writes)."""
        with open(self.root / ".lock", "w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def commit(self, tables: Mapping[str, pa.Table], tombstones: Sequence[Tombstone] = ()) -> int:
        """Write one batch atomically and return its sequence number.

        Call with :meth:`lock` held. Every table is conformed to its declared schema and
        stamped with the batch's ``batch_seq``.
        """
        seq = self._next_seq()
        staging = self.root / _STAGING / f"{seq:020d}-{uuid.uuid4().hex[:8]}"
        staging.mkdir(parents=True)
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
            os.rename(staging, self.root / _BATCHES / f"{seq:020d}")
            _fsync_dir(self.root / _BATCHES)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return seq

    def clean_staging(self) -> None:
        """Remove commits left half-written by a killed process (call with the lock held)."""
        shutil.rmtree(self.root / _STAGING, ignore_errors=True)

    # -- internals -----------------------------------------------------------------------

    def _next_seq(self) -> int:
        seqs = [int(p.name) for p in (self.root / _BATCHES).iterdir() if p.name.isdigit()]
        return max(seqs, default=_EMPTY_SEQ) + 1

    def _ensure_empty_batch(self) -> None:
        # An empty file per table keeps every glob non-empty, so views bind on a new store.
        empty_dir = self.root / _BATCHES / f"{_EMPTY_SEQ:020d}"
        missing = [n for n in _schema.TABLES if not (empty_dir / f"{n}.parquet").exists()]
        if not missing:
            return
        tmp = self.root / _STAGING / f"empty-{uuid.uuid4().hex[:8]}"
        tmp.mkdir(parents=True)
        for name in _schema.TABLES:
            _write_parquet(_schema.empty(name), tmp / f"{name}.parquet")
        empty_dir.mkdir(exist_ok=True)
        for name in missing:
            os.replace(tmp / f"{name}.parquet", empty_dir / f"{name}.parquet")
        shutil.rmtree(tmp, ignore_errors=True)

    def _raw_view_sql(self) -> list[tuple[str, str]]:
        out = []
        for name in _schema.TABLES:
            glob = (self.root / _BATCHES / "*" / f"{name}.parquet").as_posix()
            out.append(
                (
                    f"raw_{name}",
                    f"SELECT * FROM read_parquet('{_quote(glob)}', union_by_name = true)",
                )
            )
        return out

    def _create_views(self) -> None:
        statements = [
            f"CREATE OR REPLACE VIEW {name} AS {body}" for name, body in self._raw_view_sql()
        ]
        statements.append(f"CREATE OR REPLACE VIEW metric_specs AS {_metric_specs_sql()}")
        statements += load_views(self.con, prelude=statements)
        for name in FRIENDLY_NAMES:
            stmt = f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM stg_{name}"
            self.con.execute(stmt)
            statements.append(stmt)
        _atomic_write_text(self.root / "views.sql", ";\n".join(statements) + ";\n")

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


def commit_scores(store: ParquetStore, scores: pa.Table) -> int:
    """Commit score rows, superseding each (run, source) they cover; returns the batch seq.

    Re-deriving replaces the earlier derived rows of the same runs, so there are no duplicates.
    """
    pairs = pl.from_arrow(scores.select(["run_id", "source"]))
    assert isinstance(pairs, pl.DataFrame)
    stones = [Tombstone("scores", r, s) for r, s in pairs.unique().sort("run_id").rows()]
    with store.lock():
        return store.commit({"scores": scores}, tombstones=stones)


def _tombstone_table(tombstones: Sequence[Tombstone]) -> pa.Table:
    return pa.table(
        {
            "table_name": [t.table for t in tombstones],
            "run_id": [t.run_id for t in tombstones],
            "source": [t.source for t in tombstones],
        }
    )


# Free text and JSON: a dictionary would only be built to be thrown away.
_NO_DICTIONARY = {"raw", "extra", "results", "metadata", "explanation", "agent_components", "error"}


# Small enough that a run's rows span few groups, large enough that a group's footer is cheap.
ROW_GROUP_ROWS = 65_536


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
        compression="zstd",
        compression_level=1,
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


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _quote(text: str) -> str:
    return text.replace("'", "''")


def _ident(name: str) -> str:
    if not name.replace("_", "").isalnum():
        raise ValueError(f"not a table or view name: {name!r}")
    return name
