"""A trend over versions (``Store.trend``) beside a hand-written DuckDB + numpy floor.

    python benchmarks/bench_trends.py --store DIR            # e.g. bench_scale's 1M store
    python benchmarks/bench_trends.py --make 2000 --workdir DIR   # writes a 2,000-run store
    python benchmarks/bench_trends.py --store DIR --family scan
    python benchmarks/bench_trends.py --store DIR --versions 10 100 1000 2000  # per N
    python benchmarks/bench_trends.py --false-alarms         # flat trends: how often flagged

Issue 39's goal: a trend over 2,000 versions in <= 5 s on the 1M store (2,000 runs of one
benchmark, 10 tasks x 50 seeds, one version per run). Each side runs in a child process of its
own, after its imports (and ``open_store`` for hylo), and reports its seconds and peak RSS
(``VmHWM``, reset before the work). The floor (:func:`floor`) reads the store's Parquet files
with DuckDB (``_floor.py``: the manifest's batches, the tombstone rule) and computes in numpy
what the trend computes: each (task, version)'s rate and Wilson interval, the best earlier
version (the running maximum, the earliest on ties), the paired counts against it, Tango's
one-sided score test (at 0 it is (b - c) / sqrt(b + c)), Holm over each version's tasks (or
over every test with ``--family scan``), and the regression point: the first version whose
adjusted p is below alpha and whose Tango upper bound at the verdict's level (1 - 2 alpha / m,
Bonferroni over the m tests of its family, the compare rule) is below 0. The answers are
cross-checked: counts and positions equal, rates, bounds and p-values within 1e-9; a
disagreement prints ``MISMATCH`` and exits 1.

The floor rests on the store's shape, checked (untimed) before it runs: one score per
(run, key, metric), one benchmark and split, every run's errors convention ``exclude`` (an
errored episode is an abstention), every value 0 or 1.

``--false-alarms`` simulates flat trends (no version differs from another: every version's
keys drawn from the same per-key success probabilities) through ``trend_scores`` and prints
how often a task gets a regression point under each family: the screening and the scan.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _measure import peak_rss_mb, reset_peak

HERE = Path(__file__).resolve()
ALPHA = 0.05
LEVEL = 0.95


def _child(side: str, store: str, out: str, family: str) -> None:
    """One side in this fresh process; prints seconds and peak RSS as JSON."""
    if side == "floor":
        import duckdb
        import numpy  # noqa: F401
        from _floor import check

        with duckdb.connect() as con:  # the store's shape, checked apart: not the answer's cost
            check(con, Path(store))
        reset_peak()
        t = time.perf_counter()
        answer = floor(Path(store), family, _ids(out))
    else:
        import scipy.stats  # noqa: F401  (imported on first use: not the question's cost)
        import tqdm.std  # noqa: F401

        import hylo_analytics as ha
        import hylo_analytics.aggregate
        import hylo_analytics.compare

        opened = ha.open_store(store)
        reset_peak()
        t = time.perf_counter()
        trend = opened.trend(_ids(out), family=family, progress=False)  # type: ignore[arg-type]
        answer = _answers(trend)
    seconds, rss = time.perf_counter() - t, peak_rss_mb()
    for name, frame in answer.items():
        frame.write_parquet(Path(out) / f"{side}-{name}.parquet")
    print(json.dumps({"seconds": seconds, "rss_mb": rss}))


def _answers(trend: Any) -> dict[str, Any]:
    """The figures both sides give, under one set of names."""
    return {
        "rates": trend.rates.select("task_id", "position", "n", "rate", "ci_low", "ci_high"),
        "tests": trend.tests.select(
            "task_id",
            "position",
            "best_position",
            "n_pairs",
            "wins",
            "losses",
            "p_worse",
            "p_adjusted",
        ),
        "points": trend.regressions.select("task_id", "position"),
    }


def _version_key(v: str) -> tuple[Any, ...]:
    """Natural version order, written out for the floor's labels (digits as numbers; a
    pre-release word before the release, as ``2.3.0-rc1 < 2.3.0``)."""
    pre = {"dev": 0, "a": 1, "alpha": 1, "b": 2, "beta": 2, "rc": 4}
    key = [
        (2, int(tok), "") if tok.isdigit() else (0, pre[tok], tok) if tok in pre else (3, 0, tok)
        for tok in re.findall(r"\d+|[a-z]+", v.lower())
    ]
    return (*key, (1, 0, ""))


def _ids(out: str | Path) -> list[str] | None:
    """The runs measured (``--versions``), handed to the children in a file: None is all."""
    path = Path(out) / "ids.json"
    return json.loads(path.read_text()) if path.exists() else None


def floor(store: Path, family: str, ids: list[str] | None = None) -> dict[str, Any]:
    """The trend in DuckDB + numpy (see the module docstring)."""
    import duckdb
    import numpy as np
    import polars as pl
    from _floor import current
    from scipy import special

    scores = current(
        store, "scores",
        "s.run_id, s.key, s.task_id, case when s.value is not null and not isnan(s.value) "
        "and coalesce(s.valid, true) then s.value end as v",
        "metric = 'success'",
    )  # fmt: skip
    where = "true" if ids is None else "list_contains($ids, run_id)"
    runs = current(store, "runs", "s.run_id, s.agent_version", where)
    with duckdb.connect() as con:
        rows = con.sql(
            f"select r.agent_version, s.task_id, s.key, s.v from ({scores}) as s "
            f"join ({runs}) as r using (run_id)",
            params={} if ids is None else {"ids": ids},
        ).pl()
    versions = sorted(rows["agent_version"].unique().to_list(), key=_version_key)
    tasks = sorted(rows["task_id"].unique().to_list())
    keys = rows.select("task_id", "key").unique().sort("task_id", "key")
    kidx = keys.with_columns(k=pl.int_range(pl.len()).over("task_id"))
    rows = rows.join(kidx, on=["task_id", "key"]).with_columns(
        p=pl.col("agent_version").replace_strict({v: i for i, v in enumerate(versions)},
                                                 return_dtype=pl.Int64),
        t=pl.col("task_id").replace_strict({t: i for i, t in enumerate(tasks)},
                                           return_dtype=pl.Int64),
    )  # fmt: skip
    n_t, n_p, n_k = len(tasks), len(versions), int(kidx["k"].max()) + 1
    vals = np.full((n_t, n_k, n_p), np.nan)
    vals[rows["t"].to_numpy(), rows["k"].to_numpy(), rows["p"].to_numpy()] = (
        rows["v"].cast(pl.Float64).fill_null(np.nan).to_numpy()
    )
    ok = ~np.isnan(vals)
    n = ok.sum(axis=1)  # (tasks, versions)
    succ = np.nansum(vals, axis=1)
    rate = np.where(n > 0, succ / np.maximum(n, 1), np.nan)
    z = special.ndtri(0.5 + LEVEL / 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        mid, den = rate + z * z / (2 * n), 1 + z * z / n
        half = z * np.sqrt(rate * (1 - rate) / n + z * z / (4.0 * n * n))
    lo = np.where(succ <= 0, 0.0, np.clip((mid - half) / den, 0, 1))
    hi = np.where(succ >= n, 1.0, np.clip((mid + half) / den, 0, 1))
    # the best earlier version: a record is strictly above every rate before it
    best = np.full((n_t, n_p), -1)
    r = np.where(np.isnan(rate), -np.inf, rate)
    running = np.maximum.accumulate(r, axis=1)
    before = np.concatenate([np.full((n_t, 1), -np.inf), running[:, :-1]], axis=1)
    record = r > before
    at = np.where(record, np.arange(n_p), -1)
    last = np.maximum.accumulate(at, axis=1)
    best[:, 1:] = last[:, :-1]
    par = np.maximum(best, 0)
    v_par = np.take_along_axis(vals, par[:, None, :].repeat(n_k, axis=1), axis=2)
    both = ok & ~np.isnan(v_par)
    wins = (both & (vals > v_par)).sum(axis=1)
    losses = (both & (vals < v_par)).sum(axis=1)
    pairs = both.sum(axis=1)
    tested = (best >= 0) & ~np.isnan(rate)
    disc = wins + losses
    with np.errstate(invalid="ignore", divide="ignore"):
        stat = np.where(disc > 0, (wins - losses) / np.sqrt(disc), 0.0)
    p_worse = np.where(tested, special.ndtr(stat), np.nan)
    adj, size = _holm(p_worse, tested, family)
    upper = _tango_upper(wins, losses, pairs, 1 - 2 * ALPHA / np.maximum(size, 1))
    regressed = tested & (adj < ALPHA) & (upper < 0)
    first = np.where(regressed.any(axis=1), regressed.argmax(axis=1), -1)
    t_i, p_i = np.nonzero(tested)
    return {
        "rates": pl.DataFrame({
            "task_id": np.repeat(tasks, n_p), "position": np.tile(np.arange(n_p), n_t),
            "n": n.ravel(), "rate": rate.ravel(), "ci_low": lo.ravel(), "ci_high": hi.ravel(),
        }).filter(pl.col("n") > 0),
        "tests": pl.DataFrame({
            "task_id": np.asarray(tasks)[t_i], "position": p_i, "best_position": best[t_i, p_i],
            "n_pairs": pairs[t_i, p_i], "wins": wins[t_i, p_i], "losses": losses[t_i, p_i],
            "p_worse": p_worse[t_i, p_i], "p_adjusted": adj[t_i, p_i],
        }),
        "points": pl.DataFrame({"task_id": tasks, "position": first}).with_columns(
            pl.when(pl.col("position") >= 0).then("position")
        ),
    }  # fmt: skip


def _holm(p: Any, tested: Any, family: str) -> tuple[Any, Any]:
    """Holm's adjusted p per version's tasks (the columns) or over every test at once."""
    import numpy as np

    if family == "scan":
        flat = np.where(tested, p, np.inf).ravel()
        m = int(tested.sum())
        order = np.argsort(flat, kind="stable")
        steps = np.minimum(1.0, (m - np.arange(flat.size)) * flat[order])
        out = np.empty_like(flat)
        out[order] = np.maximum.accumulate(np.where(np.isfinite(steps), steps, 1.0))
        return np.where(tested, out.reshape(p.shape), np.nan), np.full(p.shape, m)
    m = tested.sum(axis=0)  # tests per version
    filled = np.where(tested, p, np.inf)
    order = np.argsort(filled, axis=0, kind="stable")
    sorted_p = np.take_along_axis(filled, order, axis=0)
    steps = np.minimum(1.0, (m[None, :] - np.arange(p.shape[0])[:, None]) * sorted_p)
    steps = np.maximum.accumulate(np.where(np.isfinite(sorted_p), steps, 1.0), axis=0)
    out = np.empty_like(steps)
    np.put_along_axis(out, order, steps, axis=0)
    return np.where(tested, out, np.nan), np.broadcast_to(m, p.shape)


def _tango_upper(b: Any, c: Any, n: Any, level: Any) -> Any:
    """Tango's score interval's upper bound for (b - c) / n, by bisection, every cell at once."""
    import numpy as np
    from scipy import special

    b, c, n = (np.asarray(x, dtype=float) for x in (b, c, n))
    z = special.ndtri(0.5 + np.asarray(level) / 2)
    lo, hi = np.full(b.shape, -1.0), np.full(b.shape, 1.0)
    nn = np.maximum(n, 1)
    for _ in range(60):
        d = (lo + hi) / 2
        big_b = -b - c + (2 * nn - b + c) * d
        big_c = -c * d * (1 - d)
        p21 = (np.sqrt(np.maximum(big_b**2 - 8 * nn * big_c, 0)) - big_b) / (4 * nn)
        with np.errstate(invalid="ignore", divide="ignore"):
            t = (b - c - nn * d) / np.sqrt(nn * (2 * p21 + d * (1 - d)))
        num = b - c - nn * d
        t = np.where(np.isfinite(t), t, np.where(num == 0, 0, np.sign(num) * np.inf))
        above = t > -z
        lo, hi = np.where(above, d, lo), np.where(above, hi, d)
    return np.where(b >= nn, 1.0, (lo + hi) / 2)


def disagreement(out: Path) -> str | None:
    """Where hylo's answers and the floor's differ (None when they agree)."""
    import polars as pl

    keys = {"rates": ["task_id", "position"], "tests": ["task_id", "position"],
            "points": ["task_id"]}  # fmt: skip
    for name, on in keys.items():
        a, b = (pl.read_parquet(out / f"{s}-{name}.parquet") for s in ("hylo", "floor"))
        a = a.with_columns(pl.col(pl.Int32, pl.UInt32, pl.UInt64).cast(pl.Int64))
        b = b.with_columns(pl.col(pl.Int32, pl.UInt32, pl.UInt64).cast(pl.Int64))
        if a.height != b.height:
            return f"{name}: {a.height} rows against {b.height}"
        j = a.join(b, on=on, how="full", suffix="_f", coalesce=True, nulls_equal=True)
        for c in (c for c in a.columns if c not in on):
            x, y = pl.col(c), pl.col(f"{c}_f")
            if a.schema[c].is_float():
                bad = ~(((x - y).abs() <= 1e-9 * (1 + y.abs())) | (x.is_null() & y.is_null()))
            else:
                bad = ~x.eq_missing(y)
            wrong = j.filter(bad)
            if wrong.height:
                row = wrong.row(0, named=True)
                return f"{name}.{c}: {wrong.height} rows differ, e.g. {row}"
    return None


def _run(side: str, store: Path, out: Path, family: str) -> dict[str, Any]:
    got = subprocess.run(
        [sys.executable, str(HERE), "--child", side, str(store), str(out), family],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if got.returncode:
        raise SystemExit(f"{side} failed:\n{got.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(got.stdout.strip().splitlines()[-1])
    return result


def measure(store: Path, family: str, versions: int | None = None) -> int:
    """Both sides, the ratio and the cross-check; 1 on a disagreement or a missed goal.

    ``versions``: the trend of the first that many runs (by run id) only."""
    import os

    from _floor import run_ids

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        if versions is not None:
            (out / "ids.json").write_text(json.dumps(run_ids(store)[:versions]))
        hylo, base = _run("hylo", store, out, family), _run("floor", store, out, family)
        bad = disagreement(out)
    load = os.getloadavg()[0]
    met = hylo["seconds"] <= 5
    print(
        f"trend ({family}) of {versions or 'every'} run(s) of {store}: hylo {hylo['seconds']:.2f} s, peak RSS "
        f"{hylo['rss_mb']:,.0f} MiB | floor (DuckDB + numpy) {base['seconds']:.2f} s, "
        f"{base['rss_mb']:,.0f} MiB | ratio {hylo['seconds'] / base['seconds']:.1f}x | "
        f"goal <= 5 s: {'met' if met else 'MISSED'} | load {load:.1f}"
    )
    print("answers agree" if bad is None else f"MISMATCH: {bad}")
    return 0 if bad is None and met else 1


def false_alarms(reps: int, versions: int, tasks: int, keys: int) -> None:
    """Flat trends through trend_scores: the share of tasks given a regression point, and of
    trends with any (the family-wise error rate over the trend)."""
    import numpy as np
    import polars as pl

    from hylo_analytics.compare import trend_scores

    rng = np.random.default_rng(0)
    flagged = {"tasks": [0, 0], "scan": [0, 0]}
    for _ in range(reps):
        p = rng.uniform(0.2, 0.95, size=(tasks, keys))  # each key's own difficulty, shared
        v = rng.uniform(size=(versions, tasks, keys)) < p[None]
        ver, task, key = np.meshgrid(np.arange(versions), np.arange(tasks), np.arange(keys),
                                     indexing="ij")  # fmt: skip
        frame = pl.DataFrame({
            "run_id": ver.ravel().astype(str), "agent_version": [f"1.{i}" for i in ver.ravel()],
            "task_id": task.ravel().astype(str), "key": (task * keys + key).ravel().astype(str),
            "metric": "success", "value": v.ravel().astype(float),
        })  # fmt: skip
        for family, counts in flagged.items():
            got = int(trend_scores(frame, family=family).regressions["regressed"].sum())  # type: ignore[arg-type]
            counts[0] += got
            counts[1] += got > 0
    for family, (n, any_) in flagged.items():
        print(
            f"flat trends, {versions} versions x {tasks} tasks x {keys} keys, {reps} "
            f"replicates, family={family}: {n} of {reps * tasks} tasks given a regression "
            f"point ({n / (reps * tasks):.1%}); {any_} of {reps} trends with any ({any_ / reps:.0%})"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", type=Path, help="the store to measure")
    ap.add_argument("--make", type=int, metavar="RUNS", help="write a store of RUNS runs first")
    ap.add_argument("--workdir", type=Path, help="--make: where the logs and store go")
    ap.add_argument("--family", choices=("tasks", "scan"), default="tasks")
    ap.add_argument("--versions", type=int, nargs="*", metavar="N",
                    help="measure the trend of the first N runs (one version each), per N")  # fmt: skip
    ap.add_argument("--false-alarms", action="store_true", help="simulate flat trends")
    ap.add_argument("--reps", type=int, default=20, help="--false-alarms: replicates")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(*args.child)
        return
    if args.false_alarms:
        for versions in (10, 200):
            false_alarms(args.reps, versions=versions, tasks=10, keys=50)
        return
    store = args.store
    if args.make:
        if args.workdir is None:
            ap.error("--make needs --workdir")
        import hylo_analytics as ha
        from hylo_analytics.testing import SynthConfig, write_dataset

        logs, store = args.workdir / "logs", args.workdir / "store"
        write_dataset(logs, SynthConfig(runs=args.make, tasks=10, seeds=50, traces_per_run=0))
        ha.open_store(store).ingest(logs, progress=False)
    if store is None:
        ap.error("give --store DIR or --make RUNS --workdir DIR")
    sizes = args.versions or [None]
    raise SystemExit(max(measure(store, args.family, n) for n in sizes))


if __name__ == "__main__":
    main()
