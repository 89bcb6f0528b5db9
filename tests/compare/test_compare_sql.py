"""Store.compare (the store's resolved rows paired where they lie) equals compare_scores on the
same rows read as a frame: every column, bootstrap bounds bit for bit, on random stores."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

import hylo_analytics as ha
from hylo_analytics.compare import compare_scores
from hylo_analytics.resolution import preferred_scores

RUNS = ("p", "c1", "c2")
STEPS_VALUES = (3.0, 7.5, 12.0, 20.25)  # exact in binary: sums of them are order-free


def _store(root: Path, seed: int) -> ha.Store:
    """Three runs of random keys, epochs, 0/1 successes, numeric steps, abstentions and
    errored episodes."""
    rng = np.random.default_rng(seed)
    runs, samples, scores = [], [], []
    for run in RUNS:
        runs.append(
            {
                "run_id": run,
                "source_format": "hylo.evallog/v0.1",
                "source_path": str(root / run),
                "benchmark_id": "bench",
                "benchmark_digest": "sha256:d",
                "split": "test",
                "agent_name": run,
                "agent_version": "1",
                "status": "success",
            }
        )
        for task in ("t0", "t1", "t2"):
            for s in range(int(rng.integers(1, 6))):
                key = f"{task}#{s}"
                for epoch in range(1, int(rng.choice([1, 1, 2, 3])) + 1):
                    errored = rng.random() < 0.15
                    ident = {
                        "run_id": run,
                        "key": key,
                        "task_id": task,
                        "seed": s,
                        "epoch": epoch,
                        "episode_id": f"{run}-{key}-{epoch}",
                    }
                    status = "error" if errored else "success"
                    samples.append({**ident, "status": status, "trace_status": "none"})
                    for metric in ("success", "steps"):
                        value: float | None
                        if errored:
                            value, reason = None, "episode errored"
                        elif rng.random() < 0.1:
                            value, reason = None, "abstained"
                        elif metric == "success":
                            value, reason = float(rng.random() < 0.6), None
                        else:
                            value, reason = float(rng.choice(STEPS_VALUES)), None
                        scores.append(
                            {
                                **ident,
                                "metric": metric,
                                "value": value,
                                "valid": value is not None,
                                "skip_reason": reason,
                                "source": "evallog",
                                "source_kind": "imported",
                                "scorer_version": "",
                            }
                        )
    store = ha.open_store(root)
    with store.parquet.lock():
        store.parquet.commit(
            {
                "runs": pa.Table.from_pylist(runs),
                "samples": pa.Table.from_pylist(samples),
                "scores": pa.Table.from_pylist(scores),
            }
        )
    return store


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    seed=st.integers(0, 2**31),
    by=st.sampled_from([(), ("task_id",)]),
    pair_on_epoch=st.booleans(),
    errors=st.sampled_from([None, "failure", "exclude"]),
    ci=st.sampled_from(["auto", "percentile", "newcombe"]),
)
@pytest.mark.slow
def test_the_store_path_equals_the_frame_path(
    tmp_path_factory: pytest.TempPathFactory,
    seed: int,
    by: tuple[str, ...],
    pair_on_epoch: bool,
    errors: str | None,
    ci: Any,
) -> None:
    store = _store(tmp_path_factory.mktemp("cmp"), seed)
    options: dict[str, Any] = {
        "by": by,
        "pair_on_epoch": pair_on_epoch,
        "errors": errors,
        "ci": ci,
        "n_resamples": 200,
        "seed": seed,
    }
    metrics = ["success", "steps"]
    got = store.compare(["c1", "c2"], "p", metrics=metrics, **options)
    frame = preferred_scores(store, runs=list(RUNS), metrics=metrics).drop("source")
    want = compare_scores(frame, candidates=["c1", "c2"], parent="p", metrics=metrics, **options)
    keys = ["candidate", "metric", "level", *by]
    assert_frame_equal(got.sort(keys), want.sort(keys), check_exact=True)
    assert got.height == want.height > 0
