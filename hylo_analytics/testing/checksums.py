"""Checksums of a store's tables, views and answers: the proof that a change moved no answer.

Each relation is read whole, cast to text (floats to 10 significant digits, since sums in
another thread order differ in their last bits), sorted by every column and hashed. Columns
that name the machine or the moment (paths, file times, ingest and declaration times, batch numbers) are left
out.
"""

from __future__ import annotations

import hashlib

import polars as pl

from hylo_analytics._sql import view_names
from hylo_analytics.store import FRIENDLY_NAMES, ParquetStore

__all__ = ["VOLATILE", "frame_checksum", "store_checksums"]

VOLATILE = frozenset(
    {"ingested_at", "declared_at", "batch_seq", "source_path", "trace_path", "path", "mtime_ns"}
)


def frame_checksum(frame: pl.DataFrame) -> str:
    """A hash of ``frame``'s rows that ignores their order and the :data:`VOLATILE` columns."""
    cols = sorted(c for c in frame.columns if c not in VOLATILE)
    as_text = []
    for c in cols:
        dtype = frame.schema[c]
        if dtype.is_nested():  # lists and structs: their Python form (small frames only)
            as_text.append(pl.Series(c, [repr(v) for v in frame[c].to_list()]))
        elif dtype == pl.Binary:  # bytes (trace_files.data): as hex
            as_text.append(frame[c].bin.encode("hex"))
        elif dtype.is_float():
            as_text.append(frame[c].round_sig_figs(10).cast(pl.String))
        else:
            as_text.append(frame[c].cast(pl.String))
    text = pl.DataFrame(as_text).sort(cols, nulls_last=True).write_csv() if cols else ""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def store_checksums(store: ParquetStore) -> dict[str, tuple[int, str]]:
    """(rows, checksum) of every table and every ``int_``/``mart_`` view of ``store``."""
    names = [*FRIENDLY_NAMES, *(v for v in view_names() if not v.startswith("stg_"))]
    out = {}
    for name in names:
        frame = store.sql(f"SELECT * FROM {name}")
        out[name] = (frame.height, frame_checksum(frame))
    return out
