"""Rank and summarize at 10 to 2,000 policies, each beside a hand-written floor (issue 39).

    python benchmarks/bench_many_policies.py --store DIR            # 10, 100, 1,000, 2,000 runs
    python benchmarks/bench_many_policies.py --store DIR --sizes 100 2000 --steps rank
    python benchmarks/bench_many_policies.py --store DIR10M --policy agent_name --sizes 2000

``--store``: the 1M store of ``bench_scale.py --large`` (2,000 runs of one benchmark, 10 tasks
x 50 seeds, 4 % errored, errors excluded by the hylo convention); a policy is a run
(``--policy run_id``, the default) and the first N runs in id order are ranked. With
``--policy agent_name`` on the 10M store of ``SynthConfig(runs=20000, agents=2000)`` every
policy is an agent over its 10 runs (a key's value the mean of its runs: not 0/1).

Each side runs in a child process of its own after import and ``open_store`` (peak RSS per
child, ``VmHWM``), and the answers are cross-checked (``MISMATCH`` fails the run):

- ``rank``: ``Store.rank(runs, policy=...)`` against the floor of the issue: the success
  values of those runs read from the store's Parquet with DuckDB into a keys x runs matrix,
  every pairwise win count at once as one product ``W = S'F`` (S: successes, F: failures of
  the valid keys), Bradley-Terry fitted on W by minorize-maximize (200 iterations). Checked:
  each policy's games won and lost equal W's row and column sums (0/1 values only);
- ``summarize``: ``Store.summarize(runs, by=[policy])`` (IQM and mean with the stratified
  bootstrap, profiles, P(X > Y)) against the floor: per-run per-task means in DuckDB and each
  run's IQM in numpy. Checked: the IQM estimates equal.

Goals (1M store): rank of 100 runs <= 2 s; rank of 2,000 <= 10x the floor and <= 1.5 GiB;
summarize of 2,000 <= 10x its floor and <= 1.5 GiB. At 10M (2,000 agents): <= 3 GiB.
Each line prints the load average beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()


def _child(step: str, store_path: str, n: int, policy: str, out: str) -> None:
    from _measure import peak_rss_mb, reset_peak

    if step.startswith("floor_"):
        got = _floor(step[6:], Path(store_path), n, policy)
    else:
        import scipy.stats  # noqa: F401  (imported before the clock: not the question's cost)

        import hylo_analytics as ha
        import hylo_analytics.aggregate
        import hylo_analytics.compare

        store = ha.open_store(store_path)
        runs = _runs(store.sql, n, policy)
        reset_peak()
        t = time.perf_counter()
        if step == "rank":
            r = store.rank(runs, policy=policy, progress=False)
            answer = r.strengths.select("policy", "wins", "losses")
        else:
            s = store.summarize(runs, by=[policy], progress=False)
            answer = s.summary.filter(statistic="iqm").select(policy=policy, iqm="estimate")
        got = {"seconds": time.perf_counter() - t, "rss_mb": peak_rss_mb()}
        answer.write_parquet(out)
        print(json.dumps(got))
        return
    got["table"].write_parquet(out)
    print(json.dumps({k: v for k, v in got.items() if k != "table"}))


def _runs(sql: Any, n: int, policy: str) -> list[str]:
    """The first ``n`` runs in id order (``run_id``), or every run of the first ``n`` policies."""
    if policy == "run_id":
        ids: list[str] = sql("SELECT run_id FROM stg_runs ORDER BY run_id")["run_id"].to_list()
        return ids[:n]
    found = sql(
        f"SELECT run_id FROM stg_runs WHERE {policy} IN (SELECT DISTINCT {policy} FROM stg_runs "
        f"ORDER BY 1 LIMIT {n})"
    )
    return list(found["run_id"].to_list())


def _floor(question: str, store: Path, n: int, policy: str) -> dict[str, Any]:
    """DuckDB over the store's Parquet files and numpy: the issue's floors."""
    import duckdb
    import numpy as np
    import polars as pl
    from _floor import current, files
    from _measure import peak_rss_mb, reset_peak

    con = duckdb.connect()
    runs_sql = f"select run_id, {policy} as policy from {files(store, 'runs')}"
    reset_peak()
    t = time.perf_counter()
    picked = con.sql(f"select * from ({runs_sql}) order by run_id").pl()
    if policy == "run_id":
        picked = picked.head(n)
    else:
        keep = sorted(set(picked["policy"].to_list()))[:n]
        picked = picked.filter(pl.col("policy").is_in(keep))
    con.register("picked", picked.to_arrow())
    scores = current(store, "scores", "s.run_id, s.key, s.task_id, s.value", "metric = 'success'")
    if question == "rank":
        long = con.sql(
            f"select p.policy, s.key, avg(s.value) as v from ({scores}) s join picked p "
            "using (run_id) group by all"
        ).pl()
        names = sorted(set(long["policy"].to_list()))
        pol = long["policy"].cast(pl.Enum(names)).to_physical().to_numpy()
        keys, key = np.unique(long["key"].to_numpy(), return_inverse=True)
        v = np.full((len(keys), len(names)), np.nan)
        v[key, pol] = long["v"].fill_null(np.nan).to_numpy()
        valid = ~np.isnan(v)
        s, f = (valid & (v == 1)).astype(np.float32), (valid & (v == 0)).astype(np.float32)
        w = (s.T @ f).astype(np.float64)  # every pair's wins at once
        games = w + w.T
        p = np.ones(len(names))
        for _ in range(200):  # Hunter's minorize-maximize
            p = w.sum(axis=1) / (games / (p[:, None] + p[None, :])).sum(axis=1).clip(1e-300)
            p /= np.exp(np.log(np.maximum(p, 1e-300)).mean())
        table = pl.DataFrame(
            {"policy": names, "wins": w.sum(axis=1).astype(np.int64),
             "losses": w.sum(axis=0).astype(np.int64), "strength": np.log(p)}
        )  # fmt: skip
    else:
        cells = con.sql(
            f"select p.policy, s.run_id, s.task_id, avg(s.value) as rate from ({scores}) s join "
            "picked p using (run_id) where s.value is not null group by all order by 1, 2, 3"
        ).pl()
        names = sorted(set(cells["policy"].to_list()))
        rates = cells["rate"].to_numpy()
        per = cells.group_by("policy", maintain_order=True).len()["len"].to_numpy()
        iqm = [
            float(np.mean(np.sort(r)[len(r) // 4 : len(r) - len(r) // 4]))
            for r in np.split(rates, np.cumsum(per)[:-1])
        ]
        table = pl.DataFrame({"policy": names, "iqm": iqm})
        if question == "summarize_boot":  # and the IQM's stratified bootstrap, by hand
            n_ep = (
                con.sql(
                    f"select p.policy, s.run_id, s.task_id, count(*) as n from ({scores}) s join "
                    "picked p using (run_id) where s.value is not null group by all order by 1, 2, 3"
                )
                .pl()["n"]
                .to_numpy()
            )
            rng = np.random.default_rng(0)
            c = int(per[0])  # the benchmark's runs all have the same number of cells
            groups = len(per)
            step = max(1, 2**25 // (c * 10_000))
            for g0 in range(0, groups, step):
                sl = slice(g0 * c, min(groups, g0 + step) * c)
                draws = rng.binomial(n_ep[sl, None], rates[sl, None], (len(rates[sl]), 10_000))
                boot = np.sort((draws / n_ep[sl, None]).reshape(-1, c, 10_000), axis=1)
                np.quantile(boot[:, c // 4 : c - c // 4].mean(axis=1), [0.025, 0.975], axis=1)
    return {"seconds": time.perf_counter() - t, "rss_mb": peak_rss_mb(), "table": table}


def _step(step: str, store: Path, n: int, policy: str, out: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(HERE), "--child", step, str(store), str(n), policy, str(out)],
        check=False, capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode:
        raise SystemExit(f"{step} at {n} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _disagreement(question: str, hylo: Path, floor: Path) -> str | None:
    import numpy as np
    import polars as pl

    a = pl.read_parquet(hylo).with_columns(pl.col("policy").cast(pl.String)).sort("policy")
    b = pl.read_parquet(floor).sort("policy")
    if a["policy"].to_list() != b["policy"].to_list():
        return "different policies"
    cols = ("wins", "losses") if question == "rank" else ("iqm",)
    for c in cols:
        if not np.allclose(a[c].to_numpy(), b[c].to_numpy(), rtol=1e-9):
            return f"{c} differs"
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", type=Path)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000, 2000])
    parser.add_argument("--steps", nargs="+", default=["rank", "summarize"])
    parser.add_argument("--policy", default="run_id")
    parser.add_argument("--child", nargs=5, metavar=("STEP", "STORE", "N", "POLICY", "OUT"))
    args = parser.parse_args()
    if args.child:
        step, store, n, policy, out = args.child
        _child(step, store, int(n), policy, out)
        return
    if args.store is None:
        parser.error("--store DIR is required")
    import tempfile

    tmp = Path(tempfile.mkdtemp())
    print("| question | N | hylo_analytics | peak RSS | floor | floor RSS | ratio | load |")
    print("|---|---|---|---|---|---|---|---|")
    bad = False
    for step in args.steps:
        for n in args.sizes:
            ours, theirs = tmp / f"{step}-{n}.parquet", tmp / f"floor-{step}-{n}.parquet"
            got = _step(step, args.store, n, args.policy, ours)
            floor = _step(f"floor_{step}", args.store, n, args.policy, theirs)
            # a key whose value is a mean of runs is no 0/1 game record to check by products
            wrong = None if args.policy != "run_id" and step == "rank" else _disagreement(
                step, ours, theirs)  # fmt: skip
            bad |= wrong is not None
            mark = f" **MISMATCH**: {wrong}" if wrong else ""
            print(
                f"| {step}{mark} | {n:,} | {got['seconds']:.2f} s | {got['rss_mb']:,.0f} MiB "
                f"| {floor['seconds']:.2f} s | {floor['rss_mb']:,.0f} MiB "
                f"| {got['seconds'] / floor['seconds']:.2f}x | {os.getloadavg()[0]:.2f} |",
                flush=True,
            )
            if step == "summarize":  # a floor doing the IQM's bootstrap too, by hand
                boot = _step("floor_summarize_boot", args.store, n, args.policy, theirs)
                print(
                    f"| summarize: hand numpy with the IQM's bootstrap | {n:,} | "
                    f"{got['seconds']:.2f} s | | {boot['seconds']:.2f} s | "
                    f"{boot['rss_mb']:,.0f} MiB | {got['seconds'] / boot['seconds']:.2f}x | "
                    f"{os.getloadavg()[0]:.2f} |",
                    flush=True,
                )
    if bad:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
