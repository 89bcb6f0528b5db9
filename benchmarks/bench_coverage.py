"""Coverage table: how often each interval covers the true paired difference, and how often
the verdicts are wrong, by seeded simulation.

Binary metrics: parent success p in {0.5, 0.8, 0.95, 0.98}, n in {20, 50, 200} pairs, the
candidate at p (no change), p - 3 points and p - 10 points, outcomes of one key correlated
(rho = 0.3). Intervals: Tango (the default), Newcombe, the paired percentile bootstrap (the
old default) and Wald. Verdicts (statistical rule, alpha 0.05, margin 5 points): the share of
"unchanged" under a true 10-point change and of "improved" under no change.

Continuous metrics: paired differences of lognormal values (skewed, like latencies), the
coverage of the mean difference by the percentile bootstrap and by BCa (the default).

One-sample means (``aggregate``'s interval of a continuous metric): skewed values (lognormal,
exponential), counts like ``steps`` (Poisson, negative binomial) and normal values at n = 20,
50, 200, all intervals on the same replicates: the t interval, Johnson's (1978) modified t,
Hall's (1992) skewness-corrected t with the normal and with the t quantile (``hall``, the
default), and the studentized bootstrap (bootstrap-t, ``--mean-resamples`` resamples, 10,000
by default as in ``aggregate``). The Monte-Carlo standard error of a coverage near 0.95 is
``sqrt(0.95 * 0.05 / reps)`` (0.0022 at 10,000 replicates).

    python benchmarks/bench_coverage.py [--reps 5000] [--boot-reps 1000]
    python benchmarks/bench_coverage.py --only means [--mean-reps 10000] [--mean-resamples 10000]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl
from scipy import stats

from hylo_analytics.compare import StatisticalRule
from hylo_analytics.stats import bootstrap_ci, hall_ci, newcombe_ci, tango_ci
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


# (name, draw(rng, shape), true mean)
MEAN_CELLS: tuple[tuple[str, Callable[[np.random.Generator, tuple[int, int]], Any], float], ...] = (
    ("lognormal(0, 1)", lambda r, sh: r.lognormal(0.0, 1.0, sh), float(np.exp(0.5))),
    ("lognormal(0, 0.5)", lambda r, sh: r.lognormal(0.0, 0.5, sh), float(np.exp(0.125))),
    ("exponential", lambda r, sh: r.exponential(1.0, sh), 1.0),
    ("Poisson(5)", lambda r, sh: r.poisson(5.0, sh), 5.0),
    ("NB(mean 50, k 2)", lambda r, sh: r.negative_binomial(2, 2 / 52, sh), 50.0),
    ("NB(mean 3, k 0.5)", lambda r, sh: r.negative_binomial(0.5, 0.5 / 3.5, sh), 3.0),
    ("normal", lambda r, sh: r.normal(10.0, 3.0, sh), 10.0),
)


def mean_table(reps: int, n_resamples: int) -> pl.DataFrame:
    """Coverage of the mean by every one-sample interval, on the same replicates per cell."""
    rows = []
    for i, (name, draw, true) in enumerate(MEAN_CELLS):
        for n in NS:
            x = np.asarray(draw(np.random.default_rng([i, n]), (reps, n)), dtype=np.float64)
            mean, std = x.mean(axis=1), x.std(axis=1, ddof=1)
            d = x - mean[:, None]
            with np.errstate(divide="ignore", invalid="ignore"):
                skew = (d**3).mean(axis=1) / (d**2).mean(axis=1) ** 1.5
            q = float(stats.t.ppf(0.975, n - 1))
            se = std / np.sqrt(n)
            # Johnson (1978): the t interval moved by the skewness term mu3 / (6 s^2 n)
            shift = (d**3).sum(axis=1) * n / ((n - 1) * (n - 2)) / (6 * std**2 * n)
            hz = _hall_z(mean, std, skew, n)
            bounds = {
                "t": (mean - q * se, mean + q * se),
                "johnson": (mean + shift - q * se, mean + shift + q * se),
                "hall_z": hz,
                "hall": hall_ci(mean, std, skew, np.full(reps, n)),
                "bootstrap_t": bootstrap_ci(
                    x.ravel(), np.full(reps, n), method="studentized",
                    n_resamples=n_resamples, seed=1,
                ),
            }  # fmt: skip
            row: dict[str, Any] = {"cell": name, "n": n}
            for method, (lo, hi) in bounds.items():
                row[method] = float(np.mean((lo <= true) & (true <= hi)))
            rows.append(row)
    return pl.DataFrame(rows)


def _hall_z(
    mean: np.ndarray, std: np.ndarray, skew: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """Hall's interval with the normal quantile in place of t (as Hall 1992 states it)."""
    # hall_ci at the level whose t quantile on n - 1 df is z(0.975)
    level = 2 * float(stats.t.cdf(1.959963984540054, n - 1)) - 1
    return hall_ci(mean, std, skew, np.full(len(mean), n), level)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5000)
    ap.add_argument("--boot-reps", type=int, default=1000)
    ap.add_argument("--mean-reps", type=int, default=10_000)
    ap.add_argument("--mean-resamples", type=int, default=10_000)
    ap.add_argument("--only", choices=("binary", "paired", "means"), default=None)
    args = ap.parse_args()
    t = time.perf_counter()
    with pl.Config(tbl_rows=100, tbl_cols=20, float_precision=3, tbl_width_chars=200):
        if args.only in (None, "binary"):
            print(
                "Binary: coverage of the 95% interval of the paired difference, and verdict errors"
            )
            print(binary_table(args.reps, args.boot_reps))
        if args.only in (None, "paired"):
            print(
                "\nContinuous (lognormal, paired): coverage of the 95% interval of the mean "
                "difference"
            )
            print(continuous_table(min(args.reps, 2000)))
        if args.only in (None, "means"):
            print(
                f"\nOne-sample means, {args.mean_reps:,} replicates a cell (bootstrap-t: "
                f"{args.mean_resamples:,} resamples): coverage of the 95% interval"
            )
            print(mean_table(args.mean_reps, args.mean_resamples))
    print(f"\n{time.perf_counter() - t:.1f} s")


if __name__ == "__main__":
    main()
