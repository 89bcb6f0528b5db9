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
import numpy.typing as npt
import polars as pl

from hylo_analytics._lazy import LazyModule
from hylo_analytics.compare import (
    BUILTIN_DIRECTIONS,
    Alternative,
    Direction,
    FloatArray,
    bootstrap_mean_ci,
    mcnemar_p,
)
from hylo_analytics.verdicts import RelativeNoiseRule, StatisticalRule, add_verdicts

if TYPE_CHECKING:
    from scipy import stats
else:  # scipy is imported on first use: it costs half a second at startup
    stats = LazyModule("scipy.stats")

if TYPE_CHECKING:
    from hylo_analytics.store import Store

__all__ = [
    "ComparabilityError",
    "benjamini_hochberg",
    "compare_runs",
    "compare_scores",
    "holm",
]

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
    pk = ["key", "epoch"] if pair_on_epoch else ["key"]
    by = list(by)
    _check_columns(scores, ["run_id", "metric", "value", *pk, *by])
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
        pairs, par, by, directions or {}, alternative, mid_p, ci, n_boot, confidence, seed
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
    source: str | None = None,
    force: bool = False,
    **options: object,
) -> pl.DataFrame:
    """:func:`compare_scores` on the store's current scores, behind the gate.

    Scores are the preferred one per key and metric (``int_scores_preferred``: re-scored >
    derived > observation > imported), or those of one ``source`` when given.

    The gate refuses runs whose benchmark digest, split or scorer version (per metric) differ
    from the parent's, naming what differs; ``force=True`` compares them anyway and marks
    their rows ``forced`` with the difference in ``gate_note``.
    """
    cands = [candidates] if isinstance(candidates, str) else list(candidates)
    runs = [*cands, parent]
    where = "list_contains($runs, run_id)" + (
        "" if metrics is None else " AND list_contains($metrics, metric)"
    )
    params: dict[str, object] = {"runs": runs}
    if metrics is not None:
        params["metrics"] = list(metrics)
    if source is None:
        scores = store.sql(f"SELECT * FROM int_scores_preferred WHERE {where}", params)
    else:
        scores = store.sql(
            f"SELECT * FROM stg_scores WHERE source = $source AND {where}",
            params | {"source": source},
        )
    meta = store.sql(
        "SELECT run_id, benchmark_digest, split FROM stg_runs WHERE list_contains($runs, run_id)",
        {"runs": runs},
    )
    missing = sorted(set(runs) - set(meta["run_id"]))
    if missing:
        raise ValueError(f"no run(s) {missing} in the store (see 'hylo-analytics runs')")
    if scores.filter(pl.col("run_id") == parent).is_empty():
        raise ValueError(
            f"parent {parent!r} has no scores"
            + (f" of source {source!r}" if source else "")
            + f" for {metrics}"
        )
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
    par = meta.filter(pl.col("run_id") == parent)
    cand = meta.filter(pl.col("run_id").is_in(cands))
    found = []
    for f in _GATE_FIELDS:  # a handful of fields, each checked for all candidates at once
        pv = par[f].item()
        bad = cand.filter(pl.col(f).ne_missing(pl.lit(pv, pl.String)))
        found.append(
            bad.select(
                "run_id",
                why=pl.format(f"{f} '{{}}' != parent's {pv!r}", pl.col(f).fill_null("None")),
            )
        )
    versions = scores.group_by("run_id", "metric").agg(
        v=pl.col("scorer_version").drop_nulls().unique().sort().str.join(",")
    )
    pv = versions.filter(pl.col("run_id") == parent).select("metric", pv="v")
    vd = versions.filter(pl.col("run_id") != parent).join(pv, on="metric")
    found.append(
        vd.filter(pl.col("v") != pl.col("pv")).select(
            "run_id",
            why=pl.format("scorer_version of '{}' '{}' != parent's '{}'", "metric", "v", "pv"),
        )
    )
    problems = pl.concat(found).sort("run_id", "why").group_by("run_id", maintain_order=True)
    rows = problems.agg(pl.col("why").str.join(", ")).rows()
    return {str(r): str(w) for r, w in rows}


def _check_columns(frame: pl.DataFrame, needed: list[str]) -> None:
    missing = [c for c in dict.fromkeys(needed) if c not in frame.columns]
    if missing:
        raise ValueError(f"scores frame lacks column(s) {missing}; it has {frame.columns}")


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
    ci: CiMethod,
    n_boot: int,
    confidence: float,
    seed: int,
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
    dirs = {**BUILTIN_DIRECTIONS, **directions}
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
    st = _with_ci(st, pairs, by, gcols, ci, n_boot, confidence, seed)
    cw, pw = st["candidate_wins"].to_numpy(), st["parent_wins"].to_numpy()
    return st.with_columns(
        pl.Series("p_value", mcnemar_p(cw, pw, alternative=alternative, mid_p=mid_p)),
        pl.Series("p_two_sided", mcnemar_p(cw, pw, alternative="two-sided", mid_p=mid_p)),
    ).drop("sd_diff")


def _wilcoxon(
    st: pl.DataFrame, pairs: pl.DataFrame, by: list[str], gcols: list[str], alt: Alternative
) -> pl.DataFrame:
    """``st`` with the Wilcoxon signed-rank p of every group (``wilcoxon_p``).

    Normal approximation, tie-corrected, zero differences dropped: equals
    ``scipy.stats.wilcoxon(d, method="approx", zero_method="wilcox", correction=False)`` on
    the improvement-oriented differences. Ranks are computed per distinct ``|d|`` (a tie block
    of size t holding ranks c-t+1..c has mean rank c-(t-1)/2), and the overall blocks are sums
    of the per-group blocks. When every non-zero ``|d|`` is the same (a binary metric) there is
    one block per group and no pass over the pairs is needed. No non-zero difference: p = 1.
    """
    d = pl.col("diff")
    nzd = d.filter(pl.col("both") & (d != 0)).abs()
    lo, hi = pairs.select(nzd.min().alias("lo"), nzd.max().alias("hi")).row(0)
    if lo == hi:  # one |d| value (or none): ranks are all (n + 1) / 2
        m = (pl.col("n_pos") + pl.col("n_neg")).cast(pl.Float64)
        w = st.select(
            *gcols,
            n=m,
            r_pos=pl.col("n_pos").cast(pl.Float64) * (m + 1) / 2,
            tie_term=m**3 - m,
        )
    else:
        nz = pairs.filter(pl.col("both") & (d != 0))
        fine = nz.group_by(["candidate", "metric", *by, d.abs().alias("a")]).agg(
            t=pl.len().cast(pl.Float64), npos=(d > 0).sum().cast(pl.Float64)
        )
        blocks = _up(fine, by, ["t", "npos"], []).sort([*gcols, "a"])
        blocks = blocks.with_columns(c=pl.col("t").cum_sum().over(gcols))
        t = pl.col("t")
        w = blocks.group_by(gcols).agg(
            r_pos=((pl.col("c") - (t - 1) / 2) * pl.col("npos")).sum(),
            n=t.sum(),
            tie_term=(t**3 - t).sum(),
        )
    st = st.join(w, on=gcols, how="left", nulls_equal=True)
    n = pl.col("n").fill_null(0.0)
    r_plus = pl.when("higher_is_better").then("r_pos").otherwise(n * (n + 1) / 2 - pl.col("r_pos"))
    var = n * (n + 1) * (2 * n + 1) / 24 - pl.col("tie_term").fill_null(0.0) / 48
    z = st.select((r_plus - n * (n + 1) / 4) / var.sqrt()).to_series().to_numpy()
    with np.errstate(invalid="ignore", divide="ignore"):
        two = np.minimum(1.0, 2 * stats.norm.sf(np.abs(z)))
        p = stats.norm.sf(z) if alt == "greater" else two
    p = np.where(np.isfinite(z), p, 1.0)
    return st.drop("n", "r_pos", "tie_term").with_columns(
        pl.Series("wilcoxon_p", p, dtype=pl.Float64)
    )


def _with_ci(
    st: pl.DataFrame,
    pairs: pl.DataFrame,
    by: list[str],
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
    d = _levels(pairs.filter("both"), by)
    d = d.join(st.select(*gcols, "gid"), on=gcols, nulls_equal=True).sort("gid")
    lo, hi = bootstrap_mean_ci(
        d["diff"].to_numpy(), d["gid"].to_numpy(), n_boot=n_boot, confidence=confidence, seed=seed
    )
    sizes = np.bincount(d["gid"].to_numpy(), minlength=st.height)
    lo_full = np.full(st.height, math.nan)
    hi_full = np.full(st.height, math.nan)
    lo_full[: lo.size], hi_full[: hi.size] = lo, hi
    has_pairs = sizes > 0
    return st.drop("gid").with_columns(
        pl.Series("ci_low", np.where(has_pairs, lo_full, math.nan)).fill_nan(None),
        pl.Series("ci_high", np.where(has_pairs, hi_full, math.nan)).fill_nan(None),
    )


def holm(p: npt.ArrayLike) -> FloatArray:
    """Holm step-down adjusted p-values (equal to statsmodels' ``multipletests(p, "holm")``)."""
    p = np.asarray(p, dtype=np.float64)
    order = np.argsort(p, kind="stable")
    steps = (p.size - np.arange(p.size)) * p[order]
    out = np.empty_like(p)
    out[order] = np.minimum(1.0, np.maximum.accumulate(steps))
    return out


def benjamini_hochberg(p: npt.ArrayLike) -> FloatArray:
    """Benjamini-Hochberg adjusted p-values (statsmodels' ``fdr_bh``)."""
    p = np.asarray(p, dtype=np.float64)
    order = np.argsort(p, kind="stable")[::-1]
    ranks = p.size - np.arange(p.size)
    out = np.empty_like(p)
    out[order] = np.minimum(1.0, np.minimum.accumulate(p[order] * p.size / ranks))
    return out


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
