"""Peak RSS of ingesting one huge single-line EvalLog (issue 28, item 5).

    python benchmarks/bench_huge_line.py              # a 100 MB one-line hylo.evallog/v0.1
    python benchmarks/bench_huge_line.py --mb 20      # a smaller one, a quick run

A harness that writes its whole run as one JSON line gives the reader a single document of
the file's size. The ingest runs in a spawned child process whose high-water mark is reset
before the ingest (``/proc/self/clear_refs``), so the peak is the ingest's own (imports
excluded). Goal: under 1 GiB of RSS for the 100 MB log (measured before this work: 1,674
MiB for this log; the issue saw 2.1 GB for another; after: 962 MiB).
The log is cached under ``/tmp/hylo-bench-huge-line``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import shutil
import tempfile
import time
from pathlib import Path

from _measure import peak_rss_mb, reset_peak, status_mib

CACHE = Path("/tmp/hylo-bench-huge-line")
GOAL_MIB = 1024.0


def _sample(i: int) -> dict[str, object]:
    """One sample of the fast path's shape (only modelled fields), about 300 bytes."""
    task = f"tabletop/task_{i % 50:02d}_with_a_long_descriptive_name"
    return {
        "key": f"{task}#{i}",
        "task_id": task,
        "seed": i,
        "episode_id": f"huge-line-episode-{i:09d}",
        "status": "success" if i % 3 else "failure",
        "scores": {"success": float(i % 3 != 0), "steps": float(i % 97), "reward": i % 1000 / 1e3},
    }


def make_log(path: Path, mb: int) -> Path:
    """A valid v0.1 EvalLog of about ``mb`` MB on one line (samples with three scores each,
    no traces)."""
    if path.exists():
        return path
    n = mb * 10**6 // len(json.dumps(_sample(0)))
    head = {
        "version": "hylo.evallog/v0.1",
        "run_id": f"huge-line-{mb}mb",
        "benchmark": {"id": "bench/huge", "version": "1", "split": "test"},
        "agent": {"name": "huge", "version": "1.0"},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        fh.write(json.dumps(head)[:-1] + ', "samples": [')
        for i in range(n):
            fh.write(("," if i else "") + json.dumps(_sample(i)))
        fh.write("]}")  # one line: no newline anywhere
    return path


def _child(log: str, store: str, out: mp.Queue) -> None:  # type: ignore[type-arg]
    import hylo_analytics as ha

    s = ha.open_store(store)
    before = status_mib("VmRSS")
    reset_peak()
    t0 = time.perf_counter()
    report = s.ingest(log, progress=False)
    out.put(
        {
            "seconds": time.perf_counter() - t0,
            "peak_mib": peak_rss_mb(),
            "rss_before_mib": before,
            "samples": report.samples_added,
            "quarantined": report.quarantined,
        }
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=100, help="size of the log in MB (100)")
    args = ap.parse_args()
    log = make_log(CACHE / f"huge-{args.mb}mb" / "evallog.json", args.mb)
    size = log.stat().st_size
    tmp = Path(tempfile.mkdtemp(prefix="hylo-huge-"))
    try:
        ctx = mp.get_context("spawn")
        q: mp.Queue = ctx.Queue()  # type: ignore[type-arg]
        p = ctx.Process(target=_child, args=(str(log), str(tmp / "store"), q))
        p.start()
        p.join()  # the result is small: the child ends after putting it
        if p.exitcode != 0 or q.empty():
            raise SystemExit(f"the ingest child failed (exit code {p.exitcode})")
        res = q.get()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"log: {size / 1e6:.1f} MB on one line, {res['samples']:,} samples stored, "
          f"{res['quarantined']} quarantined, {res['seconds']:.1f} s")  # fmt: skip
    print(f"peak RSS: {res['peak_mib']:.0f} MiB ({res['peak_mib'] / (size / 2**20):.1f}x the "
          f"file; {res['rss_before_mib']:.0f} MiB before the ingest)")  # fmt: skip
    if args.mb == 100:
        verdict = "met" if res["peak_mib"] < GOAL_MIB else "MISSED"
        print(f"goal: peak < {GOAL_MIB:.0f} MiB for 100 MB: {verdict}")


if __name__ == "__main__":
    main()
