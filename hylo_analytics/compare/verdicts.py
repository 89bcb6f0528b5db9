"""Verdicts on a comparison: ``improved | regressed | unchanged | inconclusive``.

One logic, two ways to set its thresholds, both polars expressions over the comparison frame
(so a verdict is an ordinary column, with the p-value that decided it and a note that says
why):

- ``improved`` needs the one-sided test in the metric's direction to reject at ``alpha``
  (after the family's adjustment): a noise threshold, when set, is an *extra* condition
  (the interval must also clear it), never a replacement for the test;
- ``regressed`` the same in the other direction;
- ``unchanged`` needs evidence of equivalence: the ``1 - 2 alpha`` interval of the difference
  (the two one-sided tests, TOST) lies strictly inside ``+-margin``, with the margin stated;
  three tied pairs are not evidence of "no change";
- everything else is ``inconclusive``.

A metric whose direction is not known gets two-sided tests and can only be ``unchanged`` or
``inconclusive``: what would "improved" mean? The note says so, and how to give a direction.

:class:`StatisticalRule` sets the margin in the metric's units (points of success rate for a
0/1 metric; a fraction of the parent's mean otherwise). :class:`RelativeNoiseRule`
(Autobench's relative noise) sets both the noise threshold and the margin as a fraction of the
parent's mean.

:class:`ComparisonVerdictSpec` is Autobench's declarable ``verdict:`` block of an analysis
spec (:mod:`hylo_analytics.analysis`): which metric, which parent run against which
candidates, the direction, and the rule with its parameters::

    verdict:
      metric: step_speedup              # a stored, derived or post-derived metric
      parent: octo-ft                   # a run id, unique prefix or selector
      candidates: [octo-ft-v2]          # optional: default every other analysed run
      direction: maximize               # optional: default what the metric declares
      by: [task_id]                     # optional: also per group
      rule: {kind: relative_noise, noise: 0.05, alpha: 0.05, adjust: holm}
      #  or {kind: statistical, alpha: 0.05, adjust: holm, margin: 0.02, threshold: 0}

A list of such blocks gives one verdict table each. Verdicts are controlled comparisons, not
causal claims; they are computed, never stored.

The frame needs: ``direction`` (``maximize | minimize | unknown``), ``p_holm`` /
``p_worse_holm`` (or the ``bh`` / raw ones, as ``adjust`` says), ``ci_low`` / ``ci_high``,
``eq_low`` / ``eq_high`` (the interval at ``equivalence_level``), ``mean_parent`` and
``is_binary``; ``p_tost``, ``family`` and ``family_size`` are used when present.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import polars as pl

from hylo_analytics._config import (
    ConfigError,
    check_keys,
    expect_list,
    expect_mapping,
    expect_number,
    expect_str,
)
from hylo_analytics.errors import InputError

__all__ = [
    "VERDICTS",
    "ComparisonVerdictSpec",
    "RelativeNoiseRule",
    "Rule",
    "StatisticalRule",
    "add_verdicts",
    "parse_verdicts",
]

VERDICTS = ("improved", "regressed", "unchanged", "inconclusive")
Adjust = Literal["holm", "bh", "none"]


def _finite(e: pl.Expr) -> pl.Expr:
    return e.is_not_null() & e.is_finite()


def _num(e: pl.Expr, digits: int = 3) -> pl.Expr:
    """A number for a note: at most ``digits`` significant decimals, signed."""
    return e.round_sig_figs(digits).cast(pl.String)


class _Logic:
    """What both rules share; ``margin_expr`` / ``noise_expr`` are the rule's thresholds."""

    alpha: float
    adjust: Adjust

    def margin_expr(self) -> pl.Expr:
        raise NotImplementedError

    def noise_expr(self) -> pl.Expr:
        raise NotImplementedError

    @property
    def equivalence_level(self) -> float:
        """The two-sided level whose interval is the TOST at ``alpha``: ``1 - 2 alpha``."""
        return 1 - 2 * self.alpha

    def _p(self, worse: bool) -> pl.Expr:
        if self.adjust == "none":
            return pl.col("p_worse" if worse else "p_value")
        return pl.col(f"p_worse_{self.adjust}" if worse else f"p_{self.adjust}")

    def _parts(self, margin: pl.Expr, noise: pl.Expr) -> dict[str, pl.Expr]:
        known = pl.col("direction") != "unknown"
        up = pl.col("direction") != "minimize"
        lo, hi = pl.col("ci_low"), pl.col("ci_high")
        lo_o = pl.when(up).then(lo).otherwise(-hi)
        hi_o = pl.when(up).then(hi).otherwise(-lo)
        better, worse = self._p(False), self._p(True)
        noisy = noise > 0
        clears_up = ~noisy | (_finite(lo_o) & (lo_o > noise))
        clears_down = ~noisy | (_finite(hi_o) & (hi_o < -noise))
        # the verdict's interval (one-sided alpha, adjusted as the p is) must agree with the
        # test: a sign test can reject while the mean difference's interval holds 0
        v_lo, v_hi = _verdict_interval()
        va_lo = pl.when(up).then(v_lo).otherwise(-v_hi)
        va_hi = pl.when(up).then(v_hi).otherwise(-v_lo)
        shown = _finite(va_lo) & _finite(va_hi)
        agrees_up = ~shown | (va_lo > 0)
        agrees_down = ~shown | (va_hi < 0)
        eq_lo, eq_hi = pl.col("eq_low"), pl.col("eq_high")
        equivalent = (
            _finite(margin) & _finite(eq_lo) & _finite(eq_hi) & (eq_lo > -margin) & (eq_hi < margin)
        )
        test_up = known & _finite(better) & (better < self.alpha) & clears_up
        test_down = known & _finite(worse) & (worse < self.alpha) & clears_down
        return {
            "improved": test_up & agrees_up,
            "regressed": test_down & agrees_down,
            "disagree": (test_up & ~agrees_up) | (test_down & ~agrees_down),
            "unchanged": equivalent,
            "better": better,
            "worse": worse,
            "margin": margin,
        }

    def _verdict(self, parts: dict[str, pl.Expr]) -> pl.Expr:
        return (
            pl.when(parts["improved"])
            .then(pl.lit("improved"))
            .when(parts["regressed"])
            .then(pl.lit("regressed"))
            .when(parts["unchanged"])
            .then(pl.lit("unchanged"))
            .otherwise(pl.lit("inconclusive"))
        )

    def _note(self, parts: dict[str, pl.Expr], verdict: pl.Expr) -> pl.Expr:
        adjust = {"holm": "Holm", "bh": "Benjamini-Hochberg", "none": "unadjusted"}[self.adjust]
        fam = pl.format(
            " ({} over {} test(s): {})",
            pl.lit(adjust),
            pl.col("family_size").cast(pl.String),
            pl.col("family"),
        )
        eq = pl.format(
            "{}% CI [{}, {}]",
            pl.lit(f"{self.equivalence_level:.0%}".rstrip("%")),
            _num(pl.col("eq_low")),
            _num(pl.col("eq_high")),
        )
        margin = pl.when(_finite(parts["margin"])).then(pl.format("+-{}", _num(parts["margin"])))
        unknown = pl.format(
            "no direction known for '{}': two-sided tests, no improved/regressed "
            "(give directions={{'{}': 'maximize' | 'minimize'}} or --direction {}=...); ",
            pl.col("metric"),
            pl.col("metric"),
            pl.col("metric"),
        )
        best_p = pl.min_horizontal(parts["better"], parts["worse"])
        text = (
            pl.when(verdict == "improved")
            .then(pl.format("p = {} < {}", _num(parts["better"]), pl.lit(str(self.alpha))))
            .when(verdict == "regressed")
            .then(pl.format("p(worse) = {} < {}", _num(parts["worse"]), pl.lit(str(self.alpha))))
            .when(verdict == "unchanged")
            .then(pl.format("{} inside {}", eq, margin))
            .when(parts["disagree"])
            .then(
                pl.format(
                    "the test rejects (p = {} < {}) but the difference's {}% interval [{}, {}] "
                    "(one-sided alpha, adjusted as the p is) holds 0: the test and the "
                    "interval disagree (for a numeric metric the sign test counts pairs, the "
                    "interval is of the mean difference), so no verdict",
                    _num(best_p),
                    pl.lit(str(self.alpha)),
                    (_verdict_level() * 100).round(2).cast(pl.String),
                    _num(_verdict_interval()[0]),
                    _num(_verdict_interval()[1]),
                )
            )
            .when(pl.col("n_pairs") == 0)
            .then(pl.lit("no pairs to compare"))
            .when(margin.is_null())
            .then(
                pl.format(
                    "p = {} >= {}; 'unchanged' needs an equivalence margin (margin=, --margin)",
                    _num(best_p),
                    pl.lit(str(self.alpha)),
                )
            )
            .otherwise(
                pl.format(
                    "p = {} >= {} and {} not inside {}",
                    _num(best_p),
                    pl.lit(str(self.alpha)),
                    eq,
                    margin,
                )
            )
        )
        text = (
            pl.when(verdict.is_in(["improved", "regressed"]))
            .then(pl.concat_str(text, fam))
            .otherwise(text)
        )
        return (
            pl.when(pl.col("direction") == "unknown")
            .then(pl.concat_str(unknown, text))
            .otherwise(text)
        )

    def _p_verdict(self, parts: dict[str, pl.Expr], verdict: pl.Expr, tost: pl.Expr) -> pl.Expr:
        return (
            pl.when(verdict == "improved")
            .then(parts["better"])
            .when(verdict == "regressed")
            .then(parts["worse"])
            .when(verdict == "unchanged")
            .then(tost)
            .otherwise(pl.min_horizontal(parts["better"], parts["worse"]))
        )


@dataclass(frozen=True)
class StatisticalRule(_Logic):
    """The test at ``alpha`` decides improved/regressed; equivalence within ``+-margin``
    decides unchanged.

    ``margin`` is in points of success rate for 0/1 metrics (0.02 = 2 points) and a fraction
    of the parent's mean otherwise. It is a domain decision, so there is no default: without
    one, "unchanged" is never concluded (``inconclusive`` instead) and the note says so.
    ``threshold`` (metric units) is an extra condition on improved/regressed: the interval
    must clear it.
    """

    alpha: float = 0.05
    adjust: Adjust = "holm"
    margin: float | None = None
    threshold: float = 0.0
    name: str = "statistical"

    def __post_init__(self) -> None:
        _check(self.alpha, self.margin, self.threshold)

    def margin_expr(self) -> pl.Expr:
        if self.margin is None:
            return pl.lit(None, pl.Float64)
        m = pl.lit(float(self.margin))
        return pl.when(pl.col("is_binary")).then(m).otherwise(m * pl.col("mean_parent").abs())

    def noise_expr(self) -> pl.Expr:
        return pl.lit(float(self.threshold))

    def describe(self) -> str:
        """The rule in words, for every output that shows a verdict."""
        margin = (
            "unchanged needs an equivalence margin (none given)"
            if self.margin is None
            else f"unchanged when the {self.equivalence_level:.0%} CI lies inside "
            f"+-{self.margin:g} ({self.margin * 100:g} points for 0/1 metrics, else a fraction "
            "of the parent's mean)"
        )
        noise = f", and the 95% CI clears +-{self.threshold:g}" if self.threshold else ""
        return (
            f"statistical rule: improved / regressed when the one-sided p of the test the "
            f"interval inverts (the row's test) in the metric's direction ({_adjust_text(self.adjust)} within its family) is < "
            f"{self.alpha:g} and the verdict's interval (ci_adj: {1 - 2 * self.alpha:.0%}, "
            f"Bonferroni over the family) agrees{noise}; {margin}; otherwise inconclusive"
        )


@dataclass(frozen=True)
class RelativeNoiseRule(_Logic):
    """Autobench's relative noise: the change must exceed ``noise`` (a fraction of the
    parent's mean) *and* pass the test; unchanged needs the ``1 - 2 alpha`` interval inside
    ``+-noise`` of the parent's mean. 2/2 vs 1/2 is not "improved" at p = 1."""

    noise: float = 0.05
    alpha: float = 0.05
    adjust: Adjust = "holm"
    name: str = "relative_noise"

    def __post_init__(self) -> None:
        _check(self.alpha, self.noise, 0.0)

    def margin_expr(self) -> pl.Expr:
        return pl.lit(float(self.noise)) * pl.col("mean_parent").abs()

    def noise_expr(self) -> pl.Expr:
        return self.margin_expr()

    def describe(self) -> str:
        return (
            f"relative noise rule: improved / regressed when the change exceeds "
            f"{self.noise:.0%} of the parent's mean and the one-sided p of the row's test "
            f"({_adjust_text(self.adjust)}) is < {self.alpha:g}; unchanged when the "
            f"{self.equivalence_level:.0%} CI lies inside +-{self.noise:.0%} of the parent's "
            "mean; otherwise inconclusive"
        )


Rule = StatisticalRule | RelativeNoiseRule


def _verdict_interval() -> tuple[pl.Expr, pl.Expr]:
    """The verdict's interval: ``ci_adj_*`` when the comparison has it."""
    return pl.col("ci_adj_low"), pl.col("ci_adj_high")


def _verdict_level() -> pl.Expr:
    return pl.col("ci_adj_level")


def _adjust_text(adjust: Adjust) -> str:
    return {"holm": "Holm-adjusted", "bh": "BH-adjusted", "none": "unadjusted"}[adjust]


def _check(alpha: float, margin: float | None, threshold: float) -> None:
    if not 0 < alpha < 0.5:
        raise InputError(f"alpha must be in (0, 0.5), got {alpha!r}")
    if margin is not None and not margin > 0:
        raise InputError(f"the equivalence margin must be > 0 (or None), got {margin!r}")
    if threshold < 0:
        raise InputError(f"the noise threshold must be >= 0, got {threshold!r}")


def add_verdicts(frame: pl.DataFrame, rule: Rule) -> pl.DataFrame:
    """``frame`` with ``verdict``, ``p_verdict`` (the p that decided it), ``verdict_note``
    (why, in words), ``margin`` and ``verdict_rule``."""
    defaults = {
        "family": pl.lit("overall"),
        "family_size": pl.lit(1),
        "p_tost": pl.lit(None, pl.Float64),
        # a frame without the verdict's interval: the test alone decides
        "ci_adj_low": pl.lit(None, pl.Float64),
        "ci_adj_high": pl.lit(None, pl.Float64),
        "ci_adj_level": pl.lit(None, pl.Float64),
    }
    frame = frame.with_columns(v.alias(k) for k, v in defaults.items() if k not in frame.columns)
    parts = rule._parts(rule.margin_expr(), rule.noise_expr())
    verdict = rule._verdict(parts)
    out = frame.with_columns(verdict.alias("verdict"), parts["margin"].alias("margin"))
    v = pl.col("verdict")
    return out.with_columns(
        rule._p_verdict(parts, v, pl.col("p_tost")).alias("p_verdict"),
        rule._note(parts, v).alias("verdict_note"),
        pl.lit(rule.name).alias("verdict_rule"),
    )


_RULE_FIELDS: dict[str, tuple[str, ...]] = {
    "relative_noise": ("noise", "alpha", "adjust"),
    "statistical": ("alpha", "adjust", "margin", "threshold"),
}
_ADJUST = ("holm", "bh", "none")
_VERDICT_KEYS = ("metric", "parent", "candidates", "direction", "by", "source", "rule")


@dataclass(frozen=True)
class ComparisonVerdictSpec:
    """One ``verdict:`` block: ``metric`` of ``candidates`` against ``parent`` under ``rule``.

    ``candidates`` empty means every other analysed run; ``direction`` None means what the
    metric declares (else two-sided: only unchanged / inconclusive). The default rule is
    Autobench's relative noise at 5% of the parent's mean.
    """

    metric: str
    parent: str
    candidates: tuple[str, ...] = ()
    direction: Literal["maximize", "minimize"] | None = None
    by: tuple[str, ...] = ()
    source: str | None = None
    rule: Rule = field(default_factory=RelativeNoiseRule)


def parse_verdicts(value: object, path: str = "verdict") -> tuple[ComparisonVerdictSpec, ...]:
    """One block (a mapping) or a list of them, validated; errors name the key path."""
    if isinstance(value, list):
        if not value:
            raise ConfigError(path, "expected at least one verdict block")
        return tuple(_parse_verdict(v, f"{path}[{i}]") for i, v in enumerate(value))
    return (_parse_verdict(value, path),)


def _parse_verdict(value: object, path: str) -> ComparisonVerdictSpec:
    m = expect_mapping(value, path)
    check_keys(m, _VERDICT_KEYS, path)
    for key in ("metric", "parent"):
        if key not in m:
            raise ConfigError(f"{path}.{key}", "required")
    direction = m.get("direction")
    if direction is not None and direction not in ("maximize", "minimize"):
        raise ConfigError(
            f"{path}.direction", f"expected 'maximize' or 'minimize', got {direction!r}"
        )
    source = m.get("source")
    return ComparisonVerdictSpec(
        metric=expect_str(m["metric"], f"{path}.metric"),
        parent=expect_str(m["parent"], f"{path}.parent"),
        candidates=_strings(m.get("candidates", []), f"{path}.candidates"),
        direction=direction,
        by=_strings(m.get("by", []), f"{path}.by"),
        source=None if source is None else expect_str(source, f"{path}.source"),
        rule=_parse_rule(m.get("rule", {}), f"{path}.rule"),
    )


def _strings(value: object, path: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    return tuple(expect_str(v, f"{path}[{i}]") for i, v in enumerate(expect_list(value, path)))


def _parse_rule(value: object, path: str) -> Rule:
    m = expect_mapping(value, path)
    kind = m.get("kind", "relative_noise")
    if kind not in _RULE_FIELDS:
        raise ConfigError(f"{path}.kind", f"expected one of {list(_RULE_FIELDS)}, got {kind!r}")
    check_keys(m, ["kind", *_RULE_FIELDS[kind]], path)
    args: dict[str, Any] = {}
    for key in _RULE_FIELDS[kind]:
        if key not in m or (key == "margin" and m[key] is None):
            continue
        if key == "adjust":
            if m[key] not in _ADJUST:
                raise ConfigError(
                    f"{path}.adjust", f"expected one of {list(_ADJUST)}, got {m[key]!r}"
                )
            args[key] = m[key]
            continue
        num = expect_number(m[key], f"{path}.{key}", minimum=0)
        if key == "alpha" and not 0 < num < 0.5:
            raise ConfigError(f"{path}.alpha", f"expected a number in (0, 0.5), got {num!r}")
        if key in ("noise", "margin") and not num > 0:
            raise ConfigError(f"{path}.{key}", f"expected a number > 0, got {num!r}")
        args[key] = num
    return RelativeNoiseRule(**args) if kind == "relative_noise" else StatisticalRule(**args)
