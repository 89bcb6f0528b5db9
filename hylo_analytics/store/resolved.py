"""The score resolution materialized at publish: which runs a commit touched, and their rows.

The rule is SQL (``sql/int_scores_resolution.sql``, macro ``score_rank``) and stays the one
definition: this module evaluates that very view, once per publish, over the store as the new
manifest will show it (the published batches and the ones being published) for the runs the
new batches touched, and writes the answer as the ``resolved_scores`` table of one more batch.
Readers then scan one row per episode and metric (``int_scores_preferred``) instead of ranking
every candidate score at every question. Re-scoring one run re-resolves that run alone.

A run is touched by a batch that writes its scores or samples (the rule reads both: ``errored``
comes from the sample's status) or supersedes them by a tombstone (a re-ingest, a re-score, a
deletion: a run with nothing left gets no rows, and its tombstone hides the old ones).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hylo_analytics import _schema
from hylo_analytics._sql import RULE_VIEW, duckdb_memory_limit, macro_sql, view_sql

__all__ = ["TABLE", "connection", "every_run", "touched_runs", "write_resolved"]

TABLE = "resolved_scores"
# the tables the rule reads: a batch writing or superseding them changes a run's resolution
_INPUTS = ("scores", "samples")
# a literal IN list prunes row groups by their run_id statistics; past this many runs the
# publish resolves a large part of the store anyway and reads it whole
_LITERAL_RUNS = 2_000


def _mb(size: str) -> float:
    """``4GB``, ``512MB``, ``2GiB`` in MB."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)I?B\s*", size.upper())
    if m is None:
        return 1024.0
    return float(m.group(1)) * {"": 2**-20, "K": 2**-10, "M": 1, "G": 2**10, "T": 2**20}[m.group(2)]


def touched_runs(folders: Sequence[Path]) -> set[str]:
    """The runs whose resolution the batches in ``folders`` change."""
    runs: set[str] = set()
    for folder in folders:
        for name in _INPUTS:
            path = folder / f"{name}.parquet"
            if path.exists():
                col = pq.read_table(path, columns=["run_id"]).column("run_id")
                runs.update(v for v in pc.unique(col).to_pylist() if v is not None)
        stones = folder / "tombstones.parquet"
        if stones.exists():
            t = pq.read_table(stones, columns=["table_name", "run_id"])
            hit = t.filter(
                pc.is_in(t.column("table_name"), value_set=pa.array(_INPUTS, pa.string()))
            )
            runs.update(v for v in pc.unique(hit.column("run_id")).to_pylist() if v is not None)
    return runs


# DuckDB's memory for one resolution, tried in turn: a budget that keeps the ingest of one
# 100 MB log (1.2M score rows of one run) under 1 GB of RSS, then more for larger runs
# (DuckDB cannot spill every operator of the rule: it fails at 640 MB there), where the
# store's own limit caps it
_FIRST_LIMIT_MB = 700
_BASE_LIMIT = "1GB"  # the connection's other (small) queries


def _limits_mb() -> tuple[int, ...]:
    return (
        _FIRST_LIMIT_MB,
        2 * _FIRST_LIMIT_MB,
        max(4 * _FIRST_LIMIT_MB, int(_mb(duckdb_memory_limit()))),
    )


def write_resolved(
    con: duckdb.DuckDBPyConnection,
    folders: Sequence[Path],
    runs: Collection[str] | None,
    seq: int,
    out: Path,
    *,
    reconcile: bool,
    row_group_rows: int,
) -> None:
    """Write ``out/resolved_scores.parquet`` for ``runs`` (None: every run) over ``folders``.

    ``folders`` are the batch folders the store will be once published, oldest first, whole
    (every file final: ``con`` caches Parquet footers by path). Rows are the rule's, stamped
    ``batch_seq = seq``, runs in order, in row groups of ``row_group_rows``; no file when there
    are none. DuckDB streams the copy and spills past its memory limit, so memory stays bounded
    at any size. ``con`` is :func:`connection`'s: its views are replaced here.
    """
    try:
        _point(con, folders, runs, reconcile, (*_INPUTS, "tombstones"))
        for view in ("stg_scores", "stg_samples", RULE_VIEW):
            con.execute(f"CREATE OR REPLACE VIEW {view} AS {view_sql(view)}")
        names = [f.name for f in _schema.SCHEMAS[TABLE] if f.name != "batch_seq"]
        select = ", ".join(f'"{n}"' for n in names)
        target = out / f"{TABLE}.parquet"
        copy = (
            f"COPY (SELECT {select}, CAST({int(seq)} AS BIGINT) AS batch_seq "
            f"FROM {RULE_VIEW} ORDER BY run_id, metric, key, epoch) "
            f"TO {_literal(target.as_posix())} (FORMAT parquet, COMPRESSION zstd, "
            f"COMPRESSION_LEVEL 1, ROW_GROUP_SIZE {int(row_group_rows)})"
        )
        limits = _limits_mb()
        for limit in limits:
            con.execute(f"SET memory_limit = '{limit}MB'")
            try:
                con.execute(copy)
                break
            except duckdb.OutOfMemoryException:
                target.unlink(missing_ok=True)
                if limit == limits[-1]:
                    raise
        if pq.read_metadata(target).num_rows == 0:
            target.unlink()
    finally:
        con.execute(f"SET memory_limit = '{_BASE_LIMIT}'")
        con.execute("DROP TABLE IF EXISTS _touched")


def every_run(
    con: duckdb.DuckDBPyConnection, folders: Sequence[Path], *, reconcile: bool
) -> list[str]:
    """Every run with scores, samples or resolved rows in ``folders`` (a whole resolution
    supersedes each one's older rows). Reads no tombstones file (it may be rewritten next)."""
    _point(con, folders, None, reconcile, (*_INPUTS, TABLE))
    found = con.execute(
        "SELECT DISTINCT run_id FROM (SELECT run_id FROM raw_scores UNION ALL "
        f"SELECT run_id FROM raw_samples UNION ALL SELECT run_id FROM raw_{TABLE}) "
        "WHERE run_id IS NOT NULL"
    ).fetchall()
    return sorted(r[0] for r in found)


def _point(
    con: duckdb.DuckDBPyConnection,
    folders: Sequence[Path],
    runs: Collection[str] | None,
    reconcile: bool,
    tables: Sequence[str],
) -> None:
    """``raw_<table>`` views of ``con`` over ``folders``, filtered to ``runs`` at the scan."""
    con.execute("DROP TABLE IF EXISTS _touched")
    where = ""
    if runs is not None:
        wanted = sorted(runs)
        if len(wanted) <= _LITERAL_RUNS:  # a literal list prunes row groups by statistics
            where = f" WHERE run_id IN ({', '.join(_literal(r) for r in wanted) or 'NULL'})"
        else:
            con.execute("CREATE TEMP TABLE _touched (run_id VARCHAR)")
            con.executemany("INSERT INTO _touched VALUES (?)", [(r,) for r in wanted])
            where = " WHERE run_id IN (SELECT run_id FROM _touched)"
    for name in tables:
        files = [f / f"{name}.parquet" for f in folders if (f / f"{name}.parquet").exists()]
        body = _relation(con, name, files, reconcile)
        if name != "tombstones" and where:
            body = f"SELECT * FROM ({body}){where}"
        con.execute(f"CREATE OR REPLACE VIEW raw_{name} AS {body}")


def connection(threads: int, spill: Path) -> duckdb.DuckDBPyConnection:
    """A connection for :func:`write_resolved`: the macros, a bounded memory, a warm cache of
    Parquet footers (a writer publishing many commits reads the same files again)."""
    con = duckdb.connect(":memory:")
    con.execute(f"SET threads TO {int(threads)}")
    con.execute(f"SET memory_limit = '{_BASE_LIMIT}'")
    con.execute(f"SET temp_directory = '{_quote(spill.as_posix())}'")
    con.execute("SET parquet_metadata_cache = true")
    for stmt in macro_sql():
        con.execute(stmt)
    return con


def _relation(
    con: duckdb.DuckDBPyConnection, name: str, files: Sequence[Path], reconcile: bool
) -> str:
    """Table ``name`` over ``files`` with exactly its declared columns (older files: null)."""
    if not files:
        return f"SELECT {_schema.duckdb_columns(name, set())} WHERE false"
    listed = ", ".join(_literal(p.as_posix()) for p in files)
    body = f"SELECT * FROM read_parquet([{listed}]{', union_by_name = true' if reconcile else ''})"
    if not reconcile:
        return body
    present = {r[0] for r in con.execute(f"DESCRIBE {body}").fetchall()}
    return f"SELECT {_schema.duckdb_columns(name, present)} FROM ({body})"


def _quote(text: str) -> str:
    return text.replace("'", "''")


def _literal(text: str) -> str:
    return "'" + _quote(text) + "'"
