"""mart_pass_at_k gives Store.pass_at_k's points, under each run's errors policy."""

from __future__ import annotations

from math import comb
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from flip_data import commit

import hylo_analytics as ha
from hylo_analytics.stats.repeated import pass_at, pass_hat

HE = "harness error: timeout"


def _store(root: Path, seed: int) -> ha.Store:
    """Four runs of 30 keys with 1-6 epochs each: solved, failed, errored or abstained
    epochs; one run from a harness that counts an error as a failure (vla-eval), one with
    a metric that is not 0/1 (steps), left out of the view."""
    rng = np.random.default_rng(seed)
    runs, samples, scores = [], [], []
    for r, fmt in enumerate(["hylo.evallog/v0.1", "vla-eval", "hylo.evallog/v0.1", "inspect.eval"]):
        run = f"run-{r}"
        runs.append({"run_id": run, "agent_name": f"a{r}", "source_format": fmt})
        p = rng.uniform(0.1, 0.9)
        for t in range(30):
            key = f"t{t % 5}#{t}"
            for epoch in range(1, int(rng.integers(1, 7)) + 1):
                u = rng.uniform()
                value = None if u < 0.15 else float(rng.uniform() < p)
                why = None if value is not None else (HE if u < 0.1 else "grader abstained")
                base = {"run_id": run, "key": key, "task_id": key.split("#")[0],
                        "epoch": epoch}  # fmt: skip
                status = "error" if why == HE else "success" if value else "failure"
                samples.append({**base, "status": status})
                for metric, v in (("success", value), ("steps", None if value is None else 7.5)):
                    scores.append(
                        {**base, "metric": metric, "value": v, "valid": v is not None,
                         "skip_reason": why, "source": "evallog", "source_kind": "imported"}
                    )  # fmt: skip
    return commit(root, runs, samples, scores)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_view_gives_store_pass_at_k_points(tmp_path: Path, seed: int) -> None:
    store = _store(tmp_path / "s", seed)
    sql = store.sql("select * from mart_pass_at_k order by run_id, metric, k")
    assert set(sql["metric"]) == {"success"}  # steps is not 0/1
    assert sql["errors"].to_list() == [
        "failure" if r == "run-1" else "exclude" for r in sql["run_id"]
    ]
    py = store.pass_at_k(k=list(range(1, int(sql["k"].max()) + 1)))  # type: ignore[arg-type]
    both = sql.join(py, on=["run_id", "metric", "k"], suffix="_py", how="left")
    assert both.height == sql.height > 20
    for col in ("pass_at_k", "pass_hat_k"):
        diff = (both[col] - both[f"{col}_py"]).abs().max()
        assert diff is not None and diff < 1e-12, col  # type: ignore[operator]
    for col in ("n_items", "n_items_short", "n_samples", "errors"):
        assert both[col].to_list() == both[f"{col}_py"].to_list(), col
    # Python has a point (null where no key has k samples) for every k the view lacks
    missing = py.join(sql, on=["run_id", "metric", "k"], how="anti")
    assert missing["n_items"].to_list() == [0] * missing.height


def test_the_estimator_by_hand(tmp_path: Path) -> None:
    """One key of n = 5 epochs with c = 2 solved: 1 - C(3,k)/C(5,k) and C(2,k)/C(5,k)."""
    values = [1.0, 0.0, 1.0, 0.0, 0.0]
    rows = [
        {"run_id": "r", "key": "t#1", "task_id": "t", "epoch": e + 1, "metric": "success",
         "value": v, "valid": True, "skip_reason": None, "source": "evallog",
         "source_kind": "imported"}
        for e, v in enumerate(values)
    ]  # fmt: skip
    store = ha.open_store(tmp_path / "s")
    with store.parquet.lock():
        store.parquet.commit(
            {
                "runs": pa.table({"run_id": ["r"], "source_format": ["hylo.evallog/v0.1"]}),
                "samples": pa.Table.from_pylist(
                    [{k: r[k] for k in ("run_id", "key", "task_id", "epoch")} for r in rows]
                ),
                "scores": pa.Table.from_pylist(rows),
            }
        )
    got = store.sql("select k, pass_at_k, pass_hat_k from mart_pass_at_k order by k")
    assert got["k"].to_list() == [1, 2, 3, 4, 5]
    for k, at, hat in got.iter_rows():
        assert at == pytest.approx(1 - comb(3, k) / comb(5, k), rel=1e-12)
        assert hat == pytest.approx(comb(2, k) / comb(5, k), abs=1e-15)
        assert at == pytest.approx(float(pass_at(np.array([5]), np.array([2]), k)[0]))
        assert hat == pytest.approx(float(pass_hat(np.array([5]), np.array([2]), k)[0]))
    assert isinstance(got, pl.DataFrame)
