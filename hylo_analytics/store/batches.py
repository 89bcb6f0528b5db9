"""Batches and tombstones: the folders a commit writes, their Parquet files, the rows they supersede.

A batch is one folder of ``<table>.parquet`` files, written whole in a writer's staging folder
and moved into ``batches/`` by one ``rename``. Rows are never rewritten in place: a later batch
supersedes a run's rows by its tombstones.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hylo_analytics import _schema
from hylo_analytics.errors import (
    InputError,
    StoreWriteError,
)

_BATCHES = "batches"

_STAGING = "_staging"

_EMPTY_SEQ = 0

_SEQ_LOCK = ".seq.lock"  # held for the moment a writer takes a batch number

_OWNER = "owner.json"  # in a writer's staging folder: who writes there


@dataclass(frozen=True)
class Tombstone:
    """Rows of ``table`` for ``run_id`` (and ``source``, when given) in earlier commits are dead."""

    table: str
    run_id: str
    source: str | None = None


def _tombstone_table(tombstones: Sequence[Tombstone]) -> pa.Table:
    return pa.table(
        {
            "table_name": [t.table for t in tombstones],
            "run_id": [t.run_id for t in tombstones],
            "source": [t.source for t in tombstones],
        }
    )


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
                raise InputError(
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
