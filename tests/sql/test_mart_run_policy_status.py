"""mart_run_policy_status: literal policy_results rows in, exact final statuses out."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

import hylo_analytics as ha


def test_final_status_per_run(tmp_path: Path) -> None:
    store = ha.open_store(tmp_path / "s")
    runs = pa.table({"run_id": ["ok", "fail", "unk", "diag", "none"], "status": ["success"] * 5})
    results = pa.table(
        {
            "run_id": ["ok", "fail", "fail", "unk", "diag"],
            "key": ["a", "a", "b", "a", None],
            "policy": ["p", "p", "p", "p", "watch"],
            "metric": ["m"] * 5,
            "passed": [True, True, False, None, False],
            "role": ["constraint", "constraint", "constraint", "constraint", "diagnostic"],
        }
    )
    with store.parquet.lock():
        store.parquet.commit({"runs": runs, "policy_results": results})
    got = store.sql(
        "select run_id, status, n_checks, n_failed, n_unchecked, final_status "
        "from mart_run_policy_status order by run_id"
    )
    assert got.rows() == [
        ("diag", "success", 1, 0, 0, "passed"),  # a failed diagnostic policy changes nothing
        ("fail", "success", 2, 1, 0, "failed_policy"),
        ("none", "success", 0, 0, 0, "passed"),
        ("ok", "success", 1, 0, 0, "passed"),
        ("unk", "success", 1, 0, 1, "unverified"),
    ]
