"""Ingest in a process that is already big (a notebook's session, a test worker) vs a fresh one.

    python benchmarks/bench_ingest_big_process.py            # 60 runs, 1 GiB of objects
    python benchmarks/bench_ingest_big_process.py --heap-mib 300 --runs 20   # a quick run

The same logs are ingested twice, each into a new store in its own spawned child: once in a
fresh interpreter (the reference), once after the child has built a heap of small Python
objects (lists of ints, as a session holding data does). Only the ingest is timed. The ingest
commits batch by batch and gives freed memory back between them when the process holds more
than 512 MiB; that step once ran a full ``gc.collect()`` (a walk of the whole heap: 0.1-0.5 s
in such a process) and an ``ldconfig`` lookup of libc at every batch, so the big process paid
for the session's objects at each one.

Goal: the big process's ingest within 1.3x of the fresh one's.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import tempfile
import time
from pathlib import Path

GOAL = 1.3
CHUNK = 256 * 1024


def _ingest(logs: str, store: str, heap_mib: int, out: mp.Queue[tuple[float, int]]) -> None:
    import hylo_analytics as ha
    from hylo_analytics.ingest import ingest_paths

    heap = [list(range(20)) for _ in range(heap_mib * 2**20 // 400)]  # ~400 bytes each
    t = time.perf_counter()
    parquet = ha.open_store(store).parquet  # small chunks: a big folder's many batches
    report = ingest_paths(parquet, [Path(logs)], progress=False, chunk_bytes=CHUNK)
    out.put((time.perf_counter() - t, report.runs_added))
    del heap


def _timed(logs: Path, store: Path, heap_mib: int) -> float:
    ctx = mp.get_context("spawn")
    out: mp.Queue[tuple[float, int]] = ctx.Queue()
    child = ctx.Process(target=_ingest, args=(str(logs), str(store), heap_mib, out))
    child.start()
    seconds, runs = out.get()
    child.join()
    if child.exitcode or not runs:
        raise SystemExit(f"the ingest child failed (exit {child.exitcode}, {runs} runs)")
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=60, help="runs (one EvalLog each)")
    ap.add_argument("--heap-mib", type=int, default=1024, help="the big process's objects")
    ap.add_argument("--repeat", type=int, default=2, help="pairs of measurements")
    args = ap.parse_args()

    from hylo_analytics.testing import SynthConfig, write_dataset

    with tempfile.TemporaryDirectory(prefix="hylo-bench-big-") as tmp:
        logs = Path(tmp) / "logs"
        cfg = SynthConfig(runs=args.runs, tasks=5, seeds=10, mean_steps=10, seed=7)
        write_dataset(logs, cfg)
        size = sum(p.stat().st_size for p in logs.rglob("*") if p.is_file())
        print(
            f"logs: {args.runs} runs with traces, {size / 2**20:.1f} MiB, {CHUNK // 1024} KiB chunks"
        )
        ratios = []
        for i in range(args.repeat):
            fresh = _timed(logs, Path(tmp) / f"fresh{i}", 0)
            big = _timed(logs, Path(tmp) / f"big{i}", args.heap_mib)
            ratios.append(big / fresh)
            print(
                f"  fresh process {fresh:6.2f} s   with {args.heap_mib} MiB of objects "
                f"{big:6.2f} s   ratio {big / fresh:5.2f}x"
            )
        worst = max(ratios)
        verdict = "met" if worst <= GOAL else "MISSED"
        print(f"goal: the big process within {GOAL}x of the fresh one: {verdict} ({worst:.2f}x)")


if __name__ == "__main__":
    main()
