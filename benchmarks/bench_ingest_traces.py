"""Trace ingest + built-in scoring (20,000 small JSONL files) vs two references, in one process.

    python benchmarks/bench_ingest_traces.py            # 40 runs x 500 samples: 20,000 traces
    python benchmarks/bench_ingest_traces.py --small    # 2,000 traces
    python benchmarks/bench_ingest_traces.py --data DIR # reuse (or create) a dataset in DIR

Three measurements of the same work (read every trace, keep every event with its raw line,
compute the built-in scores, write Parquet):

- a plain-Python ``json`` loop: each file read, each line ``json.loads``-ed into column lists,
  the built-in scores computed per episode in Python, both tables written with pyarrow;
- one multi-threaded native read of the same bytes as a single stream: every trace concatenated
  into one JSONL file beforehand (not timed), then one DuckDB query: ``read_json`` over it and
  the built-in reductions as a group-by (the floor a per-file reader is measured against; it
  writes nothing and keeps no raw line, so it is a floor, not the same work);
- hylo_analytics: ``store.ingest(logs)`` + ``store.score()`` in a fresh store, in a child
  process, so its peak RSS is its own.

Goal 2: hylo >= 10x faster than the json loop, within 1.5x of the single-stream read, and a
peak RSS under 1 GB.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import hylo_analytics as ha
from hylo_analytics.testing import SynthConfig, write_dataset

_RSS_GOAL_MB = 1024.0


def _config(small: bool) -> SynthConfig:
    return SynthConfig(runs=4 if small else 40, tasks=10, seeds=50, mean_steps=170, seed=2)


def _p95(xs: list[float]) -> float:
    s = sorted(xs)
    pos = 0.95 * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def _episode_scores(evs: list[dict[str, Any]], status: str) -> dict[str, float | None]:
    """The built-in scores of one episode, with the same gates as the SQL."""
    steps = [e for e in evs if e.get("type") == "step"]
    ends = [e for e in evs if e.get("type") == "end"]
    end_status = ends[-1].get("status") if ends else None
    errored = end_status == "error" if ends else status == "error"
    flags = [(e.get("info") or {}).get("success") for e in steps]
    known = [f for f in flags if f is not None]
    rewards = [e["reward"] for e in steps if e.get("reward") is not None]
    lats = [e["latency_ms"] for e in steps if e.get("latency_ms") is not None]
    vals: dict[str, float | None] = {
        "success": float(end_status == "success"),
        "success_once": float(any(known)) if known else None,
        "success_at_end": float(flags[-1]) if steps and flags[-1] is not None else None,
        "steps": float(len(steps)),
        "safety_interventions": float(sum(1 for e in evs if e.get("type") == "intervention")),
        "return": sum(rewards) if rewards else None,
        "latency_p95": _p95(lats) if lats else None,
    }
    if errored or not ends:
        return dict.fromkeys(vals)
    return vals


_EVENT_COLS = (
    "run_id",
    "key",
    "episode_id",
    "idx",
    "type",
    "t",
    "reward",
    "terminated",
    "truncated",
    "success",
    "latency_ms",
    "reason",
    "status",
    "raw",
)


def json_loop(data: Path, out: Path) -> tuple[int, int]:
    """The plain-Python reference: json + loops into column lists, scores, Parquet."""
    ev: dict[str, list[Any]] = {k: [] for k in _EVENT_COLS}
    sc: dict[str, list[Any]] = {k: [] for k in ("run_id", "key", "metric", "value")}
    for log_path in sorted(data.glob("*/evallog.json")):
        log = json.loads(log_path.read_bytes())
        rid = log["run_id"]
        for s in log["samples"]:
            if not s.get("trace"):
                continue
            evs = []
            with open(log_path.parent / s["trace"], encoding="utf-8") as fh:
                for i, line in enumerate(fh, 1):
                    if not line.strip():
                        continue
                    e = json.loads(line)
                    evs.append(e)
                    ev["run_id"].append(rid)
                    ev["key"].append(s["key"])
                    ev["episode_id"].append(s["episode_id"])
                    ev["idx"].append(i)
                    for k in ("type", "t", "reward", "terminated", "truncated"):
                        ev[k].append(e.get(k))
                    ev["success"].append((e.get("info") or {}).get("success"))
                    for k in ("latency_ms", "reason", "status"):
                        ev[k].append(e.get(k))
                    ev["raw"].append(line.rstrip("\r\n"))
            for m, v in _episode_scores(evs, s["status"]).items():
                sc["run_id"].append(rid)
                sc["key"].append(s["key"])
                sc["metric"].append(m)
                sc["value"].append(v)
    out.mkdir(parents=True, exist_ok=True)
    for name, cols in (("events", ev), ("scores", sc)):
        pq.write_table(
            pa.table(cols), out / f"{name}.parquet", compression="zstd", compression_level=1
        )
    return len(ev["idx"]), len(sc["key"])


_NATIVE_COLUMNS = (
    "{type: 'VARCHAR', t: 'BIGINT', reward: 'DOUBLE', terminated: 'BOOLEAN', "
    "truncated: 'BOOLEAN', info: 'STRUCT(success BOOLEAN)', latency_ms: 'DOUBLE', "
    "reason: 'VARCHAR', status: 'VARCHAR'}"
)

# The single stream has no file boundaries: an episode is the run of lines from one start
# event to the next (a running count, in the stream's order).
_NATIVE_SCORES = """
with e as (
    select *, sum(cast(type = 'start' as int)) over (rows unbounded preceding) as ep,
           row_number() over () as idx
    from read_json('{path}', format = 'newline_delimited', columns = {columns})
)
select ep,
       count(*) filter (where type = 'step') as n_steps,
       sum(reward) filter (where type = 'step') as total_reward,
       bool_or(info.success) filter (where type = 'step') as success_once,
       arg_max(info.success, idx) filter (where type = 'step') as success_at_end,
       quantile_cont(latency_ms, 0.95) filter (where type = 'step') as latency_p95,
       count(*) filter (where type = 'intervention') as n_interventions,
       count(*) filter (where type = 'end') as n_end_events,
       arg_max(status, idx) filter (where type = 'end') as end_status,
       count(*) as n_events
from e group by ep
"""


def native_read(stream: Path) -> tuple[int, int]:
    """One multi-threaded DuckDB ``read_json`` of the concatenated traces + the reductions."""
    con = duckdb.connect()
    scores = con.sql(_NATIVE_SCORES.format(path=stream, columns=_NATIVE_COLUMNS)).to_arrow_table()
    con.close()
    return int(pc.sum(scores["n_events"]).as_py()), scores.num_rows


def _concatenate(data: Path, stream: Path) -> int:
    n = 0
    with open(stream, "wb") as out:
        for path in sorted(data.glob("*/episodes/*.jsonl")):
            out.write(path.read_bytes())
            n += 1
    return n


def _hylo_child(data: str, store_dir: str, conn: Any) -> None:
    store = ha.open_store(store_dir)
    t0 = time.perf_counter()
    ingest = store.ingest(data, progress=False)
    t1 = time.perf_counter()
    scored = store.score()
    t2 = time.perf_counter()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10
    conn.send((t1 - t0, t2 - t1, rss, ingest.events_added, ingest.quarantined, scored.rows_written))
    conn.close()


def hylo(data: Path, store_dir: Path) -> tuple[float, float, float, int, int, int]:
    """Ingest + score in a fresh store, in a child process: (ingest s, score s, RSS MB, ...)."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_hylo_child, args=(str(data), str(store_dir), child))
    proc.start()
    result: tuple[float, float, float, int, int, int] = parent.recv()
    proc.join()
    return result


def _dataset(small: bool, data: Path | None, work: Path) -> Path:
    if data is not None and (data / ".complete").exists():
        return data
    target = data or work / "logs"
    t0 = time.perf_counter()
    write_dataset(target, _config(small))
    (target / ".complete").touch()
    print(f"generated the data in {time.perf_counter() - t0:.0f} s")
    return target


def run(small: bool, data: Path | None = None) -> list[dict[str, Any]]:
    """Measure the three, print them, and return the goal rows."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        logs = _dataset(small, data, work)
        stream = work / "all.jsonl"
        n_files = _concatenate(logs, stream)
        size_mb = stream.stat().st_size / 2**20
        ingest_s, score_s, rss_mb, n_events, quarantined, n_scores = hylo(logs, work / "store")
        ours = ingest_s + score_s
        t0 = time.perf_counter()
        ref_events, _ = json_loop(logs, work / "ref-json")
        loop_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        nat_events, nat_episodes = native_read(stream)
        native_s = time.perf_counter() - t0
    assert quarantined == 0 and n_events == ref_events == nat_events, (
        n_events,
        ref_events,
        nat_events,
    )
    assert nat_episodes == n_files
    workload = f"{n_files:,} traces, {n_events:,} events, {size_mb:,.0f} MiB"
    print(
        f"traces: {workload}\n"
        f"  hylo_analytics   {ours:7.2f} s  (ingest {ingest_s:.2f} s + score {score_s:.2f} s, "
        f"{n_scores:,} score rows)  peak RSS {rss_mb:,.0f} MiB\n"
        f"  json loop        {loop_s:7.2f} s  ratio {loop_s / ours:5.1f}x  (goal >= 10x)\n"
        f"  native stream    {native_s:7.2f} s  hylo/native {ours / native_s:5.2f}x  "
        f"(goal <= 1.5x)\n"
        f"  peak RSS         {rss_mb:7.0f} MiB (goal < {_RSS_GOAL_MB:.0f} MiB)"
    )
    return [
        {
            "goal": "2",
            "workload": f"traces ingest+score: {workload}",
            "hylo_s": ours,
            "reference": "plain-Python json loop",
            "reference_s": loop_s,
            "ratio": loop_s / ours,
            "target": ">= 10x",
            "met": loop_s / ours >= 10,
            "peak_rss_mb": rss_mb,
        },
        {
            "goal": "2",
            "workload": f"traces ingest+score: {workload}",
            "hylo_s": ours,
            "reference": "one native read of the same bytes (DuckDB read_json + group-by)",
            "reference_s": native_s,
            "ratio": ours / native_s,  # as stated: hylo time over the single-stream time
            "target": "<= 1.5x (hylo_s / reference_s)",
            "met": ours / native_s <= 1.5,
            "peak_rss_mb": rss_mb,
        },
        {
            "goal": "2/7",
            "workload": f"traces ingest+score peak RSS: {workload}",
            "hylo_s": ours,
            "reference": "1 GB",
            "reference_s": float("nan"),
            "ratio": rss_mb / _RSS_GOAL_MB,  # as stated: peak RSS over the 1 GB budget
            "target": "< 1 GB peak RSS",
            "met": rss_mb < _RSS_GOAL_MB,
            "peak_rss_mb": rss_mb,
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
