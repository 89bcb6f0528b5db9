"""Repeated samples: the coverage of the pass@k / pass^k intervals, and whether the epochs
plan's predicted width is the width more epochs give.

**Coverage.** Items have success probabilities ``p ~ Beta(a, b)`` (U-shaped: most items
always or never solved, as real suites; flat; easy), each sampled ``n`` times. The estimand
of a suite's pass@k is the population's ``E[1 - (1 - p)^k]`` and of pass^k ``E[p^k]``
(closed form for a beta). Each replicate is one group of one :func:`pass_curves` call, so
every interval sees the same replicates: ``wilson`` at the effective sample size (the default), ``normal`` (Wald) and the
``percentile`` bootstrap over items. The Monte-Carlo standard error of a coverage near 0.95
is ``sqrt(0.95 * 0.05 / reps)`` (0.005 at 2,000 replicates).

**Predicted widths.** Two policies on ``m`` fixed items (logit-normal item difficulty shared
by both, an item-specific difference of sd ``tau``), ``e0`` epochs each: from each replicate
:func:`variance_split` predicts the paired interval's width at ``e1`` epochs; the table
compares the mean predicted width with the mean width the replicates run at ``e1`` epochs
actually get, and says where more epochs can never halve the width.

**At scale** (``--scale DIR``): a store of 2,000 runs x 500 keys x 5 epochs (5M samples,
made with numpy by ``tests/repeated_data.py`` and committed once into DIR, about 1-2 min),
then ``Store.pass_at_k`` by run, by policy (200 policies of 10 runs) and by task, and
``Store.epochs_plan`` of one policy against another, each timed after a warm-up read, with
the load average beside it.

    python benchmarks/bench_repeated.py [--reps 2000] [--resamples 2000]
    python benchmarks/bench_repeated.py --only scale --scale DIR
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

from hylo_analytics.stats.repeated import (
    CurveMethod,
    epochs_to_halve,
    pass_curves,
    variance_split,
    width_at,
)

BETAS = {"U-shaped Beta(0.3, 0.3)": (0.3, 0.3), "flat Beta(1, 1)": (1.0, 1.0),
         "easy Beta(4, 1)": (4.0, 1.0)}  # fmt: skip
ITEMS = (10, 20, 50, 200)
EPOCHS = (5,)
METHODS: tuple[CurveMethod, ...] = ("wilson", "normal", "percentile")


def _beta_moment(a: float, b: float, k: int) -> float:
    """``E[p^k]`` for ``p ~ Beta(a, b)``."""
    return float(np.prod([(a + j) / (a + b + j) for j in range(k)]))


def coverage_table(reps: int, resamples: int) -> pl.DataFrame:
    rows = []
    for name, (a, b) in BETAS.items():
        for m in ITEMS:
            for e in EPOCHS:
                rng = np.random.default_rng([m, e, round(a * 10), round(b * 10)])
                p = rng.beta(a, b, size=(reps, m))
                c = rng.binomial(e, p).ravel()
                n = np.full(c.size, e)
                group = np.repeat(np.arange(reps), m)
                for method in METHODS:
                    got = pass_curves(n, c, group, method=method, n_resamples=resamples, seed=1)
                    for k in (1, 2, e):
                        at = got.k == k
                        true_at = 1 - _beta_moment(b, a, k)
                        true_hat = _beta_moment(a, b, k)
                        lo, hi = got.pass_at_k_low[at], got.pass_at_k_high[at]
                        lo2, hi2 = got.pass_hat_k_low[at], got.pass_hat_k_high[at]
                        rows.append({
                            "items p": name, "items": m, "epochs": e, "k": k,
                            "method": method,
                            "pass@k coverage": float(np.mean((lo <= true_at) & (true_at <= hi))),
                            "pass^k coverage": float(np.mean((lo2 <= true_hat) & (true_hat <= hi2))),
                            "pass@k width": float(np.mean(hi - lo)),
                        })  # fmt: skip
    return pl.DataFrame(rows)


SCENARIOS = {  # name: (items, sd of the item difference tau, e0, e1; None: the plan's)
    "within dominates": (50, 0.1, 2, 8),
    "balanced, the plan's epochs": (50, 0.8, 4, None),
    "balanced": (50, 0.8, 4, 16),
    "between dominates": (50, 1.5, 10, 40),
    "200 items": (200, 0.3, 4, 16),
}


def _epochs(rng: np.random.Generator, p: np.ndarray, e: int, reps: int) -> tuple[np.ndarray, ...]:
    """Means and variances (ddof 1) of ``e`` Bernoulli(p) epochs per item, ``reps`` times."""
    c = rng.binomial(e, p, size=(reps, len(p))).astype(np.float64)
    mean = c / e
    return mean.ravel(), (mean * (1 - mean) * e / (e - 1)).ravel()


def width_table(reps: int) -> pl.DataFrame:
    rows = []
    z = 1.959963984540054
    for name, (m, tau, e0, e1) in SCENARIOS.items():
        rng = np.random.default_rng([m, round(tau * 10), e0])
        skill = rng.normal(0.0, 1.2, m)  # shared difficulty: a paired design
        pa = 1 / (1 + np.exp(-(skill + 0.2 + rng.normal(0, tau, m))))
        pb = 1 / (1 + np.exp(-skill))
        between = float(np.var(pa - pb, ddof=1))
        within = float(np.mean(pa * (1 - pa) + pb * (1 - pb)))  # times 1 / epochs
        group = np.repeat(np.arange(reps), m)
        split = variance_split(group, *_split_args(rng, pa, pb, e0, reps))
        _, to_halve = epochs_to_halve(split)
        finite = np.isfinite(to_halve)
        target = e1 if e1 is not None else int(np.median(to_halve[finite]))
        predicted = width_at(split, target)
        later = variance_split(group, *_split_args(rng, pa, pb, target, reps))
        rows.append({
            "scenario": name, "items": m, "epochs now": e0, "epochs then": target,
            "within share now": float(np.nanmean(split.within_share)),
            "width now": float(np.nanmean(split.ci_width)),
            "predicted width then": float(np.nanmean(predicted)),
            "simulated width then": float(np.nanmean(later.ci_width)),
            "true width then": 2 * z * np.sqrt((between + within / target) / m),
            "halving possible (truth)": within / e0 > 3 * between,
            "halving possible (share of plans)": float(np.mean(finite)),
            "median epochs to halve": float(np.median(to_halve[finite])) if finite.any()
            else float("inf"),
        })  # fmt: skip
    return pl.DataFrame(rows)


def _split_args(
    rng: np.random.Generator, pa: np.ndarray, pb: np.ndarray, e: int, reps: int
) -> tuple[np.ndarray, ...]:
    n = np.full(reps * len(pa), float(e))
    ma, va = _epochs(rng, pa, e, reps)
    mb, vb = _epochs(rng, pb, e, reps)
    return ma, va, n, mb, vb, n


def scale_table(root: Path) -> pl.DataFrame:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from repeated_data import epochs_store  # type: ignore[import-not-found]

    import hylo_analytics as ha

    t = time.perf_counter()
    if (root / "store").exists():
        store = ha.open_store(root / "store")
    else:
        store, _ = epochs_store(root / "store", 2000, 500, 5, agents=200)
    print(f"store: {time.perf_counter() - t:.1f} s")
    store.pass_at_k(k=1)  # warm: the views bound, the files' metadata read
    cases = {
        "pass_at_k by run (2,000 curves, k 1-5)": lambda: store.pass_at_k(),
        "pass_at_k by policy (200 curves, k 1-50)": lambda: store.pass_at_k(by=["agent_name"]),
        "pass_at_k by policy, item task_id (k 1-1,250)": lambda: store.pass_at_k(
            by=["agent_name"], item="task_id"
        ),
        "epochs_plan policy vs policy (10 runs each)": lambda: store.epochs_plan(
            "agent=policy-000", "agent=policy-001"
        ),
    }
    rows = []
    for name, call in cases.items():
        t = time.perf_counter()
        out = call()
        rows.append({"call": name, "seconds": time.perf_counter() - t, "rows": out.height,
                     "load": os.getloadavg()[0]})  # fmt: skip
    return pl.DataFrame(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--resamples", type=int, default=2000)
    ap.add_argument("--only", choices=("coverage", "widths", "scale"), default=None)
    ap.add_argument("--scale", type=Path, metavar="DIR", help="the store's folder (--only scale)")
    args = ap.parse_args()
    pl.Config.set_tbl_rows(200)
    pl.Config.set_tbl_cols(20)
    pl.Config.set_tbl_width_chars(200)
    pl.Config.set_float_precision(3)
    pl.Config.set_fmt_str_lengths(60)
    if args.only in (None, "coverage"):
        t = time.perf_counter()
        print(coverage_table(args.reps, args.resamples))
        print(f"coverage: {time.perf_counter() - t:.1f} s")
    if args.only in (None, "widths"):
        t = time.perf_counter()
        print(width_table(args.reps))
        print(f"widths: {time.perf_counter() - t:.1f} s")
    if args.only == "scale":
        if args.scale is None:
            ap.error("--only scale needs --scale DIR")
        print(scale_table(args.scale))


if __name__ == "__main__":
    main()
