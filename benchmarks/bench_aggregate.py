"""Benchmark: mean + stderr + 10,000-resample bootstrap CI for every (run, task) group.

1,000 runs x 10 tasks x 50 seeds = 500,000 scores, 10,000 groups, built directly with numpy (no
ingest). Compared, in the same process, with ``scipy.stats.bootstrap`` called once per group and
with a plain-Python loop; both references are timed on a subset of groups and extrapolated
linearly (printed as such). Targets: all groups < 5 s; one group of 1,000,000 binary values
< 0.05 s.

    python benchmarks/bench_aggregate.py [--runs 1000] [--resamples 10000]
"""

from __future__ import annotations

import argparse
import math
import random
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl
from scipy import stats

from hylo_analytics import stats as intervals
from hylo_analytics.aggregate import aggregate_scores


def timed(fn: Callable[[], Any], repeat: int = 1) -> tuple[float, Any]:
    best, out = math.inf, None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def scores_frame(runs: int, tasks: int, seeds: int, rng: np.random.Generator) -> pl.DataFrame:
    n = runs * tasks * seeds
    run = np.repeat(np.arange(runs), tasks * seeds)
    task = np.tile(np.repeat(np.arange(tasks), seeds), runs)
    p = rng.beta(2, 2, size=(runs, tasks))[run, task]
    success = (rng.random(n) < p).astype(np.float64)
    steps = rng.gamma(4.0, 8.0, size=n).round()
    base = {"run_id": run.astype(str), "task_id": task.astype(str)}
    return pl.concat(
        [
            pl.DataFrame({**base, "metric": "success", "value": success}),
            pl.DataFrame({**base, "metric": "steps", "value": steps}),
        ]
    )


def python_loop(groups: list[list[float]], resamples: int, seed: int) -> list[tuple]:
    rnd = random.Random(seed)
    out = []
    for xs in groups:
        n = len(xs)
        mean = sum(xs) / n
        sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
        boot = sorted(sum(rnd.choices(xs, k=n)) / n for _ in range(resamples))
        out.append(
            (mean, sd / math.sqrt(n), boot[int(0.025 * resamples)], boot[int(0.975 * resamples)])
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--tasks", type=int, default=10)
    ap.add_argument("--seeds", type=int, default=50)
    ap.add_argument("--resamples", type=int, default=10_000)
    ap.add_argument("--subset", type=int, default=20, help="groups timed for the references")
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    df = scores_frame(a.runs, a.tasks, a.seeds, rng)
    n_groups = a.runs * a.tasks
    print(
        f"{df.height:,} scores ({df.height // 2:,} per metric: success 0/1, steps counts), "
        f"{n_groups:,} (run, task) groups per metric, B = {a.resamples:,}"
    )

    results: dict[str, float] = {}
    for metric, method in (
        ("success", "percentile"),
        ("success", "bca"),
        ("steps", "percentile"),
        ("steps", "bca"),
        ("steps", "studentized"),  # the default for continuous metrics since issue 12
    ):
        sub = df.filter(pl.col("metric") == metric)
        t, out = timed(
            lambda sub=sub, method=method: aggregate_scores(
                sub,
                by=["run_id", "task_id"],
                ci=method,
                n_resamples=a.resamples,
                seed=1,
                reducer=None,
            )
        )
        assert out.height == n_groups
        results[f"{metric}/{method}"] = t
        path = "binomial shortcut" if metric == "success" else "multinomial weights x matmul"
        flag = "OK" if t < 5 else "MISSED"
        print(
            f"aggregate_scores() {metric:7s} {method:10s} all groups: {t:6.2f} s  ({path}; target < 5 s: {flag})"
        )

    # References on a subset of the steps groups, extrapolated.
    steps = df.filter(pl.col("metric") == "steps")["value"].to_numpy().reshape(n_groups, a.seeds)
    k = min(a.subset, n_groups)
    t_scipy, _ = timed(
        lambda: [
            stats.bootstrap(
                (g,), np.mean, n_resamples=a.resamples, method="percentile", random_state=0
            )
            for g in steps[:k]
        ]
    )
    k_py = max(1, k // 4)
    t_py, _ = timed(lambda: python_loop([list(g) for g in steps[:k_py]], a.resamples, 0))
    scipy_all = t_scipy / k * n_groups
    py_all = t_py / k_py * n_groups
    ours = results["steps/percentile"]
    print(
        f"scipy.stats.bootstrap per group: {t_scipy:.2f} s for {k} groups -> extrapolated {scipy_all:,.0f} s for all ({scipy_all / ours:,.0f}x ours)"
    )
    print(
        f"plain-Python loop:              {t_py:.2f} s for {k_py} groups -> extrapolated {py_all:,.0f} s for all ({py_all / ours:,.0f}x ours)"
    )

    # One group of 1,000,000 binary values.
    big = (rng.random(1_000_000) < 0.3).astype(np.float64)
    t_big, _ = timed(
        lambda: intervals.bootstrap_ci(big, [big.size], n_resamples=a.resamples, seed=0), repeat=3
    )
    t_bca, _ = timed(
        lambda: intervals.bootstrap_ci(
            big, [big.size], method="bca", n_resamples=a.resamples, seed=0
        ),
        repeat=3,
    )
    big_df = pl.DataFrame({"run_id": "r", "metric": "success", "value": big})
    t_agg, _ = timed(
        lambda: aggregate_scores(
            big_df, ci="percentile", n_resamples=a.resamples, seed=0, reducer=None
        ),
        repeat=3,
    )
    t_scipy_big, _ = timed(
        lambda: stats.bootstrap(
            (big,), np.mean, n_resamples=200, method="percentile", random_state=0
        )
    )
    scipy_big = t_scipy_big / 200 * a.resamples
    print(
        f"n = 1,000,000 binary, bootstrap_ci percentile: {t_big * 1e3:.1f} ms, BCa: {t_bca * 1e3:.1f} ms (target < 50 ms: {'OK' if t_big < 0.05 else 'MISSED'})"
    )
    print(f"  aggregate_scores() end to end (polars statistics + interval): {t_agg * 1e3:.1f} ms")
    print(
        f"  scipy.stats.bootstrap, 200 resamples: {t_scipy_big:.2f} s -> extrapolated {scipy_big:,.0f} s for {a.resamples:,} ({scipy_big / t_big:,.0f}x ours)"
    )


if __name__ == "__main__":
    main()
