"""mart_success_rates: errored episodes count as failures in one rate and not in the other;
other abstentions are in neither."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import hylo_analytics as ha


def test_two_rates(tmp_path: Path) -> None:
    store = ha.open_store(tmp_path / "s")
    values = [1.0, 1.0, 0.0, None, None, None]
    reasons = [None, None, None, "harness error: timeout", "harness error: crash", "abstained"]
    scores = pa.table(
        {
            "run_id": ["r"] * 6,
            "key": [f"t#{i}" for i in range(6)],
            "task_id": ["t"] * 6,
            "metric": ["success"] * 6,
            "value": pa.array(values, pa.float64()),
            "valid": [v is not None for v in values],
            "skip_reason": reasons,
            "source": ["evallog"] * 6,
            "source_kind": ["imported"] * 6,
        }
    )
    runs = pa.table({"run_id": ["r"], "agent_name": ["a"], "source_format": ["vla-eval"]})
    # an error is an episode whose sample status is 'error', whatever its skip reason says
    samples = pa.table(
        {
            "run_id": ["r"] * 6,
            "key": [f"t#{i}" for i in range(6)],
            "epoch": [1] * 6,
            "status": ["success", "success", "failure", "error", "error", "success"],
        }
    )
    scores = scores.append_column("epoch", pa.array([1] * 6, pa.int64()))
    with store.parquet.lock():
        store.parquet.commit({"runs": runs, "samples": samples, "scores": scores})
    row = store.sql("SELECT * FROM mart_success_rates").row(0, named=True)
    assert (row["n_total"], row["n_valid"], row["n_errors"], row["n_skipped_other"]) == (
        6,
        5,
        2,
        1,
    )
    assert row["success_rate_errors_excluded"] == pytest.approx(2 / 3)
    assert row["success_rate_errors_as_failures"] == pytest.approx(2 / 5)
    # the run's own rate is its harness's (vla-eval: errors are failures), with the Wilson
    # interval of that rate; each of the two named rates has its own
    from hylo_analytics import stats as iv

    assert row["errors"] == "failure" and row["success_rate"] == pytest.approx(2 / 5)
    lo, hi = iv.wilson([2], [5])
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((lo[0], hi[0]))
    lo, hi = iv.wilson([2], [3])
    assert (row["errors_excluded_ci_low"], row["errors_excluded_ci_high"]) == pytest.approx(
        (lo[0], hi[0])
    )
