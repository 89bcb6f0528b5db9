"""The item x run flip matrix (issue 39, item 5) beside a hand-written DuckDB + numpy floor.

    python benchmarks/bench_flip_matrix.py --store DIR            # e.g. the 1M store
    python benchmarks/bench_flip_matrix.py --store DIR --sizes 10,100,1000,2000
    python benchmarks/bench_flip_matrix.py --runs 200             # a synthetic store, made here

Goal: a flip matrix of 2,000 runs x 500 keys each in <= 5 s on the 1M store of
``bench_scale.py --large`` (2,000 runs of one benchmark, 10 tasks x 50 seeds, 4 % errored),
peak RSS reported. For each size N (the first N runs in natural version order, or every run
when N is the store's count), three children run one after the other, each in a process of
its own, timed after import and ``open_store`` (peak RSS ``VmHWM`` of that process):

- ``hylo``: ``Store.flip_matrix(runs)``: the outcomes frame, the keys' counts, solve rates and
  flags, the runs' counts and flips;
- ``floor``: plain DuckDB over the store's Parquet files (``_floor.py``: the current rows, the
  tombstones applied) reading each (run, key)'s success and whether its episode errored, then
  numpy on a runs x keys matrix: the same per-key counts, solve rate, ``always_fails``,
  ``newly_broken`` / ``newly_fixed`` / ``newly_errored`` and per-run ``n_broken`` /
  ``n_fixed``, with a hand-written natural version sort. It rests on ``_floor``'s facts of the
  synthetic store (one source per episode, one epoch per key, one suite), checked untimed;
- ``chart``: ``Store.flip_matrix`` and ``charts.flip_matrix(...).to_dict()`` (for the record:
  what a report section or ``--chart`` adds).

The two answers are compared row for row (counts and flags equal, solve rates within 1e-9);
a disagreement prints ``MISMATCH`` and exits 1. The load average is printed beside each line.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _measure import peak_rss_mb, reset_peak

HERE = Path(__file__).resolve()
GOAL_S = 5.0
KEY_COLS = ["key", "n_valid", "n_success", "n_failure", "n_errored", "always_fails",
            "newly_broken", "newly_fixed", "newly_errored"]  # fmt: skip
RUN_COLS = ["run_id", "position", "n_success", "n_errored", "n_broken", "n_fixed"]


def _hylo(store_path: str, runs: list[str] | None, out: Path, chart: bool) -> dict[str, Any]:
    import hylo_analytics as ha
    import hylo_analytics.compare  # imported on first use: not the question's cost

    if chart:
        from hylo_analytics import charts
    store = ha.open_store(store_path)
    reset_peak()
    t = time.perf_counter()
    fm = store.flip_matrix(runs)
    if chart:
        charts.flip_matrix(fm).to_dict()
    seconds, rss = time.perf_counter() - t, peak_rss_mb()
    fm.keys.write_parquet(out / "hylo_keys.parquet")
    fm.runs.write_parquet(out / "hylo_runs.parquet")
    return {"seconds": seconds, "rss_mb": rss, "cells": fm.outcomes.height}


def _natural(version: str | None) -> tuple[tuple[int, int, str], ...]:
    """Natural version order, written by hand for the floor (1.9 < 1.10, 1.2.0-rc1 < 1.2.0)."""
    pre = {"dev": 0, "a": 1, "alpha": 1, "b": 2, "beta": 2, "c": 3, "pre": 3, "rc": 4}
    tokens = re.findall(r"\d+|[a-z]+", (version or "").lower())
    key = [
        (2, int(t), "") if t.isdigit() else (0, pre[t], t) if t in pre else (3, 0, t)
        for t in tokens
    ]
    return (*key, (1, 0, ""))


def _floor(store_path: str, runs: list[str] | None, out: Path) -> dict[str, Any]:
    import duckdb
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from _floor import _runs_filter, _scores, check, current

    store = Path(store_path)
    with duckdb.connect() as checking:
        check(checking, store, runs)
    reset_peak()
    t = time.perf_counter()
    con = duckdb.connect()
    meta = con.sql(
        f"""select run_id, agent_version, ingested_at, coalesce(errors_policy, case when
        source_format = 'vla-eval' then 'failure' else 'exclude' end) as errors
        from ({current(store, "runs", "s.*", _runs_filter(runs))})"""
    ).fetchall()
    meta.sort(key=lambda r: (_natural(r[1]), r[2], r[0]))  # 2,000 labels, not rows
    order = {r[0]: i for i, r in enumerate(meta)}
    failing = np.array([r[3] == "failure" for r in meta])
    where = "metric = 'success' and " + _runs_filter(runs)
    errored = current(store, "samples", "s.run_id, s.key, s.epoch", "status = 'error'")
    cells = con.sql(
        f"""select s.run_id, s.key, case when s.ok then s.raw end as v,
            not s.ok and e.key is not null as errored
        from ({_scores(store, where)}) as s
        left join ({errored}) as e on e.run_id = s.run_id and e.key = s.key
            and e.epoch is not distinct from s.epoch"""
    ).to_arrow_table()
    run_codes = pc.dictionary_encode(cells["run_id"]).combine_chunks()
    key_codes = pc.dictionary_encode(cells["key"]).combine_chunks()
    to_pos = np.array([order[r] for r in run_codes.dictionary.to_pylist()])
    r = to_pos[run_codes.indices.to_numpy()]
    k = key_codes.indices.to_numpy()
    value = cells["v"].to_numpy(zero_copy_only=False).astype(float)
    err = cells["errored"].to_numpy(zero_copy_only=False)
    n_runs, n_keys = len(meta), len(key_codes.dictionary)
    code = np.full((n_runs, n_keys), -1, np.int8)  # -1 missing, 0 failure, 1 success, 2 error
    code[r, k] = np.where(np.isnan(value), np.where(err, 2, 3), value).astype(np.int8)
    vals = np.full((n_runs, n_keys), np.nan)
    vals[r, k] = np.where(err & failing[r], 0.0, value)  # the run's errors convention
    valid = ~np.isnan(vals)
    n_valid, n_success = valid.sum(0), (code == 1).sum(0)
    n_failure, n_errored = (code == 0).sum(0), (code == 2).sum(0)
    last, prev = code[-1], code[-2] if n_runs > 1 else np.full(n_keys, -1)
    keys = pa.table({
        "key": key_codes.dictionary, "n_valid": n_valid, "n_success": n_success,
        "n_failure": n_failure, "n_errored": n_errored,
        "solve_rate": np.where(n_valid > 0, np.nansum(vals, 0) / np.maximum(n_valid, 1), np.nan),
        "always_fails": (n_success == 0) & (n_failure > 0),
        "newly_broken": (prev == 1) & (last == 0), "newly_fixed": (prev == 0) & (last == 1),
        "newly_errored": (prev == 1) & (last == 2),
    })  # fmt: skip
    steps = (code[:-1] == 1) & (code[1:] == 0), (code[:-1] == 0) & (code[1:] == 1)
    run_table = pa.table({
        "run_id": [m[0] for m in meta], "position": np.arange(n_runs),
        "n_success": (code == 1).sum(1), "n_errored": (code == 2).sum(1),
        "n_broken": np.r_[0, steps[0].sum(1)], "n_fixed": np.r_[0, steps[1].sum(1)],
    })  # fmt: skip
    seconds, rss = time.perf_counter() - t, peak_rss_mb()
    pq.write_table(keys, out / "floor_keys.parquet")
    pq.write_table(run_table, out / "floor_runs.parquet")
    return {"seconds": seconds, "rss_mb": rss, "cells": int(valid.size)}


def disagreement(out: Path) -> str | None:
    """Where hylo's keys and runs differ from the floor's, or None when they agree."""
    import polars as pl

    for what, cols, on in (("keys", KEY_COLS, "key"), ("runs", RUN_COLS, "run_id")):
        a = pl.read_parquet(out / f"hylo_{what}.parquet")
        b = pl.read_parquet(out / f"floor_{what}.parquet")
        if a.height != b.height:
            return f"{what}: {a.height} rows against {b.height}"
        j = a.join(b, on=on, how="full", suffix="_f", coalesce=True)
        for c in [*cols[1:], *(["solve_rate"] if what == "keys" else [])]:
            x, y = pl.col(c).cast(pl.Float64), pl.col(f"{c}_f").cast(pl.Float64)
            bad = j.filter(~(((x - y).abs() <= 1e-9) | (x.is_null() & y.is_null())))
            if bad.height:
                row = bad.row(0, named=True)
                return f"{what}.{c}: {bad.height} rows differ, e.g. {row[on]}: {row[c]} vs {row[f'{c}_f']}"
    return None


def _child(step: str, store: str, out: str) -> None:
    opts = json.loads(sys.stdin.read())
    if step == "floor":
        got = _floor(store, opts["runs"], Path(out))
    else:
        got = _hylo(store, opts["runs"], Path(out), chart=step == "chart")
    print(json.dumps(got))


def _run(step: str, store: Path, out: Path, runs: list[str] | None) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, str(HERE), "--child", step, str(store), str(out)],
        input=json.dumps({"runs": runs}), capture_output=True, text=True, check=False,
    )  # fmt: skip
    if proc.returncode:
        raise SystemExit(f"{step} failed:\n{proc.stderr[-3000:]}")
    got: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return {**got, "load": os.getloadavg()[0]}


def _ordered_runs(store: Path) -> list[str]:
    import hylo_analytics as ha
    from hylo_analytics._versions import version_ranks

    meta = ha.open_store(store).sql("select run_id, agent_version, ingested_at from stg_runs")
    meta = meta.with_columns(_v=version_ranks(meta["agent_version"]))
    return meta.sort(["_v", "ingested_at", "run_id"])["run_id"].to_list()


def measure(store: Path, sizes: list[int] | None) -> int:
    every = _ordered_runs(store)
    code = 0
    print(
        "| runs x keys | hylo_analytics | floor (DuckDB + numpy) | ratio | with the chart | goal |"
    )
    print("|---|---|---|---|---|---|")
    for n in sizes or [len(every)]:
        runs = None if n >= len(every) else every[:n]
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp)
            floor = _run("floor", store, out, runs)
            hylo = _run("hylo", store, out, runs)
            chart = _run("chart", store, out, runs)
            wrong = disagreement(out)
        if wrong:
            print(f"MISMATCH at {n} runs: {wrong}")
            code = 1
        keys = hylo["cells"] // min(n, len(every))
        met = hylo["seconds"] <= GOAL_S
        print(
            f"| {min(n, len(every)):,} x {keys:,} | {hylo['seconds']:.2f} s, "
            f"{hylo['rss_mb']:,.0f} MiB (load {hylo['load']:.1f}) | {floor['seconds']:.2f} s, "
            f"{floor['rss_mb']:,.0f} MiB (load {floor['load']:.1f}) | "
            f"{hylo['seconds'] / floor['seconds']:.1f}x | {chart['seconds']:.2f} s, "
            f"{chart['rss_mb']:,.0f} MiB | <= {GOAL_S:.0f} s: {'met' if met else '**missed**'} |"
        )
    return code


def _synthetic(n_runs: int, tmp: Path) -> Path:
    import hylo_analytics as ha
    from hylo_analytics.testing import SynthConfig, write_dataset

    logs, store = tmp / "logs", tmp / "store"
    write_dataset(logs, SynthConfig(runs=n_runs, tasks=10, seeds=50, traces_per_run=0))
    ha.open_store(store).ingest(logs, progress=False)
    return store


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--store", type=Path, help="a store to measure (never written)")
    p.add_argument("--runs", type=int, default=200, help="without --store: runs to generate")
    p.add_argument("--sizes", help="comma-separated numbers of runs (default: every run)")
    p.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        _child(*args.child)
        return 0
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else None
    if args.store is not None:
        return measure(args.store, sizes)
    with tempfile.TemporaryDirectory() as tmp:
        return measure(_synthetic(args.runs, Path(tmp)), sizes)


if __name__ == "__main__":
    raise SystemExit(main())
