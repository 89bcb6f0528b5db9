"""Cost-quality Pareto fronts (issue 42, item 4): timings at N policies, and P(on the front)
against the true front.

    python benchmarks/bench_pareto.py                       # both parts (about 3 minutes)
    python benchmarks/bench_pareto.py --part timings --sizes 20 200 2000
    python benchmarks/bench_pareto.py --part calibration --datasets 1000

**timings**: N policies x 500 keys (one suite), 0/1 quality and a gamma cost, 1,000
resamples. ``paired``: :func:`~hylo_analytics.stats.pareto.pareto_bootstrap` on shared keys
(one draw of keys for all); ``unpaired``: the same rows, each policy's keys drawn on its own
(the design of policies that ran different keys: B x rows draws); ``store``: ``Store.pareto``
on a store holding the same numbers as score rows (built untimed), the ranking's reader run
once per metric, then the paired bootstrap; ``chart``: ``charts.pareto_intervals(...)
.to_dict()``. Goal: 2,000 x 500 x 1,000 paired in seconds.

**calibration**: 12 policies with known success rates and mean costs (a front of 5, some
policies just behind it), 100 keys shared by all with a key difficulty moving every policy's
success and cost together; for each of ``--datasets`` data sets the paired bootstrap
(500 resamples). Reported: per bin of P(on the front), how many policies fell in it and the
share truly on the front of the true means; and the coverage of the 95% intervals of the two
means. P(on the front) is a bootstrap frequency, not a posterior probability: the table says
how far to read it as one.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[1]))

from hylo_analytics.stats.pareto import pareto_bootstrap, pareto_front  # noqa: E402

N_KEYS = 500
RESAMPLES = 1_000


def _data(n_pol: int, n_keys: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    skill = rng.uniform(0.2, 0.9, n_pol)
    price = np.exp(rng.normal(0, 0.5, n_pol)) * (0.5 + skill)
    quality = (rng.random((n_keys, n_pol)) < skill).astype(float)
    cost = np.round(rng.gamma(4.0, 5.0, (n_keys, n_pol)) * price)
    key, policy = (a.ravel() for a in np.meshgrid(np.arange(n_keys), np.arange(n_pol),
                                                  indexing="ij"))  # fmt: skip
    return {"quality": quality.ravel(), "cost": cost.ravel(), "key": key, "policy": policy}


def _store(root: Path, d: dict[str, np.ndarray], n_pol: int) -> Any:
    import hylo_analytics as ha

    names = np.array([f"r{i:05d}" for i in range(n_pol)], dtype=object)
    run = names[d["policy"]]
    key = np.array([f"t#{k:03d}" for k in range(N_KEYS)], dtype=object)[d["key"]]  # text order
    n = len(run)
    runs = pa.table({
        "run_id": list(names), "source_format": ["hylo.evallog/v0.1"] * n_pol,
        "source_path": [f"/x/{r}" for r in names], "benchmark_id": ["b"] * n_pol,
        "benchmark_digest": ["sha256:d"] * n_pol, "split": ["s"] * n_pol,
        "agent_name": [f"p{r}" for r in names], "agent_version": ["1"] * n_pol,
        "status": ["success"] * n_pol,
    })  # fmt: skip
    ident = {"run_id": pa.array(run, pa.string()), "key": pa.array(key, pa.string()),
             "task_id": pa.array(["t"] * n), "seed": pa.array(d["key"]),
             "epoch": pa.array(np.ones(n, np.int64)),
             "episode_id": pa.array(np.char.add(run.astype(str), key.astype(str)))}  # fmt: skip
    samples = pa.table({**ident, "status": pa.array(["success"] * n),
                        "trace_status": pa.array(["none"] * n)})  # fmt: skip

    def scores(metric: str, values: np.ndarray) -> pa.Table:
        return pa.table({**ident, "metric": pa.array([metric] * n), "value": pa.array(values),
                         "valid": pa.array(np.ones(n, bool)),
                         "skip_reason": pa.nulls(n, pa.string()),
                         "source": pa.array(["evallog"] * n),
                         "source_kind": pa.array(["imported"] * n),
                         "scorer_version": pa.array([""] * n)})  # fmt: skip

    store = ha.open_store(root)
    with store.parquet.lock():
        store.parquet.commit({"runs": runs, "samples": samples,
                              "scores": pa.concat_tables([scores("success", d["quality"]),
                                                          scores("steps", d["cost"])])})  # fmt: skip
    return store


def _timed(fn: Callable[..., Any], *args: Any, **kw: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn(*args, **kw)
    return time.perf_counter() - start, out


def timings(sizes: list[int]) -> None:
    from hylo_analytics import charts

    print("| policies x keys | paired | unpaired | Store.pareto | chart | on the front |")
    print("|---|---|---|---|---|---|")
    for n_pol in sizes:
        d = _data(n_pol, N_KEYS)
        args = (d["quality"], d["cost"])
        kw = {"policy": d["policy"], "key": d["key"], "n_resamples": RESAMPLES}
        t_paired, r = _timed(pareto_bootstrap, *args, pairing="paired", **kw)
        t_unpaired, _ = _timed(pareto_bootstrap, *args, pairing="unpaired", **kw)
        root = Path(tempfile.mkdtemp(prefix="bench-pareto-"))
        try:
            store = _store(root / "s", d, n_pol)
            t_store, front = _timed(store.pareto, cost="steps")
            t_chart, _ = _timed(lambda f: charts.pareto_intervals(f).to_dict(), front)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        same = front.frame.sort("policy")["p_front"].to_list() == r.p_front.tolist()
        print(f"| {n_pol:,} x {N_KEYS} | {t_paired:.2f} s | {t_unpaired:.2f} s | "
              f"{t_store:.2f} s{'' if same else ' (MISMATCH)'} | {t_chart:.2f} s | "
              f"{int(r.on_front.sum())} |", flush=True)  # fmt: skip


def _world(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """12 policies' success logits and cost scales: a front of 5 and 7 behind it, some close."""
    logit = np.array([-1.0, -0.2, 0.4, 1.0, 1.6, -1.2, -0.4, 0.3, 0.9, 1.5, -0.5, 0.0])
    scale = np.array([1.0, 1.3, 1.7, 2.3, 3.2, 1.05, 1.4, 1.8, 2.4, 3.4, 2.0, 2.8])
    rng = np.random.default_rng(seed)
    difficulty = rng.normal(0, 1.0, 400_000)  # the key population, for the true means
    p = 1 / (1 + np.exp(-(logit[None, :] - difficulty[:, None])))
    true_q = p.mean(axis=0)
    true_c = scale * 20 * np.exp(0.3 * difficulty).mean()  # cost grows with difficulty
    return logit, scale, np.stack([true_q, true_c])


def calibration(datasets: int, seed: int = 0) -> None:
    logit, scale, truth = _world(seed)
    on_true = pareto_front(truth[0], truth[1])
    rng = np.random.default_rng(seed + 1)
    n_keys, n_pol = 100, len(logit)
    key, policy = (a.ravel() for a in np.meshgrid(np.arange(n_keys), np.arange(n_pol),
                                                  indexing="ij"))  # fmt: skip
    p_all, on_all, cover_q, cover_c = [], [], 0, 0
    start = time.perf_counter()
    for _ in range(datasets):
        difficulty = rng.normal(0, 1.0, n_keys)[:, None]
        p = 1 / (1 + np.exp(-(logit[None, :] - difficulty)))
        q = (rng.random((n_keys, n_pol)) < p).astype(float)
        c = rng.gamma(4.0, 5.0, (n_keys, n_pol)) * scale * np.exp(0.3 * difficulty)
        r = pareto_bootstrap(q.ravel(), c.ravel(), policy=policy, key=key, n_resamples=500,
                             seed=int(rng.integers(2**31)))  # fmt: skip
        p_all.append(r.p_front)
        on_all.append(on_true)
        cover_q += int(((r.quality_low <= truth[0]) & (truth[0] <= r.quality_high)).sum())
        cover_c += int(((r.cost_low <= truth[1]) & (truth[1] <= r.cost_high)).sum())
    took = time.perf_counter() - start
    p_front, on = np.concatenate(p_all), np.concatenate(on_all)
    print(f"\n{datasets} data sets x {n_pol} policies x {n_keys} keys, 500 paired resamples "
          f"each ({took:.0f} s); true front: {int(on_true.sum())} policies\n")  # fmt: skip
    print("| P(on the front) | policies | mean P | share truly on the front |")
    print("|---|---|---|---|")
    edges = [0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 1.0001]
    for lo, hi in itertools.pairwise(edges):
        inside = (p_front >= lo) & (p_front < hi)
        if inside.any():
            print(f"| [{lo:.2f}, {min(hi, 1):.2f}{']' if hi > 1 else ')'} | {int(inside.sum()):,}"
                  f" | {p_front[inside].mean():.3f} | {on[inside].mean():.3f} |")  # fmt: skip
    total = datasets * n_pol
    print(f"\ncoverage of the 95% percentile intervals: quality {cover_q / total:.3f}, "
          f"cost {cover_c / total:.3f} ({total:,} intervals each)")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("timings", "calibration", "both"), default="both")
    parser.add_argument("--sizes", type=int, nargs="+", default=[20, 200, 2000])
    parser.add_argument("--datasets", type=int, default=1000)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if args.part in ("timings", "both"):
        timings(args.sizes)
    if args.part in ("calibration", "both"):
        calibration(args.datasets)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
