"""Seeded simulations of paired binary comparisons: how often the verdicts are right.

The test suite runs a small version (``tests/stats/test_simulation.py``) and
``benchmarks/bench_coverage.py`` the full table. Pairs are drawn as the four cells of a paired
2x2 table with the candidate's and the parent's success rates and a correlation between the
two outcomes of one key (episodes of one task and seed share their difficulty), so a
replicate costs four integers, never a row per episode.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import polars as pl

from hylo_analytics.compare.verdicts import Rule, add_verdicts
from hylo_analytics.stats.paired import tango_ci
from hylo_analytics.stats.significance import mcnemar_p

__all__ = ["PairedCell", "cell_probabilities", "simulate_cell"]

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class PairedCell:
    """One simulated setting: ``n`` pairs, parent rate ``p``, candidate rate ``p + delta``."""

    p: float
    delta: float
    n: int
    rho: float = 0.3


def cell_probabilities(p_parent: float, p_candidate: float, rho: float) -> npt.NDArray[np.float64]:
    """P(both succeed), P(only the candidate), P(only the parent), P(both fail)."""
    sd = np.sqrt(p_candidate * (1 - p_candidate) * p_parent * (1 - p_parent))
    p11 = p_candidate * p_parent + rho * sd
    lo = max(0.0, p_candidate + p_parent - 1)
    p11 = float(np.clip(p11, lo, min(p_candidate, p_parent)))
    probs = np.array([p11, p_candidate - p11, p_parent - p11, 1 - p_candidate - p_parent + p11])
    clipped = np.clip(probs, 0.0, 1.0)
    return np.asarray(clipped / clipped.sum(), dtype=np.float64)


def simulate_cell(
    cell: PairedCell, reps: int, rule: Rule, *, level: float = 0.95, seed: int = 0
) -> pl.DataFrame:
    """``reps`` replicates of ``cell``: counts, the default interval and the verdict.

    The frame carries what :func:`~hylo_analytics.compare.verdicts.add_verdicts` reads, built
    by the same statistics the engine calls (one-sided exact McNemar each way, Tango's
    interval at ``level`` and at the rule's equivalence level), so the verdicts are the
    engine's verdicts for those counts.
    """
    rng = np.random.default_rng(
        [seed, cell.n, round(cell.p * 1000), round((cell.delta + 1) * 1000)]
    )
    probs = cell_probabilities(cell.p, cell.p + cell.delta, cell.rho)
    counts = rng.multinomial(cell.n, probs, size=reps)
    a, b, c = counts[:, 0], counts[:, 1], counts[:, 2]
    n = np.full(reps, cell.n)
    lo, hi = tango_ci(b, c, n, level)
    eq_lo, eq_hi = tango_ci(b, c, n, rule.equivalence_level)
    better = mcnemar_p(b, c, alternative="greater")
    worse = mcnemar_p(c, b, alternative="greater")
    frame = pl.DataFrame(
        {
            "metric": "success",
            "direction": "maximize",
            "n_pairs": n,
            "is_binary": True,
            "mean_candidate": (a + b) / cell.n,
            "mean_parent": (a + c) / cell.n,
            "p_value": better,
            "p_worse": worse,
            "p_holm": better,
            "p_worse_holm": worse,
            "p_bh": better,
            "p_worse_bh": worse,
            "ci_low": lo,
            "ci_high": hi,
            "eq_low": eq_lo,
            "eq_high": eq_hi,
        }
    )
    return add_verdicts(frame, rule).with_columns(
        covered=(pl.col("ci_low") <= cell.delta) & (cell.delta <= pl.col("ci_high"))
    )
