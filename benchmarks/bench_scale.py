"""Ingest, score, aggregate and compare at 10k, 100k and 1M samples: time and peak RSS per size.

    python benchmarks/bench_scale.py            # 10k / 100k / 1M samples; 200 / 2k / 20k traces
    python benchmarks/bench_scale.py --small    # 10k / 100k samples; 200 / 2k traces
    python benchmarks/bench_scale.py --large --workdir DIR  # 1M / 10M samples (issue 26)
    python benchmarks/bench_scale.py --large --workdir DIR --sizes 20k --commits 5  # a quick try
    python benchmarks/bench_scale.py --large --workdir DIR --sizes 1m --reuse --steps compare
    python benchmarks/bench_scale.py --table --workdir DIR  # goal 5: per size, from DIR's runs

Issue 14's goals 7 and 8. Every step runs in its own child process on a store written once per
size, so each peak RSS (``VmHWM``) is that step's alone. EvalLogs carry 500 samples a run and
their scores (no traces): ``aggregate`` is every run by run on success and steps, ``compare``
every run against the first (overall). Traces (~150 events each) are ingested and re-scored by
the built-in scorers. Scaling is linear when the time per sample at the largest size is within
1.5x of the time per sample at the size before it; goal 7 is aggregate and compare at 1M
samples under 5 s and 2 GB each.

``--large`` measures issue 26's goals at 1M and 10M samples (``--sizes``: 2,000 and 20,000
runs of one benchmark, 10 tasks x 50 seeds, one trace per run unless ``--no-traces``), and the
costs ``docs/scale-out.md`` reports. Steps (``--steps``, in this order):

- ``ingest``; ``score`` (re-score the traces, on a copy of the store: see below);
- goal 1, each question beside its **floor** (``_floor.py``: plain DuckDB over the same
  Parquet files, a hand-written query computing the same answer), each side in its own
  process, the answers cross-checked (counts equal, means within 1e-9; a disagreement prints
  ``MISMATCH`` and fails the run): ``aggregate`` of every run (<= 5x; a second line without
  the bootstrap, so the bootstrap's own time is the difference), ``mart_aggregate``
  (``select * from mart_aggregate_run``), ``compare`` of every run against the first,
  ``declare`` (those pairs, for the marts), ``mart_compare`` of one pair (last vs first, open
  + first query; the floor reads those 2 runs only): each <= 3x, peak RSS <= 1.5 GiB at 1M,
  <= 3 GiB at 10M;
- ``two_runs`` (goal 2): aggregate, compare and ``mart_compare`` of the first and last runs
  in the big store against a store holding only those 2 runs: <= 2x + 50 ms;
- ``commit`` (goal 3): ``--commits`` new runs committed one by one (ingest, then score that
  run) into a copy of the big store, and each into an empty store: medians <= 2x, maxima
  reported.

The floors read the current score rows directly, which is the one score resolution only when
each episode has one source; the store measured is therefore never re-scored (``score`` runs on
a copy), and each floor checks it (untimed) before its query. Each line carries the load
average. The logs and stores stay in ``--workdir`` (``--reuse`` measures the listed
``--steps`` on them again; ``answers/`` holds both sides' answers); a step that runs past
``--timeout`` seconds is reported as such. ``--sizes`` also takes plain numbers (``10000``).

``--table`` (issue 26's goal 5) prints, from ``DIR/results.jsonl`` (every ``--large`` run into
``DIR`` appends to it), one markdown row per question and one per its floor, one column per
size: the range of its times over the runs recorded, its largest peak RSS, and hylo / floor.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _measure import peak_rss_mb

HERE = Path(__file__).resolve()


def _child(step: str, store_path: str, logs: str, opts: dict[str, Any]) -> None:
    """One measured step in this fresh process; prints seconds and peak RSS as JSON."""
    if step.startswith("floor_"):  # DuckDB alone: no hylo_analytics import
        import pyarrow.parquet as pq
        from _floor import run as floor

        got = floor(
            step[6:], Path(store_path), opts["ids"], timed_open=step == "floor_mart_compare"
        )
        _report(got["seconds"], got["table"], opts, pq.write_table)
        return
    if step == "commits":
        _commits(store_path, opts)
        return
    import hylo_analytics as ha

    store = ha.open_store(store_path)
    if step in ("aggregate", "aggregate_closed", "compare") or step.startswith("two_"):
        # imported on first use, not the question's cost (and compiled from source where
        # PYTHONDONTWRITEBYTECODE is set, as on these machines: 60-90 ms for compare's package)
        import scipy.stats  # noqa: F401

        import hylo_analytics.aggregate
        import hylo_analytics.compare
    ids = opts.get("ids") or []
    if not ids and step not in ("ingest", "score", "aggregate", "mart_aggregate"):
        ids = store.sql("SELECT run_id FROM runs ORDER BY run_id")["run_id"].to_list()
    t = time.perf_counter()
    out: Any = None
    if step == "ingest":
        store.ingest(logs, progress=False)
    elif step == "score":
        store.score()
    elif step == "aggregate":
        out = store.aggregate(("run_id",), metrics=["success", "steps"])
    elif step == "aggregate_closed":  # no bootstrap: what is left of aggregate's time
        ci = {"success": "wilson", "steps": "normal"}
        out = store.aggregate(("run_id",), metrics=["success", "steps"], ci=ci)
    elif step == "compare":
        out = store.compare(ids[1:], ids[0], by=opts.get("by", ()))
    elif step == "declare":  # the pairs compare measured, made mart_compare's
        store.declare_parent(ids[1:], ids[0])
    elif step == "mart_aggregate":  # the SQL path (what Spark runs): every run's statistics
        out = store.sql("SELECT * FROM mart_aggregate_run")
    elif step in ("mart_compare", "two_mart_compare"):  # one pair's rows
        if step == "mart_compare":  # open + first query, as a fresh notebook's first cell
            t = time.perf_counter()
            store = ha.open_store(store_path)
        out = store.sql(
            "SELECT * FROM mart_compare WHERE candidate = $c AND parent = $p",
            {"c": ids[-1], "p": ids[0]},
        )
    elif step == "two_aggregate":
        out = _aggregate_runs(store, [ids[0], ids[-1]])
    elif step == "two_compare":
        out = store.compare(ids[-1], ids[0])
    elif step == "setup_pair":  # a store of 2 runs only, their pair declared
        store.ingest(opts["paths"], progress=False)
        store.declare_parent(ids[-1], ids[0])
    else:
        raise SystemExit(f"unknown step {step!r}")
    _report(time.perf_counter() - t, out, opts, lambda df, path: df.write_parquet(path))


def _aggregate_runs(store: Any, runs: list[str]) -> Any:
    """``aggregate`` of ``runs`` only: its own run filter when it has one, else the frame's."""
    import inspect

    from hylo_analytics.aggregate import aggregate_scores
    from hylo_analytics.resolution import preferred_scores

    metrics = ["success", "steps"]
    if "runs" in inspect.signature(aggregate_scores).parameters:
        return store.aggregate(("run_id",), metrics=metrics, runs=runs)
    return aggregate_scores(preferred_scores(store, runs=runs), ("run_id",), metrics=metrics)


def _commits(store_path: str, opts: dict[str, Any]) -> None:
    """Commit each run folder (ingest, then score that run) into ``store_path``, or, with
    ``fresh``, each into an empty store of its own (opened before the clock starts)."""
    import hylo_analytics as ha

    seconds = []
    store = None if opts.get("fresh") else ha.open_store(store_path)
    for i, path in enumerate(opts["paths"]):
        if opts.get("fresh"):
            root = Path(store_path) / f"s{i}"
            _rm(root)
            store = ha.open_store(root)
        assert store is not None
        t = time.perf_counter()
        store.ingest(path, progress=False)
        store.score(runs=[Path(path).name])
        seconds.append(time.perf_counter() - t)
        if opts.get("fresh"):
            _rm(Path(store_path) / f"s{i}")
    print(json.dumps({"seconds": seconds, "rss_mb": peak_rss_mb()}))


def _report(seconds: float, answer: Any, opts: dict[str, Any], write: Any) -> None:
    rss = peak_rss_mb()  # before the answer is written: writing it is not the question's cost
    if answer is not None and opts.get("out"):
        write(answer, opts["out"])
    print(json.dumps({"seconds": seconds, "rss_mb": rss}))


def _step(
    step: str,
    store: Path,
    logs: Path,
    timeout: float | None = None,
    opts: dict[str, Any] | None = None,
) -> dict[str, Any]:
    # the options go through stdin: 20,000 run ids are too long for a command line
    out = subprocess.run(
        [sys.executable, str(HERE), "--child", step, str(store), str(logs), "--child-opts", "-"],
        input=json.dumps(opts or {}, default=str),
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if out.returncode:
        raise RuntimeError(f"step {step} on {store} failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
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
                got = _step(step, store, logs, opts={"by": ["task_id"]})
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
    "two_runs", "commit",
)  # fmt: skip
SIZES = {"20k": 20_000, "1m": 1_000_000, "10m": 10_000_000}
FLOORED = {  # issue 26's goal 1: each question against its DuckDB floor, and the ratio allowed
    "aggregate": ("aggregate, every run (success, steps), default intervals", 5.0),
    "compare": ("compare every run with the first (success, paired, overall)", 3.0),
    "mart_aggregate": ("select * from mart_aggregate_run", 3.0),
    "mart_compare": ("mart_compare, one pair (open + first query)", 3.0),
}
TWO_RUNS = {  # goal 2: a question about 2 runs, in the big store and in a store of just them
    "two_aggregate": ("aggregate", "aggregate of 2 runs"),
    "two_compare": ("compare", "compare of 2 runs"),
    "two_mart_compare": ("mart_compare", "mart_compare of their pair"),
}


@dataclass(frozen=True)
class Large:
    """What ``--large`` measures, and where: the logs and stores stay in ``workdir``."""

    workdir: Path
    steps: Sequence[str] = LARGE_STEPS
    sizes: Sequence[int] = (1_000_000, 10_000_000)
    reuse: bool = False
    timeout: float = 1800.0
    traces: bool = True
    commits: int = 100


def run_large(cfg: Large) -> list[dict[str, Any]]:
    """The 1M / 10M measurements; results are also appended to ``workdir/results.jsonl``."""
    from hylo_analytics.testing import SynthConfig, write_dataset

    rows: list[dict[str, Any]] = []
    for n in cfg.sizes:
        logs, store = cfg.workdir / f"logs{n}", cfg.workdir / f"store{n}"
        if not cfg.reuse:
            _rm(logs)
            _rm(store)
            t = time.perf_counter()
            write_dataset(logs, _synth(SynthConfig, n // 500, cfg.traces))
            _record(cfg.workdir, rows, f"generate logs, {n:,} samples", time.perf_counter() - t)
        for step in cfg.steps:
            try:
                rows += _large_step(cfg, step, n, store, logs)
            except subprocess.TimeoutExpired:
                _record(cfg.workdir, rows, f"{step}, {n:,} samples: over {cfg.timeout:.0f} s")
        size = sum(f.stat().st_size for f in store.rglob("*.parquet"))
        _record(cfg.workdir, rows, f"store Parquet size, {n:,} samples: {size / 2**20:,.0f} MiB")
    return rows


def _synth(config: Any, runs: int, traces: bool, seed: int = 0) -> Any:
    return config(runs=runs, tasks=10, seeds=50, traces_per_run=1 if traces else 0, seed=seed)


def _large_step(cfg: Large, step: str, n: int, store: Path, logs: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    if step in FLOORED:
        return _floored(cfg, step, n, store, logs)
    if step == "two_runs":
        return _two_runs(cfg, n, store, logs)
    if step == "commit":
        return _commit(cfg, n, store)
    opts = {}
    if step == "score":  # on a copy: the questions' floors read a store never re-scored
        scored = cfg.workdir / f"scored{n}"
        _copy(store, scored)
        store = scored
    elif step == "declare":
        opts["ids"] = _ids(store)
    got = _step(step, store, logs, cfg.timeout, opts)
    _record(cfg.workdir, rows, f"{step}, {n:,} samples", got["seconds"], got["rss_mb"], step, n)
    return rows


def _floored(cfg: Large, step: str, n: int, store: Path, logs: Path) -> list[dict[str, Any]]:
    """Goal 1: hylo's answer and the floor's, each in its own process, cross-checked."""
    from _floor import disagreement

    ids = _ids(store)
    label, allowed = FLOORED[step]
    limit = 1536.0 if n <= 1_000_000 else 3072.0
    sides = [step, f"floor_{step}"] + (["aggregate_closed"] if step == "aggregate" else [])
    got, paths = {}, {}
    for side in sides:
        paths[side] = _answer(cfg, n, side)
        got[side] = _step(side, store, logs, cfg.timeout, {"ids": ids, "out": paths[side]})
    floor = got[f"floor_{step}"]
    rows: list[dict[str, Any]] = []
    for side in (s for s in sides if not s.startswith("floor_")):
        bad = disagreement(step, paths[side], paths[f"floor_{step}"])
        ratio = got[side]["seconds"] / floor["seconds"]
        closed = side == "aggregate_closed"
        row = {
            "goal": "26.1",
            "workload": f"{label}, {n:,} samples"
            if not closed
            else f"aggregate, closed-form intervals only (ci=wilson/normal), {n:,} samples: "
            "the bootstrap's own time is the difference",
            "hylo_s": got[side]["seconds"],
            "reference": "DuckDB",
            "reference_s": floor["seconds"],
            "ratio": ratio,
            "target": "(for the record)" if closed else f"<= {allowed:g}x, <= {limit / 1024:g} GiB",
            "met": None if closed else ratio <= allowed and got[side]["rss_mb"] <= limit,
            "peak_rss_mb": got[side]["rss_mb"],
            "reference_rss_mb": floor["rss_mb"],
            "step": side,
            "n": n,
        }
        rows.append(_checked(cfg, row, bad))
    return rows


def _two_runs(cfg: Large, n: int, store: Path, logs: Path) -> list[dict[str, Any]]:
    """Goal 2: questions about the first and last runs, in the big store and in their own."""
    from _floor import disagreement

    ids = _ids(store)
    pair, two = cfg.workdir / f"pair{n}", [ids[0], ids[-1]]
    if not (cfg.reuse and pair.exists()):
        _rm(pair)
        paths = [logs / r for r in two]
        _step("setup_pair", pair, logs, cfg.timeout, {"ids": two, "paths": paths})
    rows: list[dict[str, Any]] = []
    for step, (question, label) in TWO_RUNS.items():
        big_out, small_out = _answer(cfg, n, f"{step}-big"), _answer(cfg, n, f"{step}-small")
        big = _step(step, store, logs, cfg.timeout, {"ids": two, "out": big_out})
        small = _step(step, pair, logs, cfg.timeout, {"ids": two, "out": small_out})
        row = {
            "goal": "26.2",
            "workload": f"{label}, {n // 500:,}-run store vs a store of those 2",
            "hylo_s": big["seconds"],
            "reference": "2-run store",
            "reference_s": small["seconds"],
            "ratio": big["seconds"] / small["seconds"],
            "target": "<= 2x + 50 ms",
            "met": big["seconds"] <= 2 * small["seconds"] + 0.05,
            "peak_rss_mb": big["rss_mb"],
            "reference_rss_mb": small["rss_mb"],
        }
        rows.append(_checked(cfg, row, disagreement(question, big_out, small_out)))
    return rows


def _commit(cfg: Large, n: int, store: Path) -> list[dict[str, Any]]:
    """Goal 3: commit new runs one by one (ingest + score) into the big store, and each into
    an empty store: the median and the maximum (a compaction) of each."""
    import statistics

    extra = _commit_logs(cfg, n)
    paths = sorted(p for p in extra.iterdir() if p.is_dir())[: cfg.commits]
    grown = cfg.workdir / f"commit{n}"
    _copy(store, grown)  # the big store itself stays as measured, for --reuse
    big = _step("commits", grown, extra, cfg.timeout, {"paths": paths})
    empty = cfg.workdir / f"commit_empty{n}"
    _rm(empty)
    alone = _step("commits", empty, extra, cfg.timeout, {"paths": paths, "fresh": True})
    _rm(grown)
    k = len(paths)
    rows: list[dict[str, Any]] = []
    for how, f in (("median", statistics.median), ("max (a compaction)", max)):
        b, a = f(big["seconds"]), f(alone["seconds"])
        row = {
            "goal": "26.3",
            "workload": f"commit one run (ingest + score), {how} of {k}, into the "
            f"{n // 500:,}-run store vs an empty one",
            "hylo_s": b,
            "reference": "empty store",
            "reference_s": a,
            "ratio": b / a,
            "target": "<= 2x" if how == "median" else "(for the record)",
            "met": b <= 2 * a if how == "median" else None,
            "peak_rss_mb": big["rss_mb"],
            "reference_rss_mb": alone["rss_mb"],
        }
        rows.append(_checked(cfg, row, None))
    return rows


def _commit_logs(cfg: Large, n: int) -> Path:
    """``cfg.commits`` new runs (their own seed), renamed ``run-commit-...``: the synthetic
    ids (``run-<agent>-<version>-<index>``) would collide with the big store's."""
    from hylo_analytics.testing import SynthConfig, write_dataset

    extra = cfg.workdir / f"commit_logs{n}"
    if extra.exists() and sum(p.is_dir() for p in extra.iterdir()) >= cfg.commits:
        return extra
    _rm(extra)
    raw = cfg.workdir / f"commit_logs{n}.tmp"
    _rm(raw)
    write_dataset(raw, _synth(SynthConfig, cfg.commits, cfg.traces, seed=1))
    extra.mkdir()
    for run in sorted(raw.iterdir()):
        new = "run-commit-" + run.name.removeprefix("run-")
        for f in run.rglob("*"):
            if f.is_file():
                f.write_text(f.read_text().replace(run.name, new))
                f.rename(f.with_name(f.name.replace(run.name, new)))
        run.rename(extra / new)
    _rm(raw)
    return extra


def _checked(cfg: Large, row: dict[str, Any], bad: str | None) -> dict[str, Any]:
    """``row`` recorded; a disagreement of the answers marks it, loudly, and unmet."""
    if bad:
        row = {**row, "workload": f"{row['workload']} **MISMATCH**: {bad}", "met": False}
        print(f"MISMATCH: {row['workload']}", file=sys.stderr, flush=True)
    row = {**row, "load": os.getloadavg()[0]}
    with (cfg.workdir / "results.jsonl").open("a") as f:
        f.write(json.dumps(row) + "\n")
    print(json.dumps(row), file=sys.stderr, flush=True)
    return row


def _answer(cfg: Large, n: int, side: str) -> Path:
    folder = cfg.workdir / "answers"
    folder.mkdir(exist_ok=True)
    return folder / f"{n}-{side}.parquet"


def _ids(store: Path) -> list[str]:
    from _floor import run_ids

    return run_ids(store)


def _copy(src: Path, dst: Path) -> None:
    import shutil

    _rm(dst)
    shutil.copytree(src, dst)


def _record(
    workdir: Path,
    rows: list[dict[str, Any]],
    what: str,
    s: float | None = None,
    mb: float | None = None,
    step: str | None = None,
    n: int | None = None,
) -> None:
    row = {"goal": "16 scale-out", "workload": what, "hylo_s": s, "reference": None,
           "reference_s": None, "ratio": None, "target": "(for the record)", "met": None,
           "peak_rss_mb": mb, "load": os.getloadavg()[0]}  # fmt: skip
    if step is not None:
        row |= {"step": step, "n": n}
    rows.append(row)
    with (workdir / "results.jsonl").open("a") as f:
        f.write(json.dumps(row) + "\n")
    print(json.dumps(row), file=sys.stderr, flush=True)


TABLE_STEPS = {  # --table: each question's line (and its floor's), in this order
    "ingest": "ingest (logs -> store)",
    "aggregate": "`Store.aggregate`, every run, default intervals",
    "aggregate_closed": "the same, ci=wilson/normal",
    "mart_aggregate": "`select * from mart_aggregate_run`",
    "compare": "`Store.compare`, every run with the first",
    "declare": "declare those pairs",
    "mart_compare": "`mart_compare`, one pair (open + first query)",
}


def size_table(results: Path) -> str:
    """Goal 5's table from ``results`` (``workdir/results.jsonl``): per question and size, the
    time (the range over every line recorded for that step and size) and the largest peak RSS,
    then its floor's and the ratio."""
    got: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for line in results.read_text().splitlines():
        row = json.loads(line)
        if row.get("step") in TABLE_STEPS and row.get("hylo_s") is not None:
            got.setdefault((row["step"], row["n"]), []).append(row)
    sizes = sorted({n for _, n in got})

    def cell(rows: list[dict[str, Any]], s: str, mb: str, ratio: bool = False) -> str:
        t = sorted(r[s] for r in rows if r.get(s) is not None)
        if not t:
            return ""
        out = _span(t[0], t[-1], ".3g") + " s"
        rss = [r[mb] for r in rows if r.get(mb)]
        out += f", {max(rss):,.0f} MiB" if rss else ""
        if ratio:
            x = sorted(r["ratio"] for r in rows)
            out += f" ({_span(x[0], x[-1], '.2g')}x)"
        return out

    lines = ["| question | " + " | ".join(f"{n:,}" for n in sizes) + " |"]
    lines.append("|---" * (len(sizes) + 1) + "|")
    for step, label in TABLE_STEPS.items():
        cols = [got.get((step, n), []) for n in sizes]
        if any(cols):
            lines.append(
                f"| {label} | {' | '.join(cell(c, 'hylo_s', 'peak_rss_mb') for c in cols)} |"
            )
        if any(r.get("reference_s") for c in cols for r in c):
            floors = " | ".join(cell(c, "reference_s", "reference_rss_mb", True) for c in cols)
            lines.append(f"| its floor, DuckDB (hylo / floor) | {floors} |")
    loads = [r["load"] for c in got.values() for r in c if r.get("load") is not None]
    if loads:
        lines.append(f"\nLoad average (1 min) at those lines: {min(loads):.1f}-{max(loads):.1f}.")
    return "\n".join(lines)


def _span(low: float, high: float, fmt: str) -> str:
    a, b = format(low, fmt), format(high, fmt)
    return a if a == b else f"{a}-{b}"


def _rm(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def _size(text: str) -> int:
    """``20k``, ``1m``, ``10m`` (or a plain number) as a count of samples."""
    t = text.strip().lower()
    try:
        return SIZES[t] if t in SIZES else int(t)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"a size is 20k, 1m, 10m or a number, not {text!r}"
        ) from None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--large", action="store_true", help="1M and 10M samples")
    ap.add_argument("--workdir", type=Path, help="--large: where the logs and stores stay")
    ap.add_argument("--reuse", action="store_true", help="--large: the logs and stores exist")
    ap.add_argument("--steps", default=",".join(LARGE_STEPS), help="--large: steps to measure")
    ap.add_argument("--timeout", type=float, default=1800.0, help="--large: seconds per step")
    ap.add_argument(
        "--sizes", default="1m,10m", help="--large: comma-separated sizes (20k = 40 runs, 1m, 10m)"
    )
    ap.add_argument("--no-traces", action="store_true", help="--large: logs without traces")
    ap.add_argument("--commits", type=int, default=100, help="--large: commits of goal 3")
    ap.add_argument(
        "--table",
        action="store_true",
        help="print goal 5's per-size table from WORKDIR/results.jsonl (after --large runs)",
    )
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    ap.add_argument("--child-opts", default="{}", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        step, store, logs = args.child
        opts = sys.stdin.read() if args.child_opts == "-" else args.child_opts
        _child(step, store, logs, json.loads(opts))
        return
    sys.path.insert(0, str(HERE.parent))
    from run_all import table

    if args.table:
        if args.workdir is None:
            ap.error("--table needs --workdir")
        print(size_table(args.workdir / "results.jsonl"))
        return
    if args.large:
        if args.workdir is None:
            ap.error("--large needs --workdir")
        args.workdir.mkdir(parents=True, exist_ok=True)
        steps = [s for s in args.steps.split(",") if s]
        unknown = sorted(set(steps) - set(LARGE_STEPS))
        if unknown:
            ap.error(f"unknown step(s) {unknown}; the steps are {', '.join(LARGE_STEPS)}")
        cfg = Large(
            workdir=args.workdir,
            steps=steps,
            sizes=[_size(s) for s in args.sizes.split(",") if s],
            reuse=args.reuse,
            timeout=args.timeout,
            traces=not args.no_traces,
            commits=args.commits,
        )
        rows = run_large(cfg)
        print(table(rows))
        if any("MISMATCH" in str(r["workload"]) for r in rows):
            raise SystemExit("the answers of hylo_analytics and the floor disagree (MISMATCH)")
        return
    print(table(run(args.small)))


if __name__ == "__main__":
    main()
