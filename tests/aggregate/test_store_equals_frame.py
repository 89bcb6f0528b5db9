"""The store path of ``aggregate`` equals the frame path over the store's resolved scores."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

import hylo_analytics as ha
from hylo_analytics.aggregate import aggregate_scores
from hylo_analytics.resolution import preferred_scores

# (value of success, value of steps): a number, or None for an abstention with a reason
_SUCCESS = st.sampled_from([0.0, 1.0, 1.0, None])
_STEPS = st.one_of(st.integers(0, 40).map(float), st.floats(0, 50, width=32), st.none())
_EPISODE = st.tuples(
    st.integers(0, 2),  # task
    st.integers(0, 2),  # seed
    st.integers(0, 2),  # epoch
    st.booleans(),  # errored
    _SUCCESS,
    _STEPS,
    st.booleans(),  # a re-scorer's abstention as a second source of success
)
_RUNS = st.lists(st.lists(_EPISODE, min_size=1, max_size=12), min_size=1, max_size=3)


def _store(root: Path, runs: list[list[tuple[Any, ...]]]) -> ha.Store:
    run_rows, samples, scores = [], [], []
    for r, episodes in enumerate(runs):
        run = f"run{r}"
        run_rows.append(
            {
                "run_id": run,
                "source_format": "hylo.evallog/v0.1",
                "benchmark_id": "bench",
                "split": "test",
                "agent_name": f"agent{r % 2}",
                "agent_version": "1",
                "status": "success",
            }
        )
        seen = set()
        for task, seed, epoch, errored, success, steps, rescored in episodes:
            key = f"t{task}#{seed}"
            if (key, epoch) in seen:
                continue
            seen.add((key, epoch))
            samples.append(
                {
                    "run_id": run,
                    "key": key,
                    "task_id": f"t{task}",
                    "seed": seed,
                    "epoch": epoch,
                    "episode_id": f"{run}-{key}-{epoch}",
                    "status": "error" if errored else "success",
                    "trace_status": "none",
                }
            )
            base = {
                "run_id": run,
                "key": key,
                "task_id": f"t{task}",
                "seed": seed,
                "epoch": epoch,
                "episode_id": f"{run}-{key}-{epoch}",
            }
            for metric, value in (("success", success), ("steps", steps)):
                reason = "harness error: timeout" if errored else f"no {metric}"
                scores.append(
                    {
                        **base,
                        "metric": metric,
                        "value": value,
                        "valid": value is not None,
                        "skip_reason": None if value is not None else reason,
                        "source": "evallog",
                        "source_kind": "imported",
                        "scorer_version": "",
                    }
                )
            if rescored:
                scores.append(
                    {
                        **base,
                        "metric": "success",
                        "value": None,
                        "valid": False,
                        "skip_reason": "no trace",
                        "source": "scorer:success",
                        "source_kind": "score",
                        "scorer_version": "builtin/1",
                    }
                )
    store = ha.open_store(root / "store")
    with store.parquet.lock():
        store.parquet.commit(
            {
                "runs": pa.Table.from_pylist(run_rows),
                "samples": pa.Table.from_pylist(samples),
                "scores": pa.Table.from_pylist(scores),
            }
        )
    return store


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    runs=_RUNS,
    by=st.sampled_from([["run_id"], ["run_id", "task_id"], ["agent_name"], ["agent_name", "seed"]]),
    reduce=st.sampled_from(["mean", "max", "at_least(1)"]),
)
@pytest.mark.slow
def test_store_path_equals_frame_path(
    runs: list[list[tuple[Any, ...]]], by: list[str], reduce: str
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = _store(Path(tmp), runs)
        options: dict[str, Any] = {"n_resamples": 300, "seed": 3, "reducer": reduce}
        got = store.aggregate(by, statistics=[*ha.aggregate.STATISTICS, "sum"], **options)
        frame = preferred_scores(store)
        if "agent_name" in by:
            frame = frame.join(store.sql("select run_id, agent_name from stg_runs"), on="run_id")
        want = aggregate_scores(frame, by, statistics=[*ha.aggregate.STATISTICS, "sum"], **options)
        assert_frame_equal(got, want, check_exact=True)
        for metric in ("success", "steps"):
            one = store.aggregate(by, metrics=[metric], **options)
            assert_frame_equal(
                one, want.filter(pl.col("metric") == metric).select(one.columns), check_exact=True
            )


def test_runs_filter_is_the_same_answer_as_the_rows_of_those_runs(sample_store: ha.Store) -> None:
    """``runs=`` reads those runs at the scan; the rows equal the unfiltered call's."""
    runs = sorted(sample_store.runs()["run_id"])
    every = sample_store.aggregate(("run_id", "task_id"), ci="wilson", metrics=["success"])
    some = sample_store.aggregate(
        ("run_id", "task_id"), ci="wilson", metrics=["success"], runs=runs[1:]
    )
    assert set(some["run_id"]) == set(runs[1:])
    assert some.equals(every.filter(pl.col("run_id").is_in(runs[1:])))
    frame = sample_store.sql("select * from int_scores_preferred")
    on_frame = aggregate_scores(frame, ("run_id",), metrics=["success"], ci="wilson", runs=runs[:1])
    assert set(on_frame["run_id"]) == {runs[0]}
