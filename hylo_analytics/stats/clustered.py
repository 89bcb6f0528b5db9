"""Cluster-robust inference for a mean (or a mean paired difference): CR2, small-cluster df.

Episodes of one task (or one init state) are not independent samples when the population is
tasks: a policy better on a task is better on its every seed. An interval that treats the
keys as independent is then too narrow, the more so the larger the intra-cluster
correlation (``benchmarks/bench_cluster_coverage.py``: Tango's 95 % interval covers 0.52 of
the time at intra-task correlation 0.5, the percentile bootstrap 0.40; this one 0.93-0.96 at
10 to 50 tasks). This module gives the interval whose population is the clusters.

The model is the intercept-only regression ``y_k = mu + e_k`` of the ``N`` values of a group
(paired differences, for ``compare``), ``G`` clusters of ``n_g`` keys. Its cluster-robust
variance with Bell & McCaffrey's (2002) CR2 adjustment, ``A_g = (I - H_gg)^(-1/2)``, has a
closed form here: ``H = 11'/N``, so ``A_g 1 = 1 / sqrt(1 - n_g/N)`` and, with ``S_g`` the
cluster's residual sum ``sum_{k in g} (y_k - ybar)``,

    Var_CR2 = sum_g S_g**2 / (1 - n_g/N) / N**2,

unbiased when the errors are independent and homoskedastic, and close to it otherwise,
where CR1's ``G / (G - 1)`` is not (Pustejovsky & Tipton 2018). The t reference has Bell and
McCaffrey's degrees of freedom, ``(tr M)**2 / tr(M**2)`` of ``M = G'G`` (Imbens & Kolesar
2016, working independence), also closed: ``tr M = N`` and

    tr(M**2) = sum_g n_g**2 + (sum_g q_g)**2 - sum_g q_g**2,   q_g = n_g**2 / (N - n_g),

so ``df = N**2 / tr(M**2)``, exactly ``G - 1`` for equal clusters and fewer when one cluster
dominates. Everything is a sum over clusters: one call covers every group of an aggregate,
every row of a comparison and, from cluster sums, every pair of a ranking.

Layout (as the bootstrap's): clusters back to back, ``counts`` per group; each cluster's
``sizes`` (keys) and ``sums`` (of its values). :func:`cluster_totals` makes them from raw
values. A group of one cluster has no cluster-robust variance (``nan``); all values equal give
a zero-width interval at the mean, as any variance-based interval does.

Golden values (``tests/stats/test_clustered.py``): CR1 against statsmodels' ``OLS(...).fit(
cov_type="cluster")``, CR2 and its df against the matrix formulas (``H``, ``(I - H_gg)^(-1/2)``,
``G'G``) computed directly, the pooled contrast against the same with suite dummies.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
import numpy.typing as npt

from hylo_analytics._lazy import LazyModule
from hylo_analytics.stats.closed_form import _check_level, _codes, _f

if TYPE_CHECKING:
    from scipy import special
else:  # scipy is imported on first use: it costs half a second at startup
    special = LazyModule("scipy.special")

__all__ = [
    "ClusterRobust",
    "cluster_robust",
    "cluster_robust_over",
    "cluster_totals",
    "pool_strata",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
ArrayLike = npt.ArrayLike


@dataclass(frozen=True)
class ClusterRobust:
    """Per group: the mean, its CR2 standard error, the Bell-McCaffrey degrees of freedom,
    the clusters and keys it rests on, and the CR1 standard error (statsmodels' ``cluster``:
    ``G / (G - 1)``) for reference. ``se`` and ``df`` are ``nan`` below two clusters."""

    mean: FloatArray
    se: FloatArray
    df: FloatArray
    n_clusters: IntArray
    n: FloatArray
    se_cr1: FloatArray

    def take(self, index: npt.ArrayLike) -> ClusterRobust:
        """The groups ``index`` (a mask or positions) of this fit."""
        at = np.asarray(index)
        return ClusterRobust(self.mean[at], self.se[at], self.df[at], self.n_clusters[at],
                             self.n[at], self.se_cr1[at])  # fmt: skip

    def bounds(self, level: float) -> tuple[FloatArray, FloatArray]:
        """``mean -/+ t(df) * se``: the two-sided interval of coverage ``level``."""
        _check_level(level)
        with np.errstate(invalid="ignore"):
            q = special.stdtrit(self.df, 0.5 + level / 2)
        half = np.where(self.se == 0, 0.0, q * self.se)
        return self.mean - half, self.mean + half

    def p(self, alternative: Literal["greater", "less"], null: ArrayLike = 0.0) -> FloatArray:
        """One-sided p of the t test of ``mean <= null`` (``greater``) or ``>= null``; a zero
        standard error decides by the sign of ``mean - null`` (0.5 when equal)."""
        diff = self.mean - _f(null)
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(self.se == 0, np.sign(diff) * np.inf, diff / self.se)
            if alternative == "less":
                t = -t
            p = np.where(np.isnan(t) & (self.se == 0), 0.5, special.stdtr(self.df, -t))
        return np.asarray(np.where(np.isnan(self.se), np.nan, p), dtype=np.float64)


def cluster_robust(sizes: ArrayLike, sums: ArrayLike, counts: ArrayLike) -> ClusterRobust:
    """CR2 inference on each group's mean from its clusters' key counts and value sums.

    ``sizes`` / ``sums``: one entry per cluster, the groups' clusters back to back (``counts``
    of them per group); clusters of no key are allowed and weigh nothing. See the module
    for the formulas.
    """
    n_g, t_g = _f(sizes), _f(sums)
    c = np.asarray(counts, dtype=np.int64)
    gid = np.repeat(np.arange(len(c)), c)
    n = _f(np.bincount(gid, weights=n_g, minlength=len(c)))
    total = _f(np.bincount(gid, weights=t_g, minlength=len(c)))
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = total / n
    terms = _terms(n_g, t_g, n[gid], mean[gid])
    summed = _f(np.stack([np.bincount(gid, weights=t, minlength=len(c)) for t in terms]))
    return _finish(n, mean, summed)


def cluster_robust_over(
    n: ArrayLike, total: ArrayLike, clusters: Iterable[tuple[ArrayLike, ArrayLike]]
) -> ClusterRobust:
    """:func:`cluster_robust` with the clusters streamed: every group has a slot in each
    cluster (``(sizes, sums)``, one entry per group, 0 keys where the group has none there),
    and ``n`` / ``total`` are the groups' keys and value sums, known beforehand. Memory is a
    few arrays of the groups' length whatever the clusters: a ranking's two million pairs
    over its tasks."""
    nn, tt = _f(n), _f(total)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = tt / nn
    summed = np.zeros((len(_TERMS), len(nn)))
    for sizes, sums in clusters:
        summed += _terms(_f(sizes), _f(sums), nn, mean)
    return _finish(nn, mean, summed)


# the per-cluster terms whose sums over a group's clusters give its CR2 fit
_TERMS = ("cr2", "cr1", "q", "q2", "n2", "used")


def _terms(n_g: FloatArray, t_g: FloatArray, n: FloatArray, mean: FloatArray) -> FloatArray:
    """Each cluster's share of its group's sums (``_TERMS``): ``S_g**2 N / (N - n_g)``,
    ``S_g**2``, ``q_g``, ``q_g**2``, ``n_g**2`` and whether it holds a key."""
    used = n_g > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        resid = np.where(used, t_g - n_g * mean, 0.0)
        rest = n - n_g  # 0 for a group's only cluster: its variance is undefined
        cr2 = np.where(used, resid**2 * n / rest, 0.0)
        q = np.where(used, n_g**2 / rest, 0.0)
    return np.stack([cr2, resid**2, q, q * q, n_g**2, used.astype(np.float64)])


def _finish(n: FloatArray, mean: FloatArray, summed: FloatArray) -> ClusterRobust:
    cr2, cr1, q, q2, n2, used = summed
    few = used < 2
    nan = np.float64(np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = n**2 / (n2 + q * q - q2)
        var1 = cr1 / n**2 * used / (used - 1)
        var2 = cr2 / n**2
    return ClusterRobust(
        mean=np.where(n > 0, mean, nan),
        se=np.where(few, nan, np.sqrt(np.maximum(var2, 0.0))),
        df=np.where(few, nan, df),
        n_clusters=used.astype(np.int64),
        n=n,
        se_cr1=np.where(few, nan, np.sqrt(np.maximum(var1, 0.0))),
    )


def cluster_totals(
    values: ArrayLike, clusters: ArrayLike, groups: ArrayLike | None = None
) -> tuple[IntArray, FloatArray, FloatArray]:
    """``(counts, sizes, sums)`` for :func:`cluster_robust` from raw values: each value's
    cluster label and (optional) group label; groups in sorted label order, their clusters
    in sorted order within."""
    x = _f(values)
    g = np.zeros(len(x), dtype=np.int64) if groups is None else _codes(groups)
    cell = _codes(np.stack([g, _codes(clusters)]), axis=1)
    sizes = np.bincount(cell).astype(np.float64)
    sums = _f(np.bincount(cell, weights=x))
    owner = np.zeros(len(sizes), dtype=np.int64)
    owner[cell] = g
    counts = np.bincount(owner, minlength=int(g.max(initial=-1)) + 1).astype(np.int64)
    return counts, sizes, sums


def pool_strata(fits: ClusterRobust, weights: ArrayLike) -> ClusterRobust:
    """The weighted sum ``sum_s w_s mean_s`` of independent strata (suites, each a group of
    ``fits``, its clusters nested in it) as one cluster-robust estimate: variance ``sum w_s**2
    se_s**2`` (the CR2 of the regression on suite dummies, whose ``H`` is block-diagonal) and
    the Bell-McCaffrey df of that contrast, ``(sum w_s**2 / N_s)**2 / sum w_s**4 / (df_s
    N_s**2)``. Strata of weight 0 are left out."""
    w = _f(weights)
    use = w != 0
    w, n, se, df = w[use], fits.n[use], fits.se[use], fits.df[use]
    mean = float(np.dot(w, fits.mean[use]))
    var = float(np.sum(w**2 * se**2))
    with np.errstate(divide="ignore", invalid="ignore"):
        pooled_df = float(np.sum(w**2 / n) ** 2 / np.sum(w**4 / (df * n**2)))
        var1 = float(np.sum(w**2 * fits.se_cr1[use] ** 2))
    return ClusterRobust(
        mean=np.array([mean]),
        se=np.array([np.sqrt(var)]),
        df=np.array([pooled_df]),
        n_clusters=np.array([int(fits.n_clusters[use].sum())]),
        n=np.array([float(n.sum())]),
        se_cr1=np.array([np.sqrt(var1)]),
    )
