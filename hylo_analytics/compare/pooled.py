"""A policy against its parent over several suites: one pooled effect, its test and interval.

A paper asks "is X better than Y over the benchmark", and answers with the average of the
suites' rates. :func:`pooled_compare` pairs each suite's candidate run with that suite's
parent run by key (one :func:`~hylo_analytics.compare.compare_scores` per suite: the
suite rows are the usual comparison rows) and adds one pooled row:

- **the estimand**: the suite-weighted paired difference ``Delta = sum_s w_s delta_s``,
  ``w_s = 1/S`` (``weights="suite"``, the papers' average) or ``n_s / N``
  (``weights="episodes"``); named in ``weighting``;
- **its test** (``test_method``): for 0/1 metrics the stratified sign-flip test of the
  discordant pairs within suites, whose statistic is ``Delta`` itself (exact on a lattice
  when small, else seeded Monte Carlo: :func:`~hylo_analytics.stats.sign_flip_p`); for
  numeric metrics the p of the stratified paired bootstrap's own draws;
- **its interval** (``ci_method``): MOVER over the suites' Tango intervals (0/1) or the
  stratified paired bootstrap's percentile interval (keys resampled within suites);
- **clustered** (``cluster="task_id"``): every suite row is CR2 cluster-robust (the
  engine's ``ci="cr2"``) and the pooled row is the CR2 of ``Delta`` in the regression on
  suite dummies, clusters nested in suites: variance ``sum w_s^2 se_s^2``, t on the
  contrast's Bell-McCaffrey df (:func:`~hylo_analytics.stats.pool_strata`), for 0/1 and
  numeric metrics alike;
- ``p_pooled_mcnemar``: the exact McNemar test of the summed discordant pairs, shown for
  reference only: it weighs suites by their discordant pairs, so it does not test the
  printed ``Delta`` (unless ``weights="episodes"``, where the two tests coincide).

The suite rows and the pooled row of a metric are one family: their p-values are adjusted
together (Holm, BH) and the verdict (:func:`~hylo_analytics.compare.add_verdicts`) reads
them as for any comparison, with the verdict's interval at ``1 - 2 alpha / (S + 1)``. The
pooled row has no TOST p (``p_tost``): "unchanged" is decided by its ``1 - 2 alpha``
interval inside the margin alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import polars as pl

from hylo_analytics._harness import Errors
from hylo_analytics.compare.engine import Reducer, compare_scores
from hylo_analytics.compare.verdicts import Rule, StatisticalRule, add_verdicts
from hylo_analytics.errors import InputError
from hylo_analytics.metrics import Direction
from hylo_analytics.stats.bootstrap import bootstrap_cis
from hylo_analytics.stats.closed_form import DEFAULT_LEVEL
from hylo_analytics.stats.clustered import ClusterRobust, pool_strata
from hylo_analytics.stats.interval import paired_interval
from hylo_analytics.stats.methods import DEFAULT_RESAMPLES, DEFAULT_SEED, Seed
from hylo_analytics.stats.pooled import (
    Weighting,
    mover_ci,
    pooled_bootstrap,
    sign_flip_p,
    suite_weights,
)
from hylo_analytics.stats.significance import (
    Alternative,
    benjamini_hochberg,
    holm,
    mcnemar_p,
)

__all__ = ["POOLED_COLUMNS", "pool_suites", "pooled_compare"]

# the columns a pooled comparison adds to compare_scores' own
POOLED_COLUMNS = ("suite", "weight", "weighting", "test_method", "p_pooled_mcnemar")
_WEIGHTING = {"suite": "suite: 1/S each", "episodes": "episodes: n_s/N"}


def pooled_compare(
    scores: pl.DataFrame,
    *,
    pairs: Mapping[str, tuple[str, str]],
    candidate: str = "candidate",
    parent: str = "parent",
    metrics: list[str] | tuple[str, ...] | None = None,
    weights: Weighting = "suite",
    reducer: Reducer | None = "mean",
    alternative: Alternative = "greater",
    directions: Mapping[str, Direction] | None = None,
    n_resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: Seed = DEFAULT_SEED,
    rule: Rule | None = None,
    errors: Errors | None = None,
    cluster: str | None = None,
) -> pl.DataFrame:
    """The suite rows and the pooled row of ``candidate`` against ``parent``.

    Parameters
    ----------
    scores : a scores frame as :func:`~hylo_analytics.compare.compare_scores` takes it.
    pairs : suite -> (candidate run id, parent run id): the runs of each suite.
    candidate, parent : the names the pooled row gives the two sides (e.g. their selectors).
    weights : ``suite`` (each suite ``1/S``, as papers average suites) or ``episodes``
        (``n_s / N``).
    errors : the errors policy, passed to every suite's comparison (None: each run's harness
        convention).
    cluster : a score column whose values cluster the keys within a suite (``task_id``):
        the suite rows and the pooled row are then CR2 cluster-robust (see the module).
    Other options are :func:`compare_scores`'; ``n_resamples`` and ``seed`` also drive the
    pooled bootstrap and the Monte-Carlo sign flips.
    """
    if not pairs:
        raise InputError(
            "pooled_compare needs at least one suite in pairs; pass pairs={suite: (candidate, "
            "parent)}"
        )
    rule = rule or StatisticalRule()
    per_suite = []
    for suite, (cand, par) in pairs.items():  # one vectorized comparison per suite
        rows = compare_scores(
            scores, candidates=cand, parent=par, metrics=metrics, reducer=reducer,
            alternative=alternative, directions=directions, n_resamples=n_resamples,
            level=level, seed=seed, rule=rule, errors=errors, cluster=cluster,
        )  # fmt: skip
        per_suite.append(rows.with_columns(suite=pl.lit(suite)))
    suites = pl.concat(per_suite, how="diagonal_relaxed")
    numeric = suites.filter(~pl.col("is_binary") & (pl.col("n_pairs") > 0))
    diffs = None
    if not numeric.is_empty() and cluster is None:
        diffs = _differences(scores, pairs, numeric["metric"].unique().to_list(), reducer)
    return pool_suites(
        suites, diffs, candidate=candidate, parent=parent, weights=weights,
        alternative=alternative, n_resamples=n_resamples, level=level, seed=seed, rule=rule,
        cluster=cluster,
    )  # fmt: skip


def pool_suites(
    suites: pl.DataFrame,
    differences: pl.DataFrame | None,
    *,
    candidate: str,
    parent: str,
    weights: Weighting = "suite",
    alternative: Alternative = "greater",
    n_resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: Seed = DEFAULT_SEED,
    rule: Rule | None = None,
    cluster: str | None = None,
) -> pl.DataFrame:
    """The pooled row of every metric beside its suite rows, adjusted as one family.

    ``suites``: compare_scores' overall rows, one per (suite, metric), with a ``suite``
    column. ``differences``: (``suite``, ``metric``, ``diff``) per pair, in the order of
    the suites' keys, for the numeric metrics (None when every metric is 0/1, or when the
    suite rows are clustered by ``cluster``: their ``ci_se`` / ``ci_df`` are then pooled).
    """
    if weights not in _WEIGHTING:
        raise InputError(f"weights must be 'suite' or 'episodes', got {weights!r}")
    rule = rule or StatisticalRule()
    suites = suites.filter(pl.col("level") == "overall").sort("metric", "suite")
    out = []
    for rows in suites.partition_by("metric", maintain_order=True):
        diffs = None
        if differences is not None:
            diffs = differences.filter(pl.col("metric") == rows["metric"][0])
        out.append(_family(rows, diffs, candidate, parent, weights, alternative,
                           (n_resamples, level, seed), rule, cluster))  # fmt: skip
    frame = pl.concat(out, how="diagonal_relaxed")
    frame = add_verdicts(frame, rule)
    first = ["candidate", "parent", "metric", "level", "suite", "weight", "weighting"]
    return frame.select(*first, pl.exclude(first))


def _family(
    rows: pl.DataFrame,
    diffs: pl.DataFrame | None,
    candidate: str,
    parent: str,
    weights: Weighting,
    alternative: Alternative,
    boot: tuple[int, float, Seed],
    rule: Rule,
    cluster: str | None = None,
) -> pl.DataFrame:
    """One metric's suite rows and its pooled row, with the family's adjustments."""
    n_resamples, level, seed = boot
    n = rows["n_pairs"].to_numpy()
    w = suite_weights(n, weights)
    size = rows.height + 1
    eq_level = rule.equivalence_level
    adj = 1 - (1 - eq_level) / size
    levels = (level, eq_level, adj)
    binary = bool(rows.filter(pl.col("n_pairs") > 0)["is_binary"].all())
    direction = str(rows["direction"][0])
    known, up = direction != "unknown", direction != "minimize"
    one_sided = known and alternative == "greater"
    cw, pw = rows["candidate_wins"].to_numpy(), rows["parent_wins"].to_numpy()
    d = rows["mean_diff"].fill_null(0.0).to_numpy()
    if cluster is not None:
        fits = _suite_fits(rows)
        pooled_fit = pool_strata(fits, w)
        pooled_bounds = [(float(lo[0]), float(hi[0]))
                         for lo, hi in (pooled_fit.bounds(lv) for lv in levels)]  # fmt: skip
        up_p, down_p = (float(np.nan_to_num(pooled_fit.p(s), nan=1.0)[0]) for s in ("greater",
                                                                                   "less"))  # fmt: skip
        better, worse = (up_p, down_p) if up else (down_p, up_p)
        two = min(1.0, 2 * min(better, worse))
        df = float(pooled_fit.df[0])
        test = (f"cr2 t of the suite-weighted difference, clusters of {cluster!r} within "
                f"suites (Bell-McCaffrey df {df:.3g})")  # fmt: skip
        ci_method = "cr2 (pooled over suites)"
        suite_adj = fits.bounds(adj)
    elif binary:
        # raw b and c (candidate - parent), whatever the direction: the interval is of mean_diff
        b, c = (cw, pw) if up else (pw, cw)
        bounds = paired_interval("score", levels, n, wins=b, losses=c).bounds
        pooled_bounds = [mover_ci(d, lo, hi, w) for lo, hi in bounds]
        flip = sign_flip_p(cw, pw, n, w, n_draws=n_resamples, seed=seed)
        better, worse, two = flip.p_greater, flip.p_less, flip.p_two_sided
        test = f"stratified sign-flip of the discordant pairs ({flip.method})"
        ci_method = "mover (tango per suite)"
        suite_adj = bounds[2]
    else:
        assert diffs is not None
        x = diffs["diff"].to_numpy()
        counts = diffs.group_by("suite").len().sort("suite")["len"].to_numpy()
        if counts.tolist() != n[n > 0].tolist():
            raise AssertionError("the numeric differences do not match the suites' pairs")
        fit = pooled_bootstrap(x, n, w, levels=levels, n_resamples=n_resamples, seed=seed)
        pooled_bounds = list(fit.bounds)
        better, worse = (fit.p_greater, fit.p_less) if up else (fit.p_less, fit.p_greater)
        two = min(1.0, 2 * min(better, worse))
        test = f"stratified paired bootstrap ({n_resamples} draws, seed {seed})"
        ci_method = "stratified bootstrap (percentile)"
        # the suites' verdict intervals at the family's level: the engine's own bootstrap
        lo_a, hi_a = bootstrap_cis(
            x, n[n > 0], levels=[adj], method="percentile", n_resamples=n_resamples, seed=seed
        )[0]
        suite_adj = (np.full(len(n), np.nan), np.full(len(n), np.nan))
        suite_adj[0][n > 0], suite_adj[1][n > 0] = lo_a, hi_a
    if not one_sided:
        better = worse = two
    total = float(np.dot(w, d))
    pooled = _pooled_row(rows, w, total, pooled_bounds, (better, worse, two),
                         (candidate, parent, test, ci_method))  # fmt: skip
    if cluster is not None:
        pooled = pooled.with_columns(
            n_clusters=pl.lit(int(pooled_fit.n_clusters[0]), pl.Int64),
            ci_se=pl.lit(float(pooled_fit.se[0])).fill_nan(None),
            ci_df=pl.lit(float(pooled_fit.df[0])).fill_nan(None),
            cluster=pl.lit(cluster),
        )
    side: Alternative = "greater" if one_sided else "two-sided"
    pooled_mcnemar = float(mcnemar_p([cw.sum()], [pw.sum()], alternative=side)[0])
    pooled = pooled.with_columns(p_pooled_mcnemar=pl.lit(pooled_mcnemar))
    suite_rows = rows.with_columns(
        level=pl.lit("suite"),
        weight=pl.Series(w),
        test_method=pl.lit("per suite (compare_scores)"),
        ci_adj_low=pl.Series(suite_adj[0]).fill_nan(None),
        ci_adj_high=pl.Series(suite_adj[1]).fill_nan(None),
    )
    both = pl.concat([suite_rows, pooled], how="diagonal_relaxed")
    p, q = both["p_value"].to_numpy(), both["p_worse"].to_numpy()
    return both.with_columns(
        weighting=pl.lit(_WEIGHTING[weights]),
        family=pl.lit("this pooled comparison's suite and pooled rows"),
        family_size=pl.lit(size, pl.Int64),
        ci_adj_level=pl.lit(adj),
        p_holm=pl.Series(holm(p)),
        p_worse_holm=pl.Series(holm(q)),
        p_bh=pl.Series(benjamini_hochberg(p)),
        p_worse_bh=pl.Series(benjamini_hochberg(q)),
    )


def _pooled_row(
    rows: pl.DataFrame,
    w: np.ndarray[Any, np.dtype[np.float64]],
    total: float,
    bounds: list[tuple[float, float]],
    ps: tuple[float, float, float],
    names: tuple[str, str, str, str],
) -> pl.DataFrame:
    """The pooled row: counts summed, means and the difference weighted by ``w``."""
    candidate, parent, test, ci_method = names
    wl = pl.Series(w)
    counts = ["n_pairs", "candidate_wins", "parent_wins", "ties", "n_dropped",
              "n_dropped_candidate", "n_dropped_parent", "n_dropped_both", "n_unmatched"]  # fmt: skip
    dropped = rows.filter(pl.col("n_dropped") > 0)["suite"].to_list()
    worst = (pl.col("diff_if_drops_min").fill_null(pl.col("mean_diff")) * wl).sum()
    best = (pl.col("diff_if_drops_max").fill_null(pl.col("mean_diff")) * wl).sum()
    out = rows.select(
        pl.lit(candidate).alias("candidate"),
        pl.lit(parent).alias("parent"),
        pl.col("metric").first(),
        pl.lit("pooled").alias("level"),
        pl.lit("pooled").alias("suite"),
        pl.lit(1.0).alias("weight"),
        pl.col("direction", "direction_source").first(),
        *(pl.col(c).sum().cast(pl.Int64) for c in counts),
        (pl.col("mean_candidate").fill_null(0.0) * wl).sum().alias("mean_candidate"),
        (pl.col("mean_parent").fill_null(0.0) * wl).sum().alias("mean_parent"),
        pl.lit(total).alias("mean_diff"),
        pl.when(pl.col("n_dropped").sum() > 0).then(worst).alias("diff_if_drops_min"),
        pl.when(pl.col("n_dropped").sum() > 0).then(best).alias("diff_if_drops_max"),
        pl.col("is_binary").filter(pl.col("n_pairs") > 0).all().alias("is_binary"),
        pl.col("higher_is_better", "alternative", "mid_p", "ci_level").first(),
        pl.when(pl.col("errors").n_unique() == 1)
        .then(pl.col("errors").first())
        .otherwise(pl.lit("mixed"))
        .alias("errors"),
        pl.col("forced").any(),
        pl.col("gate_note").drop_nulls().str.join("; ").alias("gate_note"),
    )
    (lo, hi), (eq_lo, eq_hi), (a_lo, a_hi) = bounds
    note = f"pairs dropped in suite(s) {', '.join(map(str, dropped))}: see their rows"
    return out.with_columns(
        p_value=pl.lit(ps[0]),
        p_worse=pl.lit(ps[1]),
        p_two_sided=pl.lit(ps[2]),
        ci_low=pl.lit(lo),
        ci_high=pl.lit(hi),
        eq_low=pl.lit(eq_lo),
        eq_high=pl.lit(eq_hi),
        ci_adj_low=pl.lit(a_lo),
        ci_adj_high=pl.lit(a_hi),
        ci_method=pl.lit(ci_method),
        test=pl.lit(_test_code(test)),
        test_method=pl.lit(test),
        drop_note=pl.lit(note if dropped else None, pl.String),
        gate_note=pl.when(pl.col("gate_note") != "").then("gate_note"),
    )


def _test_code(test: str) -> str:
    """The ``test`` code of a pooled row, from its ``test_method`` words."""
    if test.startswith("cr2"):
        return "cr2 t (pooled)"
    return "stratified sign-flip" if "sign-flip" in test else "stratified bootstrap"


def _suite_fits(rows: pl.DataFrame) -> ClusterRobust:
    """The suites' CR2 fits, read back from their clustered rows (``ci_se``, ``ci_df``)."""

    def col(name: str) -> np.ndarray[Any, np.dtype[np.float64]]:
        return rows[name].cast(pl.Float64).fill_null(np.nan).to_numpy()

    return ClusterRobust(
        mean=col("mean_diff"), se=col("ci_se"), df=col("ci_df"),
        n_clusters=rows["n_clusters"].fill_null(0).to_numpy().astype(np.int64),
        n=col("n_pairs"), se_cr1=np.full(rows.height, np.nan),
    )  # fmt: skip


def _differences(
    scores: pl.DataFrame,
    pairs: Mapping[str, tuple[str, str]],
    metrics: list[str],
    reducer: Reducer | None,
) -> pl.DataFrame:
    """The paired differences of the numeric metrics, per suite, in key order: each run's
    valid values reduced per key (epochs, as the engine reduces them), joined on the key."""
    runs = pl.DataFrame(
        {
            "suite": [s for s, cp in pairs.items() for _ in cp],
            "run_id": [r for cp in pairs.values() for r in cp],
            "side": [side for _ in pairs for side in ("c", "p")],
        }
    )
    how = reducer or "mean"
    valid = (
        scores.lazy()
        .filter(pl.col("metric").cast(pl.String).is_in(metrics))
        .select(
            pl.col("run_id").cast(pl.String),
            pl.col("key").cast(pl.String),
            pl.col("metric").cast(pl.String),
            pl.col("value").cast(pl.Float64).fill_nan(None),
        )
        .drop_nulls("value")
        .join(runs.lazy(), on="run_id")
        .group_by("suite", "side", "metric", "key")
        .agg(getattr(pl.col("value"), how)())
    )
    cand = valid.filter(pl.col("side") == "c").drop("side")
    par = valid.filter(pl.col("side") == "p").drop("side")
    return (
        cand.join(par, on=["suite", "metric", "key"], suffix="_p")
        .select("suite", "metric", "key", diff=pl.col("value") - pl.col("value_p"))
        .sort("metric", "suite", "key")
        .collect()
    )
