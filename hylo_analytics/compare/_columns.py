"""The columns of a comparison row after its interval: the test, TOST, drops, adjustments.

``p_value`` / ``p_worse`` from the test the row's interval inverts, the equivalence p, what the
dropped pairs could change and why they were dropped, and Holm / BH within each family.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import polars as pl

from hylo_analytics.compare._sums import _OK, _PV, _V, _up
from hylo_analytics.compare.verdicts import Rule
from hylo_analytics.stats.clustered import ClusterRobust
from hylo_analytics.stats.paired import tango_p
from hylo_analytics.stats.significance import (
    Alternative,
    benjamini_hochberg,
    holm,
)

Family = Literal["comparison", "level"]


def _with_test(st: pl.DataFrame, alternative: Alternative) -> pl.DataFrame:
    """``p_value`` / ``p_worse`` / ``p_two_sided`` from the test the row's interval inverts,
    oriented by the metric's direction (two-sided where it is unknown or asked for); the
    exact McNemar (``p_mcnemar``; the sign test for numeric metrics) where there is none."""
    up, down = pl.col("_t_up"), pl.col("_t_down")
    minimize = pl.col("direction") == "minimize"
    two = pl.min_horizontal(pl.lit(1.0), 2 * pl.min_horizontal(up, down))
    better = pl.when(minimize).then(down).otherwise(up)
    worse = pl.when(minimize).then(up).otherwise(down)
    if alternative != "greater":
        better = worse = two
    unknown = pl.col("direction") == "unknown"
    has = up.is_not_null()
    # a 0/1 metric whose pairs were all dropped is still tested as 0/1 pairs are
    zero_one = pl.col("is_binary") | (pl.col("_zero_one") if "_zero_one" in st.columns else False)
    exact = pl.when(zero_one).then(pl.lit("exact mcnemar")).otherwise(pl.lit("sign"))
    return st.with_columns(
        p_value=pl.when(has)
        .then(pl.when(unknown).then(two).otherwise(better))
        .otherwise("p_mcnemar"),
        p_worse=pl.when(has)
        .then(pl.when(unknown).then(two).otherwise(worse))
        .otherwise("_mc_worse"),
        p_two_sided=pl.when(has).then(two).otherwise("_mc_two"),
        test=pl.when(has).then("test").otherwise(exact),
    ).drop("_t_up", "_t_down", "_mc_worse", "_mc_two", "_zero_one", strict=False)


def _with_tost(st: pl.DataFrame, rule: Rule) -> pl.DataFrame:
    """``p_tost``: the larger of the two one-sided score tests of equivalence within the
    rule's margin, for 0/1 metrics (the p that decides "unchanged"; others decide by the
    interval alone); of the two cluster-robust t tests for clustered rows (``ci_se``)."""
    margin = st.select(rule.margin_expr().alias("m"))["m"].to_numpy()
    b, c = st["n_pos"].to_numpy(), st["n_neg"].to_numpy()
    n = st["n_pairs"].to_numpy()
    use = st["is_binary"].to_numpy() & np.isfinite(margin) & (n > 0)
    p = np.full(len(st), np.nan)
    if "ci_se" in st.columns:  # clustered: every row's test is the CR2 t test
        se = st["ci_se"].fill_null(np.nan).to_numpy()
        fit = ClusterRobust(
            mean=st["mean_diff"].fill_null(np.nan).to_numpy(), se=se,
            df=st["ci_df"].fill_null(np.nan).to_numpy(),
            n_clusters=st["n_clusters"].fill_null(0).to_numpy(), n=n.astype(np.float64),
            se_cr1=np.full(len(st), np.nan),
        )  # fmt: skip
        with np.errstate(invalid="ignore"):
            p = np.maximum(fit.p("greater", -margin), fit.p("less", margin))
        p = np.where(np.isfinite(margin) & ~np.isnan(se), p, np.nan)
        use = np.zeros(len(st), dtype=bool)
    if use.any():
        m = margin[use]
        p[use] = np.maximum(
            tango_p(b[use], c[use], n[use], -m, "greater"),
            tango_p(b[use], c[use], n[use], m, "less"),
        )
    return st.with_columns(pl.Series("p_tost", p).fill_nan(None)).drop("n_pos", "n_neg")


def _ci_columns(
    st: pl.DataFrame,
    out: dict[str, npt.NDArray[np.float64]],
    method: npt.NDArray[Any],
    tested: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[Any]],
) -> pl.DataFrame:
    t_up, t_down, test = tested
    return st.with_columns(
        *(pl.Series(k, v, dtype=pl.Float64).fill_nan(None) for k, v in out.items()),
        pl.Series("ci_method", method.tolist(), dtype=pl.String),
        pl.Series("_t_up", t_up, dtype=pl.Float64).fill_nan(None),
        pl.Series("_t_down", t_down, dtype=pl.Float64).fill_nan(None),
        pl.Series("test", test.tolist(), dtype=pl.String),
    )


def _with_drops(
    st: pl.DataFrame, pat: pl.DataFrame, by: list[str], has_reason: bool
) -> pl.DataFrame:
    """What the dropped pairs could change, and why they were dropped.

    ``diff_if_drops_min`` / ``_max``: the mean difference over the pairs plus the dropped
    ones, had every dropped value been the worst / best for the candidate within the range
    of the metric's observed values (0 and 1 for a 0/1 metric).
    """
    gcols = ["candidate", "metric", "level", *by]
    lo, hi = pl.col("lo"), pl.col("hi")
    ncd, npd, nbd = (pl.col(f"n_dropped_{s}") for s in ("candidate", "parent", "both"))
    total = (pl.col("n_pairs") + pl.col("n_dropped")).cast(pl.Float64)
    base = pl.col("sum_d") - pl.col("sum_pv_cd") + pl.col("sum_cv_pd")
    low = (base + ncd * lo - npd * hi + nbd * (lo - hi)) / total
    high = (base + ncd * hi - npd * lo + nbd * (hi - lo)) / total
    up = pl.col("direction") != "minimize"
    drops = pl.col("n_dropped") > 0
    st = st.with_columns(
        pl.col("n_dropped_candidate", "n_dropped_parent", "n_dropped_both").cast(pl.Int64),
        diff_if_drops_min=pl.when(drops & (total > 0)).then(low),
        diff_if_drops_max=pl.when(drops & (total > 0)).then(high),
    )
    if has_reason:
        dropped = pat.filter(pl.col("matched") & ~_OK)
        sides = pl.concat(
            [
                dropped.filter(_V.is_null()).select(
                    "candidate", "metric", *by, "n", side=pl.lit("candidate"), reason="reason"
                ),
                dropped.filter(_PV.is_null()).select(
                    "candidate", "metric", *by, "n", side=pl.lit("parent"), reason="parent_reason"
                ),
            ]
        )
        fine = sides.group_by(
            "candidate", "metric", *by, "side", pl.col("reason").fill_null("(no reason)")
        ).agg(pl.col("n").sum())
        counted = (
            _up(fine, by, ["n"], [])
            .sort("n", "reason", "side", descending=[True, False, False])
            .group_by(gcols, maintain_order=True)
            .agg(
                drop_reasons=pl.format("{}: {} x{}", "side", "reason", pl.col("n").cast(pl.String))
                .head(4)
                .str.join("; ")
            )
        )
        st = st.join(counted, on=gcols, how="left", nulls_equal=True)
    else:
        st = st.with_columns(drop_reasons=pl.lit(None, pl.String))
    one_side = pl.max_horizontal(ncd, npd)
    unbalanced = (ncd + npd >= 3) & (one_side >= 0.75 * (ncd + npd)) & (ncd != npd)
    worst = pl.when(up).then("diff_if_drops_min").otherwise("diff_if_drops_max")
    best = pl.when(up).then("diff_if_drops_max").otherwise("diff_if_drops_min")
    note = pl.format(
        "{} pair(s) dropped ({} candidate, {} parent, {} both abstained): had they counted, "
        "the difference would lie between {} (worst for the candidate) and {} (best)",
        pl.col("n_dropped").cast(pl.String),
        ncd.cast(pl.String),
        npd.cast(pl.String),
        nbd.cast(pl.String),
        worst.round_sig_figs(3).cast(pl.String),
        best.round_sig_figs(3).cast(pl.String),
    )
    warn = pl.format(
        "; unbalanced: the {} abstained far more often, so the comparison may be biased",
        pl.when(ncd > npd).then(pl.lit("candidate")).otherwise(pl.lit("parent")),
    )
    return st.with_columns(
        drop_note=pl.when(drops).then(
            pl.when(unbalanced).then(pl.concat_str(note, warn)).otherwise(note)
        )
    ).drop("lo", "hi", "sum_d", "sum_pv_cd", "sum_cv_pd")


def _family_keys(family: Family) -> list[str]:
    """The columns whose values name a row's multiple-comparison family."""
    return ["level"] if family == "level" else ["candidate", "metric", "level"]


def _adjust(out: pl.DataFrame, family: Family, by: list[str]) -> pl.DataFrame:
    """Holm and BH adjusted p-values in each direction, within each family.

    Implemented in numpy (and tested equal to statsmodels' ``multipletests``), because
    ``multipletests(method="holm")`` runs ``gc.collect()``, which costs more than the rest.
    """
    keys = _family_keys(family)
    # integer labels (the families' codes): sorting millions of strings cost seconds
    label = pl.concat_str(keys, separator="\x1f").cast(pl.Categorical).to_physical()
    fam = out.select(label.alias("f"))["f"].to_numpy().astype(np.int64)
    rows = pl.when(pl.col("level") == "overall").then(pl.lit("overall")).otherwise("level")
    whose = "every candidate's" if family == "level" else "this comparison's"
    out = out.with_columns(
        family=pl.format("{} {} row(s)", pl.lit(whose), rows),
    )
    p, w = out["p_value"].to_numpy(), out["p_worse"].to_numpy()
    return out.with_columns(
        pl.Series("p_holm", holm(p, fam), dtype=pl.Float64),
        pl.Series("p_worse_holm", holm(w, fam), dtype=pl.Float64),
        pl.Series("p_bh", benjamini_hochberg(p, fam), dtype=pl.Float64),
        pl.Series("p_worse_bh", benjamini_hochberg(w, fam), dtype=pl.Float64),
    )
