"""Coverage of the ranking's Bradley-Terry strength intervals, by simulation (issue 39).

    python benchmarks/bench_strength_coverage.py            # every scenario, 400 repetitions
    python benchmarks/bench_strength_coverage.py --reps 100 --quick

A policy ``i`` solves a key of difficulty ``d ~ N(0, 1)`` with probability
``sigmoid(a_i - d)``; keys are drawn in two suites (strata). The estimand is the strength
the ranking estimates: the penalized Bradley-Terry fit of the *expected* games of ``K`` keys,
``E[w_ij] = K E_d[p_i(d) (1 - p_j(d))]`` (Gauss-Hermite quadrature, 80 nodes), centred. Each
repetition draws the keys, ranks the policies with :func:`hylo_analytics.compare.
rank_policies` (the code users run, not a copy) and records whether each policy's 95 %
interval holds its estimand. Printed per scenario: the mean coverage over policies and
repetitions (goal >= 0.93), the lowest policy's, and the mean width, for the default
``sandwich`` and (few policies) the refitting ``bootstrap``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import polars as pl

from hylo_analytics.compare.ranking import rank_policies
from hylo_analytics.stats.bradley_terry import bradley_terry

SCENARIOS = [
    # name, policies' skills, keys per suite, bootstrap too
    ("10 policies, spread 2, 2 x 250 keys", np.linspace(-1, 1, 10), 250, True),
    ("10 policies, spread 2, 2 x 50 keys", np.linspace(-1, 1, 10), 50, True),
    ("50 policies, spread 2, 2 x 250 keys", np.linspace(-1, 1, 50), 250, False),
    (
        "10 policies near the ceiling (skill 1.5-3.5), 2 x 250 keys",
        np.linspace(1.5, 3.5, 10),
        250,
        True,
    ),
    ("200 policies, spread 3, 2 x 250 keys", np.linspace(-1.5, 1.5, 200), 250, False),
]


def estimand(skill: np.ndarray, keys: int, penalty: float = 0.01) -> np.ndarray:
    """The penalized fit of the expected win counts of ``keys`` keys (both suites)."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    weights = weights / weights.sum()
    p = 1 / (1 + np.exp(-(skill[None, :] - nodes[:, None])))  # (nodes, policies)
    expected = np.einsum("q,qi,qj->ij", weights, p, 1 - p) * keys
    np.fill_diagonal(expected, 0)
    return bradley_terry(expected, penalty=penalty)


def draw(skill: np.ndarray, per_suite: int, rng: np.random.Generator) -> pl.DataFrame:
    d = rng.normal(size=2 * per_suite)
    p = 1 / (1 + np.exp(-(skill[None, :] - d[:, None])))
    won = (rng.random(p.shape) < p).astype(float)
    n = len(skill)
    return pl.DataFrame(
        {
            "policy": np.tile([f"p{i:03d}" for i in range(n)], len(d)),
            "suite": np.repeat(np.where(np.arange(len(d)) < per_suite, "a", "b"), n),
            "key": np.repeat([f"k{k}" for k in range(len(d))], n),
            "metric": "success",
            "value": won.ravel(),
        }
    )


def run(reps: int, quick: bool) -> None:
    print("| scenario | interval | coverage (mean) | lowest policy | mean width | s / rep |")
    print("|---|---|---|---|---|---|")
    for name, skill, per_suite, boot in SCENARIOS[:2] if quick else SCENARIOS:
        truth = estimand(skill, 2 * per_suite)
        methods = ["sandwich", "bootstrap"] if boot else ["sandwich"]
        for method in methods:
            rng = np.random.default_rng(2026)
            hits, widths = np.zeros(len(skill)), []
            n = reps if method == "sandwich" else max(50, reps // 4)
            t = time.perf_counter()
            for _ in range(n):
                r = rank_policies(
                    draw(skill, per_suite, rng), policy="policy", strata=["suite"],
                    strength_ci=method, n_resamples=500, progress=False,  # type: ignore[arg-type]
                ).strengths.sort("policy")  # fmt: skip
                lo, hi = r["strength_low"].to_numpy(), r["strength_high"].to_numpy()
                hits += (lo <= truth) & (truth <= hi)
                widths.append(float(np.mean(hi - lo)))
            cover = hits / n
            print(
                f"| {name} | {method} | {cover.mean():.3f} | {cover.min():.3f} | "
                f"{np.mean(widths):.3f} | {(time.perf_counter() - t) / n:.2f} |",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=400)
    parser.add_argument("--quick", action="store_true", help="the first two scenarios only")
    args = parser.parse_args()
    run(args.reps, args.quick)


if __name__ == "__main__":
    main()
