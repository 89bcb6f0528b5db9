"""Verdicts on a comparison: ``improved | regressed | unchanged | inconclusive``.

Two documented rules, both direction-aware (for a metric to minimize, a drop is an
improvement) and both polars expressions, so a verdict is an ordinary column of the tidy
comparison frame.

Rule 1, :class:`RelativeNoiseRule` (Autobench): the relative change of the candidate's mean
against the parent's, ``(c - p) / |p|``, oriented so that positive is better, is compared with
a relative-noise threshold: above ``+noise`` is improved, below ``-noise`` regressed, within
(boundaries included) unchanged. A zero or missing parent mean is inconclusive (no relative
change exists).

Rule 2, :class:`StatisticalRule`: the confidence interval of the (oriented) difference
against ``±threshold`` together with the test's p-value. Improved only when the CI lies
strictly above ``+threshold`` and ``p < alpha``; regressed when it lies strictly below
``-threshold`` and ``p < alpha``; unchanged when it lies inside ``[-threshold, +threshold]``;
otherwise inconclusive. The p-value should be two-sided (or computed in the direction being
claimed), since the rule can conclude either way.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

__all__ = ["VERDICTS", "RelativeNoiseRule", "StatisticalRule", "add_verdicts"]

VERDICTS = ("improved", "regressed", "unchanged", "inconclusive")

HigherIsBetter = bool | str | pl.Expr


def _hib(higher_is_better: HigherIsBetter) -> pl.Expr:
    if isinstance(higher_is_better, bool):
        return pl.lit(higher_is_better)
    return pl.col(higher_is_better) if isinstance(higher_is_better, str) else higher_is_better


def _col(x: float | str) -> pl.Expr:
    return pl.col(x) if isinstance(x, str) else pl.lit(float(x))


def _finite(e: pl.Expr) -> pl.Expr:
    return e.is_not_null() & e.is_finite()


@dataclass(frozen=True)
class RelativeNoiseRule:
    """Relative change vs a relative-noise threshold (a fraction, or a column name)."""

    noise: float | str = 0.05
    name: str = "relative_noise"

    def expr(
        self,
        *,
        candidate: str = "mean_candidate",
        parent: str = "mean_parent",
        higher_is_better: HigherIsBetter = "higher_is_better",
    ) -> pl.Expr:
        """The verdict of every row as a polars string expression."""
        c, p, noise = pl.col(candidate), pl.col(parent), _col(self.noise)
        rel = (c - p) / p.abs()
        oriented = pl.when(_hib(higher_is_better)).then(rel).otherwise(-rel)
        known = _finite(c) & _finite(p) & (p != 0) & _finite(noise)
        return (
            pl.when(~known)
            .then(pl.lit("inconclusive"))
            .when(oriented > noise)
            .then(pl.lit("improved"))
            .when(oriented < -noise)
            .then(pl.lit("regressed"))
            .otherwise(pl.lit("unchanged"))
        )


@dataclass(frozen=True)
class StatisticalRule:
    """CI of the difference vs ``±threshold`` together with ``p < alpha``."""

    threshold: float = 0.0
    alpha: float = 0.05
    name: str = "statistical"

    def expr(
        self,
        *,
        ci_low: str = "ci_low",
        ci_high: str = "ci_high",
        p: str = "p_verdict",
        higher_is_better: HigherIsBetter = "higher_is_better",
    ) -> pl.Expr:
        """The verdict of every row as a polars string expression."""
        lo, hi, pv, t = pl.col(ci_low), pl.col(ci_high), pl.col(p), pl.lit(self.threshold)
        hib = _hib(higher_is_better)
        lo_o = pl.when(hib).then(lo).otherwise(-hi)
        hi_o = pl.when(hib).then(hi).otherwise(-lo)
        significant = _finite(pv) & (pv < self.alpha)
        return (
            pl.when(~(_finite(lo) & _finite(hi)))
            .then(pl.lit("inconclusive"))
            .when((lo_o > t) & significant)
            .then(pl.lit("improved"))
            .when((hi_o < -t) & significant)
            .then(pl.lit("regressed"))
            .when((lo_o >= -t) & (hi_o <= t))
            .then(pl.lit("unchanged"))
            .otherwise(pl.lit("inconclusive"))
        )


def add_verdicts(
    frame: pl.DataFrame,
    rule: RelativeNoiseRule | StatisticalRule,
    *,
    higher_is_better: HigherIsBetter = "higher_is_better",
) -> pl.DataFrame:
    """``frame`` with ``verdict`` and ``verdict_rule`` columns added by ``rule``.

    The frame needs ``mean_candidate``/``mean_parent`` (rule 1) or ``ci_low``/``ci_high``/
    ``p_verdict`` (rule 2), and a boolean ``higher_is_better`` column unless one is passed.
    """
    return frame.with_columns(
        rule.expr(higher_is_better=higher_is_better).alias("verdict"),
        pl.lit(rule.name).alias("verdict_rule"),
    )
