"""Pooled comparison over suites: the coverage of the pooled interval (MOVER over the suites'
Tango intervals) and the type-I error of the pooled test (the stratified sign-flip test), by
seeded simulation.

Grid: S in {2, 4, 10, 40} suites of unequal size (n_s cycling through 20, 37, 50, 101 pairs: for many suites the
steps 1/(S n_s) span no small lattice and the test is Monte Carlo, the exact_share column),
the parent's rate in every suite p in {0.5, 0.9, 0.99} (few discordant pairs near 0.99),
outcomes of one key correlated (rho = 0.3), and three truths:

- ``null``: no change in any suite (the sign-flip test's own null);
- ``opposite``: suites alternate +d and -d (d = 5 points, or 1 point at p = 0.99) weighted so
  that the pooled difference is 0 (a null of the pooled effect that is not a null of each
  suite; the test must still hold its level);
- ``improved``: +d in every suite (coverage, and the power in the ``reject`` column).

Coverage is of the true suite-weighted difference (each suite 1/S), at 95 %; type-I is the
share of one-sided rejections at alpha = 0.05 under the two nulls. Targets (issue 29):
coverage >= 0.93, type-I <= alpha.

    python benchmarks/bench_pooled_coverage.py [--reps 1000] [--draws 20000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import polars as pl

from hylo_analytics.stats import mover_ci, sign_flip_p, suite_weights, tango_ci
from hylo_analytics.testing.simulation import cell_probabilities

SUITES = (2, 4, 10, 40)
RATES = (0.5, 0.9, 0.99)
SIZES = (20, 37, 50, 101)  # unequal, co-prime: large suite counts leave the lattice
TRUTHS = ("null", "opposite", "improved")
ALPHA = 0.05


def _deltas(truth: str, rate: float, n: np.ndarray) -> np.ndarray:
    """Each suite's true change: opposite signs cancel in the 1/S average."""
    d = 0.01 if rate >= 0.99 else 0.05
    s = len(n)
    if truth == "null":
        return np.zeros(s)
    if truth == "improved":
        return np.full(s, d)
    signs = np.where(np.arange(s) % 2 == 0, 1.0, -1.0)
    if s % 2:  # an odd count: the last suite unchanged, so the average is still 0
        signs[-1] = 0.0
    return signs * d


def cell(n_suites: int, rate: float, truth: str, reps: int, draws: int) -> dict[str, object]:
    n = np.array([SIZES[i % len(SIZES)] for i in range(n_suites)])
    deltas = _deltas(truth, rate, n)
    w = suite_weights(n)
    true = float(np.dot(w, deltas))
    rng = np.random.default_rng([n_suites, round(rate * 100), TRUTHS.index(truth)])
    # (reps, S) discordant counts: b (only the candidate succeeded), c (only the parent)
    b = np.empty((reps, n_suites), dtype=np.int64)
    c = np.empty_like(b)
    for s in range(n_suites):
        probs = cell_probabilities(rate, min(rate + deltas[s], 1.0), 0.3)
        counts = rng.multinomial(n[s], probs, size=reps)
        b[:, s], c[:, s] = counts[:, 1], counts[:, 2]
    lo, hi = tango_ci(b, c, np.broadcast_to(n, b.shape))
    d = (b - c) / n
    covered = rejected = 0
    exact = 0
    for r in range(reps):
        low, high = mover_ci(d[r], lo[r], hi[r], w)
        covered += low <= true <= high
        flip = sign_flip_p(b[r], c[r], n, w, n_draws=draws, seed=r)
        rejected += flip.p_greater < ALPHA
        exact += flip.method == "exact"
    return {
        "suites": n_suites,
        "rate": rate,
        "truth": truth,
        "discordant_per_suite": float((b + c).mean()),
        "coverage": covered / reps,
        "reject": rejected / reps,
        "exact_share": exact / reps,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--draws", type=int, default=20_000, help="Monte-Carlo sign flips")
    args = ap.parse_args()
    t = time.perf_counter()
    rows = [
        cell(s, p, truth, args.reps, args.draws) for s in SUITES for p in RATES for truth in TRUTHS
    ]
    table = pl.DataFrame(rows)
    with pl.Config(tbl_rows=100, tbl_cols=20, float_precision=3, tbl_width_chars=200):
        print(f"Pooled over suites, {args.reps} replicates a cell (reject: one-sided, alpha 0.05)")
        print(table)
    nulls = table.filter(pl.col("truth") != "improved")
    print(
        f"\ncoverage min {table['coverage'].min():.3f} (target >= 0.93); "
        f"type-I max {nulls['reject'].max():.3f} (target <= {ALPHA})"
    )
    print(f"{time.perf_counter() - t:.1f} s")


if __name__ == "__main__":
    main()
