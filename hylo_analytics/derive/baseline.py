"""Autobench's ``paired_baseline`` post-derivation: every variant against a baseline variant.

Each case of a variant is matched with the baseline's case that has the same ``match_on``
columns (a case id and/or factor columns such as ``workload.size``), and one of five
formulas turns the two values of ``metric`` into a new, named metric (``speedup``, ...)
carrying its semantic type, unit, direction and role. ``identity`` columns (a case id when
matching on factors only) keep candidate rows apart without being matched on.

A row that cannot be derived never raises halfway and never becomes a silent NaN: it is a
diagnostic row (``on_problem="record"``) or is skipped and counted (``on_problem="skip"``).
Kinds: ``missing_match`` (no baseline case with the same match key), ``ambiguous_match``
(several rows of the metric for one variant and match key), ``absent_metric`` (the case has
no value of the metric, or it is null), ``non_numeric`` (the value is not a number),
``zero_division`` (the formula's denominator is 0), ``non_finite`` (an infinite input or an
overflow would give inf or NaN).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import polars as pl

from hylo_analytics._html import text
from hylo_analytics.contracts import DerivedMetricOutput
from hylo_analytics.errors import InputError, SelectionError

__all__ = [
    "FORMULAS",
    "BaselineResult",
    "DerivedMetricOutput",
    "PairedBaseline",
    "paired_baseline",
]

Formula = Literal[
    "baseline_over_candidate",
    "candidate_over_baseline",
    "candidate_minus_baseline",
    "baseline_minus_candidate",
    "percent_change_from_baseline",
]
_C, _B = pl.col("candidate_value"), pl.col("baseline_value")
FORMULAS: Mapping[str, tuple[pl.Expr, pl.Expr | None]] = {
    # formula -> (value, denominator that must not be 0)
    "baseline_over_candidate": (_B / _C, _C),
    "candidate_over_baseline": (_C / _B, _B),
    "candidate_minus_baseline": (_C - _B, None),
    "baseline_minus_candidate": (_B - _C, None),
    "percent_change_from_baseline": ((_C - _B) / _B * 100.0, _B),
}
DIAGNOSTIC_KINDS = (
    "missing_match",
    "ambiguous_match",
    "absent_metric",
    "non_numeric",
    "zero_division",
    "non_finite",
)


@dataclass(frozen=True)
class BaselineResult:
    """Derived values (one row per variant case) and the rows that could not be derived."""

    values: pl.DataFrame
    diagnostics: pl.DataFrame
    skipped: Mapping[str, int] = field(default_factory=dict)

    def __str__(self) -> str:
        kinds = (
            self.diagnostics["kind"].value_counts(sort=True).rows()
            if self.diagnostics.height
            else []
        )
        rec = ", ".join(f"{k} {n}" for k, n in kinds) or "none"
        skp = ", ".join(f"{k} {n}" for k, n in self.skipped.items() if n) or "none"
        return (
            f"paired_baseline: {self.values.height} derived value(s); "
            f"diagnostics recorded: {rec}; skipped: {skp}\n{self.values}"
        )

    def _repr_html_(self) -> str:
        head = text(str(self).splitlines()[0])
        diag = self.diagnostics._repr_html_() if self.diagnostics.height else ""
        return f"<p>{head}</p>{self.values._repr_html_()}{diag}"


@dataclass(frozen=True)
class PairedBaseline:
    """The ``paired_baseline`` post-derivation spec; :meth:`derive` applies it to a frame."""

    baseline_variant: str
    metric: str
    output: DerivedMetricOutput
    formula: Formula = "baseline_over_candidate"
    match_on: Sequence[str] = ("case_id",)
    # columns naming a candidate row without being matched on (a sample's key and epoch when
    # matching on factors only): each candidate row is derived and kept on its own, while the
    # baseline side stays one case per match key
    identity: Sequence[str] = ()
    include_baseline: bool = True
    on_problem: Literal["skip", "record"] = "record"
    variant_col: str = "variant"
    metric_col: str = "metric"
    value_col: str = "value"

    def derive(self, frame: pl.DataFrame) -> BaselineResult:
        """Derive the output metric for every case of every variant of ``frame`` (long form)."""
        self._validate(frame)
        match = [self.variant_col, *self.match_on]
        keys = [*match, *(c for c in self.identity if c not in match)]
        m = _numeric(frame.filter(pl.col(self.metric_col) == self.metric), self.value_col)

        def sides(by: list[str]) -> pl.DataFrame:
            agg = m.group_by(by).agg(
                pl.len().alias("n_rows"),
                pl.col("num").first(),
                pl.col("raw_null").first(),
                pl.col("bad").first(),
                pl.col("shown").first(),
            )
            return frame.select(by).unique().join(agg, on=by, how="left", nulls_equal=True)

        side = sides(keys)
        base = sides(match) if keys != match else side
        base = base.filter(pl.col(self.variant_col) == self.baseline_variant).drop(self.variant_col)
        base = base.rename({c: f"b_{c}" for c in ("n_rows", "num", "raw_null", "bad", "shown")})
        base = base.with_columns(matched=pl.lit(True))
        cand = side
        if not self.include_baseline:
            cand = side.filter(pl.col(self.variant_col) != self.baseline_variant)
        j = cand.join(base, on=list(self.match_on), how="left", nulls_equal=True)
        j = j.with_columns(candidate_value=pl.col("num"), baseline_value=pl.col("b_num"))
        value, denom = FORMULAS[self.formula]
        j = j.with_columns(_problem(denom, self.formula)).with_columns(value=value)
        # an infinite input (or an overflow) gives inf or NaN: a diagnostic, never a value
        broken = pl.col("kind").is_null() & (
            pl.col("value").is_infinite() | pl.col("value").is_nan()
        ).fill_null(False)
        j = j.with_columns(
            kind=pl.when(broken).then(pl.lit("non_finite")).otherwise("kind"),
            detail=pl.when(broken)
            .then(
                pl.format(
                    "{} of candidate {} and baseline {} is {}",
                    pl.lit(self.formula),
                    pl.col("shown"),
                    pl.col("b_shown"),
                    pl.col("value").cast(pl.String),
                )
            )
            .otherwise("detail"),
        )
        ok = j.filter(pl.col("kind").is_null())
        bad = j.filter(pl.col("kind").is_not_null())
        out = self.output
        values = ok.select(
            *keys,
            pl.lit(out.name).alias("metric"),
            "value",
            "candidate_value",
            "baseline_value",
            pl.lit(self.baseline_variant).alias("baseline_variant"),
            pl.lit(self.metric).alias("source_metric"),
            pl.lit(self.formula).alias("formula"),
            pl.lit(out.semantic_type, pl.String).alias("semantic_type"),
            pl.lit(out.unit, pl.String).alias("unit"),
            pl.lit(out.direction).alias("direction"),
            pl.lit(out.role).alias("role"),
        ).sort(keys, nulls_last=True)
        diags = bad.select(*keys, pl.lit(self.metric).alias("metric"), "kind", "detail").sort(
            keys, nulls_last=True
        )
        counts = dict(diags["kind"].value_counts().rows())
        if self.on_problem == "skip":
            skipped = {k: int(counts.get(k, 0)) for k in DIAGNOSTIC_KINDS}
            return BaselineResult(values, diags.clear(), skipped)
        return BaselineResult(values, diags, {})

    def _validate(self, frame: pl.DataFrame) -> None:
        if self.formula not in FORMULAS:
            raise InputError(f"formula {self.formula!r} is not one of {sorted(FORMULAS)}")
        if self.on_problem not in ("skip", "record"):
            raise InputError(f"on_problem must be 'skip' or 'record', got {self.on_problem!r}")
        if not self.match_on:
            raise InputError("match_on needs at least one column (a case id or factor)")
        need = [self.variant_col, self.metric_col, self.value_col, *self.match_on, *self.identity]
        missing = [c for c in need if c not in frame.columns]
        if missing:
            raise InputError(
                f"paired_baseline: frame lacks column(s) {missing}; it has {frame.columns} "
                "(name the columns with variant_col=, metric_col=, value_col=, match_on=)"
            )
        if frame.filter(pl.col(self.variant_col) == self.baseline_variant).is_empty():
            variants = frame[self.variant_col].unique().sort().to_list()
            raise SelectionError(
                f"baseline variant {self.baseline_variant!r} not in column "
                f"{self.variant_col!r} (variants: {variants})"
            )


def paired_baseline(
    frame: pl.DataFrame,
    *,
    baseline_variant: str,
    metric: str,
    output: DerivedMetricOutput,
    formula: Formula = "baseline_over_candidate",
    match_on: Sequence[str] = ("case_id",),
    identity: Sequence[str] = (),
    include_baseline: bool = True,
    on_problem: Literal["skip", "record"] = "record",
    variant_col: str = "variant",
    metric_col: str = "metric",
    value_col: str = "value",
) -> BaselineResult:
    """Apply a :class:`PairedBaseline` spec given as keyword arguments."""
    spec = PairedBaseline(
        baseline_variant=baseline_variant,
        metric=metric,
        output=output,
        formula=formula,
        match_on=tuple(match_on),
        identity=tuple(identity),
        include_baseline=include_baseline,
        on_problem=on_problem,
        variant_col=variant_col,
        metric_col=metric_col,
        value_col=value_col,
    )
    return spec.derive(frame)


def _numeric(frame: pl.DataFrame, value_col: str) -> pl.DataFrame:
    """``num`` (Float64 or null), ``raw_null`` and ``bad`` (present but not a number)."""
    v = pl.col(value_col)
    dtype = frame.schema[value_col]
    if dtype.is_numeric():
        num = v.cast(pl.Float64)
    elif dtype == pl.String:
        num = v.str.strip_chars().cast(pl.Float64, strict=False)
    else:  # booleans, structs, lists: not a quantity a ratio can be taken of
        num = pl.lit(None, pl.Float64)
    shown = v.cast(pl.String, strict=False) if dtype != pl.Object else pl.lit("<object>")
    return frame.with_columns(
        raw_null=v.is_null(),
        num=num.fill_nan(None),
        shown=shown,
    ).with_columns(bad=~pl.col("raw_null") & pl.col("num").is_null())


def _problem(denom: pl.Expr | None, formula: str) -> list[pl.Expr]:
    """``kind`` and ``detail`` of the first problem of each row (null when derivable)."""

    def absent(p: str) -> pl.Expr:
        return pl.col(f"{p}n_rows").is_null() | pl.col(f"{p}raw_null").fill_null(True)

    zero = pl.lit(False) if denom is None else (denom == 0).fill_null(False)
    kind = (
        pl.when(pl.col("matched").is_null())
        .then(pl.lit("missing_match"))
        .when((pl.col("n_rows") > 1) | (pl.col("b_n_rows") > 1))
        .then(pl.lit("ambiguous_match"))
        .when(absent("") | absent("b_"))
        .then(pl.lit("absent_metric"))
        .when(pl.col("bad") | pl.col("b_bad"))
        .then(pl.lit("non_numeric"))
        .when(zero)
        .then(pl.lit("zero_division"))
    )
    side = (
        pl.when(absent("") | pl.col("bad").fill_null(False))
        .then(pl.lit("candidate"))
        .otherwise(pl.lit("baseline"))
    )
    detail = (
        pl.when(pl.col("matched").is_null())
        .then(pl.lit("no baseline case with this match key"))
        .when((pl.col("n_rows") > 1) | (pl.col("b_n_rows") > 1))
        .then(
            pl.format(
                "{} candidate row(s), {} baseline row(s) of the metric for this match key",
                pl.col("n_rows").fill_null(0),
                pl.col("b_n_rows").fill_null(0),
            )
        )
        .when(absent("") | absent("b_"))
        .then(pl.format("{} has no value", side))
        .when(pl.col("bad") | pl.col("b_bad"))
        .then(
            pl.format(
                "{} value {} is not a number",
                side,
                pl.when(pl.col("bad")).then("shown").otherwise("b_shown"),
            )
        )
        .when(zero)
        .then(pl.lit(f"denominator of {formula} is 0"))
    )
    return [kind.alias("kind"), detail.alias("detail")]
