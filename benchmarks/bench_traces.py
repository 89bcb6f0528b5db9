"""Issue 26 goal 4: traces at scale. Ingest + score of 20,000 JSONL traces vs two references.

    python benchmarks/bench_traces.py               # 40 runs x 500 samples: 20,000 traces, 2.8M events
    python benchmarks/bench_traces.py --small       # 2,000 traces
    python benchmarks/bench_traces.py --data DIR    # reuse (or create) a dataset in DIR

Each side runs in a child process of its own (spawned), so its peak RSS (``VmHWM``) is its own,
and the load average is printed beside each line:

- hylo_analytics: ``store.ingest(logs)`` + ``store.score()`` into a fresh store (and the
  store's size on disk after it);
- a plain-Python ``json`` loop: each file read, each line ``json.loads``-ed into column lists
  with its raw line, the built-in scores per episode in Python, Parquet written with pyarrow
  (``bench_ingest_traces.json_loop``);
- DuckDB ``read_json`` over the same files (a glob, ``filename = true``) and the built-in
  reductions as one group-by per file: a floor that keeps no raw line and writes nothing.

Goal 4: hylo >= 5x faster than the json loop (about <= 2x DuckDB's read_json), peak RSS < 1 GB.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

_RSS_GOAL_MB = 1024.0

# the reductions of the built-in scorers, per file (one file = one episode)
_READ_JSON = """
with e as (
    select * from read_json('{glob}', format = 'newline_delimited', filename = true,
                            columns = {columns})
)
select filename,
       count(*) filter (where type = 'step') as n_steps,
       sum(reward) filter (where type = 'step') as total_reward,
       bool_or(info.success) filter (where type = 'step') as success_once,
       quantile_cont(latency_ms, 0.95) filter (where type = 'step') as latency_p95,
       count(*) filter (where type = 'intervention') as n_interventions,
       arg_max(status, t) filter (where type = 'end') as end_status,
       count(*) as n_events
from e group by filename
"""


def _config(small: bool) -> Any:
    from hylo_analytics.testing import SynthConfig

    # 40 runs x 10 tasks x 50 seeds = 20,000 traces of ~140 events (2.8M events)
    return SynthConfig(runs=4 if small else 40, tasks=10, seeds=50, mean_steps=170, seed=2)


def _hylo(data: str, work: str) -> dict[str, Any]:
    import hylo_analytics as ha

    store = ha.open_store(Path(work) / "store")
    t0 = time.perf_counter()
    ingest = store.ingest(data, progress=False)
    t1 = time.perf_counter()
    scored = store.score()
    t2 = time.perf_counter()
    root = Path(work) / "store"  # the published batches (not the retired ones, collected later)
    listed = json.loads((root / "manifest.json").read_text())["batches"]
    size = sum(p.stat().st_size for b in listed for p in (root / "batches" / b["name"]).iterdir())
    return {
        "ingest_s": t1 - t0,
        "score_s": t2 - t1,
        "seconds": t2 - t0,
        "events": ingest.events_added,
        "quarantined": ingest.quarantined,
        "score_rows": scored.rows_written,
        "store_mib": size / 2**20,
    }


def _json_loop(data: str, work: str) -> dict[str, Any]:
    from bench_ingest_traces import json_loop

    t0 = time.perf_counter()
    n_events, _ = json_loop(Path(data), Path(work) / "ref-json")
    return {"seconds": time.perf_counter() - t0, "events": n_events}


def _read_json(data: str, work: str) -> dict[str, Any]:
    import duckdb
    import pyarrow.compute as pc
    from bench_ingest_traces import _NATIVE_COLUMNS

    t0 = time.perf_counter()
    con = duckdb.connect()
    glob = str(Path(data) / "*" / "episodes" / "*.jsonl")
    out = con.sql(_READ_JSON.format(glob=glob, columns=_NATIVE_COLUMNS)).to_arrow_table()
    con.close()
    return {
        "seconds": time.perf_counter() - t0,
        "events": int(pc.sum(out["n_events"]).as_py()),
        "files": out.num_rows,
    }


def _cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_SELF)  # every thread of the process
    return use.ru_utime + use.ru_stime


def _child(name: str, data: str, work: str, conn: Any) -> None:
    from _measure import peak_rss_mb, reset_peak

    reset_peak()
    cpu = _cpu()
    result = {"_hylo": _hylo, "_json_loop": _json_loop, "_read_json": _read_json}[name](data, work)
    result["cpu_s"] = _cpu() - cpu
    result["rss_mib"] = peak_rss_mb()
    conn.send(result)
    conn.close()


def measure(name: str, data: Path, work: Path) -> dict[str, Any]:
    """Run side ``name`` in a spawned child; its result with its peak RSS and the load."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    work.mkdir(parents=True, exist_ok=True)
    proc = ctx.Process(target=_child, args=(name, str(data), str(work), child))
    proc.start()
    result: dict[str, Any] = parent.recv()
    proc.join()
    result["load"] = os.getloadavg()[0]
    return result


def _dataset(small: bool, data: Path | None, work: Path) -> Path:
    from hylo_analytics.testing import write_dataset

    if data is not None and (data / ".complete").exists():
        return data
    target = data or work / "logs"
    t0 = time.perf_counter()
    write_dataset(target, _config(small))
    (target / ".complete").touch()
    print(f"generated the data in {time.perf_counter() - t0:.0f} s")
    return target


def run(small: bool, data: Path | None = None) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        logs = _dataset(small, data, work)
        files = list(logs.glob("*/episodes/*.jsonl"))
        size_mib = sum(f.stat().st_size for f in files) / 2**20
        ours = measure("_hylo", logs, work / "hylo")
        loop = measure("_json_loop", logs, work / "loop")
        floor = measure("_read_json", logs, work / "floor")
    assert ours["quarantined"] == 0, ours
    assert ours["events"] == loop["events"] == floor["events"], (ours, loop, floor)
    assert floor["files"] == len(files)
    workload = f"{len(files):,} traces, {ours['events']:,} events, {size_mib:,.0f} MiB"
    ratio = loop["seconds"] / ours["seconds"]
    over = ours["seconds"] / floor["seconds"]
    cpu_ratio = loop["cpu_s"] / ours["cpu_s"]
    cpu_over = ours["cpu_s"] / floor["cpu_s"]
    print(
        f"traces: {workload}\n"
        f"  hylo_analytics  {ours['seconds']:7.2f} s  (ingest {ours['ingest_s']:.2f} s + score "
        f"{ours['score_s']:.2f} s, {ours['score_rows']:,} score rows)  peak RSS "
        f"{ours['rss_mib']:,.0f} MiB  store {ours['store_mib']:,.1f} MiB  CPU {ours['cpu_s']:.1f} s  "
        f"load {ours['load']:.1f}\n"
        f"  json loop       {loop['seconds']:7.2f} s  loop/hylo {ratio:5.2f}x (goal >= 5x)  "
        f"peak RSS {loop['rss_mib']:,.0f} MiB  CPU {loop['cpu_s']:.1f} s ({cpu_ratio:.2f}x)  "
        f"load {loop['load']:.1f}\n"
        f"  read_json       {floor['seconds']:7.2f} s  hylo/read_json {over:5.2f}x (about <= 2x)  "
        f"peak RSS {floor['rss_mib']:,.0f} MiB  CPU {floor['cpu_s']:.1f} s ({cpu_over:.2f}x)  "
        f"load {floor['load']:.1f}\n"
        f"  goal 4: {'met' if ratio >= 5 and ours['rss_mib'] < _RSS_GOAL_MB else 'missed'} "
        f"(>= 5x the json loop and < {_RSS_GOAL_MB:.0f} MiB)"
    )
    return [
        {
            "goal": "26/4",
            "workload": f"traces ingest+score: {workload}",
            "hylo_s": ours["seconds"],
            "reference": "plain-Python json loop",
            "reference_s": loop["seconds"],
            "ratio": ratio,
            "target": ">= 5x",
            "met": ratio >= 5,
            "peak_rss_mb": ours["rss_mib"],
        },
        {
            "goal": "26/4",
            "workload": f"traces ingest+score: {workload}",
            "hylo_s": ours["seconds"],
            "reference": "DuckDB read_json over the same files (writes nothing)",
            "reference_s": floor["seconds"],
            "ratio": over,
            "target": "about <= 2x (hylo_s / reference_s)",
            "met": over <= 2,
            "peak_rss_mb": ours["rss_mib"],
        },
    ]


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--small", action="store_true", help="2,000 traces, for a quick check")
    p.add_argument("--data", type=Path, help="dataset folder to reuse (created if missing)")
    args = p.parse_args()
    run(args.small, args.data)


if __name__ == "__main__":
    main()
