"""An event's raw line, read from the trace file the store keeps once.

A trace's events carry no copy of their line (``events.raw`` is null): the file's bytes are in
``trace_files`` once (one zstd frame, ``data``; its text through :func:`trace_text`, or
``hylo_trace_text(data, size)`` on a store's DuckDB connection), and an event's line is line ``idx`` of the file its sample names
(``samples.trace_path = trace_files.path``), with its line break (and any ``\\r`` before it)
trimmed, exactly as ingest used to copy it. ``events.raw`` still holds the grade events' lines
(a trace's, which the grades scorer reads in SQL, and a grader's, which no file holds), and
every line of a store written before ``trace_files`` existed; those are read as they are, so
an older store reads (and exports) as before.

:func:`with_raw_sql` wraps any selection of event rows: only the files of the events asked
for are split into lines (by DuckDB, in one query, no Python loop over lines).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa
from duckdb.func import FunctionNullHandling, PythonUDFType
from duckdb.sqltypes import BIGINT, BLOB, VARCHAR

if TYPE_CHECKING:
    import polars as pl

    from hylo_analytics.store import ParquetStore

__all__ = [
    "compress_trace",
    "event_lines",
    "register_trace_text",
    "trace_text",
    "with_raw_sql",
]

_CODEC = pa.Codec("zstd", compression_level=1)


def compress_trace(data: bytes) -> bytes:
    """A trace file's bytes as stored in ``trace_files.data``: one zstd frame."""
    return bytes(_CODEC.compress(data, asbytes=True))


def trace_text(data: bytes, size: int) -> str:
    """The text of a trace file stored as ``(data, size)`` (``trace_files``)."""
    return bytes(_CODEC.decompress(data, decompressed_size=size, asbytes=True)).decode()


def _trace_texts(data: pa.Array, size: pa.Array) -> pa.Array:
    out = [
        None if d is None else _CODEC.decompress(d, decompressed_size=n, asbytes=True)
        for d, n in zip(data.to_pylist(), size.to_pylist(), strict=True)
    ]
    return pa.array(out, pa.binary()).cast(pa.string())  # validated as UTF-8


def register_trace_text(con: duckdb.DuckDBPyConnection) -> None:
    """Create ``hylo_trace_text(data, size)`` on ``con``: a ``trace_files`` row's text."""
    con.create_function(
        "hylo_trace_text",
        _trace_texts,
        [BLOB, BIGINT],
        VARCHAR,
        type=PythonUDFType.ARROW,
        null_handling=FunctionNullHandling.SPECIAL,
        side_effects=False,
    )


def with_raw_sql(events: str) -> str:
    """SQL of the rows of ``events`` (a query over ``stg_events`` with at least ``run_id``,
    ``key``, ``episode_id``, ``idx`` and ``raw``) with ``raw`` filled in from the trace files.

    Row order is not kept: order by ``idx`` (as every reader does)."""
    return f"""
with _ev as ({events}),
_smp as (
    select distinct s.run_id, s.key, s.episode_id, s.trace_path
    from stg_samples as s
    where s.trace_path is not null
      and s.run_id in (select run_id from _ev where raw is null)
),
_want as (
    select distinct m.run_id, m.trace_path as path
    from (select distinct run_id, key, episode_id from _ev where raw is null) as e
    join _smp as m on m.run_id = e.run_id and m.key = e.key and m.episode_id = e.episode_id
),
_files as (
    -- a join, not IN: the files asked are the build side, and their keys filter the scan
    select f.run_id, f.path, string_split(hylo_trace_text(f.data, f.size), chr(10)) as lines
    from stg_trace_files as f
    join _want as w on w.run_id = f.run_id and w.path = f.path
),
_lines as (
    select run_id, path, unnest(lines) as line, generate_subscripts(lines, 1) as line_no
    from _files
)
select e.* replace (coalesce(e.raw, rtrim(l.line, chr(13))) as raw)
from _ev as e
left join _smp as m
  on e.raw is null and m.run_id = e.run_id and m.key = e.key and m.episode_id = e.episode_id
left join _lines as l
  on l.run_id = m.run_id and l.path = m.trace_path and l.line_no = e.idx
"""


def event_lines(store: ParquetStore, runs: list[str] | None = None) -> pl.DataFrame:
    """Every current event of ``runs`` (default: all) with its raw line:
    ``run_id, key, episode_id, idx, type, raw``, sorted."""
    where = "true" if runs is None else "list_contains($runs, run_id)"
    params: dict[str, Any] = {} if runs is None else {"runs": list(runs)}
    events = f"select run_id, key, episode_id, idx, type, raw from stg_events where {where}"
    return store.sql(
        f"select * from ({with_raw_sql(events)}) order by run_id, key, episode_id, idx", params
    )
