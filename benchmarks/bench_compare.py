"""Benchmark: 1,000 candidate runs x 500 keys against one parent, overall and per task.

The scores frame is built with numpy (no ingest). ``compare_scores`` (one polars join, all
candidates at once, vectorized McNemar, Holm/BH) is timed against a plain-Python reference
that loops over dicts per candidate and calls scipy once per test, as the foundation's
``paired_compare`` did. Target: < 0.5 s and >= 10x. Run: ``python benchmarks/bench_compare.py``.
"""

from __future__ import annotations

import time
from collections import defaultdict

import numpy as np
import polars as pl
from scipy import stats

from hylo_analytics.compare import compare_scores

N_CAND, N_TASKS, N_SEEDS = 1000, 10, 50  # 500 keys per run


def build() -> pl.DataFrame:
    rng = np.random.default_rng(0)
    n_keys = N_TASKS * N_SEEDS
    runs = np.array(["parent"] + [f"cand-{i:04d}" for i in range(N_CAND)])
    tasks = np.array([f"task/{t:02d}" for t in range(N_TASKS)])
    task_of_key = np.repeat(np.arange(N_TASKS), N_SEEDS)
    keys = np.char.add(
        np.char.add(tasks[task_of_key], "#"), np.tile(np.arange(N_SEEDS), N_TASKS).astype(str)
    )
    n_runs = runs.size
    skill = rng.uniform(0.3, 0.8, n_runs)
    values = (rng.random((n_runs, n_keys)) < skill[:, None]).astype(np.float64)
    values[rng.random((n_runs, n_keys)) < 0.03] = np.nan  # abstentions
    return pl.DataFrame(
        {
            "run_id": np.repeat(runs, n_keys),
            "key": np.tile(keys, n_runs),
            "task_id": np.tile(tasks[task_of_key], n_runs),
            "metric": "success",
            "value": values.ravel(),
        }
    ).with_columns(pl.col("value").fill_nan(None))


def reference(frame: pl.DataFrame) -> dict[tuple[str, str | None], tuple[int, int, int, float]]:
    """Plain Python: dicts per run, a loop over keys, one scipy call per test."""
    by_run: dict[str, dict[str, tuple[str, float | None]]] = defaultdict(dict)
    for run, key, task, value in zip(
        frame["run_id"].to_list(),
        frame["key"].to_list(),
        frame["task_id"].to_list(),
        frame["value"].to_list(),
        strict=True,
    ):
        by_run[run][key] = (task, value)
    parent = by_run.pop("parent")
    out = {}
    for cand, scores in by_run.items():
        counts: dict[str | None, list[int]] = defaultdict(lambda: [0, 0, 0])
        for key, (task, c) in scores.items():
            p = parent.get(key, (task, None))[1]
            if c is None or p is None:
                continue
            slot = 0 if c > p else 1 if c < p else 2
            counts[None][slot] += 1
            counts[task][slot] += 1
        for group, (w, lo, t) in counts.items():
            pval = float(stats.binom.sf(w - 1, w + lo, 0.5)) if w + lo else 1.0
            out[(cand, group)] = (w, lo, t, pval)
    return out


def foundation_style(frame: pl.DataFrame) -> int:
    """What the foundation's demo did: per candidate and task, dicts + scalar paired_compare."""
    runs: dict[str, dict[str | None, dict[str, float | None]]] = defaultdict(
        lambda: defaultdict(dict)
    )
    for run, key, task, value in zip(
        frame["run_id"].to_list(),
        frame["key"].to_list(),
        frame["task_id"].to_list(),
        frame["value"].to_list(),
        strict=True,
    ):
        runs[run][None][key] = value
        runs[run][task][key] = value
    parent = runs.pop("parent")
    n = 0
    for groups in runs.values():
        for group, cand in groups.items():
            shared = cand.keys() & parent[group].keys()
            kept = [(cand[k], parent[group][k]) for k in shared]
            kept = [(c, p) for c, p in kept if c is not None and p is not None]
            cw = sum(c > p for c, p in kept)
            pw = sum(c < p for c, p in kept)
            _ = float(stats.binom.sf(cw - 1, cw + pw, 0.5)) if cw + pw else 1.0
            n += 1
    return n


def main() -> None:
    t0 = time.perf_counter()
    frame = build()
    print(f"built {frame.height:,} score rows in {time.perf_counter() - t0:.2f} s")
    timings = []
    for _ in range(3):
        t0 = time.perf_counter()
        fast = compare_scores(
            frame,
            candidates=[f"cand-{i:04d}" for i in range(N_CAND)],
            parent="parent",
            by=["task_id"],
            ci="none",
        )
        timings.append(time.perf_counter() - t0)
    t_fast = min(timings)
    t0 = time.perf_counter()
    ref = reference(frame)
    t_ref = time.perf_counter() - t0
    got = {
        (c, t): (w, lo, ti, p)
        for c, t, w, lo, ti, p in fast.select(
            "candidate", "task_id", "candidate_wins", "parent_wins", "ties", "p_value"
        ).iter_rows()
    }
    assert got.keys() == ref.keys(), "row sets differ"
    assert all(got[k][:3] == ref[k][:3] and abs(got[k][3] - ref[k][3]) < 1e-12 for k in ref)
    print(
        f"compare_scores ({fast.height:,} rows, ci=none): best of 3 {t_fast:.3f} s "
        f"(runs: {', '.join(f'{t:.3f}' for t in timings)})"
    )
    print(f"plain-Python dict loop: {t_ref:.3f} s  ->  {t_ref / t_fast:.1f}x faster")
    t0 = time.perf_counter()
    foundation_style(frame)
    t_found = time.perf_counter() - t0
    print(
        f"foundation-style loop (dicts per task + scalar paired_compare): {t_found:.3f} s  ->  "
        f"{t_found / t_fast:.1f}x faster"
    )
    print(
        f"target < 0.5 s: {'met' if t_fast < 0.5 else 'NOT met'}; "
        f">= 10x: {'met' if t_ref / t_fast >= 10 else 'NOT met'}"
    )
    t0 = time.perf_counter()
    compare_scores(
        frame,
        candidates=[f"cand-{i:04d}" for i in range(N_CAND)],
        parent="parent",
        by=["task_id"],
    )
    print(
        "with the default interval (ci=auto: Tango score CI and its TOST interval, 0/1 data): "
        f"{time.perf_counter() - t0:.2f} s"
    )
    for resamples in (1_000, 10_000):  # 10,000 is the default for continuous metrics
        t0 = time.perf_counter()
        compare_scores(
            frame,
            candidates=[f"cand-{i:04d}" for i in range(N_CAND)],
            parent="parent",
            by=["task_id"],
            ci="percentile",
            n_resamples=resamples,
        )
        print(
            f"with a {resamples:,}-resample paired bootstrap CI per row: "
            f"{time.perf_counter() - t0:.2f} s"
        )


if __name__ == "__main__":
    main()
