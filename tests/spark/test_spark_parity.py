"""Every view on Spark equals the same view on DuckDB, row for row (floats to 1e-9)."""

from __future__ import annotations

import json
import math
import shutil
import time
from pathlib import Path

import polars as pl
import pytest

import hylo_analytics as ha
from hylo_analytics._manifest import StoreError
from hylo_analytics._sql import view_names
from hylo_analytics.spark import register, spark_sql
from hylo_analytics.testing.older import strip_resolution

_FLOATS = (pl.Float32, pl.Float64)


def _normal(frame: pl.DataFrame) -> pl.DataFrame:
    """One representation per value: ints as Int64, times as epoch microseconds, nested
    values as sorted-key JSON text, so two engines' frames compare cell for cell."""
    cols = []
    for name, dtype in frame.schema.items():
        col = pl.col(name)
        if dtype in _FLOATS:
            cols.append(col.cast(pl.Float64))
        elif dtype.is_integer():
            cols.append(col.cast(pl.Int64))
        elif isinstance(dtype, pl.Datetime):
            cols.append(col.dt.epoch("us"))
        elif dtype.is_nested():
            text = [
                None if v is None else json.dumps(v, sort_keys=True) for v in frame[name].to_list()
            ]
            cols.append(pl.Series(name, text, pl.String).alias(name))
        else:
            cols.append(col)
    out = frame.select(cols)
    exact = [c for c, t in out.schema.items() if t not in _FLOATS]
    floats = [c for c, t in out.schema.items() if t in _FLOATS]
    keys = exact + [pl.col(c).round(6) for c in floats]
    return out.sort(keys, nulls_last=True) if keys else out


def assert_same_rows(view: str, spark_frame: pl.DataFrame, duck_frame: pl.DataFrame) -> None:
    assert spark_frame.columns == duck_frame.columns, view
    assert spark_frame.height == duck_frame.height, (
        f"{view}: {spark_frame.height} rows vs {duck_frame.height}"
    )
    s, d = _normal(spark_frame), _normal(duck_frame)
    for name in d.columns:
        a, b = s[name].to_list(), d[name].to_list()
        if d.schema[name] in _FLOATS:
            bad = [
                (i, x, y) for i, (x, y) in enumerate(zip(a, b, strict=True))
                if not (x is None and y is None)
                and not (x is not None and y is not None and (
                    (math.isnan(x) and math.isnan(y)) or x == y
                    or abs(x - y) <= 1e-9 * max(1.0, abs(y))
                ))
            ]  # fmt: skip
        else:
            bad = [(i, x, y) for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
        assert not bad, (
            f"{view}.{name}: {len(bad)} rows differ, first (row, spark, duckdb): {bad[:3]}"
        )


def _parity(spark: object, store: ha.Store, label: str) -> dict[str, tuple[float, float]]:
    t = time.perf_counter()
    names = register(spark, store.root)  # type: ignore[arg-type]
    timings = {"(register)": (time.perf_counter() - t, 0.0)}
    assert set(view_names()) <= set(names)
    for view in view_names():
        t = time.perf_counter()
        on_spark = spark_sql(spark, f"select * from {view}")
        t_spark = time.perf_counter() - t
        t = time.perf_counter()
        on_duck = store.sql(f"select * from {view}")
        timings[view] = (t_spark, time.perf_counter() - t)
        assert_same_rows(f"{label}:{view}", on_spark, on_duck)
    print(f"\n{label} (seconds: spark, duckdb)")
    for view, (a, b) in timings.items():
        print(f"  {view:28s} {a:7.2f} {b:7.3f}")
    return timings


def test_sample_store_views_agree(spark: object, spark_sample_store: ha.Store) -> None:
    # the sample re-scored: scores of two kinds, so the resolution rule is exercised
    assert (
        spark_sample_store.sql("select count(distinct source_kind) n from stg_scores")["n"][0] >= 2
    )
    # declared pairs, so the pairing views are compared on rows, not on two empty tables
    assert spark_sample_store.sql("select count(*) n from mart_compare")["n"][0] > 0
    _parity(spark, spark_sample_store, "sample")


def test_generated_store_views_agree(spark: object, generated_store: ha.Store) -> None:
    runs = generated_store.sql("select count(*) n from stg_runs")["n"][0]
    assert runs >= 200
    # superseded rows exist, so the stg_ views' tombstone rule is exercised on both engines
    assert generated_store.sql("select count(*) n from raw_tombstones")["n"][0] > 0
    failed = generated_store.sql("select failed_policies from mart_run_policy_status")
    assert ["alpha", "zeta"] in failed["failed_policies"].to_list()
    assert generated_store.sql("select count(*) n from int_paired")["n"][0] > 0
    _parity(spark, generated_store, "generated")


def test_a_store_not_resolved_yet_reads_the_rule_on_both_engines(
    spark: object, spark_sample_store: ha.Store, tmp_path: Path
) -> None:
    """A store an older version wrote (no resolved_scores, no flag): Spark reads the rule too."""
    root = tmp_path / "older"
    shutil.copytree(spark_sample_store.root, root)
    strip_resolution(root)
    older = ha.open_store(root, create=False)
    assert not older.parquet.manifest.resolved
    register(spark, root)
    for view in ("int_scores_preferred", "int_key_scores", "mart_aggregate_run"):
        on_spark = spark_sql(spark, f"select * from {view}")
        assert on_spark.height > 0
        assert_same_rows(f"older:{view}", on_spark, older.sql(f"select * from {view}"))
        assert_same_rows(
            f"resolved:{view}", on_spark, spark_sample_store.sql(f"select * from {view}")
        )


def test_friendly_names_and_raw_tables(spark: object, spark_sample_store: ha.Store) -> None:
    register(spark, str(spark_sample_store.root) + "/")  # a string is passed through as is
    n_spark = spark_sql(spark, "select count(*) as n from runs")["n"][0]
    assert n_spark == spark_sample_store.sql("select count(*) as n from runs")["n"][0] == 3
    raw = spark_sql(spark, "select count(*) as n from raw_scores")["n"][0]
    assert raw == spark_sample_store.sql("select count(*) as n from raw_scores")["n"][0]


def test_a_missing_store_is_a_clear_error(spark: object, tmp_path: object) -> None:
    with pytest.raises(StoreError, match="no store at"):
        register(spark, str(tmp_path))
