"""EvalLog ingest against the parse floor (issue 14, goal 1), in one process.

    python benchmarks/bench_ingest_evallog.py            # 1,000 EvalLogs x 500 samples
    python benchmarks/bench_ingest_evallog.py --small    # 100 EvalLogs, a quick run

Three ways to get 500k samples (1.5M score rows) out of 1,000 logs without traces:

* **json loop** (reference): ``json.loads`` each file, loop over samples and scores into column
  lists (runs; samples ``run_id, key, task_id, seed, episode_id, status``; scores ``run_id,
  key, episode_id, metric, value``), build pyarrow tables, write them as zstd Parquet: what a
  hand-written ingest does.
* **orjson floor**: the same loop with ``orjson.loads``, stopping at the column lists (no Arrow,
  no Parquet), as the issue measured its floor. Building and writing the tables from those
  lists is timed separately and printed for information ("orjson + write").
* **hylo_analytics**: ``store.ingest`` into a fresh store, in a spawned child process whose
  high-water mark is reset before the ingest (``/proc/self/clear_refs``), so the peak RSS is
  the ingest's own. Its time is taken inside the child (imports excluded).

The three are run interleaved ``--repeat`` times (default 2) and each keeps its best time.

Goals: ingest within 1.5x of the floor (ratio floor_s / hylo_s >= 0.67) and >= 3x faster than
the json loop. Memory: a chunked ingest must not grow with its input, so the child ingests the
full and the small dataset with the same small chunk (8 MiB) and the peak RSS growth of the
first must stay within 1.5x of the second's (ratio growth_full / growth_small); with
``--small``, 100 vs 10 logs in 1 MiB chunks.
The dataset is cached under ``/tmp/hylo-bench-evallog``.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
from _measure import peak_rss_mb, reset_peak, status_mib

CACHE = Path("/tmp/hylo-bench-evallog")
MEMORY_CHUNK = 8 * 2**20
FLOOR_TARGET = 1 / 1.5
JSON_TARGET = 3.0
MEMORY_TARGET = 1.5


def dataset(runs: int) -> Path:
    """``runs`` EvalLogs x 500 samples, no traces, generated once and cached."""
    from hylo_analytics.testing import SynthConfig, write_dataset

    out = CACHE / f"runs-{runs}"
    done = out / ".complete"
    if not done.exists():
        shutil.rmtree(out, ignore_errors=True)
        write_dataset(out, SynthConfig(runs=runs, tasks=10, seeds=50, traces_per_run=0, seed=1))
        done.touch()
    return out


Columns = dict[str, dict[str, list[Any]]]


def _columns(data: Path, loads: Any) -> Columns:
    """Every log's runs, samples and scores as column lists: the per-row Python loop."""
    runs: dict[str, list[Any]] = {
        k: [] for k in ("run_id", "benchmark_id", "agent_name", "agent_version", "n_samples")
    }
    samples: dict[str, list[Any]] = {
        k: [] for k in ("run_id", "key", "task_id", "seed", "episode_id", "status")
    }
    scores: dict[str, list[Any]] = {
        k: [] for k in ("run_id", "key", "episode_id", "metric", "value")
    }
    for path in sorted(data.glob("*/evallog.json")):
        log = loads(path.read_bytes())
        rid = log["run_id"]
        runs["run_id"].append(rid)
        runs["benchmark_id"].append(log["benchmark"]["id"])
        runs["agent_name"].append(log["agent"]["name"])
        runs["agent_version"].append(log["agent"].get("version"))
        runs["n_samples"].append(len(log["samples"]))
        for s in log["samples"]:
            samples["run_id"].append(rid)
            for k in ("key", "task_id", "seed", "episode_id", "status"):
                samples[k].append(s[k])
            for m, v in s["scores"].items():
                scores["run_id"].append(rid)
                scores["key"].append(s["key"])
                scores["episode_id"].append(s["episode_id"])
                scores["metric"].append(m)
                scores["value"].append(None if v is None else float(v))
    return {"runs": runs, "samples": samples, "scores": scores}


def _write(cols: Columns, out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    for name, c in cols.items():
        pq.write_table(
            pa.table(c), out / f"{name}.parquet", compression="zstd", compression_level=1
        )
    return len(cols["samples"]["key"])


def json_loop(data: Path, out: Path) -> int:
    """The plain-Python reference: json, loops into lists, Arrow tables, Parquet."""
    return _write(_columns(data, json.loads), out)


def _ingest_child(data: str, store: str, chunk_bytes: int | None, conn: Any) -> None:
    import hylo_analytics as ha
    from hylo_analytics.ingest import ingest_paths

    s = ha.open_store(store)
    before = status_mib("VmRSS")
    reset_peak()  # the peak is then this ingest's own
    t0 = time.perf_counter()
    if chunk_bytes is None:
        report = s.ingest(data, progress=False)
    else:
        report = ingest_paths(s, [Path(data)], progress=False, chunk_bytes=chunk_bytes)
    seconds = time.perf_counter() - t0
    peak = peak_rss_mb()
    conn.send((seconds, before, peak, report.samples_added, report.quarantined))
    conn.close()


def hylo_ingest(data: Path, store: Path, chunk_bytes: int | None = None) -> dict[str, float]:
    """``store.ingest`` in a spawned child: its time, RSS before and peak RSS (MiB)."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_ingest_child, args=(str(data), str(store), chunk_bytes, child))
    proc.start()
    seconds, before, peak, n, quarantined = parent.recv()
    proc.join()
    assert proc.exitcode == 0 and quarantined == 0, (proc.exitcode, quarantined)
    return {"seconds": seconds, "before": before, "peak": peak, "samples": n}


def run(small: bool, repeat: int = 2) -> list[dict[str, Any]]:
    full = dataset(100 if small else 1000)
    tiny = dataset(10 if small else 100)
    n_logs = 100 if small else 1000
    chunk = MEMORY_CHUNK // (8 if small else 1)  # the small set has a few chunks too
    workload = f"{n_logs:,} EvalLogs x 500 samples"
    json_s = floor_s = write_s = math.inf
    ours: dict[str, float] = {"seconds": math.inf}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for r in range(repeat):  # interleaved, best of each: the machine is shared
            t0 = time.perf_counter()
            n_ref = json_loop(full, work / f"ref{r}")
            json_s = min(json_s, time.perf_counter() - t0)

            t0 = time.perf_counter()
            cols = _columns(full, orjson.loads)
            floor_s = min(floor_s, time.perf_counter() - t0)
            t0 = time.perf_counter()
            _write(cols, work / f"floor{r}")
            write_s = min(write_s, time.perf_counter() - t0)
            del cols

            got = hylo_ingest(full, work / f"store{r}")
            assert got["samples"] == n_ref, (got["samples"], n_ref)
            if got["seconds"] < ours["seconds"]:
                ours = got
        mem_full = hylo_ingest(full, work / "store-mem-full", chunk)
        mem_tiny = hylo_ingest(tiny, work / "store-mem-tiny", chunk)
    hylo_s = ours["seconds"]
    grow_full = mem_full["peak"] - mem_full["before"]
    grow_tiny = mem_tiny["peak"] - mem_tiny["before"]
    print(
        f"{workload} ({n_ref:,} samples, {3 * n_ref:,} score rows)\n"
        f"  hylo_analytics   {hylo_s:6.2f} s   peak RSS {ours['peak']:,.0f} MiB "
        f"(+{ours['peak'] - ours['before']:,.0f} MiB over the child's imports)\n"
        f"  orjson floor     {floor_s:6.2f} s   (parse into column lists; no Arrow, no Parquet)\n"
        f"  orjson + write   {floor_s + write_s:6.2f} s   (floor, then Arrow tables + Parquet)\n"
        f"  json loop        {json_s:6.2f} s   (json, lists, Arrow tables, Parquet)\n"
        f"  vs floor         {hylo_s / floor_s:6.2f}x the floor's time (target <= 1.5x)\n"
        f"  vs json loop     {json_s / hylo_s:6.2f}x faster (target >= 3x)\n"
        f"  memory, {chunk / 2**20:g} MiB chunks: +{grow_full:,.0f} MiB on {n_logs:,} logs, "
        f"+{grow_tiny:,.0f} MiB on {n_logs // 10:,} logs (target: growth within 1.5x)"
    )
    peak = ours["peak"]
    return [
        {
            "goal": "1: EvalLog ingest near the orjson floor",
            "workload": workload,
            "hylo_s": hylo_s,
            "reference": "orjson parse into column lists",
            "reference_s": floor_s,
            "ratio": floor_s / hylo_s,
            "target": ">= 0.67 (within 1.5x of the floor)",
            "met": floor_s / hylo_s >= FLOOR_TARGET,
            "peak_rss_mb": peak,
        },
        {
            "goal": "1: EvalLog ingest vs plain Python",
            "workload": workload,
            "hylo_s": hylo_s,
            "reference": "json loop into lists + Parquet",
            "reference_s": json_s,
            "ratio": json_s / hylo_s,
            "target": ">= 3x",
            "met": json_s / hylo_s >= JSON_TARGET,
            "peak_rss_mb": peak,
        },
        {
            "goal": "1: EvalLog ingest memory bounded by the chunk",
            "workload": f"{n_logs:,} vs {n_logs // 10:,} EvalLogs, {chunk / 2**20:g} MiB chunks",
            "hylo_s": mem_full["seconds"],
            "reference": f"peak RSS growth on {n_logs // 10:,} logs (MiB)",
            "reference_s": grow_tiny,
            "ratio": grow_full / max(grow_tiny, 1.0),
            "target": "<= 1.5 (growth_full / growth_small)",
            "met": grow_full / max(grow_tiny, 1.0) <= MEMORY_TARGET,
            "peak_rss_mb": mem_full["peak"],
        },
    ]


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--small", action="store_true", help="100 logs instead of 1,000")
    p.add_argument("--repeat", type=int, default=2, help="rounds; the best time of each counts")
    args = p.parse_args()
    for row in run(args.small, args.repeat):
        print(f"  {'met   ' if row['met'] else 'MISSED'} {row['goal']}: ratio {row['ratio']:.2f}")


if __name__ == "__main__":
    main()
