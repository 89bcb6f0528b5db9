"""Python-API answers counted in Spark equal Store.aggregate / Store.compare."""

from __future__ import annotations

import polars as pl

import hylo_analytics as ha
from hylo_analytics.spark import aggregate, paired, register

RUNS = ["run-octo-ft-1.0.0-0000", "run-octo-ft-1.1.0-0001", "run-octo-ft-1.2.0-rc1-0002"]


def test_aggregate_equals_store_aggregate(spark: object, spark_sample_store: ha.Store) -> None:
    register(spark, spark_sample_store.root)  # type: ignore[arg-type]
    keys = ["run_id", "metric"]
    got = aggregate(spark).sort(keys)  # type: ignore[arg-type]
    want = spark_sample_store.aggregate().sort(keys)
    assert got.height == want.height >= 9  # 3 runs, the logged and the re-scored metrics
    counts = ["n_total", "n_valid", "n_skipped", "n_errors"]
    assert (
        got.select(*keys, *counts)
        .cast({c: pl.Int64 for c in counts})
        .equals(want.select(*keys, *counts))
    )
    for col in ["mean", "std", "stderr", "coverage"]:
        assert (got[col] - want[col]).abs().max() < 1e-12, col  # type: ignore[operator]
    binary = want.filter(pl.col("ci_method") == "wilson").select(*keys, "ci_low", "ci_high")
    spark_wilson = got.join(binary, on=keys)
    assert spark_wilson.height == binary.height >= 3
    assert (spark_wilson["wilson_low"] - spark_wilson["ci_low"]).abs().max() < 1e-12  # type: ignore[operator]
    assert (spark_wilson["wilson_high"] - spark_wilson["ci_high"]).abs().max() < 1e-12  # type: ignore[operator]


def test_paired_counts_and_mcnemar_equal_store_compare(
    spark: object, spark_sample_store: ha.Store
) -> None:
    register(spark, spark_sample_store.root)  # type: ignore[arg-type]
    parent, cands = RUNS[0], RUNS[1:]
    got = paired(spark, parent, ["success", "steps"])  # type: ignore[arg-type]
    want = spark_sample_store.compare(cands, parent, metrics=["success", "steps"], ci="none")
    want = want.filter(pl.col("level") == "overall").sort("candidate", "metric")
    counts = ["n_pairs", "candidate_wins", "parent_wins", "ties", "n_dropped"]
    assert got.height == want.height == 4
    assert got.select("candidate", "metric", *counts).equals(
        want.select("candidate", "metric", *counts)
    )
    assert (got["p_mcnemar"] - want["p_mcnemar"]).abs().max() < 1e-12  # type: ignore[operator]
    assert got["p_mcnemar"].min() < 0.05  # something to find: not all ones
