"""Stores as older versions left them, for tests of readers.

:func:`strip_resolution` removes what the publish-time resolution wrote (the
``resolved_scores`` files, their tombstones, the manifest's ``resolved`` flag), so a test can
check that readers of such a store read the rule and that its next writer resolves it.
:func:`inline_trace_lines` makes a store read as one written before ``trace_files``: every
event row carries its raw line, and no batch has a ``trace_files`` file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import duckdb
import pyarrow.compute as pc
import pyarrow.parquet as pq

__all__ = ["inline_trace_lines", "strip_resolution"]


def strip_resolution(root: str | os.PathLike[str]) -> None:
    """Make the store at ``root`` read as one written before ``resolved_scores`` existed."""
    root = Path(root)
    for path in (root / "batches").glob("*/resolved_scores.parquet"):
        path.unlink()
    for path in (root / "batches").glob("*/tombstones.parquet"):
        table = pq.read_table(path)
        pq.write_table(table.filter(pc.not_equal(table["table_name"], "resolved_scores")), path)
    manifest = root / "manifest.json"
    data = json.loads(manifest.read_text())
    data.pop("resolved", None)
    manifest.write_text(json.dumps(data))


def inline_trace_lines(root: str | os.PathLike[str]) -> None:
    """Make the store at ``root`` read as one written before ``trace_files`` existed.

    Each events file gets its rows' raw lines back (read from the trace files, as a reader
    does), the ``trace_files`` files and their tombstones go, and the manifest's batches are
    marked as written by other schemas (so readers reconcile columns by name, as they do for
    an older store). Only the current rows get a line back: superseded rows are never read.
    """
    from hylo_analytics import open_store
    from hylo_analytics._traces import event_lines

    root = Path(root)
    lines = event_lines(open_store(root, create=False).parquet).select(
        "run_id", "key", "episode_id", "idx", "raw"
    )
    con = duckdb.connect()
    con.register("lines", lines.to_arrow())
    for path in (root / "batches").glob("*/events.parquet"):
        con.register("ev", pq.read_table(path))
        table = con.sql(
            """SELECT e.* EXCLUDE (_at) REPLACE (coalesce(e.raw, l.raw) AS raw)
               FROM (SELECT *, row_number() OVER () AS _at FROM ev) AS e
               LEFT JOIN lines AS l USING (run_id, key, episode_id, idx) ORDER BY e._at"""
        ).to_arrow_table()
        con.unregister("ev")
        pq.write_table(table.cast(pq.read_schema(path)), path)
    con.close()
    for path in (root / "batches").glob("*/trace_files.parquet"):
        path.unlink()
    for path in (root / "batches").glob("*/tombstones.parquet"):
        table = pq.read_table(path)
        pq.write_table(table.filter(pc.not_equal(table["table_name"], "trace_files")), path)
    manifest = root / "manifest.json"
    data = json.loads(manifest.read_text())
    for batch in data["batches"]:
        batch["schema"] = "older"
    manifest.write_text(json.dumps(data))
