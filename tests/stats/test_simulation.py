"""The default verdicts hold their promises where robot evals live, computed exactly.

For parent success p in {0.5, 0.8, 0.95, 0.98} and n in {20, 50, 200} pairs (outcomes of one
key correlated, rho = 0.3), every paired table a cell can give is enumerated with its
probability (:func:`~hylo_analytics.testing.simulation.exact_cell`), so each rate below is
exact, with no Monte-Carlo slack: the default interval (Tango) covers the true difference, a
true 10-point change is never called "unchanged", and no difference is called "improved" at
most alpha of the time, up to the asymptotic score test's known excess (its size peaks at
5.4 % for a one-sided 5 % test over p 0.5-0.99, n 10-500, rho 0-0.9; the exact McNemar, which
never exceeds 5 %, holds 0.0-1.4 % at p 0.98 and n <= 50 and so finds almost nothing there).
The seeded simulation (``simulate_cell``) is checked against the engine table by table; the
full table is ``benchmarks/bench_coverage.py``.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from hylo_analytics.compare import StatisticalRule, compare_scores
from hylo_analytics.stats import mcnemar_p
from hylo_analytics.testing.simulation import (
    PairedCell,
    cell_probabilities,
    exact_cell,
    simulate_cell,
    table_verdicts,
)

PS = (0.5, 0.8, 0.95, 0.98)
NS = (20, 50, 200)
RULE = StatisticalRule(alpha=0.05, margin=0.05)
# the asymptotic score test's excess over alpha on this grid (exactly: 0.0022 at p 0.8, n 50)
SIZE_EXCESS = 0.005


def _rate(frame: pl.DataFrame, event: pl.Expr) -> float:
    return float(
        frame.select(
            (event.cast(pl.Float64) * pl.col("weight")).sum() / pl.col("weight").sum()
        ).item()
    )


@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("p", PS)
def test_default_interval_covers(p: float, n: int) -> None:
    for delta in (0.0, -0.03, -0.10):
        got = _rate(exact_cell(PairedCell(p, delta, n), RULE), pl.col("covered"))
        assert got >= 0.945, (p, n, delta, got)


@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("p", PS)
def test_a_real_change_is_not_called_unchanged(p: float, n: int) -> None:
    for delta in (-0.10, 0.10):
        if not 0 <= p + delta <= 1:
            continue
        f = exact_cell(PairedCell(p, delta, n), RULE)
        assert _rate(f, pl.col("verdict") == "unchanged") <= 0.001, (p, n, delta)


@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("p", PS)
def test_no_difference_is_rarely_improved(p: float, n: int) -> None:
    f = exact_cell(PairedCell(p, 0.0, n), RULE)
    assert _rate(f, pl.col("verdict") == "improved") <= RULE.alpha + SIZE_EXCESS
    assert _rate(f, pl.col("verdict") == "regressed") <= RULE.alpha + SIZE_EXCESS


def test_the_exact_rates_are_the_simulated_rates() -> None:
    """The enumeration's probabilities and verdicts are what drawing tables gives."""
    cell = PairedCell(0.8, 0.0, 50)
    exact = _rate(exact_cell(cell, RULE), pl.col("verdict") == "improved")
    sim = simulate_cell(cell, 20_000, RULE, seed=1)
    drawn = float((sim["verdict"] == "improved").mean())
    assert abs(drawn - exact) < 4 * np.sqrt(exact * (1 - exact) / 20_000)
    assert _rate(exact_cell(cell, RULE), pl.lit(True)) == pytest.approx(1.0, abs=1e-9)


def test_the_score_test_finds_what_the_exact_mcnemar_misses_near_one() -> None:
    """At 98 % success and 200 pairs a 3-point drop: the verdict's power, and the exact
    McNemar's on the same tables (the reason the verdict uses the score test)."""
    f = exact_cell(PairedCell(0.98, -0.03, 200), RULE)
    power = _rate(f, pl.col("verdict") == "regressed")
    exact_power = _rate(
        f.with_columns(pe=pl.Series(mcnemar_p(f["c"].to_numpy(), f["b"].to_numpy()))),
        pl.col("pe") < RULE.alpha,
    )
    assert power > exact_power + 0.05
    assert power > 0.5


@pytest.mark.slow
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
        sim = table_verdicts([counts[0]], [counts[1]], [counts[2]], cell.n, RULE).row(0, named=True)
        assert out["verdict"] == sim["verdict"], rep
        assert out["test"] == "tango score"
        assert out["ci_low"] == pytest.approx(sim["ci_low"], abs=1e-12)
        assert out["p_value"] == pytest.approx(sim["p_value"], abs=1e-12)
        assert out["p_verdict"] == pytest.approx(sim["p_verdict"], abs=1e-12)
