"""The Parquet store: every layer of the store package in one class, and the helpers over it."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

import polars as pl
import pyarrow as pa

from hylo_analytics.errors import (
    InputTypeError,
)
from hylo_analytics.store.batches import Tombstone
from hylo_analytics.store.publish import Committing


class ParquetStore(Committing):
    """A folder of Parquet files with a DuckDB connection whose views read them.

    ``threads``: DuckDB's thread count (default: ``HYLO_ANALYTICS_THREADS``, else every core).
    Opening a store writes nothing (it may be read-only): what is missing is made in memory,
    and on disk by the first writer. A folder that holds no store (``create=True``) reads as
    an empty store and nothing is created on disk until the first write (an ingest, a commit):
    a typo in a path never leaves an empty store behind. ``create=False`` opens an existing
    store only (:class:`StoreNotFoundError` otherwise). ``lock_timeout``: seconds a write waits for another writer before
    :class:`StoreLockedError` (default ``HYLO_ANALYTICS_LOCK_TIMEOUT``, else no limit).
    """


def as_parquet(store: Any) -> ParquetStore:
    """The :class:`ParquetStore` behind ``store``: itself, or the one a facade holds.

    :class:`hylo_analytics.api.Store` holds its persistence layer as ``store.parquet``; the
    functions of the stages take a ``ParquetStore`` and accept what users pass them through
    this (and :func:`pinned`, which unwraps the first argument).
    """
    if isinstance(store, ParquetStore):
        return store
    inner = getattr(store, "parquet", None)
    if isinstance(inner, ParquetStore):
        return inner
    raise InputTypeError(f"expected a store (open_store(PATH)), got {type(store).__name__}")


_T = TypeVar("_T")


def unwrap_store(obj: _T) -> _T | ParquetStore:
    """``obj``, or the :class:`ParquetStore` it holds when it is a facade (a ``Store``).

    For functions that take a store or a frame and tell them apart with ``isinstance``.
    """
    inner = getattr(obj, "parquet", None)
    return inner if isinstance(inner, ParquetStore) else obj


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
        if args and not isinstance(args[0], ParquetStore):
            inner = getattr(args[0], "parquet", None)  # a facade: its store, unwrapped
            if isinstance(inner, ParquetStore):
                args = (inner, *args[1:])  # type: ignore[assignment]
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
    store = as_parquet(store)
    with store.lock():
        return store.commit({"scores": scores}, tombstones=stones)
