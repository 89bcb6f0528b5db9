"""Seeded simulations of paired binary comparisons: how often the verdicts are right.

The test suite runs a small version (``tests/stats/test_simulation.py``) and
``benchmarks/bench_coverage.py`` the full table. Pairs are drawn as the four cells of a paired
2x2 table with the candidate's and the parent's success rates and a correlation between the
two outcomes of one key (episodes of one task and seed share their difficulty), so a
replicate costs four integers, never a row per episode.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import polars as pl

from hylo_analytics._lazy import LazyModule
from hylo_analytics.compare.verdicts import Rule, StatisticalRule, add_verdicts
from hylo_analytics.errors import InputTypeError
from hylo_analytics.stats.paired import tango_ci, tango_p

if TYPE_CHECKING:
    from scipy import special
else:
    special = LazyModule("scipy.special")

__all__ = ["PairedCell", "cell_probabilities", "exact_cell", "simulate_cell", "table_verdicts"]

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
    by the same statistics the engine calls (Tango's one-sided score test each way, its
    interval at ``level`` and at the rule's equivalence level), so the verdicts are the
    engine's verdicts for those counts.
    """
    rng = np.random.default_rng(
        [seed, cell.n, round(cell.p * 1000), round((cell.delta + 1) * 1000)]
    )
    probs = cell_probabilities(cell.p, cell.p + cell.delta, cell.rho)
    counts = rng.multinomial(cell.n, probs, size=reps)
    a, b, c = counts[:, 0], counts[:, 1], counts[:, 2]
    return table_verdicts(a, b, c, cell.n, rule, level=level, delta=cell.delta)


def exact_cell(cell: PairedCell, rule: StatisticalRule, *, level: float = 0.95) -> pl.DataFrame:
    """Every paired table ``cell`` can give (its ``b`` and ``c``), with its probability
    (``weight``) and verdict: a rate is a weighted mean, exact, with no Monte-Carlo noise.

    Only for :class:`StatisticalRule`, whose thresholds do not read the parent's mean (it is
    set to ``cell.p``); summing the both-succeeded cell out would change a relative rule's.
    """
    if not isinstance(rule, StatisticalRule):
        raise InputTypeError(
            "exact_cell needs a StatisticalRule (its margin is in points): simulate other rules "
            "with a Monte-Carlo run"
        )
    probs = cell_probabilities(cell.p, cell.p + cell.delta, cell.rho)
    n = cell.n
    bb, cc = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    fits = bb + cc <= n
    b, c = bb[fits], cc[fits]
    same = probs[0] + probs[3]
    with np.errstate(divide="ignore"):
        log_p = (
            special.gammaln(n + 1) - special.gammaln(b + 1) - special.gammaln(c + 1)
            - special.gammaln(n - b - c + 1)
            + special.xlogy(b, probs[1]) + special.xlogy(c, probs[2])
            + special.xlogy(n - b - c, same)
        )  # fmt: skip
    # tables below 1e-15 each (at most 1e-11 together) change no rate a test can see
    likely = log_p > -35
    b, c, log_p = b[likely], c[likely], log_p[likely]
    a = np.full(len(b), 0)  # unused by a StatisticalRule
    frame = table_verdicts(a, b, c, n, rule, level=level, delta=cell.delta)
    return frame.with_columns(
        mean_parent=pl.lit(cell.p), weight=pl.Series(np.exp(log_p), dtype=pl.Float64)
    )


def table_verdicts(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    c: npt.ArrayLike,
    n: int,
    rule: Rule,
    *,
    level: float = 0.95,
    delta: float | None = None,
) -> pl.DataFrame:
    """The engine's verdict for paired tables of ``n`` pairs (``a`` both succeeded, ``b`` only
    the candidate, ``c`` only the parent), with ``covered`` when the true ``delta`` is given."""
    a, b, c = (np.asarray(x, dtype=np.int64) for x in (a, b, c))
    size = np.full(len(b), n)
    lo, hi = tango_ci(b, c, size, level)
    eq_lo, eq_hi = tango_ci(b, c, size, rule.equivalence_level)
    better = tango_p(b, c, size, 0.0, "greater")
    worse = tango_p(b, c, size, 0.0, "less")
    frame = pl.DataFrame(
        {
            "b": b,
            "c": c,
            "metric": "success",
            "direction": "maximize",
            "n_pairs": size,
            "is_binary": True,
            "mean_candidate": (a + b) / n,
            "mean_parent": (a + c) / n,
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
    out = add_verdicts(frame, rule)
    if delta is None:
        return out
    return out.with_columns(covered=(pl.col("ci_low") <= delta) & (delta <= pl.col("ci_high")))
