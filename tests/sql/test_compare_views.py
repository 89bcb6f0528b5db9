"""int_paired and mart_compare agree with Store.compare on the same store."""

from __future__ import annotations

import polars as pl
import pytest

import hylo_analytics as ha

COUNTS = ["n_pairs", "candidate_wins", "parent_wins", "ties", "n_dropped"]
RUNS = ["run-octo-ft-1.0.0-0000", "run-octo-ft-1.1.0-0001", "run-octo-ft-1.2.0-rc1-0002"]


@pytest.mark.parametrize("parent", RUNS)
def test_mart_compare_equals_python(sample_store: ha.Store, parent: str) -> None:
    cands = [r for r in RUNS if r != parent]
    metrics = ["success", "steps", "safety_interventions"]
    py = sample_store.compare(cands, parent, metrics=metrics, by=["task_id"], ci="none")
    sql = sample_store.sql("SELECT * FROM mart_compare WHERE parent = $p", {"p": parent})
    keys = ["candidate", "metric", "level", "task_id"]
    a = py.select(*keys, *COUNTS, "mean_diff").sort(keys, nulls_last=True)
    b = sql.select(*keys, *COUNTS, "mean_diff").sort(keys, nulls_last=True)
    assert a.height == b.height == 2 * 3 * 11
    assert a.select(*keys, *COUNTS).equals(b.select(*keys, *COUNTS))
    assert (a["mean_diff"] - b["mean_diff"]).abs().max() < 1e-12  # type: ignore[operator]


def test_int_paired_is_symmetric_and_direction_aware(sample_store: ha.Store) -> None:
    p = sample_store.sql("SELECT * FROM int_paired")
    swapped = p.select(
        pl.col("parent").alias("candidate"),
        pl.col("candidate").alias("parent"),
        "key",
        "metric",
        pl.col("outcome").replace({"candidate": "parent", "parent": "candidate"}),
    )
    keys = ["candidate", "parent", "key", "metric"]
    left = p.select(*keys, "outcome").sort(keys)
    assert left.equals(swapped.sort(keys))
    steps = p.filter(pl.col("metric") == "steps", pl.col("outcome") == "candidate")
    assert (steps["candidate_value"] < steps["parent_value"]).all()
    dropped = p.filter(pl.col("outcome") == "dropped")
    assert (dropped["candidate_value"].is_null() | dropped["parent_value"].is_null()).all()
