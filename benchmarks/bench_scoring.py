"""All built-in scorers over ~20,000 episodes (~3.5M events) vs a plain-Python episode loop.

Generates a synthetic dataset into a temp dir, ingests it, then times
``compute_scores`` (DuckDB over the Parquet store, from reading the files to the Arrow rows)
against a plain-Python loop computing the same scores from the same stored events, fetched
once as Python lists beforehand (so the loop is not charged for reading). Checks that both give
the same values, and prints both times and the ratio (target >= 15x).

    .venv/bin/python benchmarks/bench_scoring.py [--runs 40 --seeds 50 --mean-steps 170]
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import hylo_analytics as ha
from hylo_analytics.scoring import BUILTIN_SCORERS, compute_scores
from hylo_analytics.testing import SynthConfig, write_dataset

BUILTINS = [s for s in BUILTIN_SCORERS if s != "grades"]


def _p95(xs: list[float]) -> float:
    s = sorted(xs)
    pos = 0.95 * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def python_scores(samples: list[tuple[Any, ...]], events: list[tuple[Any, ...]]) -> dict[Any, Any]:
    """The reference: one dict per episode, then the same gates and scores as the SQL."""
    by_ep: dict[tuple[str, str], list[tuple[Any, ...]]] = defaultdict(list)
    for ev in events:
        by_ep[(ev[0], ev[1])].append(ev)
    out: dict[tuple[str, str, str], float | None] = {}
    for run_id, key, episode_id, status, trace_status in samples:
        evs = sorted(by_ep.get((run_id, episode_id), []), key=lambda e: e[2])
        steps = [e for e in evs if e[3] == "step"]
        ends = [e for e in evs if e[3] == "end"]
        n_inter = sum(1 for e in evs if e[3] == "intervention")
        end_status = ends[-1][7] if ends else None
        errored = end_status == "error" if ends else status == "error"
        gate = None
        if trace_status not in ("ok", "partial"):
            gate = "no trace"
        elif errored:
            gate = "episode errored"
        elif not ends:
            gate = "no end event"
        flags = [e[5] for e in steps if e[5] is not None]
        rewards = [e[4] for e in steps if e[4] is not None]
        lats = [e[6] for e in steps if e[6] is not None]
        vals: dict[str, float | None] = {
            "success": float(end_status == "success"),
            "success_once": float(any(flags)) if steps and flags else None,
            "success_at_end": (float(steps[-1][5]) if steps and steps[-1][5] is not None else None),
            "steps": float(len(steps)),
            "safety_interventions": float(n_inter),
            "return": sum(rewards) if rewards else None,
            "latency_p95": _p95(lats) if lats else None,
        }
        for m, v in vals.items():
            out[(run_id, key, m)] = None if gate is not None else v
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--tasks", type=int, default=10)
    ap.add_argument("--seeds", type=int, default=50)
    ap.add_argument("--mean-steps", type=int, default=170)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="build (or reuse) the store in this folder")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        cfg = SynthConfig(
            runs=args.runs, tasks=args.tasks, seeds=args.seeds, mean_steps=args.mean_steps
        )
        t0 = time.perf_counter()
        if not (root / "store").exists():
            write_dataset(root / "data", cfg)
            ha.open_store(root / "store").ingest(root / "data", progress=False)
        store = ha.open_store(root / "store")
        n_ep, n_ev = store.parquet.con.execute(
            "select (select count(*) from stg_samples), (select count(*) from stg_events)"
        ).fetchall()[0]
        print(f"dataset: {n_ep} episodes, {n_ev} events (setup {time.perf_counter() - t0:.1f}s)")

        fast = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            rows, *_ = compute_scores(store, BUILTINS)
            fast.append(time.perf_counter() - t0)

        samples = store.parquet.con.execute(
            "select run_id, key, episode_id, status, trace_status from stg_samples"
        ).fetchall()
        t0 = time.perf_counter()
        events = store.parquet.con.execute(
            "select run_id, episode_id, idx, type, reward, success, latency_ms, status "
            "from stg_events"
        ).fetchall()
        fetch = time.perf_counter() - t0
        slow = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            ref = python_scores(samples, events)
            slow.append(time.perf_counter() - t0)

        got = {
            (r, k, m): v
            for r, k, m, v in zip(
                *(rows.column(c).to_pylist() for c in ("run_id", "key", "metric", "value")),
                strict=True,
            )
        }
        bad = [
            k
            for k, v in ref.items()
            if (v is None) != (got[k] is None) or (v is not None and not math.isclose(v, got[k]))
        ]
        assert len(got) == len(ref) and not bad, f"{len(bad)} values differ, e.g. {bad[:3]}"
        f, s = min(fast), min(slow)
        print(f"vectorized (DuckDB, {len(BUILTINS)} scorers): {f:.3f}s  (best of {args.repeat})")
        print(f"plain Python loop over fetched lists:  {s:.3f}s  (best of {args.repeat})")
        print(f"ratio: {s / f:.1f}x  (target >= 15x); {rows.num_rows} score rows, all equal")
        print(
            f"(fetching the events as Python lists, not charged to the loop: {fetch:.2f}s; "
            f"end to end the ratio is {(s + fetch) / f:.1f}x)"
        )


if __name__ == "__main__":
    main()
