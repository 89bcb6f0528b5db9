"""Many paired comparisons at once: every candidate run against one parent, as one join.

:func:`compare_scores` works on a long scores frame (``run_id, key, metric, value`` plus any
``by`` columns), so it is usable on data that never went through a store;
:func:`compare_runs` (``Store.compare``) reads ``stg_scores`` of one ``source``, applies the
comparability gate, and delegates. One tidy frame comes back: one row per (candidate,
metric) overall and one per ``by`` group, with wins, the McNemar p, Holm and
Benjamini-Hochberg adjusted p-values across every row of the call, the mean difference with
its CI, a Wilcoxon p and a verdict.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Literal

import numpy as np
import polars as pl
from scipy import stats
from statsmodels.stats.multitest import multipletests

from hylo_analytics.compare import (
    BUILTIN_DIRECTIONS,
    Alternative,
    Direction,
    bootstrap_mean_ci,
    mcnemar_p,
)
from hylo_analytics.verdicts import RelativeNoiseRule, StatisticalRule, add_verdicts

if TYPE_CHECKING:
    from hylo_analytics.store import Store

__all__ = ["ComparabilityError", "compare_runs", "compare_scores"]

Reducer = Literal["mean", "max", "min"]
CiMethod = Literal["bootstrap", "normal", "none"]
_REDUCERS = ("mean", "max", "min")
_GATE_FIELDS = ("benchmark_digest", "split")
_COLUMNS = (
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


class ComparabilityError(ValueError):
    """Runs that measure different things were asked to be compared (see ``force``)."""


def compare_scores(
    scores: pl.DataFrame,
    *,
    candidates: Sequence[str] | str,
    parent: str,
    metrics: Sequence[str] | None = None,
    by: Sequence[str] = (),
    reducer: Reducer | None = None,
    pair_on_epoch: bool = False,
    alternative: Alternative = "greater",
    mid_p: bool = False,
    directions: Mapping[str, Direction] | None = None,
    ci: CiMethod = "bootstrap",
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    rule: RelativeNoiseRule | StatisticalRule | None = None,
    verdict_p: Literal["holm", "bh", "raw"] = "holm",
    forced: Mapping[str, str] | None = None,
) -> pl.DataFrame:
    """Compare every candidate with ``parent`` on the keys they share, overall and per ``by``.

    Parameters
    ----------
    scores : one row per (run_id, key[, epoch], metric) with a nullable ``value``.
    reducer : how several epochs of one key are reduced before pairing; ``None`` refuses
        duplicates with an error (never "the last one wins"). Abstentions are ignored by the
        reducer; a key whose epochs all abstained stays an abstention.
    pair_on_epoch : pair on (key, epoch) instead of reducing epochs.
    directions : metric -> "maximize" | "minimize"; built-ins and "maximize" otherwise.
    ci : "bootstrap" (paired, seeded), "normal" (mean ± z·sd/√n) or "none".
    rule : the verdict rule (default :class:`StatisticalRule`); rule 2 uses ``p_verdict``, the
        two-sided McNemar p adjusted by ``verdict_p`` across the call.
    forced : candidate -> what the gate found different, for candidates compared anyway.
    """
    cands = [candidates] if isinstance(candidates, str) else list(candidates)
    if parent in cands:
        raise ValueError(f"parent {parent!r} is also listed as a candidate")
    pair_keys = ["key", "epoch"] if pair_on_epoch else ["key"]
    _check_columns(scores, ["run_id", "metric", "value", *pair_keys, *by])
    frame = scores.lazy().filter(pl.col("run_id").is_in([*cands, parent]))
    if metrics is not None:
        frame = frame.filter(pl.col("metric").is_in(list(metrics)))
    cols = ["run_id", *pair_keys, "metric", *[b for b in by if b not in pair_keys]]
    frame = frame.select(*cols, pl.col("value").cast(pl.Float64).fill_nan(None))
    frame = _reduce(frame.collect(), [*pair_keys, "metric"], list(by), reducer, pair_keys)
    pairs = _pairs(frame, cands, parent, pair_keys, list(by), directions or {})
    out = _aggregate(pairs, list(by), alternative, mid_p, ci, n_boot, confidence, seed)
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
    first = ["candidate", "parent", "metric", "level", *by, *_COLUMNS]
    return out.select(*first, pl.exclude(first)).sort(
        "candidate", "metric", "level", *by, nulls_last=False
    )


def compare_runs(
    store: Store,
    candidates: Sequence[str] | str,
    parent: str,
    *,
    metrics: Sequence[str] | None = ("success",),
    by: Sequence[str] = (),
    source: str = "evallog",
    force: bool = False,
    **options: object,
) -> pl.DataFrame:
    """:func:`compare_scores` on the store's current scores of ``source``, behind the gate.

    The gate refuses runs whose benchmark digest, split or scorer version (per metric) differ
    from the parent's, naming what differs; ``force=True`` compares them anyway and marks
    their rows ``forced`` with the difference in ``gate_note``.
    """
    cands = [candidates] if isinstance(candidates, str) else list(candidates)
    runs = [*cands, parent]
    scores = store.sql(
        "SELECT * FROM stg_scores WHERE source = $source AND list_contains($runs, run_id)"
        + ("" if metrics is None else " AND list_contains($metrics, metric)"),
        {"source": source, "runs": runs} | ({} if metrics is None else {"metrics": list(metrics)}),
    )
    meta = store.sql(
        "SELECT run_id, benchmark_digest, split FROM stg_runs WHERE list_contains($runs, run_id)",
        {"runs": runs},
    )
    missing = sorted(set(runs) - set(meta["run_id"]))
    if missing:
        raise ValueError(f"no run(s) {missing} in the store (see 'hylo-analytics runs')")
    if scores.filter(pl.col("run_id") == parent).is_empty():
        raise ValueError(f"parent {parent!r} has no scores of source {source!r} for {metrics}")
    problems = _gate(meta, scores, cands, parent)
    if problems and not force:
        detail = "; ".join(f"{c}: {why}" for c, why in problems.items())
        raise ComparabilityError(
            f"refusing to compare with parent {parent!r}: {detail}. "
            "Pass force=True (--force) to compare anyway; the rows are then marked forced."
        )
    return compare_scores(
        scores,
        candidates=cands,
        parent=parent,
        metrics=metrics,
        by=by,
        forced=problems,
        **options,  # type: ignore[arg-type]
    )


def _gate(
    meta: pl.DataFrame, scores: pl.DataFrame, cands: list[str], parent: str
) -> dict[str, str]:
    """Candidate -> what differs from the parent (benchmark digest, split, scorer versions)."""
    versions = scores.group_by("run_id", "metric").agg(
        pl.col("scorer_version").drop_nulls().unique().sort().str.join(",").alias("v")
    )
    by_run = {r["run_id"]: r for r in meta.iter_rows(named=True)}  # one row per run (metadata)
    ver = {(r, m): v for r, m, v in versions.iter_rows()}
    out: dict[str, str] = {}
    for c in cands:
        diffs = [
            f"{f} {by_run[c][f]!r} != parent's {by_run[parent][f]!r}"
            for f in _GATE_FIELDS
            if by_run[c][f] != by_run[parent][f]
        ]
        for (run, metric), v in sorted(ver.items()):
            pv = ver.get((parent, metric))
            if run == c and pv is not None and v != pv:
                diffs.append(f"scorer_version of {metric!r} {v!r} != parent's {pv!r}")
        if diffs:
            out[c] = ", ".join(diffs)
    return out


def _check_columns(frame: pl.DataFrame, needed: list[str]) -> None:
    missing = [c for c in dict.fromkeys(needed) if c not in frame.columns]
    if missing:
        raise ValueError(f"scores frame lacks column(s) {missing}; it has {frame.columns}")


def _reduce(
    frame: pl.DataFrame, ident: list[str], by: list[str], reducer: Reducer | None, pk: list[str]
) -> pl.DataFrame:
    """One row per (run, pair key, metric): refuse duplicates or reduce them explicitly."""
    group = ["run_id", *ident]
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
    if reducer not in _REDUCERS:
        raise ValueError(f"reducer must be one of {_REDUCERS} (never first/last), got {reducer!r}")
    value = getattr(pl.col("value"), reducer)()
    extra = [pl.col(b).first() for b in by if b not in pk]
    return frame.group_by(group).agg(value, *extra)


def _pairs(
    frame: pl.DataFrame,
    cands: list[str],
    parent: str,
    pk: list[str],
    by: list[str],
    directions: Mapping[str, Direction],
) -> pl.DataFrame:
    """One row per candidate key (matched or not) and one per parent-only key."""
    dirs = {**BUILTIN_DIRECTIONS, **directions}
    par = frame.filter(pl.col("run_id") == parent).drop("run_id")
    par = par.rename({"value": "parent_value"} | {b: f"{b}__p" for b in by if b not in pk})
    par = par.with_columns(present_p=pl.lit(True))
    cand = frame.filter(pl.col("run_id") != parent).rename({"run_id": "candidate"})
    cand = cand.with_columns(present_c=pl.lit(True))
    on = [*pk, "metric"]
    # every candidate x every parent key, so parent-only keys are counted as unmatched
    cm = cand.select("candidate", "metric").unique()
    grid = cm.join(par, on="metric", how="inner")
    joined = grid.join(cand, on=["candidate", *on], how="full", coalesce=True)
    joined = joined.with_columns(
        [pl.coalesce(b, f"{b}__p").alias(b) for b in by if b not in pk]
    ).drop([f"{b}__p" for b in by if b not in pk], strict=False)
    missing_cands = set(cands) - set(cand["candidate"].unique())
    if missing_cands:
        raise ValueError(f"candidate(s) {sorted(missing_cands)} have no scores to compare")
    hib = pl.col("metric").replace_strict(dirs, default="maximize") == "maximize"
    matched = pl.col("present_c") & pl.col("present_p")
    return (
        joined.with_columns(
            present_c=pl.col("present_c").fill_null(False),
            present_p=pl.col("present_p").fill_null(False),
        )
        .with_columns(
            higher_is_better=hib,
            matched=matched,
            both=matched & pl.col("value").is_not_null() & pl.col("parent_value").is_not_null(),
            diff=pl.col("value") - pl.col("parent_value"),
        )
        .with_columns(better=pl.when(hib).then(pl.col("diff")).otherwise(-pl.col("diff")))
    )


def _aggregate(
    pairs: pl.DataFrame,
    by: list[str],
    alternative: Alternative,
    mid_p: bool,
    ci: CiMethod,
    n_boot: int,
    confidence: float,
    seed: int,
) -> pl.DataFrame:
    """Counts, means, Wilcoxon, CI and McNemar p for every (candidate, metric, level, group)."""
    levels = [pairs.with_columns(pl.lit("overall").alias("level"))]
    levels += [] if not by else [pairs.with_columns(pl.lit("/".join(by)).alias("level"))]
    if by:
        levels[0] = levels[0].with_columns([pl.lit(None, pairs.schema[b]).alias(b) for b in by])
    allp = pl.concat(levels)
    gcols = ["candidate", "metric", "level", *by]
    ok = pl.col("both")
    stats_ = allp.group_by(gcols).agg(
        pl.col("higher_is_better").first(),
        n_pairs=ok.sum().cast(pl.Int64),
        candidate_wins=(ok & (pl.col("better") > 0)).sum().cast(pl.Int64),
        parent_wins=(ok & (pl.col("better") < 0)).sum().cast(pl.Int64),
        n_dropped=(pl.col("matched") & ~ok).sum().cast(pl.Int64),
        n_unmatched=(~pl.col("matched")).sum().cast(pl.Int64),
        mean_candidate=pl.col("value").filter(ok).mean(),
        mean_parent=pl.col("parent_value").filter(ok).mean(),
        mean_diff=pl.col("diff").filter(ok).mean(),
        sd_diff=pl.col("diff").filter(ok).std(),
    )
    stats_ = stats_.with_columns(
        ties=pl.col("n_pairs") - pl.col("candidate_wins") - pl.col("parent_wins"),
        direction=pl.when("higher_is_better")
        .then(pl.lit("maximize"))
        .otherwise(pl.lit("minimize")),
    )
    stats_ = stats_.join(
        _wilcoxon(allp, gcols, alternative), on=gcols, how="left", nulls_equal=True
    )
    stats_ = _with_ci(stats_, allp, gcols, ci, n_boot, confidence, seed)
    cw, pw = stats_["candidate_wins"].to_numpy(), stats_["parent_wins"].to_numpy()
    return stats_.with_columns(
        pl.Series("p_value", mcnemar_p(cw, pw, alternative=alternative, mid_p=mid_p)),
        pl.Series("p_two_sided", mcnemar_p(cw, pw, alternative="two-sided", mid_p=mid_p)),
    ).drop("sd_diff")


def _wilcoxon(allp: pl.DataFrame, gcols: list[str], alternative: Alternative) -> pl.DataFrame:
    """Wilcoxon signed-rank p (normal approximation, tie-corrected, zeros dropped) per group.

    Equals ``scipy.stats.wilcoxon(d, method="approx", zero_method="wilcox",
    correction=False)`` on the improvement-oriented differences; groups without a non-zero
    difference get p = 1.
    """
    nz = allp.filter(pl.col("both") & (pl.col("better") != 0)).select(
        *gcols, "better", pl.col("better").abs().alias("a")
    )
    nz = nz.with_columns(pl.col("a").rank("average").over(gcols).alias("r"))
    ties = (
        nz.group_by([*gcols, "a"])
        .len()
        .group_by(gcols)
        .agg(((pl.col("len").cast(pl.Float64) ** 3) - pl.col("len")).sum().alias("t"))
    )
    w = (
        nz.group_by(gcols)
        .agg(
            pl.col("r").filter(pl.col("better") > 0).sum().alias("r_plus"),
            pl.len().cast(pl.Float64).alias("n"),
        )
        .join(ties, on=gcols, nulls_equal=True)
    )
    n = pl.col("n")
    var = n * (n + 1) * (2 * n + 1) / 24 - pl.col("t") / 48
    w = w.with_columns(z=(pl.col("r_plus") - n * (n + 1) / 4) / var.sqrt())
    z = w["z"].to_numpy()
    p = (
        stats.norm.sf(z)
        if alternative == "greater"
        else np.minimum(1.0, 2 * stats.norm.sf(np.abs(z)))
    )
    p = np.where(np.isfinite(z), p, 1.0)
    return w.select(gcols).with_columns(pl.Series("wilcoxon_p", p, dtype=pl.Float64))


def _with_ci(
    st: pl.DataFrame,
    allp: pl.DataFrame,
    gcols: list[str],
    ci: CiMethod,
    n_boot: int,
    confidence: float,
    seed: int,
) -> pl.DataFrame:
    if ci == "none":
        return st.with_columns(ci_low=pl.lit(None, pl.Float64), ci_high=pl.lit(None, pl.Float64))
    if ci == "normal":
        z = float(stats.norm.ppf(0.5 + confidence / 2))
        half = z * pl.col("sd_diff").fill_null(0.0) / pl.col("n_pairs").sqrt()
        known = pl.col("n_pairs") > 0
        return st.with_columns(
            ci_low=pl.when(known).then(pl.col("mean_diff") - half),
            ci_high=pl.when(known).then(pl.col("mean_diff") + half),
        )
    if ci != "bootstrap":
        raise ValueError(f"ci must be 'bootstrap', 'normal' or 'none', got {ci!r}")
    st = st.sort(gcols, nulls_last=False).with_row_index("gid")
    d = allp.filter("both").join(st.select(*gcols, "gid"), on=gcols, nulls_equal=True).sort("gid")
    lo, hi = bootstrap_mean_ci(
        d["diff"].to_numpy(), d["gid"].to_numpy(), n_boot=n_boot, confidence=confidence, seed=seed
    )
    sizes = np.bincount(d["gid"].to_numpy(), minlength=st.height)
    lo_full = np.full(st.height, math.nan)
    hi_full = np.full(st.height, math.nan)
    lo_full[: lo.size], hi_full[: hi.size] = lo, hi
    known = sizes > 0
    return st.drop("gid").with_columns(
        pl.Series("ci_low", np.where(known, lo_full, math.nan)).fill_nan(None),
        pl.Series("ci_high", np.where(known, hi_full, math.nan)).fill_nan(None),
    )


def _adjust(out: pl.DataFrame, verdict_p: str) -> pl.DataFrame:
    """Holm and BH adjusted p-values across every test of the call, and the verdict's p."""
    if out.is_empty():
        nul = pl.lit(None, pl.Float64)
        return out.with_columns(p_holm=nul, p_bh=nul, p_verdict=nul)
    p, p2 = out["p_value"].to_numpy(), out["p_two_sided"].to_numpy()
    holm = multipletests(p, method="holm")[1]
    bh = multipletests(p, method="fdr_bh")[1]
    methods = {"holm": "holm", "bh": "fdr_bh"}
    pv = p2 if verdict_p == "raw" else multipletests(p2, method=methods[verdict_p])[1]
    return out.with_columns(
        pl.Series("p_holm", holm), pl.Series("p_bh", bh), pl.Series("p_verdict", pv)
    )
