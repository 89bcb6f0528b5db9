"""Both verdict rules at their boundaries, for both directions."""

from __future__ import annotations

import math

import polars as pl
import pytest

from hylo_analytics.compare.verdicts import RelativeNoiseRule, StatisticalRule, add_verdicts


def _rel(c: float | None, p: float | None, hib: bool, noise: float = 0.05) -> str:
    f = pl.DataFrame(
        {"mean_candidate": [c], "mean_parent": [p], "higher_is_better": [hib]},
        schema={
            "mean_candidate": pl.Float64,
            "mean_parent": pl.Float64,
            "higher_is_better": pl.Boolean,
        },
    )
    out = add_verdicts(f, RelativeNoiseRule(noise))
    assert out["verdict_rule"].item() == "relative_noise"
    return str(out["verdict"].item())


@pytest.mark.parametrize(
    ("c", "p", "hib", "want"),
    [
        (1.25, 1.0, True, "improved"),  # +25 % > 20 %
        (1.2, 1.0, True, "unchanged"),  # exactly +20 %: the boundary is unchanged
        (0.8, 1.0, True, "unchanged"),  # exactly -20 %
        (0.75, 1.0, True, "regressed"),
        (0.75, 1.0, False, "improved"),  # lower is better: a 25 % drop improves
        (1.25, 1.0, False, "regressed"),
        (-1.25, -1.0, True, "regressed"),  # relative to |parent|
        (1.0, 0.0, True, "inconclusive"),  # no relative change from 0
        (None, 1.0, True, "inconclusive"),
        (math.nan, 1.0, True, "inconclusive"),
    ],
)
def test_relative_noise_rule(c: float | None, p: float | None, hib: bool, want: str) -> None:
    assert _rel(c, p, hib, noise=0.2) == want


def test_relative_noise_from_a_column() -> None:
    f = pl.DataFrame(
        {"mean_candidate": [1.1, 1.1], "mean_parent": [1.0, 1.0], "noise": [0.05, 0.2]}
    )
    out = f.with_columns(RelativeNoiseRule("noise").expr(higher_is_better=True).alias("v"))
    assert out["v"].to_list() == ["improved", "unchanged"]


def _stat(lo: float | None, hi: float | None, p: float, hib: bool = True) -> str:
    f = pl.DataFrame(
        {"ci_low": [lo], "ci_high": [hi], "p_verdict": [p], "higher_is_better": [hib]},
        schema={
            "ci_low": pl.Float64,
            "ci_high": pl.Float64,
            "p_verdict": pl.Float64,
            "higher_is_better": pl.Boolean,
        },
    )
    return str(add_verdicts(f, StatisticalRule(threshold=0.1, alpha=0.05))["verdict"].item())


@pytest.mark.parametrize(
    ("lo", "hi", "p", "hib", "want"),
    [
        (0.11, 0.3, 0.01, True, "improved"),
        (0.10, 0.3, 0.01, True, "inconclusive"),  # CI touches +threshold: not cleared
        (0.11, 0.3, 0.05, True, "inconclusive"),  # p == alpha is not significant
        (0.11, 0.3, 0.0499, True, "improved"),
        (-0.3, -0.11, 0.01, True, "regressed"),
        (-0.3, -0.10, 0.01, True, "inconclusive"),
        (-0.1, 0.1, 0.9, True, "unchanged"),  # inside ±threshold, boundaries included
        (-0.1, 0.1000001, 0.9, True, "inconclusive"),
        (-0.3, -0.11, 0.01, False, "improved"),  # lower is better
        (0.11, 0.3, 0.01, False, "regressed"),
        (None, None, 0.01, True, "inconclusive"),
    ],
)
def test_statistical_rule(
    lo: float | None, hi: float | None, p: float, hib: bool, want: str
) -> None:
    assert _stat(lo, hi, p, hib) == want


def test_rule_takes_a_literal_direction() -> None:
    f = pl.DataFrame({"ci_low": [0.2], "ci_high": [0.4], "p_verdict": [0.001]})
    out = f.select(StatisticalRule().expr(higher_is_better=False))
    assert out.item() == "regressed"
