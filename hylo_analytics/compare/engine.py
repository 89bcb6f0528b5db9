"""The paired-comparison engine: every candidate run against one parent, as one join.

:func:`compare_scores` works on a long scores frame (``run_id, key, metric, value`` plus any
``by`` columns), so it is usable on data that never went through a store;
:func:`~hylo_analytics.compare.compare_runs` (``Store.compare``) reads the resolved scores,
applies the comparability gate and calls it, and
:func:`~hylo_analytics.compare.paired_compare` is its two-run case. One tidy frame comes back:
one row per (candidate, metric) overall and one per ``by`` group, with wins, the McNemar p,
Holm and Benjamini-Hochberg adjusted p-values across every row of the call, the mean
difference with its CI, a Wilcoxon p and a verdict. Every statistic is
:mod:`hylo_analytics.stats`'; this module only lays the pairs out for it.

The key is the unit: several epochs of one key are reduced (by their mean, as in the SQL view
``int_key_scores``) before pairing, unless ``pair_on_epoch``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np
import polars as pl

from hylo_analytics.compare.verdicts import RelativeNoiseRule, StatisticalRule, add_verdicts
from hylo_analytics.metrics import Direction, default_registry
from hylo_analytics.stats.bootstrap import DEFAULT_RESAMPLES, bootstrap_ci
from hylo_analytics.stats.intervals import DEFAULT_LEVEL, z_value
from hylo_analytics.stats.significance import (
    Alternative,
    benjamini_hochberg,
    holm,
    mcnemar_p,
    signed_rank_p,
)

__all__ = ["COLUMNS", "CiMethod", "Reducer", "compare_scores"]

Reducer = Literal["mean", "max", "min"]
CiMethod = Literal["bootstrap", "normal", "none"]
_REDUCERS = ("mean", "max", "min")
COLUMNS = (
    "direction",
    "n_pairs",
    "candidate_wins",
    "parent_wins",
    "ties",
    "n_dropped",
    "n_unmatched",
    "p_value",
    "p_holm",
    "p_bh",
    "mean_candidate",
    "mean_parent",
    "mean_diff",
    "ci_low",
    "ci_high",
    "wilcoxon_p",
    "p_two_sided",
    "p_verdict",
    "verdict",
    "verdict_rule",
)


def compare_scores(
    scores: pl.DataFrame,
    *,
    candidates: Sequence[str] | str,
    parent: str,
    metrics: Sequence[str] | None = None,
    by: Sequence[str] = (),
    reducer: Reducer | None = "mean",
    pair_on_epoch: bool = False,
    alternative: Alternative = "greater",
    mid_p: bool = False,
    directions: Mapping[str, Direction] | None = None,
    ci: CiMethod = "bootstrap",
    n_resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: int = 0,
    rule: RelativeNoiseRule | StatisticalRule | None = None,
    verdict_p: Literal["holm", "bh", "raw"] = "holm",
    forced: Mapping[str, str] | None = None,
) -> pl.DataFrame:
    """Compare every candidate with ``parent`` on the keys they share, overall and per ``by``.

    Parameters
    ----------
    scores : one row per (run_id, key[, epoch], metric) with a nullable ``value``; with a
        ``source`` column, one source per key (resolve first: several sources are refused).
    reducer : how several epochs of one key are reduced before pairing (default ``mean``, the
        rule of ``int_key_scores``); ``None`` refuses duplicates with an error (never "the
        last one wins"). Abstentions are ignored by the reducer; a key whose epochs all
        abstained stays an abstention.
    pair_on_epoch : pair on (key, epoch) instead of reducing epochs.
    directions : metric -> "maximize" | "minimize"; built-ins and "maximize" otherwise.
    ci : "bootstrap" (paired percentile bootstrap, ``n_resamples``, ``seed``), "normal"
        (mean ± z·sd/√n) or "none"; at ``level``.
    rule : the verdict rule (default :class:`StatisticalRule`); rule 2 uses ``p_verdict``, the
        two-sided McNemar p adjusted by ``verdict_p`` across the call.
    forced : candidate -> what the gate found different, for candidates compared anyway.
    """
    cands = [candidates] if isinstance(candidates, str) else list(candidates)
    if parent in cands:
        raise ValueError(f"parent {parent!r} is also listed as a candidate")
    pk = ["key", "epoch"] if pair_on_epoch else ["key"]
    by = list(by)
    _check_columns(scores, ["run_id", "metric", "value", *pk, *by])
    _check_one_source(scores, pk)
    frame = scores.lazy().filter(pl.col("run_id").is_in([*cands, parent]))
    if metrics is not None:
        frame = frame.filter(pl.col("metric").is_in(list(metrics)))
    cols = list(dict.fromkeys(["run_id", *pk, "metric", *by]))
    # categorical ids: grouping and joining on integers instead of hashing strings
    cat = [c for c in cols if scores.schema[c] == pl.String]
    lazy = frame.select(*cols, pl.col("value").cast(pl.Float64).fill_nan(None))
    ids = lazy.with_columns(pl.col(cat).cast(pl.Categorical)).collect()
    pairs, par = _pairs(_reduce(ids, [*pk, "metric"], by, reducer, pk), cands, parent, pk)
    out = _aggregate(
        pairs, par, by, directions or {}, alternative, mid_p, (ci, n_resamples, level, seed)
    )
    out = out.with_columns(
        pl.col(c).cast(pl.String) for c in ["candidate", "metric", *by] if c in [*cat, "candidate"]
    )
    out = _adjust(out, verdict_p)
    out = add_verdicts(out, rule or StatisticalRule())
    forced = forced or {}
    out = out.with_columns(
        pl.lit(parent).alias("parent"),
        pl.lit(alternative).alias("alternative"),
        pl.lit(mid_p).alias("mid_p"),
        pl.col("candidate").is_in(list(forced)).alias("forced"),
        pl.col("candidate")
        .replace_strict(forced, default=None, return_dtype=pl.String)
        .alias("gate_note"),
    )
    first = ["candidate", "parent", "metric", "level", *by, *COLUMNS]
    return out.select(*first, pl.exclude(first)).sort(
        "candidate", "metric", "level", *by, nulls_last=False
    )


def _check_columns(frame: pl.DataFrame, needed: list[str]) -> None:
    missing = [c for c in dict.fromkeys(needed) if c not in frame.columns]
    if missing:
        raise ValueError(f"scores frame lacks column(s) {missing}; it has {frame.columns}")


def _check_one_source(frame: pl.DataFrame, pk: list[str]) -> None:
    """Two sources of one key are two scorers, not two epochs: never average them."""
    if "source" not in frame.columns:
        return
    many = frame.group_by("run_id", *pk, "metric").agg(n=pl.col("source").n_unique())
    bad = many.filter(pl.col("n") > 1)
    if bad.height:
        ex = bad.row(0, named=True)
        raise ValueError(
            f"{bad.height} (run, key, metric) combination(s) have scores of several sources, "
            f"e.g. run {ex['run_id']!r} key {ex['key']!r} metric {ex['metric']!r}; read the "
            "resolved scores (hylo_analytics.resolution) or filter one source first"
        )


def _reduce(
    frame: pl.DataFrame, ident: list[str], by: list[str], reducer: Reducer | None, pk: list[str]
) -> pl.DataFrame:
    """One row per (run, pair key, metric): refuse duplicates or reduce them explicitly."""
    group = ["run_id", *ident]
    if reducer is not None and reducer not in _REDUCERS:
        raise ValueError(f"reducer must be one of {_REDUCERS} (never first/last), got {reducer!r}")
    ids = [
        pl.col(c).to_physical() if frame.schema[c] == pl.Categorical else pl.col(c) for c in group
    ]
    # a 64-bit row hash settles the common case (no duplicates) in one cheap pass; a hash
    # collision only costs the exact check below
    if frame.select(pl.struct(ids).hash(0).n_unique()).item() == frame.height:
        return frame
    counts = frame.group_by(group).len().filter(pl.col("len") > 1)
    if counts.is_empty():
        return frame
    if reducer is None:
        ex = counts.row(0, named=True)
        raise ValueError(
            f"{counts.height} (run, key, metric) combination(s) have several rows (epochs), "
            f"e.g. run {ex['run_id']!r} key {ex['key']!r} metric {ex['metric']!r}: "
            f"{ex['len']} rows. Choose reducer='mean'|'max'|'min', or pair_on_epoch=True."
        )
    value = getattr(pl.col("value"), reducer)()
    extra = [pl.col(b).first() for b in by if b not in pk]
    return frame.group_by(group).agg(value, *extra)


def _pairs(
    frame: pl.DataFrame, cands: list[str], parent: str, pk: list[str]
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Candidate rows joined with the parent's value of the same key; and the parent's rows.

    Differences stay raw (candidate - parent); the metric's direction is applied per group
    in :func:`_aggregate`, so no per-row work depends on it.
    """
    par = frame.filter(pl.col("run_id") == parent).drop("run_id")
    cand = frame.filter(pl.col("run_id") != parent).rename({"run_id": "candidate"})
    missing = set(cands) - set(cand["candidate"].unique().cast(pl.String))
    if missing:
        raise ValueError(f"candidate(s) {sorted(missing)} have no scores to compare")
    right = par.select(*pk, "metric", pl.col("value").alias("parent_value"), matched=pl.lit(True))
    pairs = cand.join(right, on=[*pk, "metric"], how="left").with_columns(
        matched=pl.col("matched").fill_null(False),
        both=pl.col("value").is_not_null() & pl.col("parent_value").is_not_null(),
        diff=pl.col("value") - pl.col("parent_value"),
    )
    return pairs, par


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


def _aggregate(
    pairs: pl.DataFrame,
    par: pl.DataFrame,
    by: list[str],
    directions: Mapping[str, Direction],
    alternative: Alternative,
    mid_p: bool,
    interval: tuple[CiMethod, int, float, int],
) -> pl.DataFrame:
    """Counts, means, Wilcoxon, CI and McNemar p for every (candidate, metric, level, group).

    One pass over the pairs per finest group; the overall rows are sums of those.
    """
    gcols = ["candidate", "metric", "level", *by]
    ok, d = pl.col("both"), pl.col("diff")
    sums = {
        "n_rows": pl.len(),
        "n_matched": pl.col("matched").sum(),
        "n_pairs": ok.sum(),
        "n_pos": (ok & (d > 0)).sum(),
        "n_neg": (ok & (d < 0)).sum(),
        "sum_c": pl.col("value").filter(ok).sum(),
        "sum_p": pl.col("parent_value").filter(ok).sum(),
        "sum_d": d.filter(ok).sum(),
        "sum_d2": (d * d).filter(ok).sum(),
    }
    fine = pairs.group_by(["candidate", "metric", *by]).agg(**sums)
    st = _up(fine, by, list(sums), [])
    n_parent = _levels(par, by).group_by(["metric", "level", *by]).agg(n_parent=pl.len())
    st = st.join(n_parent, on=["metric", "level", *by], how="left", nulls_equal=True)
    dirs = {**default_registry().directions(), **directions}
    hib = pl.col("metric").cast(pl.String).replace_strict(dirs, default="maximize") == "maximize"
    n = pl.col("n_pairs").cast(pl.Float64)
    known = pl.col("n_pairs") > 0
    st = st.with_columns(higher_is_better=hib).with_columns(
        pl.col("n_pairs").cast(pl.Int64),
        candidate_wins=pl.when("higher_is_better").then("n_pos").otherwise("n_neg").cast(pl.Int64),
        parent_wins=pl.when("higher_is_better").then("n_neg").otherwise("n_pos").cast(pl.Int64),
        ties=(pl.col("n_pairs") - pl.col("n_pos") - pl.col("n_neg")).cast(pl.Int64),
        n_dropped=(pl.col("n_matched") - pl.col("n_pairs")).cast(pl.Int64),
        # candidate keys the parent lacks, and parent keys the candidate lacks
        n_unmatched=(
            pl.col("n_rows") + pl.col("n_parent").fill_null(0) - 2 * pl.col("n_matched")
        ).cast(pl.Int64),
        mean_candidate=pl.when(known).then(pl.col("sum_c") / n),
        mean_parent=pl.when(known).then(pl.col("sum_p") / n),
        mean_diff=pl.when(known).then(pl.col("sum_d") / n),
        sd_diff=pl.when(n > 1).then(
            ((pl.col("sum_d2") - pl.col("sum_d") ** 2 / n) / (n - 1)).clip(0.0).sqrt()
        ),
        direction=pl.when("higher_is_better")
        .then(pl.lit("maximize"))
        .otherwise(pl.lit("minimize")),
    )
    st = _wilcoxon(st, pairs, by, gcols, alternative)
    st = st.drop("n_rows", "n_matched", "n_parent", "n_pos", "n_neg")
    st = st.drop("sum_c", "sum_p", "sum_d", "sum_d2")
    st = _with_ci(st, pairs, by, gcols, *interval)
    cw, pw = st["candidate_wins"].to_numpy(), st["parent_wins"].to_numpy()
    return st.with_columns(
        pl.Series("p_value", mcnemar_p(cw, pw, alternative=alternative, mid_p=mid_p)),
        pl.Series("p_two_sided", mcnemar_p(cw, pw, alternative="two-sided", mid_p=mid_p)),
    ).drop("sd_diff")


def _wilcoxon(
    st: pl.DataFrame, pairs: pl.DataFrame, by: list[str], gcols: list[str], alt: Alternative
) -> pl.DataFrame:
    """``st`` with the Wilcoxon signed-rank p of every group (``wilcoxon_p``).

    The pairs are reduced to tie blocks (one per distinct non-zero ``|d|`` of a group, with
    how many differences share it and how many of them are improvements); the overall blocks
    are sums of the per-group blocks. :func:`~hylo_analytics.stats.signed_rank_p` turns the
    blocks into p-values, equal to ``scipy.stats.wilcoxon`` on the oriented differences. When
    every non-zero ``|d|`` is the same (a binary metric) there is one block per group and no
    pass over the pairs is needed.
    """
    d = pl.col("diff")
    nzd = d.filter(pl.col("both") & (d != 0)).abs()
    lo, hi = pairs.select(nzd.min().alias("lo"), nzd.max().alias("hi")).row(0)
    st = st.with_row_index("_gid")
    if lo == hi:  # one |d| value (or none): one block per group
        blocks = st.select(
            "_gid",
            t=pl.col("n_pos") + pl.col("n_neg"),
            npos=pl.col("n_pos"),
            hib=pl.col("higher_is_better"),
        ).filter(pl.col("t") > 0)
    else:
        nz = pairs.filter(pl.col("both") & (d != 0))
        fine = nz.group_by(["candidate", "metric", *by, d.abs().alias("a")]).agg(
            t=pl.len().cast(pl.Int64), npos=(d > 0).sum().cast(pl.Int64)
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


def _with_ci(
    st: pl.DataFrame,
    pairs: pl.DataFrame,
    by: list[str],
    gcols: list[str],
    ci: CiMethod,
    n_resamples: int,
    level: float,
    seed: int,
) -> pl.DataFrame:
    if ci == "none":
        return st.with_columns(ci_low=pl.lit(None, pl.Float64), ci_high=pl.lit(None, pl.Float64))
    if ci == "normal":
        half = z_value(level) * pl.col("sd_diff").fill_null(0.0) / pl.col("n_pairs").sqrt()
        known = pl.col("n_pairs") > 0
        return st.with_columns(
            ci_low=pl.when(known).then(pl.col("mean_diff") - half),
            ci_high=pl.when(known).then(pl.col("mean_diff") + half),
        )
    if ci != "bootstrap":
        raise ValueError(f"ci must be 'bootstrap', 'normal' or 'none', got {ci!r}")
    # the paired differences of every group back to back, in the order of st's rows
    st = st.with_row_index("_gid")
    d = _levels(pairs.filter("both"), by)
    d = d.join(st.select(*gcols, "_gid"), on=gcols, nulls_equal=True).sort("_gid")
    sizes = np.bincount(d["_gid"].to_numpy(), minlength=st.height)
    lo, hi = bootstrap_ci(
        d["diff"].to_numpy(), sizes, level=level, n_resamples=n_resamples, seed=seed
    )
    return st.drop("_gid").with_columns(
        pl.Series("ci_low", lo).fill_nan(None), pl.Series("ci_high", hi).fill_nan(None)
    )


def _adjust(out: pl.DataFrame, verdict_p: str) -> pl.DataFrame:
    """Holm and BH adjusted p-values across every test of the call, and the verdict's p.

    Implemented in numpy (and tested equal to statsmodels' ``multipletests``), because
    ``multipletests(method="holm")`` runs ``gc.collect()``, which costs more than the rest.
    """
    p, p2 = out["p_value"].to_numpy(), out["p_two_sided"].to_numpy()
    adjust = {"holm": holm, "bh": benjamini_hochberg}
    pv = p2 if verdict_p == "raw" else adjust[verdict_p](p2)
    return out.with_columns(
        pl.Series("p_holm", holm(p), dtype=pl.Float64),
        pl.Series("p_bh", benjamini_hochberg(p), dtype=pl.Float64),
        pl.Series("p_verdict", pv, dtype=pl.Float64),
    )
