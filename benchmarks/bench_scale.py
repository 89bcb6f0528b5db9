"""Ingest, score, aggregate and compare at 10k, 100k and 1M samples: time and peak RSS per size.

    python benchmarks/bench_scale.py            # 10k / 100k / 1M samples; 200 / 2k / 20k traces
    python benchmarks/bench_scale.py --small    # 10k / 100k samples; 200 / 2k traces
    python benchmarks/bench_scale.py --large --workdir DIR  # 1M / 10M samples (docs/scale-out.md)

Issue 14's goals 7 and 8. Every step runs in its own child process on a store written once per
size, so each peak RSS (``VmHWM``) is that step's alone. EvalLogs carry 500 samples a run and
their scores (no traces): ``aggregate`` is every run by run on success and steps, ``compare``
every run against the first, by task. Traces (~150 events each) are ingested and re-scored by
the built-in scorers. Scaling is linear when the time per sample at the largest size is within
1.5x of the time per sample at the size before it; goal 7 is aggregate and compare at 1M
samples under 5 s and 2 GB each.

``--large`` measures the costs ``docs/scale-out.md`` reports, at 1M and 10M samples (2,000 and
20,000 runs of one benchmark, one trace per run): ingest, re-score the traces, aggregate,
``mart_aggregate_run`` (the SQL path), ``Store.compare`` of every run against the first,
declaring those pairs, the first load of ``mart_compare`` for one pair in a fresh process,
and the store's size on disk. The logs and
stores stay in ``--workdir`` (``--reuse`` measures the listed ``--steps`` on them again); a
step that runs past ``--timeout`` seconds is reported as such.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _measure import peak_rss_mb

HERE = Path(__file__).resolve()


def _child(step: str, store_path: str, logs: str) -> None:
    import hylo_analytics as ha

    store = ha.open_store(store_path)
    if step in ("aggregate", "compare"):  # imported on first use: not the query's cost
        import scipy.stats  # noqa: F401
    t = time.perf_counter()
    if step == "ingest":
        store.ingest(logs, progress=False)
    elif step == "score":
        store.score()
    elif step == "aggregate":
        store.aggregate(("run_id",), metrics=["success", "steps"])
    elif step == "compare":
        ids = store.sql("SELECT run_id FROM runs ORDER BY run_id")["run_id"].to_list()
        store.compare(ids[1:], ids[0], by=["task_id"])
    elif step == "declare":  # the pairs compare measured, made mart_compare's
        ids = store.sql("SELECT run_id FROM runs ORDER BY run_id")["run_id"].to_list()
        store.declare_parent(ids[1:], ids[0])
    elif step == "mart_aggregate":  # the SQL path (what Spark runs): every run's statistics
        store.sql("SELECT * FROM mart_aggregate_run")
    elif step == "mart_compare":  # open + first query of one pair's rows, a fresh process
        ids = store.sql("SELECT run_id FROM runs ORDER BY run_id")["run_id"].to_list()
        t = time.perf_counter()
        store = ha.open_store(store_path)
        store.sql(
            "SELECT * FROM mart_compare WHERE candidate = $c AND parent = $p",
            {"c": ids[-1], "p": ids[0]},
        )
    seconds = time.perf_counter() - t
    print(json.dumps({"seconds": seconds, "rss_mb": peak_rss_mb()}))


def _step(step: str, store: Path, logs: Path, timeout: float | None = None) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, str(HERE), "--child", step, str(store), str(logs)],
        check=True,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def run(small: bool) -> list[dict[str, Any]]:
    from hylo_analytics.testing import SynthConfig, write_dataset

    sample_sizes = (10_000, 100_000) if small else (10_000, 100_000, 1_000_000)
    trace_sizes = (200, 2_000) if small else (200, 2_000, 20_000)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        per_unit: dict[str, list[tuple[int, float]]] = {}
        for n in sample_sizes:
            logs = Path(tmp) / f"logs{n}"
            write_dataset(logs, SynthConfig(runs=n // 500, tasks=10, seeds=50, traces_per_run=0))
            store = Path(tmp) / f"store{n}"
            for step in ("ingest", "aggregate", "compare"):
                got = _step(step, store, logs)
                per_unit.setdefault(step, []).append((n, got["seconds"] / n))
                goal7 = step in ("aggregate", "compare") and n == 1_000_000
                rows.append(
                    {
                        "goal": "7 bounded" if goal7 else "8 scale",
                        "workload": f"{step}, {n:,} samples ({n // 500} runs)",
                        "hylo_s": got["seconds"],
                        "reference": None,
                        "reference_s": None,
                        "ratio": None,
                        "target": "< 5 s and < 2 GB" if goal7 else "(per size)",
                        "met": (got["seconds"] < 5 and got["rss_mb"] < 2048) if goal7 else None,
                        "peak_rss_mb": got["rss_mb"],
                    }
                )
            _rm(logs)
        for n in trace_sizes:
            logs = Path(tmp) / f"traces{n}"
            write_dataset(
                logs, SynthConfig(runs=max(1, n // 500), tasks=10, seeds=min(50, n // 10))
            )
            store = Path(tmp) / f"tstore{n}"
            for step in ("ingest", "score"):
                got = _step(step, store, logs)
                per_unit.setdefault(f"trace {step}", []).append((n, got["seconds"] / n))
                rows.append(
                    {
                        "goal": "8 scale",
                        "workload": f"trace {step}, {n:,} episodes",
                        "hylo_s": got["seconds"],
                        "reference": None,
                        "reference_s": None,
                        "ratio": None,
                        "target": "(per size)",
                        "met": None,
                        "peak_rss_mb": got["rss_mb"],
                    }
                )
            _rm(logs)
        for step, points in per_unit.items():
            (n0, a), (n1, b) = points[-2], points[-1]
            rows.append(
                {
                    "goal": "8 scale",
                    "workload": f"{step}: time per unit at {n1:,} vs {n0:,}",
                    "hylo_s": None,
                    "reference": None,
                    "reference_s": None,
                    "ratio": b / a,
                    "target": "<= 1.5x (linear)",
                    "met": b / a <= 1.5,
                    "peak_rss_mb": None,
                }
            )
    return rows


LARGE_STEPS = (
    "ingest", "score", "aggregate", "mart_aggregate", "compare", "declare", "mart_compare",
)  # fmt: skip


def run_large(
    workdir: Path, steps: Sequence[str], reuse: bool, timeout: float
) -> list[dict[str, Any]]:
    """The 1M / 10M measurements; results are also appended to ``workdir/results.jsonl``."""
    from hylo_analytics.testing import SynthConfig, write_dataset

    rows: list[dict[str, Any]] = []
    for n in (1_000_000, 10_000_000):
        logs, store = workdir / f"logs{n}", workdir / f"store{n}"
        if not reuse:
            _rm(logs)
            _rm(store)
            t = time.perf_counter()
            cfg = SynthConfig(runs=n // 500, tasks=10, seeds=50, traces_per_run=1)
            write_dataset(logs, cfg)
            _record(workdir, rows, f"generate logs, {n:,} samples", time.perf_counter() - t, None)
        for step in steps:
            try:
                got = _step(step, store, logs, timeout)
            except subprocess.TimeoutExpired:
                _record(workdir, rows, f"{step}, {n:,} samples: over {timeout:.0f} s", None, None)
                continue
            _record(workdir, rows, f"{step}, {n:,} samples", got["seconds"], got["rss_mb"])
        size = sum(f.stat().st_size for f in store.rglob("*.parquet"))
        _record(
            workdir, rows, f"store Parquet size, {n:,} samples: {size / 2**20:,.0f} MiB", None, None
        )
    return rows


def _record(
    workdir: Path, rows: list[dict[str, Any]], what: str, s: float | None, mb: float | None
) -> None:
    row = {"goal": "16 scale-out", "workload": what, "hylo_s": s, "reference": None,
           "reference_s": None, "ratio": None, "target": "(for the record)", "met": None,
           "peak_rss_mb": mb, "load": os.getloadavg()[0]}  # fmt: skip
    rows.append(row)
    with (workdir / "results.jsonl").open("a") as f:
        f.write(json.dumps(row) + "\n")
    print(json.dumps(row), file=sys.stderr, flush=True)


def _rm(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--large", action="store_true", help="1M and 10M samples")
    ap.add_argument("--workdir", type=Path, help="--large: where the logs and stores stay")
    ap.add_argument("--reuse", action="store_true", help="--large: the logs and stores exist")
    ap.add_argument("--steps", default=",".join(LARGE_STEPS), help="--large: steps to measure")
    ap.add_argument("--timeout", type=float, default=1800.0, help="--large: seconds per step")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(*args.child)
        return
    sys.path.insert(0, str(HERE.parent))
    from run_all import table

    if args.large:
        if args.workdir is None:
            ap.error("--large needs --workdir")
        args.workdir.mkdir(parents=True, exist_ok=True)
        steps = [s for s in args.steps.split(",") if s]
        print(table(run_large(args.workdir, steps, args.reuse, args.timeout)))
        return
    print(table(run(args.small)))


if __name__ == "__main__":
    main()
