"""A store that stays fast, incremental ingest, and compare at hand-written-query speed.

    python benchmarks/bench_store.py            # 1,000 runs ingested one by one; compares
    python benchmarks/bench_store.py --small    # 150 runs, smaller compares

Issue 14's goals 3, 4 and 5, each a ratio against a reference run in the same process:

* goal 4: 1,000 runs ingested by 1,000 separate calls (each a batch; commits compact past 64)
  query no more than 1.5x slower than the same store compacted once;
* goal 5: ingesting one more run into that store costs <= 1.5x ingesting it into an empty one;
  ``open_store`` + a first query < 1 s;
* goal 3: ``Store.compare`` (by task, the default verdicts and intervals) within 1.5x of a
  hand-written polars query over the same Parquet files that applies the same score resolution
  (a valid value first, then the source's precedence) and gives the pairs' wins, losses and
  mean difference per task (no intervals), and within 2x of its memory: 1,000 candidates x 500
  keys, and 2 runs x 500k keys. A join of the log's own values with no resolution is printed
  for the record. Each side runs in a child process so its peak RSS is its own.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _measure import peak_rss_mb

import hylo_analytics as ha
from hylo_analytics.testing import SynthConfig, write_dataset

HERE = Path(__file__).resolve()


def _timed(fn: Any, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _queries(store: ha.Store, ids: list[str]) -> dict[str, Any]:
    return {
        "runs": lambda: store.runs(),
        "compare two runs": lambda: store.compare(ids[-1], ids[0]),
        "aggregate every run": lambda: store.aggregate(("run_id",), metrics=["success"]),
    }


def _child(kind: str, root: str) -> None:
    """One measured side, in its own process: prints seconds and peak RSS as JSON."""
    import polars as pl

    store = ha.open_store(root, create=False)
    ids = store.sql("SELECT run_id FROM runs ORDER BY run_id")["run_id"].to_list()
    parent, candidates = ids[0], ids[1:]
    if kind == "hylo":  # the first compare of a process imports scipy: not the query's cost
        store.compare(candidates[:1], parent)
    t = time.perf_counter()
    if kind == "hylo":
        out = store.compare(candidates, parent, by=["task_id"])
        rows = out.height
    else:
        files = [
            str(store.root / "batches" / b.name / "scores.parquet")
            for b in store.parquet.manifest.batches
            if (store.root / "batches" / b.name / "scores.parquet").exists()
        ]
        scores = pl.scan_parquet(files).filter(pl.col("metric") == "success")
        if kind == "resolving":
            # the same rule by hand: a valid value beats an abstention, then the source's
            # precedence and name; epochs of a key averaged
            valid = (
                pl.col("value").is_not_null()
                & ~pl.col("value").is_nan()
                & pl.col("valid").fill_null(True)
            )
            rank = pl.col("source_kind").replace_strict(
                {"score": 1, "derived": 2, "observation": 3, "imported": 4}, default=5
            )
            scores = (
                scores.with_columns(ok=valid, rank=pl.when(valid).then(rank).otherwise(rank + 10))
                .sort("rank", "source")
                .group_by("run_id", "key", "epoch", "metric")
                .first()
                .group_by("run_id", "key")
                .agg(
                    pl.col("task_id").first(),
                    value=pl.col("value").filter(pl.col("ok")).mean(),
                )
            )
        else:  # the log's own values, no resolution
            scores = scores.filter(pl.col("source") == "evallog")
        scores = scores.select("run_id", "key", "task_id", "value")
        par = scores.filter(pl.col("run_id") == parent).select("key", parent_value="value")
        cand = scores.filter(pl.col("run_id") != parent)
        out = (
            cand.join(par, on="key")
            .drop_nulls(["value", "parent_value"])
            .group_by("run_id", "task_id")
            .agg(
                n=pl.len(),
                wins=(pl.col("value") > pl.col("parent_value")).sum(),
                losses=(pl.col("value") < pl.col("parent_value")).sum(),
                diff=(pl.col("value") - pl.col("parent_value")).mean(),
            )
            .collect()
        )
        rows = out.height
    seconds = time.perf_counter() - t
    rss = peak_rss_mb()
    print(json.dumps({"seconds": seconds, "rss_mb": rss, "rows": rows}))


def _in_child(kind: str, root: Path) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, str(HERE), "--child", kind, str(root)],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _compare_rows(label: str, root: Path) -> list[dict[str, Any]]:
    naive = _in_child("naive", root)
    ref = _in_child("resolving", root)
    hylo = _in_child("hylo", root)
    ratio = hylo["seconds"] / ref["seconds"]
    mem = hylo["rss_mb"] / ref["rss_mb"]
    return [
        {
            "goal": "3 compare",
            "workload": f"{label}: time, against a join of the log's values alone",
            "hylo_s": hylo["seconds"],
            "reference": "polars join of the log's own values (no resolution, no intervals)",
            "reference_s": naive["seconds"],
            "ratio": hylo["seconds"] / naive["seconds"],
            "target": "(for the record)",
            "met": None,
            "peak_rss_mb": hylo["rss_mb"],
        },
        {
            "goal": "3 compare",
            "workload": f"{label}: time",
            "hylo_s": hylo["seconds"],
            "reference": "hand-written polars: the same resolution rule, pairs, per-task counts",
            "reference_s": ref["seconds"],
            "ratio": ratio,
            "target": "<= 1.5x the reference",
            "met": ratio <= 1.5,
            "peak_rss_mb": hylo["rss_mb"],
        },
        {
            "goal": "3 compare",
            "workload": f"{label}: peak memory",
            "hylo_s": hylo["seconds"],
            "reference": f"the same query's peak RSS ({ref['rss_mb']:.0f} MB)",
            "reference_s": ref["seconds"],
            "ratio": mem,
            "target": "<= 2x the reference's memory",
            "met": mem <= 2.0,
            "peak_rss_mb": hylo["rss_mb"],
        },
    ]


def run(small: bool) -> list[dict[str, Any]]:
    n_runs = 150 if small else 1000
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        logs = base / "logs"
        write_dataset(logs, SynthConfig(runs=n_runs + 6, tasks=10, seeds=50, traces_per_run=0))
        folders = sorted(logs.iterdir())
        extra, folders = folders[-6:], folders[:-6]

        # goal 5 / 4: one ingest per run, as a lab's harness would call it
        store = ha.open_store(base / "store")
        first, last = [], []
        t0 = time.perf_counter()
        for i, folder in enumerate(folders):
            t = time.perf_counter()
            store.ingest(folder, progress=False)
            (first if i < 20 else last).append(time.perf_counter() - t)
            last[:] = last[-20:]
        build = time.perf_counter() - t0
        print(
            f"built {n_runs} runs by {n_runs} ingests in {build:.1f} s "
            f"({len(store.parquet.manifest.batches)} batches after automatic compaction)"
        )

        def one_more(target: Path, folder: Path) -> float:
            s = ha.open_store(target)
            t = time.perf_counter()
            s.ingest(folder, progress=False)
            return time.perf_counter() - t

        into_empty = statistics.median(
            one_more(base / f"empty{i}", f) for i, f in enumerate(extra[:3])
        )
        into_full = statistics.median(one_more(base / "store", f) for f in extra[3:])
        rows.append(
            {
                "goal": "5 incremental",
                "workload": f"ingest one run into a store of {n_runs} runs",
                "hylo_s": into_full,
                "reference": "the same ingest into an empty store",
                "reference_s": into_empty,
                "ratio": into_full / into_empty,
                "target": "<= 1.5x",
                "met": into_full / into_empty <= 1.5,
                "peak_rss_mb": None,
            }
        )
        opened = subprocess.run(
            [
                sys.executable,
                "-c",
                "import time; t = time.perf_counter(); import hylo_analytics as ha; "
                f"i = time.perf_counter(); s = ha.open_store({str(base / 'store')!r}, "
                "create=False); s.sql('SELECT count(*) FROM runs'); "
                "print(time.perf_counter() - i, i - t)",
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
        open_s, import_s = float(opened[0]), float(opened[1])
        rows.append(
            {
                "goal": "5 incremental",
                "workload": f"open_store + first query, {n_runs} runs (fresh process)",
                "hylo_s": open_s,
                "reference": f"(import hylo_analytics took {import_s:.2f} s before it)",
                "reference_s": None,
                "ratio": None,
                "target": "< 1 s",
                "met": open_s < 1.0,
                "peak_rss_mb": None,
            }
        )

        compacted = ha.open_store(shutil.copytree(base / "store", base / "compacted"))
        with compacted.parquet.lock():
            compacted.parquet.compact()
        ids = store.sql("SELECT run_id FROM runs ORDER BY run_id")["run_id"].to_list()
        for name, query in _queries(store, ids).items():
            ref_q = _queries(compacted, ids)[name]
            ref_q()
            query()
            got, ref = _timed(query), _timed(ref_q)
            rows.append(
                {
                    "goal": "4 stays fast",
                    "workload": f"{name}, after {n_runs} ingests "
                    f"({len(store.parquet.manifest.batches)} batches)",
                    "hylo_s": got,
                    "reference": "the same store compacted into one batch",
                    "reference_s": ref,
                    "ratio": got / ref,
                    "target": "<= 1.5x",
                    "met": got / ref <= 1.5,
                    "peak_rss_mb": None,
                }
            )
        rows += _compare_rows(f"{len(ids) - 1} candidates x 500 keys, by task", base / "store")

        # two long runs
        long_logs = base / "long"
        seeds = 500 if small else 5000
        write_dataset(long_logs, SynthConfig(runs=2, tasks=100, seeds=seeds, traces_per_run=0))
        pair = ha.open_store(base / "pair")
        pair.ingest(long_logs, progress=False)
        rows += _compare_rows(f"2 runs x {100 * seeds:,} keys, by task", base / "pair")
    return rows


def show(rows: list[dict[str, Any]]) -> None:
    for r in rows:
        ratio = "" if r["ratio"] is None else f"{r['ratio']:.2f}x"
        ref = "" if r["reference_s"] is None else f"{r['reference_s']:.3f} s"
        print(
            f"[{r['goal']}] {r['workload']}: {r['hylo_s']:.3f} s vs {ref} "
            f"({r['reference']}) = {ratio}; target {r['target']}: "
            f"{'met' if r['met'] else 'MISSED'}"
            + (f"; peak RSS {r['peak_rss_mb']:.0f} MB" if r["peak_rss_mb"] else "")
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--child", nargs=2, metavar=("KIND", "STORE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args.child[0], args.child[1])
        return
    os.environ.setdefault("HYLO_ANALYTICS_THREADS", str(os.cpu_count() or 1))
    show(run(args.small))


if __name__ == "__main__":
    main()
