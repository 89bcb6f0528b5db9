"""Benchmark: the in-memory statistics engine at 1M samples (issue 14, goals 3 and 7).

200 runs x 5,000 keys = 1,000,000 samples, 2,000,000 score rows (``success`` 0/1 and ``steps``
counts), built with numpy (no store): 20 tasks with 20..480 seeds each, so group sizes spread
as in real evals, and 3 % of the scores abstain, so no two runs have quite the same counts.
Three workloads with their default options:

- ``aggregate_scores(by=["run_id"], metrics=["success", "steps"])``;
- the same ``by=["run_id", "task_id"]``;
- ``compare_scores`` of every run against run 0, ``by=["task_id"]``.

Each one runs in a fresh child process (spawn), which also runs the reference, in the same
process: a hand-written polars group_by (mean, std, count) for ``aggregate`` and a polars
join + group_by of the differences for ``compare``, i.e. the cost without intervals. The peak
RSS of the child is read from ``VmHWM`` after resetting it (``/proc/self/clear_refs``) just
before each call, so it is the process's peak during that call, the frame included.
Goals: under 5 s and 2 GB each.

    python benchmarks/bench_scale_engine.py [--small]
"""

from __future__ import annotations

import argparse
import hashlib
import multiprocessing as mp
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import polars as pl
from _measure import peak_rss_mb, reset_peak

N_RUNS, N_TASKS, ABSTAIN = 200, 20, 0.03
GOAL_S, GOAL_MB = 5.0, 2048.0


def build(small: bool) -> pl.DataFrame:
    """The scores frame: one row per (run, key, metric); ``small`` has 20 runs (100,000)."""
    rng = np.random.default_rng(14)
    runs = 20 if small else N_RUNS
    seeds = np.round(np.linspace(20, 480, N_TASKS)).astype(np.int64)  # 5,000 keys per run
    task_of_key = np.repeat(np.arange(N_TASKS), seeds)
    seed_of_key = np.concatenate([np.arange(s) for s in seeds])
    n_keys = len(task_of_key)
    tasks = np.array([f"task/{t:02d}" for t in range(N_TASKS)])
    keys = np.char.add(np.char.add(tasks[task_of_key], "#"), seed_of_key.astype(str))
    skill = rng.beta(2, 2, size=(runs, N_TASKS))[:, task_of_key]
    success = (rng.random((runs, n_keys)) < skill).astype(np.float64)
    scale = rng.uniform(4, 12, size=(runs, N_TASKS))[:, task_of_key]
    steps = rng.gamma(4.0, scale).round()
    run_ids = np.array([f"run-{r:04d}" for r in range(runs)])
    base = {
        "run_id": np.repeat(run_ids, n_keys),
        "task_id": np.tile(tasks[task_of_key], runs),
        "key": np.tile(keys, runs),
    }
    parts = []
    for metric, values in (("success", success), ("steps", steps)):
        v = values.ravel().copy()
        v[rng.random(v.size) < ABSTAIN] = np.nan
        parts.append(pl.DataFrame({**base, "metric": metric, "value": v}))
    return pl.concat(parts).with_columns(pl.col("value").fill_nan(None))


def _measure(fn: Callable[[], pl.DataFrame]) -> tuple[float, float, pl.DataFrame]:
    reset_peak()
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, peak_rss_mb(), out


def digest(frame: pl.DataFrame) -> str:
    """A checksum of a result (floats to 10 significant figures), to tell a change of answer."""
    cols = sorted(frame.columns)
    as_text = [
        pl.Series(c, [repr(v) for v in frame[c].to_list()])
        if frame.schema[c].is_nested()
        else (frame[c].round_sig_figs(10) if frame.schema[c].is_float() else frame[c]).cast(
            pl.String
        )
        for c in cols
    ]
    text = pl.DataFrame(as_text).sort(cols, nulls_last=True).write_csv()
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _reference_aggregate(frame: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    v = pl.col("value")
    return (
        frame.filter(pl.col("metric").is_in(["success", "steps"]))
        .group_by([*by, "metric"])
        .agg(n=v.count(), mean=v.mean(), std=v.std(), n_total=pl.len())
    )


def _reference_compare(frame: pl.DataFrame, parent: str) -> pl.DataFrame:
    par = frame.filter(pl.col("run_id") == parent).select("key", "metric", parent_value="value")
    pairs = frame.filter(pl.col("run_id") != parent).join(par, on=["key", "metric"])
    d = (pl.col("value") - pl.col("parent_value")).drop_nulls()
    agg = {"n": d.count(), "mean_diff": d.mean(), "sd": d.std(), "wins": (d > 0).sum()}
    overall = pairs.group_by("run_id", "metric").agg(**agg)
    per = pairs.group_by("run_id", "metric", "task_id").agg(**agg)
    return pl.concat([overall, per], how="diagonal")


def _child(workload: str, small: bool) -> dict[str, Any]:
    """Build the frame, then time the reference and the engine on it (peak RSS each)."""
    from hylo_analytics.aggregate import aggregate_scores
    from hylo_analytics.compare import compare_scores

    frame = build(small)
    runs = frame["run_id"].unique().sort().to_list()
    fn: Callable[[], pl.DataFrame]
    if workload == "compare":
        ref = "polars join + group_by (mean diff, sd, wins; no interval)"
        ref_fn = partial(_reference_compare, frame, runs[0])
        fn = partial(compare_scores, frame, candidates=runs[1:], parent=runs[0], by=["task_id"])
    else:
        by = ["run_id"] if workload == "aggregate_run" else ["run_id", "task_id"]
        ref = "polars group_by mean/std/count (no interval)"
        ref_fn = partial(_reference_aggregate, frame, by)
        fn = partial(aggregate_scores, frame, by=by, metrics=["success", "steps"])
    ref_s, ref_mb, _ = _measure(ref_fn)
    hylo_s, hylo_mb, out = _measure(fn)
    return {
        "rows": frame.height,
        "reference": ref,
        "reference_s": ref_s,
        "reference_rss_mb": ref_mb,
        "hylo_s": hylo_s,
        "peak_rss_mb": hylo_mb,
        "out_rows": out.height,
        "digest": digest(out),
    }


WORKLOADS = {
    "aggregate_run": 'aggregate_scores(by=["run_id"], success + steps)',
    "aggregate_run_task": 'aggregate_scores(by=["run_id", "task_id"], success + steps)',
    "compare": 'compare_scores(every run vs run 0, by=["task_id"])',
}


def run(small: bool) -> list[dict[str, Any]]:
    ctx = mp.get_context("spawn")
    rows = []
    for name, label in WORKLOADS.items():
        with ctx.Pool(1) as pool:
            got = pool.apply(_child, (name, small))
        met = got["hylo_s"] < GOAL_S and got["peak_rss_mb"] < GOAL_MB
        rows.append(
            {
                "goal": "issue 14: engine at 1M samples",
                "workload": f"{label}, {got['rows']:,} score rows",
                "hylo_s": got["hylo_s"],
                "reference": got["reference"],
                "reference_s": got["reference_s"],
                "ratio": got["reference_s"] / got["hylo_s"],
                "target": f"< {GOAL_S:g} s and < {GOAL_MB / 1024:g} GB (full size)",
                "met": met,
                "peak_rss_mb": got["peak_rss_mb"],
                "reference_rss_mb": got["reference_rss_mb"],
                "digest": got["digest"],
            }
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--small", action="store_true", help="20 runs (100,000 samples)")
    args = ap.parse_args()
    for r in run(args.small):
        print(
            f"{r['workload']}\n  hylo {r['hylo_s']:.2f} s, peak RSS {r['peak_rss_mb']:,.0f} MB | "
            f"reference {r['reference_s']:.2f} s ({r['reference_rss_mb']:,.0f} MB): "
            f"ratio {r['ratio']:.3f} (reference / hylo) | goal {r['target']}: "
            f"{'met' if r['met'] else 'NOT met'} | result {r['digest']}"
        )


if __name__ == "__main__":
    main()
