"""Seeded simulations: the default verdicts hold their promises where robot evals live.

For parent success p in {0.5, 0.8, 0.95, 0.98} and n in {20, 50, 200} pairs (outcomes of one
key correlated, rho = 0.3): the default interval (Tango) covers the true difference, a true
10-point change is almost never called "unchanged", and no difference is called "improved"
at most alpha of the time. 1,000 replicates a cell keep it under a few seconds; the full table
(more replicates, and the percentile bootstrap it replaced) is ``benchmarks/bench_coverage.py``.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from hylo_analytics.compare import StatisticalRule, compare_scores
from hylo_analytics.testing.simulation import PairedCell, cell_probabilities, simulate_cell

REPS = 1000
PS = (0.5, 0.8, 0.95, 0.98)
NS = (20, 50, 200)
RULE = StatisticalRule(alpha=0.05, margin=0.05)
# Monte-Carlo slack: two standard errors of a proportion near the bound
SLACK_COVER = 2 * np.sqrt(0.95 * 0.05 / REPS)
SLACK_RATE = 2 * np.sqrt(0.05 * 0.95 / REPS)


@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("p", PS)
def test_default_interval_covers(p: float, n: int) -> None:
    floor = 0.90 if n == 20 else 0.93
    for delta in (0.0, -0.03, -0.10):
        got = simulate_cell(PairedCell(p, delta, n), REPS, RULE)["covered"].mean()
        assert got >= floor - SLACK_COVER, (p, n, delta, got)


@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("p", PS)
def test_a_ten_point_change_is_not_called_unchanged(p: float, n: int) -> None:
    for delta in (-0.10, 0.10):
        if not 0 <= p + delta <= 1:
            continue
        f = simulate_cell(PairedCell(p, delta, n), REPS, RULE)
        assert (f["verdict"] == "unchanged").mean() <= 0.05 + SLACK_RATE, (p, n, delta)


@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("p", PS)
def test_no_difference_is_rarely_improved(p: float, n: int) -> None:
    f = simulate_cell(PairedCell(p, 0.0, n), REPS, RULE)
    assert (f["verdict"] == "improved").mean() <= RULE.alpha + SLACK_RATE
    assert (f["verdict"] == "regressed").mean() <= RULE.alpha + SLACK_RATE


def test_the_simulation_gives_the_engines_verdicts() -> None:
    """The simulated verdicts are compare_scores' verdicts on the same pairs, table by table."""
    cell = PairedCell(0.8, -0.1, 50)
    rng = np.random.default_rng(3)
    probs = cell_probabilities(cell.p, cell.p + cell.delta, cell.rho)
    for rep in range(20):
        counts = rng.multinomial(cell.n, probs)
        pairs = np.repeat([[1.0, 1.0], [1.0, 0.0], [0.0, 1.0], [0.0, 0.0]], counts, axis=0)
        keys = [f"k{i}" for i in range(cell.n)]
        frame = pl.DataFrame(
            {
                "run_id": ["C"] * cell.n + ["P"] * cell.n,
                "key": keys * 2,
                "metric": "success",
                "value": np.concatenate([pairs[:, 0], pairs[:, 1]]),
            }
        )
        out = compare_scores(frame, candidates="C", parent="P", rule=RULE).row(0, named=True)
        sim = simulate_counts(int(counts[1]), int(counts[2]), cell.n)
        assert out["verdict"] == sim["verdict"], rep
        assert out["ci_low"] == pytest.approx(sim["ci_low"], abs=1e-12)
        assert out["p_verdict"] == pytest.approx(sim["p_verdict"], abs=1e-12)


def simulate_counts(b: int, c: int, n: int) -> dict[str, object]:
    """The simulation's verdict for one table, by the same construction."""
    from hylo_analytics.compare.verdicts import add_verdicts
    from hylo_analytics.stats import mcnemar_p, tango_ci

    lo, hi = tango_ci(b, c, n)
    elo, ehi = tango_ci(b, c, n, RULE.equivalence_level)
    pb, pw = mcnemar_p([b], [c])[0], mcnemar_p([c], [b])[0]
    f = pl.DataFrame(
        {
            "metric": ["success"], "direction": ["maximize"], "n_pairs": [n],
            "is_binary": [True], "mean_parent": [0.8], "p_value": [pb], "p_worse": [pw],
            "p_holm": [pb], "p_worse_holm": [pw], "ci_low": [float(lo)], "ci_high": [float(hi)],
            "eq_low": [float(elo)], "eq_high": [float(ehi)],
        }
    )  # fmt: skip
    row: dict[str, object] = add_verdicts(f, RULE).row(0, named=True)
    return row
