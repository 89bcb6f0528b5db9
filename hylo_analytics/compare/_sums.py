"""The counts of a comparison: wins, sums and Wilcoxon per (candidate, metric, level, group).

Every figure of a comparison row that is not an interval or a p-value adjustment is a sum over
the pair patterns (``PairedRows.patterns``), weighted by how often each pattern occurs; the
overall rows are sums of the finest groups' (:func:`_up`), never a second pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from hylo_analytics._lazy import LazyModule
from hylo_analytics.compare._counts import PairedRows
from hylo_analytics.metrics import metric_bounds
from hylo_analytics.stats.significance import (
    Alternative,
    mcnemar_p,
    signed_rank_p,
)

if TYPE_CHECKING:
    from scipy import special
else:
    special = LazyModule("scipy.special")


def _levels(frame: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """``frame`` once as level 'overall' (by columns null) and once per ``by`` group."""
    overall = frame.with_columns(
        pl.lit("overall").alias("level"), *[pl.lit(None, frame.schema[b]).alias(b) for b in by]
    )
    if not by:
        return overall
    return pl.concat([overall, frame.with_columns(pl.lit("/".join(by)).alias("level"))])


def _up(fine: pl.DataFrame, by: list[str], sums: list[str], first: list[str]) -> pl.DataFrame:
    """Per-group aggregates plus the overall rows, summed from them (no second pass)."""
    keys = [c for c in fine.columns if c not in (*sums, *first, *by)]
    overall = fine.group_by(keys).agg(pl.col(first).first(), pl.col(sums).sum())
    overall = overall.with_columns(
        pl.lit("overall").alias("level"), *[pl.lit(None, fine.schema[b]).alias(b) for b in by]
    )
    if not by:
        return overall
    per = fine.with_columns(pl.lit("/".join(by)).alias("level"))
    return pl.concat([overall, per], how="diagonal")


_V, _PV, _N = pl.col("v"), pl.col("pv"), pl.col("n")
_OK = _V.is_not_null() & _PV.is_not_null()
_D = _V - _PV


def _sums(pat: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """Per (candidate, metric, by group): the counts and sums of the pairs, weighted by the
    patterns' ``n``, and the range of the values and of the non-zero ``|d|``."""
    matched = pl.col("matched")
    cand_dropped = matched & _V.is_null() & _PV.is_not_null()
    par_dropped = matched & _PV.is_null() & _V.is_not_null()
    ok, d, n = _OK, _D, _N
    nzd = d.filter(ok & (d != 0)).abs()
    # in the patterns' order (sorted in SQL): float sums come out the same on every call
    return pat.group_by(["candidate", "metric", *by], maintain_order=True).agg(
        n_rows=n.sum(),
        n_matched=n.filter(matched).sum(),
        n_pairs=n.filter(ok).sum(),
        n_pos=n.filter(ok & (d > 0)).sum(),
        n_neg=n.filter(ok & (d < 0)).sum(),
        n_11=n.filter(ok & (_V == 1) & (_PV == 1)).sum(),
        n_nonbinary=n.filter(ok & ~(_V.is_in([0.0, 1.0]) & _PV.is_in([0.0, 1.0]))).sum(),
        sum_c=(_V * n).filter(ok).sum(),
        sum_p=(_PV * n).filter(ok).sum(),
        sum_d=(d * n).filter(ok).sum(),
        sum_d2=(d * d * n).filter(ok).sum(),
        n_dropped_candidate=n.filter(cand_dropped).sum(),
        n_dropped_parent=n.filter(par_dropped).sum(),
        n_dropped_both=n.filter(matched & _V.is_null() & _PV.is_null()).sum(),
        sum_pv_cd=(_PV * n).filter(cand_dropped).sum(),
        sum_cv_pd=(_V * n).filter(par_dropped).sum(),
        lo=pl.min_horizontal(_V.min(), _PV.min()),
        hi=pl.max_horizontal(_V.max(), _PV.max()),
        abs_lo=nzd.min(),
        abs_hi=nzd.max(),
    )


def _aggregate(
    rows: PairedRows,
    pat: pl.DataFrame,
    fine: pl.DataFrame,
    parent: str,
    directions: Mapping[str, tuple[str, str | None]],
    alternative: Alternative,
    mid_p: bool,
) -> pl.DataFrame:
    """Counts, means, Wilcoxon and the exact McNemar p-values for every (candidate, metric, level,
    group), from the sums of each finest group (``rows.sums``); the overall rows are sums of
    those."""
    by = list(rows.by)
    gcols = ["candidate", "metric", "level", *by]
    abs_lo, abs_hi = fine.select(pl.col("abs_lo").min(), pl.col("abs_hi").max()).row(0)
    sums = [c for c in fine.columns if c.startswith(("n_", "sum_"))]
    st = _up(fine.select("candidate", "metric", *by, *sums), by, sums, [])
    n_parent = _up(rows.parent_rows(parent), by, ["n_parent"], [])
    st = st.join(n_parent, on=["metric", "level", *by], how="left", nulls_equal=True)
    # the range of the metric's values (either side, any pair): what a dropped value could be
    rng = fine.group_by("metric").agg(pl.col("lo").min(), pl.col("hi").max())
    st = st.join(rng, on="metric", how="left")
    metric = pl.col("metric").cast(pl.String)
    st = _bounded(st, metric, rng["metric"].cast(pl.String).to_list())
    direction = metric.replace_strict(
        {m: dv[0] for m, dv in directions.items()}, default="unknown", return_dtype=pl.String
    )
    source = metric.replace_strict(
        {m: dv[1] for m, dv in directions.items()}, default=None, return_dtype=pl.String
    )
    n = pl.col("n_pairs").cast(pl.Float64)
    known = pl.col("n_pairs") > 0
    down = pl.col("direction") == "minimize"
    st = st.with_columns(direction=direction, direction_source=source).with_columns(
        pl.col("n_pairs").cast(pl.Int64),
        # a win is better in the metric's direction (higher when the direction is unknown)
        candidate_wins=pl.when(down).then("n_neg").otherwise("n_pos").cast(pl.Int64),
        parent_wins=pl.when(down).then("n_pos").otherwise("n_neg").cast(pl.Int64),
        higher_is_better=~down,
        ties=(pl.col("n_pairs") - pl.col("n_pos") - pl.col("n_neg")).cast(pl.Int64),
        n_dropped=(pl.col("n_matched") - pl.col("n_pairs")).cast(pl.Int64),
        # candidate keys the parent lacks, and parent keys the candidate lacks
        n_unmatched=(
            pl.col("n_rows") + pl.col("n_parent").fill_null(0) - 2 * pl.col("n_matched")
        ).cast(pl.Int64),
        is_binary=known & (pl.col("n_nonbinary") == 0),
        mean_candidate=pl.when(known).then(pl.col("sum_c") / n),
        mean_parent=pl.when(known).then(pl.col("sum_p") / n),
        mean_diff=pl.when(known).then(pl.col("sum_d") / n),
        sd_diff=pl.when(n > 1).then(
            ((pl.col("sum_d2") - pl.col("sum_d") ** 2 / n) / (n - 1)).clip(0.0).sqrt()
        ),
    )
    st = _wilcoxon(st, pat, by, (abs_lo, abs_hi), gcols, alternative)
    st = st.drop("n_rows", "n_matched", "n_parent", "sum_c", "sum_p", "sum_d2", "n_nonbinary")
    cw, pw = st["candidate_wins"].to_numpy(), st["parent_wins"].to_numpy()
    unknown = (st["direction"] == "unknown").to_numpy()
    two = mcnemar_p(cw, pw, alternative="two-sided", mid_p=mid_p)
    better = mcnemar_p(cw, pw, alternative="greater", mid_p=mid_p)
    worse = mcnemar_p(pw, cw, alternative="greater", mid_p=mid_p)
    one_sided = alternative == "greater"
    return st.with_columns(
        pl.Series("p_mcnemar", np.where(unknown | (not one_sided), two, better)),
        pl.Series("_mc_worse", np.where(unknown | (not one_sided), two, worse)),
        pl.Series("_mc_two", two),
    )


def _bounded(st: pl.DataFrame, metric: pl.Expr, present: list[str]) -> pl.DataFrame:
    """``lo`` / ``hi`` as the range a dropped value could take: a declared range (a binary
    metric's [0, 1], a minmax normalizer's), else [0, 1] for a metric seen only as 0 and 1
    (one run's 1.0 against an errored parent: the parent's value was 0 or 1, not 1), else
    the values seen; ``_zero_one`` where the metric is 0/1, so its test keeps its name when
    no pair is left."""
    declared = {m: b for m in present if (b := metric_bounds(m)) is not None}
    binary = [m for m, b in declared.items() if b == (0.0, 1.0)]

    def side(i: int) -> pl.Expr:
        return metric.replace_strict({m: b[i] for m, b in declared.items()}, default=None,
                                     return_dtype=pl.Float64)  # fmt: skip

    seen_01 = pl.col("lo").is_in([0.0, 1.0]) & pl.col("hi").is_in([0.0, 1.0])
    return st.with_columns(
        lo=pl.coalesce(side(0), pl.when(seen_01).then(pl.lit(0.0)).otherwise("lo")),
        hi=pl.coalesce(side(1), pl.when(seen_01).then(pl.lit(1.0)).otherwise("hi")),
        _zero_one=metric.is_in(binary) | seen_01.fill_null(False),
    )


def _wilcoxon(
    st: pl.DataFrame,
    pat: pl.DataFrame,
    by: list[str],
    abs_range: tuple[float | None, float | None],
    gcols: list[str],
    alt: Alternative,
) -> pl.DataFrame:
    """``st`` with the Wilcoxon signed-rank p of every group (``wilcoxon_p``).

    The pairs are reduced to tie blocks (one per distinct non-zero ``|d|`` of a group, with
    how many differences share it and how many of them are improvements); the overall blocks
    are sums of the per-group blocks. :func:`~hylo_analytics.stats.signed_rank_p` turns the
    blocks into p-values, equal to ``scipy.stats.wilcoxon`` on the oriented differences. When
    every non-zero ``|d|`` is the same (a binary metric) there is one block per group and no
    pass over the pairs is needed.
    """
    lo, hi = abs_range
    st = st.with_row_index("_gid")
    if lo == hi:  # one |d| value (or none): one block per group
        blocks = st.select(
            "_gid",
            t=pl.col("n_pos") + pl.col("n_neg"),
            npos=pl.col("n_pos"),
            hib=pl.col("higher_is_better"),
        ).filter(pl.col("t") > 0)
    else:
        nz = pat.filter(_OK & (_D != 0))
        fine = nz.group_by(["candidate", "metric", *by, _D.abs().alias("a")]).agg(
            t=_N.sum().cast(pl.Int64), npos=_N.filter(_D > 0).sum().cast(pl.Int64)
        )
        blocks = (
            _up(fine, by, ["t", "npos"], [])
            .join(st.select(*gcols, "_gid", hib="higher_is_better"), on=gcols, nulls_equal=True)
            .sort("_gid", "a")
        )
    improved = pl.when("hib").then("npos").otherwise(pl.col("t") - pl.col("npos"))
    blocks = blocks.with_columns(improved=improved)
    p = signed_rank_p(
        blocks["_gid"].to_numpy(),
        blocks["t"].to_numpy(),
        blocks["improved"].to_numpy(),
        st["n_pairs"].to_numpy(),
        alternative=alt,
    )
    return st.drop("_gid").with_columns(pl.Series("wilcoxon_p", p, dtype=pl.Float64))
