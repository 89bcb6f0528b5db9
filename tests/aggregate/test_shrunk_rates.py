"""shrunk_rates(): per-task counts from the aggregate, one prior per run on a suite, the
stats.shrinkage figures as a frame; on a store (Store.shrink) and at 2,000 runs."""

from __future__ import annotations

import inspect
import time

import numpy as np
import polars as pl
import pytest

import hylo_analytics as ha
from hylo_analytics import api
from hylo_analytics.aggregate import aggregate_scores, shrunk_rates
from hylo_analytics.errors import InputError, SelectionError
from hylo_analytics.stats.beta_binomial import fit_beta_binomial
from hylo_analytics.stats.shrinkage import shrink_rates

# successes out of 10 episodes per task, per run; run "c" has two suites
WINS = {("a", "libero_spatial"): [9, 7, 10, 4, 8, 6], ("b", "libero_spatial"): [2, 5, 3, 5, 1, 4],
        ("c", "libero_spatial"): [6, 6, 5, 7], ("c", "libero_goal"): [1, 9, 0, 10, 3]}  # fmt: skip
COLUMNS = ["run_id", "benchmark_id", "task_id", "metric", "k", "n", "raw_rate", "raw_lo",
           "raw_hi", "shrunk_rate", "shrunk_lo", "shrunk_hi", "shrink_weight", "prior_mean",
           "prior_a", "prior_b", "pooling", "n_tasks", "errors", "ci_level", "ci_method"]  # fmt: skip


def _scores(wins: dict[tuple[str, str], list[int]], n: int = 10) -> pl.DataFrame:
    rows = [
        {"run_id": run, "benchmark_id": suite, "task_id": f"{suite}/t{t}", "key": f"{suite}/t{t}#{e}",
         "metric": "success", "value": float(e < k)}
        for (run, suite), ks in wins.items() for t, k in enumerate(ks) for e in range(n)
    ]  # fmt: skip
    return pl.DataFrame(rows)


def test_one_prior_per_run_and_suite_the_stats_figures() -> None:
    out = shrunk_rates(_scores(WINS), level=0.9)
    assert out.columns == COLUMNS  # split: not in the frame, dropped from the suite
    assert out.height == sum(len(v) for v in WINS.values())
    for (run, suite), ks in WINS.items():
        rows = out.filter(pl.col("run_id") == run, pl.col("benchmark_id") == suite)
        want = shrink_rates(ks, [10] * len(ks), level=0.9)
        assert rows["k"].to_list() == ks and rows["n"].to_list() == [10] * len(ks)
        assert rows["shrunk_rate"].to_numpy() == pytest.approx(want.shrunk, rel=1e-12)
        assert rows["shrunk_lo"].to_numpy() == pytest.approx(want.low, rel=1e-12)
        assert rows["shrunk_hi"].to_numpy() == pytest.approx(want.high, rel=1e-12)
        assert rows["raw_lo"].to_numpy() == pytest.approx(want.raw_low, rel=1e-12)
        fit = fit_beta_binomial(ks, [10] * len(ks))
        assert rows["pooling"].unique().to_list() == [str(fit.pooling[0])]
        assert rows["prior_mean"].unique().to_list() == pytest.approx([fit.mean[0]])
        assert rows["n_tasks"].unique().to_list() == [len(ks)]
    # the raw interval is the aggregate's own Wilson interval of each (run, task)
    agg = aggregate_scores(_scores(WINS), ["run_id", "benchmark_id", "task_id"], level=0.9)
    both = out.join(agg, on=["run_id", "benchmark_id", "task_id"])
    assert both["raw_lo"].to_list() == pytest.approx(both["ci_low"].to_list(), rel=1e-12)
    assert both["raw_hi"].to_list() == pytest.approx(both["ci_high"].to_list(), rel=1e-12)
    assert set(out["ci_method"]) == {"hierarchical (flat mean and icc)"}
    assert set(out["ci_level"]) == {0.9}


def test_a_point_mass_prior_has_no_shape_and_every_task_the_pooled_rate() -> None:
    out = shrunk_rates(_scores({("d", "s"): [5, 5, 6, 4, 5]}))
    assert out["pooling"].unique().to_list() == ["complete"]
    assert out["prior_a"].is_null().all() and out["prior_b"].is_null().all()
    assert out["shrunk_rate"].to_list() == pytest.approx([0.5] * 5)
    assert out["shrink_weight"].to_list() == pytest.approx([1.0] * 5)


def test_suite_and_group_columns_are_the_callers() -> None:
    scores = _scores(WINS)
    pooled = shrunk_rates(scores, suite=())  # every task of a run together
    assert pooled.filter(pl.col("run_id") == "c")["n_tasks"].unique().to_list() == [9]
    by_suite = shrunk_rates(scores, by=["benchmark_id"], suite=(), task=["run_id", "task_id"])
    assert by_suite["n_tasks"].unique().sort().to_list() == [5, 16]
    assert shrunk_rates(scores, interval="plain")["ci_method"][0] == "eb posterior"


def test_refusals() -> None:
    scores = _scores(WINS)
    steps = scores.with_columns(metric=pl.lit("steps"), value=pl.col("value") * 37 + 3)
    with pytest.raises(InputError, match=r"metric 'steps' is not 0/1 .* success rates"):
        shrunk_rates(steps, metric="steps")
    with pytest.raises(SelectionError, match=r"no scores of metric\(s\) \['done'\]"):
        shrunk_rates(scores, metric="done")
    with pytest.raises(InputError, match="none of the task columns"):
        shrunk_rates(scores.drop("task_id"))


def test_the_facades_defaults_are_the_engines() -> None:
    from hylo_analytics.aggregate.shrinkage import SUITE_COLUMNS
    from hylo_analytics.stats.shrinkage import DEFAULT_BOOTSTRAP

    params = inspect.signature(api.Store.shrink).parameters
    assert params["suite"].default == SUITE_COLUMNS
    assert params["n_resamples"].default == DEFAULT_BOOTSTRAP


@pytest.mark.slow
def test_store_shrink_reads_the_aggregates_cells(sample_store: ha.Store) -> None:
    out = sample_store.shrink()
    runs = sample_store.runs()
    assert out.columns[:4] == ["run_id", "benchmark_id", "split", "task_id"]
    assert out["run_id"].n_unique() == runs.height and out["n_tasks"].unique().to_list() == [10]
    agg = sample_store.aggregate(by=["run_id", "benchmark_id", "split", "task_id"],
                                 metrics=["success"])  # fmt: skip
    both = out.join(agg, on=["run_id", "benchmark_id", "split", "task_id"])
    assert both.height == out.height
    assert both["n"].to_list() == both["n_valid"].to_list()
    assert both["raw_rate"].to_list() == pytest.approx(both["mean"].to_list(), rel=1e-12)
    first = runs["run_id"][0]
    one = sample_store.shrink(first, errors="failure")
    assert one["run_id"].unique().to_list() == [first] and one["errors"][0] == "failure"
    assert one["n"].sum() >= out.filter(pl.col("run_id") == first)["n"].sum()
    with pytest.raises(InputError, match="not 0/1"):
        sample_store.shrink(metric="steps")


@pytest.mark.slow
def test_two_thousand_runs_of_ten_tasks() -> None:
    rng = np.random.default_rng(0)
    runs, tasks, episodes = 2000, 10, 10
    p = rng.beta(np.repeat(rng.uniform(1, 8, runs), tasks),
                 np.repeat(rng.uniform(1, 8, runs), tasks))  # fmt: skip
    k = rng.binomial(episodes, p)
    e = np.arange(episodes)
    scores = pl.DataFrame({
        "run_id": np.repeat([f"r{i:04d}" for i in range(runs)], tasks * episodes),
        "benchmark_id": "libero_10",
        "task_id": np.tile(np.repeat([f"t{t}" for t in range(tasks)], episodes), runs),
        "key": np.tile([f"s{x}" for x in e], runs * tasks),
        "metric": "success",
        "value": (np.tile(e, runs * tasks) < np.repeat(k, episodes)).astype(float),
    })  # fmt: skip
    start = time.perf_counter()
    out = shrunk_rates(scores)
    seconds = time.perf_counter() - start
    assert out.height == runs * tasks and out["k"].to_list() == k.tolist()
    assert seconds < 30, f"{seconds:.1f} s"  # under a second here (docs/benchmarks.md)
    shrunk, raw = out["shrunk_rate"].to_numpy(), out["raw_rate"].to_numpy()
    assert np.mean((shrunk - p) ** 2) < np.mean((raw - p) ** 2)
