"""Coverage table: how often each interval covers the true paired difference, and how often
the verdicts are wrong, by seeded simulation.

Binary metrics: parent success p in {0.5, 0.8, 0.95, 0.98}, n in {20, 50, 200} pairs, the
candidate at p (no change), p - 3 points and p - 10 points, outcomes of one key correlated
(rho = 0.3). Intervals: Tango (the default), Newcombe, the paired percentile bootstrap (the
old default) and Wald. Verdicts (statistical rule, alpha 0.05, margin 5 points): the share of
"unchanged" under a true 10-point change and of "improved" under no change.

Continuous metrics: paired differences of lognormal values (skewed, like latencies), the
coverage of the mean difference by the percentile bootstrap and by BCa (the default).

    python benchmarks/bench_coverage.py [--reps 5000] [--boot-reps 1000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import polars as pl

from hylo_analytics.compare import StatisticalRule
from hylo_analytics.stats import bootstrap_ci, newcombe_ci, tango_ci
from hylo_analytics.testing.simulation import PairedCell, cell_probabilities, simulate_cell

PS = (0.5, 0.8, 0.95, 0.98)
NS = (20, 50, 200)
DELTAS = (0.0, -0.03, -0.10)


def binary_table(reps: int, boot_reps: int) -> pl.DataFrame:
    rule = StatisticalRule(alpha=0.05, margin=0.05)
    rows = []
    for p in PS:
        for n in NS:
            for delta in DELTAS:
                cell = PairedCell(p, delta, n)
                sim = simulate_cell(cell, reps, rule)
                rng = np.random.default_rng([n, round(p * 100), round(-delta * 100)])
                counts = rng.multinomial(n, cell_probabilities(p, p + delta, 0.3), size=reps)
                a, b, c, d = counts.T
                lo, hi = newcombe_ci(a, b, c, d)
                newcombe = np.mean((lo <= delta) & (delta <= hi))
                diff = (b - c) / n
                sd = np.sqrt(np.maximum((b + c) / n - diff**2, 0) * n / max(n - 1, 1))
                half = 1.959964 * sd / np.sqrt(n)
                wald = np.mean((diff - half <= delta) & (delta <= diff + half))
                # the paired percentile bootstrap, on the first boot_reps tables
                k = min(boot_reps, reps)
                values = np.concatenate(
                    [
                        np.repeat([1.0, -1.0, 0.0], [bb, cc, n - bb - cc])
                        for bb, cc in zip(b[:k], c[:k], strict=True)
                    ]
                )
                blo, bhi = bootstrap_ci(values, np.full(k, n), n_resamples=2000, seed=0)
                boot = np.mean((blo <= delta) & (delta <= bhi))
                t_lo, t_hi = tango_ci(b, c, np.full(reps, n))
                rows.append(
                    {
                        "p_parent": p,
                        "n": n,
                        "delta": delta,
                        "tango": float(np.mean((t_lo <= delta) & (delta <= t_hi))),
                        "newcombe": float(newcombe),
                        "percentile_bootstrap": float(boot),
                        "wald": float(wald),
                        "unchanged": float((sim["verdict"] == "unchanged").mean()),
                        "improved": float((sim["verdict"] == "improved").mean()),
                    }
                )
    return pl.DataFrame(rows)


def continuous_table(reps: int) -> pl.DataFrame:
    rows = []
    rng = np.random.default_rng(0)
    for n in NS:
        cand = rng.lognormal(0.1, 1.0, size=(reps, n))
        par = rng.lognormal(0.0, 1.0, size=(reps, n))
        true = np.exp(0.1 + 0.5) - np.exp(0.5)
        d = (cand - par).ravel()
        sizes = np.full(reps, n)
        out = {"n": n}
        for method in ("percentile", "bca"):
            lo, hi = bootstrap_ci(d, sizes, method=method, n_resamples=2000, seed=1)  # type: ignore[arg-type]
            out[method] = float(np.mean((lo <= true) & (true <= hi)))
        rows.append(out)
    return pl.DataFrame(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5000)
    ap.add_argument("--boot-reps", type=int, default=1000)
    args = ap.parse_args()
    t = time.perf_counter()
    with pl.Config(tbl_rows=100, tbl_cols=20, float_precision=3, tbl_width_chars=200):
        print("Binary: coverage of the 95% interval of the paired difference, and verdict errors")
        print(binary_table(args.reps, args.boot_reps))
        print(
            "\nContinuous (lognormal, paired): coverage of the 95% interval of the mean difference"
        )
        print(continuous_table(min(args.reps, 2000)))
    print(f"\n{time.perf_counter() - t:.1f} s")


if __name__ == "__main__":
    main()
