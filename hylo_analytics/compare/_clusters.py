"""The clustered comparison's parts (``cluster=``): which interval, each row's CR2 fit, notes.

A comparison row's clusters come from the pair patterns (``PairedRows.patterns`` carries each
pair's cluster as ``_cl``), so the other errors policy's relabelled patterns cluster alike; a
ranking's pairs get theirs from two products per cluster over its keys (:func:
`pair_cluster_fits`), streamed into :func:`~hylo_analytics.stats.cluster_robust_over`, never
a loop over pairs; its strengths' sandwich sums the keys' score terms within clusters. Every
statistic is :mod:`hylo_analytics.stats.clustered`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import polars as pl

from hylo_analytics.compare._sums import _D, _N, _OK, _up
from hylo_analytics.errors import InputError
from hylo_analytics.stats.bradley_terry import key_scores, stratified_meat
from hylo_analytics.stats.clustered import ClusterRobust, cluster_robust, cluster_robust_over
from hylo_analytics.stats.interval import IntervalSpec

if TYPE_CHECKING:
    from hylo_analytics.compare.pairwise import PairCounts, PolicyValues

__all__ = [
    "FIT_COLUMNS",
    "ClusterFits",
    "chunk_fits",
    "clustered_method",
    "fit_columns",
    "key_clusters",
    "one_cluster_note",
    "pair_cluster_fits",
    "pattern_fits",
    "ranking_note",
    "ranking_spec",
    "strength_meat",
]

FloatArray = npt.NDArray[np.float64]
_BLOCK_CELLS = 2**23  # keys x policies of one dense block (64 MB of float64 values)

ClusterFits = Callable[[pl.DataFrame, npt.NDArray[np.bool_]], ClusterRobust]
"""``(st, rows)`` -> the CR2 fit of the paired differences of ``st``'s ``rows``, in order."""
FIT_COLUMNS = ("n_clusters", "ci_se", "ci_df")  # what a clustered row adds


def clustered_method(ci: str, cluster: str | None) -> str:
    """The interval ``ci`` names once ``cluster`` is known: with clusters only CR2 (``auto``
    means it); without, no CR2 (it has no clusters to read)."""
    if cluster is None:
        if ci == "cr2":
            raise InputError(
                "ci='cr2' needs cluster= (the score column whose values are the clusters, "
                "e.g. cluster='task_id'; CLI: --cluster task_id)"
            )
        return ci
    if ci not in ("auto", "cr2"):
        raise InputError(
            f"cluster={cluster!r} gives the cluster-robust interval (ci='cr2'); ci={ci!r} "
            "treats the keys as independent: drop ci= (or cluster=)"
        )
    return "cr2"


def pattern_fits(pat: pl.DataFrame, by: list[str]) -> ClusterFits:
    """Each row's clusters (count and sum of its pairs' differences per ``_cl``), read from
    the pair patterns, so the other errors policy's relabelled patterns cluster the same."""
    fine = (
        pat.filter(_OK)
        .group_by(["candidate", "metric", *by, "_cl"], maintain_order=True)
        .agg(n=_N.sum().cast(pl.Float64), t=(_D * _N).sum())
    )
    sums = _up(fine, by, ["n", "t"], [])

    def read(st: pl.DataFrame, rest: npt.NDArray[np.bool_]) -> ClusterRobust:
        gcols = ["candidate", "metric", "level", *by]
        ids = st.with_row_index("_gid").filter(pl.Series(rest)).select(*gcols, "_gid")
        d = sums.join(ids, on=gcols, nulls_equal=True).sort("_gid", "_cl", nulls_last=True)
        counts = np.bincount(d["_gid"].to_numpy(), minlength=len(st))[rest]
        return cluster_robust(d["n"].to_numpy(), d["t"].to_numpy(), counts)

    return read


def fit_columns(st: pl.DataFrame, fit: ClusterRobust, rows: npt.NDArray[np.bool_]) -> pl.DataFrame:
    """``n_clusters``, ``ci_se`` and ``ci_df`` of the rows ``rows`` (``fit``'s, in order)."""
    cols = {k: np.full(len(st), np.nan) for k in FIT_COLUMNS}
    cols["n_clusters"][rows] = fit.n_clusters
    cols["ci_se"][rows], cols["ci_df"][rows] = fit.se, fit.df
    return st.with_columns(
        pl.Series("n_clusters", cols["n_clusters"]).fill_nan(None).cast(pl.Int64),
        *(pl.Series(k, cols[k], dtype=pl.Float64).fill_nan(None) for k in ("ci_se", "ci_df")),
    )


def one_cluster_note(out: pl.DataFrame, cluster: str | None) -> pl.DataFrame:
    """The verdict note of a clustered row resting on one cluster, said as such."""
    if cluster is None or "n_clusters" not in out.columns:
        return out
    alone = (pl.col("n_clusters") < 2) & (pl.col("n_pairs") > 0)
    note = pl.format(
        "its pairs lie in {} cluster of '{}': no cluster-robust interval or test (the "
        "population is the clusters), so no verdict",
        pl.col("n_clusters").cast(pl.String),
        pl.lit(cluster),
    )
    return out.with_columns(verdict_note=pl.when(alone).then(note).otherwise("verdict_note"))


def cluster_blocks(
    values: PolicyValues, max_cells: int = _BLOCK_CELLS
) -> Iterator[tuple[int, FloatArray]]:
    """Dense blocks of each cluster's keys, clusters in order: ``(cluster, values)``, values
    NaN where a policy has no valid value; a large cluster comes in several blocks (its sums
    are sums over them)."""
    if values.key_cluster is None:
        raise InputError("cluster_blocks: the values are not clustered (rank them with cluster=)")
    n, kc, n_keys = len(values.policies), values.key_cluster, values.n_keys
    step = max(1, max_cells // max(n, 1))
    sizes = np.bincount(kc)
    first = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    korder = np.argsort(kc, kind="stable")
    pos = np.empty(n_keys, dtype=np.int64)  # each key's place in its cluster
    pos[korder] = np.arange(n_keys) - first[kc[korder]]
    code = kc[values.row_key] * n_keys + pos[values.row_key]
    rorder = np.argsort(code, kind="stable")
    code = code[rorder]
    for g, size in enumerate(sizes.tolist()):
        for p0 in range(0, size, step):
            p1 = min(p0 + step, size)
            r0, r1 = np.searchsorted(code, [g * n_keys + p0, g * n_keys + p1])
            rows = rorder[r0:r1]
            block = np.full((p1 - p0, n), np.nan)
            block[pos[values.row_key[rows]] - p0, values.row_policy[rows]] = values.row_value[rows]
            yield g, block


def key_clusters(
    stratum: npt.ArrayLike, cluster: npt.ArrayLike, row_key: npt.ArrayLike, n_keys: int
) -> npt.NDArray[np.int64]:
    """Each key's cluster, nested in its suite: a dense code of (``stratum``, ``cluster``)
    over rows, given to the row's key (``row_key``)."""
    s, c = np.asarray(stratum, dtype=np.int64), np.asarray(cluster, dtype=np.int64)
    nested = np.unique(s * (int(c.max(initial=-1)) + 1) + c, return_inverse=True)[1]
    out = np.zeros(n_keys, dtype=np.int64)
    out[np.asarray(row_key)] = nested.ravel()
    return out


def chunk_fits(fits: ClusterRobust, start: int) -> ClusterFits:
    """The reader of the fits of a chunk of pairs starting at pair ``start``."""
    return lambda st, rest: fits.take(start + np.flatnonzero(rest))


def pair_cluster_fits(values: PolicyValues, counts: PairCounts) -> ClusterRobust:
    """Every pair's CR2 fit of its paired differences, clusters streamed
    (:func:`~hylo_analytics.stats.cluster_robust_over`): a cluster's pairs (``M_g'M_g``)
    and sums of differences (``A_g - A_g'``, ``A_g = V_g'M_g``) are two products over its
    keys, taken out to the pairs, so the work is a loop over clusters, never over pairs."""
    n = counts.n_pairs.astype(np.float64)
    return cluster_robust_over(n, counts.sum_i - counts.sum_j, _cluster_sums(values, counts))


def _cluster_sums(
    values: PolicyValues, counts: PairCounts
) -> Iterator[tuple[FloatArray, FloatArray]]:
    """Each cluster's (pairs, sum of differences) for every pair ``(i, j)``."""
    n = len(values.policies)
    here, there = counts.i * n + counts.j, counts.j * n + counts.i
    current, pairs, sums = -1, np.zeros((n, n), np.float32), np.zeros((n, n))
    for g, v in cluster_blocks(values):
        if g != current and current >= 0:
            yield pairs.ravel()[here].astype(np.float64), sums.ravel()[here] - sums.ravel()[there]
            pairs, sums = np.zeros((n, n), np.float32), np.zeros((n, n))
        current = g
        valid = ~np.isnan(v)
        m = valid.astype(np.float32)
        pairs += m.T @ m
        sums += np.where(valid, v, 0.0).T @ valid.astype(np.float64)
    if current >= 0:
        yield pairs.ravel()[here].astype(np.float64), sums.ravel()[here] - sums.ravel()[there]


def strength_meat(
    values: PolicyValues, theta: FloatArray, flip: bool
) -> tuple[FloatArray, FloatArray, npt.NDArray[np.int64]]:
    """The strengths' sandwich meat, its per-stratum sums and the units per stratum: the
    keys' score terms spread within suites (a stratified bootstrap of keys, in closed form),
    or, clustered, each cluster's terms summed over its keys first (of clusters). A key of
    one policy scores 0 (no game): the units count it, the blocks read only shared keys."""
    kc = values.key_cluster
    stratum = values.key_stratum
    if kc is not None:  # each cluster's suite
        stratum = np.zeros(int(kc.max(initial=-1)) + 1, dtype=np.int64)
        stratum[kc] = values.key_stratum
    sizes = np.bincount(stratum, minlength=len(values.strata))
    meat, sums = np.zeros((len(theta), len(theta))), np.zeros((len(sizes), len(theta)))
    totals = np.zeros((len(stratum) if kc is not None else 0, len(theta)))
    shared = values.shared
    for k0, k1, v, _ in shared.blocks(max_cells=2**22):
        g = key_scores(theta, -v if flip else v)
        if shared.key_cluster is not None:
            np.add.at(totals, shared.key_cluster[k0:k1], g)
            continue
        part, part_sums = stratified_meat(g, shared.key_stratum[k0:k1], sizes)
        meat, sums = meat + part, sums + part_sums
    if kc is not None:
        meat, sums = stratified_meat(totals, stratum, sizes)
    return meat, sums, sizes


def ranking_spec(spec: IntervalSpec, strength_ci: str, cluster: str | None) -> IntervalSpec:
    """A ranking's interval: CR2 when clustered (whose strengths take the sandwich)."""
    if cluster is None:
        return spec
    if strength_ci == "bootstrap":
        raise InputError(
            "rank: cluster= with strength_ci='bootstrap' is not available (that bootstrap "
            "resamples keys); the default 'sandwich' resamples clusters within suites"
        )
    return replace(spec, method="cr2")


def ranking_note(matrix: pl.DataFrame, values: PolicyValues, cluster: str) -> str:
    """What a clustered ranking's intervals rest on, in words."""
    n = int(values.key_cluster.max(initial=-1)) + 1 if values.key_cluster is not None else 0
    alone = matrix.filter((pl.col("n_pairs") > 0) & (pl.col("n_clusters") < 2)).height
    said = (f"; {alone:,} pair(s) share keys of one cluster only: no cluster-robust test "
            "separates them") if alone else ""  # fmt: skip
    return (f"clustered by {cluster!r}: {n:,} clusters of keys (within suites); every pair's "
            "interval and test are CR2 cluster-robust (Bell-McCaffrey df) and the strengths' "
            f"sandwich resamples clusters{said}")  # fmt: skip
