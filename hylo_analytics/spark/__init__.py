"""The store's views on Apache Spark: the same ``sql/*.sql``, transpiled at load time.

:func:`register` reads the store's manifest (the published batches), creates ``raw_<table>``
temp views over those batches' Parquet files, ``metric_specs``, then every view of ``sql/`` in
dependency order, each transpiled from its DuckDB SQL by the project dialect
(:mod:`hylo_analytics.spark._dialect`), and the friendly names (``runs``, ``scores``, ...).
There is no second copy of any view: a construct the dialect cannot translate exactly is
refused (:class:`UntranslatableSQL`), never approximated. ``store_path`` may be a local folder
or any Hadoop URI Spark can read (``s3a://``, ``hdfs://``, ``abfss://``): it is passed to Spark
untouched. Only published batches are read; tombstones apply in the ``stg_*`` views as on
DuckDB. :func:`aggregate` and :func:`paired` answer the Python API's counting questions in
Spark, leaving only the small final statistics (the McNemar p) to Python. pyspark is an
optional dependency (``pip install 'hylo_analytics[spark]'``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hylo_analytics import _schema
from hylo_analytics._sql import MATERIALIZED, view_names, view_references, view_sql
from hylo_analytics.spark._dialect import UntranslatableSQL, to_spark
from hylo_analytics.spark._errors import _FRIENDLY, one_line
from hylo_analytics.store import manifest as _manifest
from hylo_analytics.store.manifest import ManifestError, StoreError

if TYPE_CHECKING:
    import polars as pl
    from pyspark.sql import SparkSession

__all__ = [
    "BROADCAST_DEFAULTS",
    "UntranslatableSQL",
    "aggregate",
    "local_session",
    "paired",
    "register",
    "spark_sql",
    "view_order",
]

# Plan-time broadcasts off (sized from compressed Parquet), run-time ones at Spark's 10 MiB
# (sized from real rows): local_session's docstring says why.
BROADCAST_DEFAULTS = {
    "spark.sql.autoBroadcastJoinThreshold": "-1",
    "spark.sql.adaptive.autoBroadcastJoinThreshold": "10MB",
}


def _is_uri(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def _read_batches(spark: SparkSession, root: str) -> tuple[list[str], bool, bool]:
    """The published batch folders (oldest first), whether all have today's schemas, and
    whether the store's scores are resolved (the manifest's ``resolved``)."""
    if not _is_uri(root):
        local = Path(root.removeprefix("file://"))
        if not (local / "batches").is_dir():
            raise StoreError(f"no store at {local} (no batches/ folder)")
        manifest = _manifest.read_manifest(local, local / "batches")
        return [b.name for b in manifest.batches], manifest.current_schemas, manifest.resolved
    where = f"{root}/{_manifest.FILE}"
    try:
        text = spark.read.text(where, wholetext=True).first()[0]  # type: ignore[index]
        data = json.loads(text)
        batches = data["batches"]
        names = [str(b["name"]) for b in batches]
    except Exception as exc:  # Spark's errors come from the JVM: name the file instead
        reason = one_line(exc)
        raise ManifestError(f"{where}: the store's manifest cannot be read: {reason}") from exc
    current = all(b.get("schema") == _manifest.SCHEMA_FINGERPRINT for b in batches)
    return names, current, data.get("resolved") is True


def view_order() -> list[str]:
    """Every view of ``sql/``, each after the views it reads."""
    order: list[str] = []

    def visit(name: str) -> None:
        if name in order:
            return
        for ref in sorted(view_references(name) | {MATERIALIZED.get(name, name)} - {name}):
            visit(ref)
        order.append(name)

    for name in view_names():
        visit(name)
    return order


def register(spark: SparkSession, store_path: str | os.PathLike[str]) -> list[str]:
    """Create every view of the store at ``store_path`` on ``spark``; return their names.

    Temp views of the session: ``raw_*`` (the published files), ``metric_specs``, the
    ``stg_`` / ``int_`` / ``mart_`` views and the friendly names. Raises
    :class:`UntranslatableSQL` naming the view, construct and line a view cannot be run by.
    """
    from pyspark.sql.pandas.types import from_arrow_schema

    from hylo_analytics.store import _metric_specs_sql

    root = os.fspath(store_path).rstrip("/")
    batches, current, resolved = _read_batches(spark, root)
    local = None if _is_uri(root) else Path(root.removeprefix("file://"))
    columns: dict[str, Sequence[str]] = {}
    created: list[str] = []
    for table, schema in _schema.SCHEMAS.items():
        files = [f"{root}/batches/{b}/{table}.parquet" for b in batches]
        if local is not None:  # a read-only store may lack a table's file in batch 0
            files = [f for f in files if Path(f.removeprefix("file://")).exists()]
        typed = from_arrow_schema(schema)
        reader = spark.read.schema(typed)
        if not current:
            reader = reader.option("mergeSchema", "true")
        # a table no batch has a file of (a store older than the table): empty, typed
        frame = reader.parquet(*files) if files else spark.createDataFrame([], typed)
        frame.createOrReplaceTempView(f"raw_{table}")
        columns[f"raw_{table}"] = schema.names
        created.append(f"raw_{table}")
    spark.sql(to_spark("metric_specs", _metric_specs_sql())).createOrReplaceTempView("metric_specs")
    created.append("metric_specs")
    for name in view_order():
        # the resolution the store wrote at publish; a store not resolved yet reads the rule
        sql = (
            f"select * from {MATERIALIZED[name]}"
            if name in MATERIALIZED and not resolved
            else view_sql(name)
        )
        frame = spark.sql(to_spark(name, sql, columns))
        frame.createOrReplaceTempView(name)
        columns[name] = frame.columns
        created.append(name)
    for name in _FRIENDLY:
        spark.table(f"stg_{name}").createOrReplaceTempView(name)
        created.append(name)
    return created


def local_session(app_name: str = "hylo-analytics", cores: int = 2, **conf: Any) -> SparkSession:
    """A local-mode SparkSession set up for one machine: ``local[cores]``, UTC, no UI.

    Bound to 127.0.0.1 (``SPARK_LOCAL_IP``) so a host name that does not resolve is no
    obstacle; few shuffle partitions, as the store's tables are small per query.

    Broadcast joins are decided at run time only (:data:`BROADCAST_DEFAULTS`). At plan time
    Spark sizes a Parquet table by its compressed bytes: at 10M samples ``raw_samples`` is
    10,481,883 bytes, just under the 10 MiB ``spark.sql.autoBroadcastJoinThreshold``, and the
    driver ran out of memory building its broadcast (the table is many times that size in
    memory). So that threshold is off (-1). Adaptive execution's own threshold,
    ``spark.sql.adaptive.autoBroadcastJoinThreshold``, is kept at Spark's 10 MiB: it is
    decided from a finished shuffle's row count and uncompressed row bytes, so a side is
    broadcast only when it really is small (a run filter's survivors, ``metric_specs``).
    Unset, it would follow the static threshold and be off too. Every ``conf`` given here
    (``--conf`` of ``hylo-analytics spark-sql``) overrides these; on an existing session
    (``getOrCreate``) the runtime SQL settings are applied again.
    """
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(max(2, cores)))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.bindAddress", "127.0.0.1")
    )
    for key, value in {**BROADCAST_DEFAULTS, **conf}.items():
        builder = builder.config(key, str(value))
    return builder.getOrCreate()


def spark_sql(spark: SparkSession, query: str, args: dict[str, Any] | None = None) -> pl.DataFrame:
    """``query`` (Spark SQL, named ``:params`` from ``args``) on ``spark`` as a polars frame."""
    import polars as pl

    frame = pl.from_arrow(spark.sql(query, args=args).toArrow())
    assert isinstance(frame, pl.DataFrame)
    return frame


def aggregate(spark: SparkSession) -> pl.DataFrame:
    """Counts, coverage, means, std, stderr and Wilson bounds per (run, metric), computed in
    Spark (``mart_aggregate_run`` of a :func:`register` ed session): the figures of
    ``Store.aggregate`` that need no resampling."""
    return spark_sql(spark, "select * from mart_aggregate_run")


def paired(spark: SparkSession, parent: str, metrics: Sequence[str] = ("success",)) -> pl.DataFrame:
    """Every candidate against ``parent``: paired wins, losses, ties, dropped per metric, counted
    in Spark (``mart_compare``, level ``overall``), with the one-sided exact McNemar
    ``p_mcnemar`` (candidate better) computed here from those counts, as ``Store.compare``
    computes its ``p_mcnemar`` (its verdict's test, ``p_value``, needs the pairs: Tango's
    score test for 0/1 metrics, the bootstrap of the mean otherwise)."""
    import polars as pl

    from hylo_analytics.stats import mcnemar_p

    frame = spark_sql(
        spark,
        "select candidate, parent, metric, n_pairs, candidate_wins, parent_wins, ties, "
        "n_dropped, mean_diff from mart_compare where parent = :parent and level = 'overall' "
        "and array_contains(:metrics, metric) order by candidate, metric",
        {"parent": parent, "metrics": list(metrics)},
    )
    p = mcnemar_p(frame["candidate_wins"].to_numpy(), frame["parent_wins"].to_numpy())
    return frame.with_columns(pl.Series("p_mcnemar", p, pl.Float64))
