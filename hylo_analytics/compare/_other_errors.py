"""The verdict under the other errors policy, so a verdict that rests on harness errors says so.

An errored key (a timeout, a crash before the first step) is a failure under ``failure`` and a
drop under ``exclude`` (:mod:`hylo_analytics._harness`). A verdict computed under one may not
hold under the other: X-VLA "improves" on pi0.5 on libero_spatial only because pi0.5's 30
timeouts count as failures. So every comparison row carries how many of each side's keys are
harness errors and, where there are any, the verdict, difference and p under the other policy
(issue 40), computed rather than guessed: the pairs' patterns carry each side's errored flag
(``PairedRows.has_errored``), so the other policy's patterns are a relabelling of the same
small frame (an errored 0 back to an abstention, or an errored abstention of a 0/1 metric to
0), and its statistics the engine's own. Only a key some of whose epochs errored (and others
not) has no exact relabelling; the engine then pairs the scores a second time.
"""

from __future__ import annotations

import polars as pl

from hylo_analytics.compare._sums import _up
from hylo_analytics.metrics import metric_bounds

__all__ = ["OTHER_COLUMNS", "other_patterns", "other_policy", "with_other"]

#: The columns a comparison row gains (null where no side errored).
OTHER_COLUMNS = ("n_errored_candidate", "n_errored_parent", "errors_other", "verdict_other",
                 "mean_diff_other", "p_verdict_other", "errors_note")  # fmt: skip


def other_policy(applied: str) -> str:
    """The policy a verdict is checked against: ``exclude`` for one under ``failure`` (or a
    mix of conventions), ``failure`` for one under ``exclude``."""
    return "exclude" if applied in ("failure", "mixed") else "failure"


def other_patterns(pat: pl.DataFrame, other: str) -> pl.DataFrame:
    """``pat`` (``PairedRows.patterns``) as the other policy pairs the same keys."""
    v, pv = pl.col("v"), pl.col("pv")
    c_err, p_err = pl.col("c_err"), pl.col("p_err")
    if other == "exclude":
        v2 = pl.when(c_err).then(None).otherwise(v)
        pv2 = pl.when(p_err).then(None).otherwise(pv)
    else:  # an errored abstention of a 0/1 metric is a failure, per run as _prepare decides
        metrics = pat["metric"].cast(pl.String).unique().to_list()
        binary = [m for m in metrics if metric_bounds(m) == (0.0, 1.0)]
        declared = [m for m in metrics if metric_bounds(m) is not None]
        metric = pl.col("metric").cast(pl.String)

        def zero_one(value: pl.Expr, over: list[str]) -> pl.Expr:
            seen = value.is_in([0.0, 1.0]) | value.is_null()
            undeclared = ~metric.is_in(declared)
            return metric.is_in(binary) | (undeclared & seen.all().over(over))

        v2 = (
            pl.when(c_err & v.is_null() & zero_one(v, ["candidate", "metric"]))
            .then(pl.lit(0.0))
            .otherwise(v)
        )
        pv2 = (
            pl.when(p_err & pv.is_null() & zero_one(pv, ["metric"])).then(pl.lit(0.0)).otherwise(pv)
        )
    ok = pl.col("v").is_not_null() & pl.col("pv").is_not_null()
    keys = [c for c in pat.columns if c not in ("v", "pv", "reason", "parent_reason", "n")]
    return (
        pat.with_columns(v=v2, pv=pv2)
        .with_columns(
            reason=pl.when(~ok).then(
                pl.coalesce("reason", pl.when(c_err).then(pl.lit("harness error")))
            ),
            parent_reason=pl.when(~ok).then(
                pl.coalesce("parent_reason", pl.when(p_err).then(pl.lit("harness error")))
            ),
        )
        .group_by([*keys, "v", "pv", "reason", "parent_reason"], maintain_order=True)
        .agg(pl.col("n").sum())
        .sort(pl.all(), nulls_last=False)
        .select(pat.columns)
    )


def errored_counts(pat: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """Per (candidate, metric, level, ``by``): the candidate's errored keys and the parent's
    errored keys among those the candidate has."""
    fine = pat.group_by(["candidate", "metric", *by], maintain_order=True).agg(
        n_errored_candidate=pl.col("n").filter("c_err").sum().cast(pl.Int64),
        n_errored_parent=pl.col("n").filter(pl.col("p_err") & pl.col("matched")).sum()
        .cast(pl.Int64),
    )  # fmt: skip
    return _up(fine, by, ["n_errored_candidate", "n_errored_parent"], [])


def with_other(
    out: pl.DataFrame, counts: pl.DataFrame, alt: pl.DataFrame | None, by: list[str],
    applied: str,
) -> pl.DataFrame:  # fmt: skip
    """``out`` with :data:`OTHER_COLUMNS`: the errored counts, and ``alt`` (the same rows
    under the other policy, or None when no key errored) joined beside the verdict."""
    keys = ["candidate", "metric", "level", *by]
    out = out.join(counts, on=keys, how="left", nulls_equal=True, maintain_order="left")
    out = out.with_columns(pl.col("n_errored_candidate", "n_errored_parent").fill_null(0))
    some = (pl.col("n_errored_candidate") + pl.col("n_errored_parent")) > 0
    other = other_policy(applied)
    if alt is None:
        alt = out.select(keys).with_columns(
            verdict_other=pl.lit(None, pl.String), mean_diff_other=pl.lit(None, pl.Float64),
            p_verdict_other=pl.lit(None, pl.Float64),
        )  # fmt: skip
    else:
        alt = alt.select(*keys, verdict_other="verdict", mean_diff_other="mean_diff",
                         p_verdict_other="p_verdict")  # fmt: skip
    out = out.join(alt, on=keys, how="left", nulls_equal=True, maintain_order="left")
    total = pl.col("n_errored_candidate") + pl.col("n_errored_parent")
    counts_text = pl.format("{} candidate / {} parent", "n_errored_candidate",
                            "n_errored_parent")  # fmt: skip
    how = {"failure": "counted as failures", "exclude": "left out"}.get(
        applied, "as each run's harness counts them"
    )
    differs = pl.format(
        "the verdict rests on harness errors: {} errored key(s) ({}) {} under errors='{}'"
        "; under errors='{}' it is {} (difference {}, p {})",
        total, counts_text, pl.lit(how), pl.lit(applied), pl.lit(other), pl.col("verdict_other"),
        pl.col("mean_diff_other").round_sig_figs(3), pl.col("p_verdict_other").round_sig_figs(3),
    )  # fmt: skip
    same = pl.format(
        "{} errored key(s) ({}); the verdict is the same under errors='{}'",
        total, counts_text, pl.lit(other),
    )  # fmt: skip
    return out.with_columns(
        errors_other=pl.when(some).then(pl.lit(other)),
        verdict_other=pl.when(some).then("verdict_other"),
        mean_diff_other=pl.when(some).then("mean_diff_other"),
        p_verdict_other=pl.when(some).then("p_verdict_other"),
        errors_note=pl.when(some & pl.col("verdict_other").ne_missing(pl.col("verdict")))
        .then(differs)
        .when(some)
        .then(same),
    )
