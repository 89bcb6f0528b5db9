"""Each group's interval in ``aggregate``: the method its kind asks for, by the one entry point.

``auto`` is Wilson for a 0/1 group, Hall's interval otherwise (the percentile bootstrap when
stratified), the CR2 cluster-robust interval of every group when ``cluster`` is set; every
method is computed by :func:`hylo_analytics.stats.mean_interval`, groups of one method and
one resampling path (0/1 values, -1/0/1 values, others) in one call.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping

import numpy as np
import polars as pl

from hylo_analytics.aggregate._query import GroupRows
from hylo_analytics.errors import InputError
from hylo_analytics.stats import closed_form
from hylo_analytics.stats.clustered import ClusterRobust, cluster_robust, cluster_totals
from hylo_analytics.stats.interval import IntervalSpec, mean_interval
from hylo_analytics.stats.methods import ONE_SAMPLE_METHODS, CIMethod, check_method

# the methods aggregate takes: the stats vocabulary's one-sample subset
CI_METHODS: tuple[str, ...] = ONE_SAMPLE_METHODS
_BINARY_ONLY = ("wilson", "clopper_pearson")


def _with_intervals(
    out: pl.DataFrame,
    rows: GroupRows,
    ci: CIMethod | Mapping[str, CIMethod],
    spec: IntervalSpec,
    stratify: str | None,
    clustered: tuple[np.ndarray, ClusterRobust] | None = None,
) -> pl.DataFrame:
    """Each group's interval by its method (``spec``: its level, resamples and seed). Groups resampled together share a path: 0/1
    values, -1/0/1 values, others (``_path``), so a group's bounds depend on its values, the
    seed and the method alone. ``clustered``: the groups (``_g``, ascending) that have values
    and their CR2 fit (:func:`_cluster_fit`), which ``auto`` then means."""
    # the method of each (metric, kind): a handful of pairs, joined onto the groups
    pairs = out.select("metric", "_kind").unique(maintain_order=True)
    how = (stratify is not None, clustered is not None)
    methods = pairs.with_columns(
        ci_method=pl.Series(
            [_method(m, k, ci, *how) for m, k in pairs.iter_rows()], dtype=pl.String
        )
    )
    out = out.join(
        methods, on=["metric", "_kind"], how="left", nulls_equal=True, maintain_order="left"
    ).with_columns(
        _path=pl.when(pl.col("_is01")).then(0).when(pl.col("_is101")).then(1).otherwise(2),
    )
    low = np.full(out.height, np.nan)
    high = np.full(out.height, np.nan)
    n_valid = out["n_valid"].to_numpy()
    boot = out.filter(pl.col("ci_method").is_in(["percentile", "bca", "studentized"]))
    values = np.zeros(0)
    at = np.zeros(0, dtype=np.int64)
    strata: pl.DataFrame | None = None
    if boot.height:
        values, strata = rows.values(sorted(set(boot["metric"].to_list())), stratify)
        # where each fetched group's values start: the fetched groups are the groups (in
        # order) of those metrics with a valid value
        fetched = out.filter(
            pl.col("metric").is_in(boot["metric"].unique().implode()) & (pl.col("n_valid") > 0)
        )
        at = np.full(out.height, -1, dtype=np.int64)
        sizes = fetched["n_valid"].to_numpy()
        at[fetched["_g"].to_numpy()] = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    for (name, path), rows_m in out.group_by(["ci_method", "_path"], maintain_order=True):
        if name == "none":
            continue
        idx = rows_m["_g"].to_numpy()
        k, n = rows_m["_sum"].fill_null(0).to_numpy(), rows_m["n_valid"].to_numpy()
        level = spec.level
        if name == "cr2":
            if clustered is None:
                raise InputError("aggregate: ci='cr2' needs cluster= (e.g. cluster='task_id')")
            used, fit = clustered
            pos = np.searchsorted(used, idx)
            hit = pos < len(used)
            hit[hit] = used[pos[hit]] == idx[hit]  # a group with values has a fit
            lo, hi = mean_interval(name, n[hit], level=level, clusters=fit.take(pos[hit]))
            # a rate's interval stays in [0, 1], as Wilson's does (clipping keeps coverage)
            rate = (rows_m["_kind"] == "binary").to_numpy()[hit]
            low[idx[hit]] = np.where(rate, np.clip(lo, 0.0, 1.0), lo)
            high[idx[hit]] = np.where(rate, np.clip(hi, 0.0, 1.0), hi)
        elif name in ("wilson", "clopper_pearson"):
            low[idx], high[idx] = mean_interval(name, n, level=level, successes=k)
        elif name == "hall":
            moments = [rows_m[c].fill_null(np.nan).to_numpy() for c in ("mean", "std", "_skew")]
            low[idx], high[idx] = mean_interval(
                name, n, level=level, mean=moments[0], std=moments[1], skewness=moments[2]
            )
        elif name == "normal":
            mean, se = rows_m["mean"].fill_null(np.nan), rows_m["stderr"].fill_null(np.nan)
            low[idx], high[idx] = mean_interval(
                name, n, level=level, mean=mean.to_numpy(), stderr=se.to_numpy()
            )
            binary = (rows_m["_kind"] == "binary").to_numpy()
            weak = binary & (np.minimum(k, n - k) < 10) & (n > 0)
            if weak.any():
                warnings.warn(
                    f"aggregate: ci='normal' on {int(weak.sum())} 0/1 group(s) with fewer than "
                    "10 successes or failures: the Wald interval covers far less than its level "
                    "there (0.64 at p = 0.95, n = 20); use 'wilson'",
                    closed_form.StatisticsWarning,
                    stacklevel=5,
                )
        else:
            sub = idx[n_valid[idx] > 0]
            if not len(sub):
                continue
            # the positions of the groups' values, back to back (no loop over groups)
            lens = n_valid[sub]
            first = np.concatenate([[0], np.cumsum(lens)[:-1]])
            take = np.arange(lens.sum()) + np.repeat(at[sub] - first, lens)
            strata_sizes = None
            if strata is not None:
                strata_sizes = _strata_sizes(strata, out, sub)
            low[sub], high[sub] = mean_interval(
                name,
                n_valid[sub],
                level=level,
                values=values[take],
                strata_sizes=strata_sizes,
                binary=path == 0,
                n_resamples=spec.n_resamples,
                seed=spec.seed,
            )
    return out.with_columns(
        ci_low=pl.Series(low).fill_nan(None),
        ci_high=pl.Series(high).fill_nan(None),
        ci_level=pl.when(pl.col("ci_method") != "none").then(pl.lit(spec.level)),
    )


def _strata_sizes(strata: pl.DataFrame, out: pl.DataFrame, sub: np.ndarray) -> np.ndarray:
    """The stratum sizes of groups ``sub`` (ascending), from the (group, stratum) counts in
    group order."""
    keys = [c for c in strata.columns[:-2]]  # the by columns and the metric
    numbered = strata.join(
        out.select([*keys, "_g"]), on=keys, how="left", nulls_equal=True, maintain_order="left"
    )
    picked = numbered.filter(pl.col("_g").is_in(pl.Series(sub).cast(pl.UInt32).implode()))
    sizes: np.ndarray = picked["len"].to_numpy()
    return sizes


def _cluster_fit(
    out: pl.DataFrame, rows: GroupRows, by: list[str], cluster: str
) -> tuple[pl.DataFrame, np.ndarray, ClusterRobust]:
    """The groups' valid values with their cluster (null values together one cluster) and
    group number ``_g``, the groups that have any (ascending) and their CR2 fit."""
    keys = [*by, "metric"]
    fetched = (
        rows.clustered(cluster)
        .join(out.select([*keys, "_g"]), on=keys, how="inner", nulls_equal=True)
        .with_columns(pl.col("_cluster").fill_null(""))
    )
    g = fetched["_g"].to_numpy()
    counts, sizes, sums = cluster_totals(fetched["_value"].to_numpy(), fetched["_cluster"], g)
    used = np.unique(g)
    # the groups' codes are dense in ``used`` order: the fit's i-th group is ``used[i]``
    return fetched, used, cluster_robust(sizes, sums, counts)


def _with_clustered(out: pl.DataFrame, fetched: pl.DataFrame) -> pl.DataFrame:
    """``n_clusters`` and the clustered standard errors (plain and ``G / (G - 1)``)."""
    g = fetched["_g"].to_numpy()
    values, clusters = fetched["_value"].to_numpy(), fetched["_cluster"].to_numpy()
    plain = closed_form.clustered_stderr(values, clusters, g)
    corrected = closed_form.clustered_stderr(values, clusters, g, small_sample=True)
    counts = fetched.group_by("_g").agg(n_clusters=pl.col("_cluster").n_unique().cast(pl.Int64))
    used = np.unique(g)
    se = pl.DataFrame(
        {
            "_g": used.astype(np.uint32),
            "stderr_clustered": plain,
            "stderr_clustered_corrected": corrected,
        }
    ).join(counts.with_columns(pl.col("_g").cast(pl.UInt32)), on="_g")
    return out.join(se.with_columns(pl.all().fill_nan(None)), on="_g", how="left")


def _method(
    metric: str,
    kind: str,
    ci: CIMethod | Mapping[str, CIMethod],
    stratified: bool,
    clustered: bool = False,
) -> str:
    chosen: str = ci.get(metric, "auto") if isinstance(ci, Mapping) else ci
    chosen = check_method(chosen, CI_METHODS, "aggregate")
    if chosen == "cr2" and not clustered:
        raise InputError("aggregate: ci='cr2' needs cluster= (e.g. cluster='task_id')")
    if chosen == "auto":
        if clustered:
            return "cr2"
        if kind == "binary":
            return "wilson"
        return "percentile" if stratified else "hall"
    if chosen in _BINARY_ONLY and kind != "binary":
        raise InputError(
            f"aggregate: ci={chosen!r} needs 0/1 values but metric {metric!r} is {kind}; "
            f"pass a mapping, e.g. ci={{{metric!r}: 'bca'}}"
        )
    return chosen
