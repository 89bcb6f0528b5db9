"""mart_task_ranks gives Store.critical_difference's average ranks with the runs as policies."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from flip_data import commit

import hylo_analytics as ha


def _store(root: Path, seed: int) -> ha.Store:
    """Two suites of 6 runs x 8 tasks x 5 keys; tied task means are common (5 keys), one
    run lacks a task, a task where only errors remain (no valid mean) for one run."""
    rng = np.random.default_rng(seed)
    runs, samples, scores = [], [], []
    for b in range(2):
        for r in range(6):
            run = f"b{b}-run-{r}"
            runs.append({"run_id": run, "agent_name": f"a{r}", "benchmark_id": f"bench-{b}",
                         "split": "test", "source_format": "hylo.evallog/v0.1"})  # fmt: skip
            p = rng.uniform(0.2, 0.8)
            for t in range(8):
                if r == 1 and t == 3:
                    continue  # a missing task
                for s in range(5):
                    key = f"t{t}#{s}"
                    value = None if (r == 2 and t == 5) else float(rng.uniform() < p)
                    base = {"run_id": run, "key": key, "task_id": f"t{t}", "epoch": 1}
                    samples.append({**base, "status": "error" if value is None else "success"})
                    scores.append(
                        {**base, "metric": "success", "value": value, "valid": value is not None,
                         "skip_reason": None if value is not None else "harness error: x",
                         "source": "evallog", "source_kind": "imported"}
                    )  # fmt: skip
    return commit(root, runs, samples, scores)


@pytest.mark.parametrize("seed", [0, 1])
def test_the_view_gives_the_critical_difference_ranks(tmp_path: Path, seed: int) -> None:
    store = _store(tmp_path / "s", seed)
    sql = store.sql("select * from mart_task_ranks order by benchmark_id, run_id")
    assert sql.height == 12
    for bench in ("bench-0", "bench-1"):
        view = sql.filter(pl.col("benchmark_id") == bench)
        runs = view["run_id"].to_list()
        cd = store.critical_difference(runs, policy="run_id").ranks
        both = view.join(cd, left_on="run_id", right_on="policy", suffix="_py")
        assert both.height == 6
        for col in ("avg_rank", "mean"):
            diff = (both[col] - both[f"{col}_py"]).abs().max()
            assert diff is not None and diff < 1e-12, col  # type: ignore[operator]
        for col in ("n_blocks", "n_missing"):
            assert both[col].to_list() == both[f"{col}_py"].to_list(), col
        # tasks 3 and 5 lack a run's valid mean: 6 complete tasks; ranks sum to k(k+1)/2
        assert set(view["n_blocks"]) == {6}
        assert view["avg_rank"].sum() == pytest.approx(21.0)
        assert view.filter(pl.col("n_missing") > 0)["run_id"].to_list() == [
            f"b{bench[-1]}-run-1",
            f"b{bench[-1]}-run-2",
        ]
