"""Ingest throughput: hylo_analytics vs a plain-Python reference ingest, in one process.

    python benchmarks/bench_ingest.py            # 1,000 EvalLogs x 500 samples; 20,000 traces
    python benchmarks/bench_ingest.py --small    # a quick run

Two datasets isolate the two targets: logs without traces (samples/s; target: 500k samples in
<= 0.6 s) and 20,000 traces of ~175 events (events/s; target: 3.5M events in <= 1.5 s). The
reference reads each file with ``json``, loops over samples and events into Python lists and
writes the same Parquet tables with pyarrow: what a hand-written ingest would do.
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

import hylo_analytics as ha
from hylo_analytics.testing import SynthConfig, write_dataset


def reference_ingest(data: Path, out: Path) -> tuple[int, int]:
    """json + loops into lists, then Parquet: the plain-Python baseline."""
    samples: dict[str, list] = {
        k: [] for k in ("run_id", "key", "task_id", "seed", "episode_id", "status")
    }
    scores: dict[str, list] = {k: [] for k in ("run_id", "key", "metric", "value")}
    events: dict[str, list] = {
        k: []
        for k in (
            "run_id",
            "episode_id",
            "idx",
            "type",
            "t",
            "reward",
            "success",
            "latency_ms",
            "raw",
        )
    }
    for log_path in sorted(data.glob("*/evallog.json")):
        log = json.loads(log_path.read_text())
        rid = log["run_id"]
        for s in log["samples"]:
            samples["run_id"].append(rid)
            for k in ("key", "task_id", "seed", "episode_id", "status"):
                samples[k].append(s[k])
            for m, v in s["scores"].items():
                scores["run_id"].append(rid)
                scores["key"].append(s["key"])
                scores["metric"].append(m)
                scores["value"].append(None if v is None else float(v))
            if s.get("trace"):
                with open(log_path.parent / s["trace"]) as fh:
                    for i, line in enumerate(fh, 1):
                        e = json.loads(line)
                        events["run_id"].append(rid)
                        events["episode_id"].append(s["episode_id"])
                        events["idx"].append(i)
                        events["type"].append(e.get("type"))
                        events["t"].append(e.get("t"))
                        events["reward"].append(e.get("reward"))
                        events["success"].append((e.get("info") or {}).get("success"))
                        events["latency_ms"].append(e.get("latency_ms"))
                        events["raw"].append(line.rstrip("\n"))
    out.mkdir(parents=True, exist_ok=True)
    for name, cols in (("samples", samples), ("scores", scores), ("events", events)):
        pq.write_table(
            pa.table(cols), out / f"{name}.parquet", compression="zstd", compression_level=1
        )
    return len(samples["key"]), len(events["idx"])


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*.parquet"))


def _measure(label: str, data: Path, work: Path, unit: str) -> None:
    store = ha.open_store(work / f"store-{label}")
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    report = store.ingest(data, progress=False)
    ours = time.perf_counter() - t0
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    n_samples, n_events = reference_ingest(data, work / f"ref-{label}")
    ref = time.perf_counter() - t0
    n = report.samples_added if unit == "samples" else report.events_added
    assert (
        report.quarantined == 0
        and report.samples_added == n_samples
        and report.events_added == n_events
    )
    print(
        f"{label}: {report.runs_added} logs, {report.samples_added:,} samples, "
        f"{report.events_added:,} events\n"
        f"  hylo_analytics  {ours:7.2f} s  {n / ours:12,.0f} {unit}/s  "
        f"parquet {_du(store.root) / 2**20:7.1f} MiB  peak RSS {max(rss0, rss1) / 2**10:,.0f} MiB "
        f"(+{(rss1 - rss0) / 2**10:,.0f} MiB)\n"
        f"  plain Python    {ref:7.2f} s  {n / ref:12,.0f} {unit}/s  "
        f"parquet {_du(work / f'ref-{label}') / 2**20:7.1f} MiB\n"
        f"  ratio           {ref / ours:7.1f}x faster"
    )


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--small", action="store_true", help="a tenth of the size, for a quick check")
    args = p.parse_args()
    scale = 10 if args.small else 1
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        t0 = time.perf_counter()
        logs = work / "logs"
        write_dataset(
            logs, SynthConfig(runs=1000 // scale, tasks=10, seeds=50, traces_per_run=0, seed=1)
        )
        traces = work / "traces"
        write_dataset(
            traces, SynthConfig(runs=40 // scale, tasks=10, seeds=50, mean_steps=170, seed=2)
        )
        print(f"generated the data in {time.perf_counter() - t0:.0f} s\n")
        _measure("logs", logs, work, "samples")
        _measure("traces", traces, work, "events")


if __name__ == "__main__":
    main()
