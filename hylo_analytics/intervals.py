"""Confidence intervals and standard errors as pure numpy/scipy functions over many groups.

Every function takes arrays (one entry per group) and returns arrays, so one call covers all the
groups of an aggregate. Conventions:

- ``level`` is the two-sided coverage (0.95 gives the 2.5 % and 97.5 % bounds);
- a group with no valid value gets ``nan`` bounds; it is never treated as 0;
- randomness takes ``seed`` (an int, ``None`` or a :class:`numpy.random.Generator`); the same
  seed and inputs give the same interval.

The bootstrap is vectorized across groups. Groups are laid out contiguously in one value array
(``sizes`` gives each group's length). For 0/1 data a resampled sum is Binomial(n, k/n), so it is
drawn directly and costs nothing per value. For other data, a resampled sum of a group of size n
is ``x @ w`` with ``w ~ Multinomial(n, 1/n)``; one weight matrix per distinct group size is shared
by every group of that size (common random numbers), which turns the bootstrap into a matrix
product. Each group's interval is an exact bootstrap interval; only the Monte-Carlo noise is
correlated across groups of equal size, so do not difference two groups' resamples.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Literal

import numpy as np
import numpy.typing as npt

from hylo_analytics._lazy import LazyModule

if TYPE_CHECKING:
    from scipy import special, stats
else:  # scipy is imported on first use: it costs half a second at startup
    special = LazyModule("scipy.special")
    stats = LazyModule("scipy.stats")

__all__ = [
    "BootstrapMethod",
    "bootstrap_ci",
    "bootstrap_means",
    "clopper_pearson",
    "clustered_stderr",
    "normal_ci",
    "wilson",
    "z_value",
]

FloatArray = npt.NDArray[np.float64]
ArrayLike = npt.ArrayLike
Seed = int | np.random.Generator | None
BootstrapMethod = Literal["percentile", "bca"]

_DEFAULT_MAX_BYTES = 64 * 2**20


def z_value(level: float) -> float:
    """The standard normal quantile for a two-sided interval of coverage ``level``."""
    _check_level(level)
    return float(special.ndtri(0.5 + level / 2))


def wilson(
    successes: ArrayLike, n: ArrayLike, level: float = 0.95
) -> tuple[FloatArray, FloatArray]:
    """Wilson score interval for a binomial proportion (good coverage even near 0 and 1)."""
    k, nn = _f(successes), _f(n)
    z = z_value(level)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = k / nn
        denom = 1 + z * z / nn
        centre = (p + z * z / (2 * nn)) / denom
        half = z * np.sqrt(p * (1 - p) / nn + z * z / (4 * nn * nn)) / denom
    # At k = 0 (k = n) the bound is exactly 0 (1); rounding would leave it a hair inside.
    low = np.where(k <= 0, 0.0, np.clip(centre - half, 0, 1))
    high = np.where(k >= nn, 1.0, np.clip(centre + half, 0, 1))
    empty = nn <= 0
    return np.where(empty, np.nan, low), np.where(empty, np.nan, high)


def clopper_pearson(
    successes: ArrayLike, n: ArrayLike, level: float = 0.95
) -> tuple[FloatArray, FloatArray]:
    """Clopper-Pearson "exact" interval: beta quantiles, conservative (coverage >= level)."""
    _check_level(level)
    k, nn = _f(successes), _f(n)
    alpha = 1 - level
    empty = nn <= 0
    safe_n = np.where(empty, 1.0, nn)
    with np.errstate(invalid="ignore"):
        low = np.where(k > 0, stats.beta.ppf(alpha / 2, k, safe_n - k + 1), 0.0)
        high = np.where(k < safe_n, stats.beta.ppf(1 - alpha / 2, k + 1, safe_n - k), 1.0)
    return np.where(empty, np.nan, low), np.where(empty, np.nan, high)


def normal_ci(
    mean: ArrayLike, stderr: ArrayLike, level: float = 0.95
) -> tuple[FloatArray, FloatArray]:
    """``mean -/+ z * stderr`` (the CLT interval Miller 2024 recommends for large evals)."""
    m, se = _f(mean), _f(stderr)
    z = z_value(level)
    return m - z * se, m + z * se


def clustered_stderr(
    values: ArrayLike,
    clusters: ArrayLike,
    groups: ArrayLike | None = None,
    *,
    small_sample: bool = False,
) -> FloatArray:
    """Cluster-robust standard error of the mean, per group (Miller 2024, "Adding Error Bars").

    ``SE = sqrt(sum_c (sum_{i in c} (x_i - xbar))**2) / n``: questions of one task (cluster)
    are correlated, so residuals are summed within a cluster before squaring. With
    ``small_sample=True`` the variance is multiplied by ``G / (G - 1)`` (G = clusters in the
    group), the usual correction that keeps it from being too small with few clusters; a group
    with one cluster then has an undefined (nan) error. With one value per cluster and the
    correction off, this is the plain ``std(ddof=0) / sqrt(n)``.
    """
    x = _f(values)
    g = _codes(np.zeros(len(x)) if groups is None else groups)
    n_groups = int(g.max()) + 1 if len(x) else 0
    c = _codes(np.stack([g, _codes(clusters)]), axis=1)
    n = np.bincount(g, minlength=n_groups).astype(float)
    mean = np.bincount(g, weights=x, minlength=n_groups) / n
    resid_sum = np.bincount(c, weights=x - mean[g])
    cluster_group = np.zeros(len(resid_sum), dtype=np.int64)
    cluster_group[c] = g
    var = np.bincount(cluster_group, weights=resid_sum**2, minlength=n_groups)
    if small_sample:
        n_clusters = np.bincount(cluster_group, minlength=n_groups).astype(float)
        with np.errstate(divide="ignore", invalid="ignore"):
            var = np.where(n_clusters > 1, var * n_clusters / (n_clusters - 1), np.nan)
    return np.asarray(np.sqrt(var) / n, dtype=np.float64)


def bootstrap_means(
    values: ArrayLike,
    sizes: ArrayLike,
    *,
    strata_sizes: ArrayLike | None = None,
    n_resamples: int = 10_000,
    seed: Seed = None,
    binary: bool | None = None,
    max_bytes: int = _DEFAULT_MAX_BYTES,
) -> Iterator[tuple[int, int, FloatArray]]:
    """Yield ``(g0, g1, means)``: resampled means of groups ``g0:g1``, shape (g1 - g0, B).

    ``values`` holds the groups back to back (``sizes[g]`` values each, all > 0). With
    ``strata_sizes`` each group is split further into consecutive strata (for example the
    seeds of one task) and the bootstrap resamples within each stratum, as rliable's stratified
    bootstrap does. Groups are processed in chunks so one chunk's resamples take at most
    ``max_bytes``.
    """
    x = _f(values)
    gsize = np.asarray(sizes, dtype=np.int64)
    ssize = gsize if strata_sizes is None else np.asarray(strata_sizes, dtype=np.int64)
    if np.any(gsize <= 0) or np.any(ssize <= 0) or ssize.sum() != len(x) or gsize.sum() != len(x):
        raise ValueError("sizes and strata_sizes must be positive and each sum to len(values)")
    if binary is None:
        binary = bool(np.all((x == 0) | (x == 1)))
    rng = np.random.default_rng(seed)
    base = int(rng.integers(2**62))
    s_start = np.concatenate([[0], np.cumsum(ssize)])
    if not np.isin(np.cumsum(gsize), s_start).all():
        raise ValueError("every group must end where one of its strata ends")
    s_sum = np.add.reduceat(x, s_start[:-1]) if len(x) else np.zeros(0)
    g_end = np.cumsum(gsize)
    strata_of_group = np.searchsorted(s_start[1:], g_end, side="left") + 1
    g_first = np.concatenate([[0], strata_of_group[:-1]])
    rows_per_chunk = max(1, max_bytes // (8 * n_resamples))
    # Without strata each stratum is a group: resample means directly and skip the reduction.
    plain = len(ssize) == len(gsize)
    weights: dict[tuple[int, int], FloatArray] = {}
    g0 = 0
    while g0 < len(gsize):
        # Strata, not groups, bound the memory: pick as many groups as fit.
        limit = g_first[g0] + rows_per_chunk
        g1 = max(g0 + 1, int(np.searchsorted(strata_of_group, limit, side="right")))
        s0, s1 = int(g_first[g0]), int(strata_of_group[g1 - 1])
        if binary:
            sums = _binomial_sums(s_sum[s0:s1], ssize[s0:s1], n_resamples, rng, plain)
        else:
            sums = _multinomial_sums(
                x, s_start, (s0, s1), ssize, n_resamples, (base, max_bytes), weights, plain
            )
        if plain:
            yield g0, g1, sums
        else:
            local = g_first[g0:g1] - s0
            yield g0, g1, np.add.reduceat(sums, local, axis=0) / gsize[g0:g1, None]
        g0 = g1


def bootstrap_ci(
    values: ArrayLike,
    sizes: ArrayLike,
    *,
    method: BootstrapMethod = "percentile",
    level: float = 0.95,
    strata_sizes: ArrayLike | None = None,
    n_resamples: int = 10_000,
    seed: Seed = None,
    binary: bool | None = None,
    max_bytes: int = _DEFAULT_MAX_BYTES,
) -> tuple[FloatArray, FloatArray]:
    """Bootstrap interval of the mean of every group (percentile or BCa), in one pass.

    Groups of size 0 get ``nan``. BCa follows Efron (1987) as ``scipy.stats.bootstrap``
    does: bias correction ``z0`` from the share of resampled means below the mean (ties count
    half), acceleration from the jackknife, which for the mean is
    ``sum d**3 / (6 * (sum d**2) ** 1.5)`` with ``d = x - xbar`` (for 0/1 data
    ``(1 - 2p) / (6 sqrt(n p (1 - p)))``). For a stratified bootstrap the acceleration uses the
    pooled group values (an approximation). Groups whose values are all equal get the
    zero-width interval at that value.
    """
    _check_level(level)
    if method not in ("percentile", "bca"):
        raise ValueError(f"bootstrap method must be 'percentile' or 'bca', got {method!r}")
    x = _f(values)
    size = np.asarray(sizes, dtype=np.int64)
    low = np.full(len(size), np.nan)
    high = np.full(len(size), np.nan)
    keep = size > 0
    if not keep.any():
        return low, high
    kept_sizes = size[keep]
    if strata_sizes is not None and not keep.all():
        raise ValueError("stratified bootstrap needs every group to have values")
    starts = np.concatenate([[0], np.cumsum(kept_sizes)[:-1]])
    if binary is None:
        binary = bool(np.all((x == 0) | (x == 1)))
    if binary and strata_sizes is None:
        # A 0/1 group's resampling distribution depends only on (n, k): bootstrap each distinct
        # pair once and hand its interval to every group that has it.
        k = np.rint(np.add.reduceat(x, starts)).astype(np.int64)
        pairs, inverse = np.unique(np.stack([kept_sizes, k]), axis=1, return_inverse=True)
        if pairs.shape[1] < len(kept_sizes):
            n_u, k_u = pairs
            offset = np.arange(n_u.sum()) - np.repeat(np.cumsum(n_u) - n_u, n_u)
            ones = (offset < np.repeat(k_u, n_u)).astype(np.float64)
            lo_u, hi_u = bootstrap_ci(
                ones,
                n_u,
                method=method,
                level=level,
                n_resamples=n_resamples,
                seed=seed,
                binary=True,
                max_bytes=max_bytes,
            )
            low[keep], high[keep] = lo_u[inverse.ravel()], hi_u[inverse.ravel()]
            return low, high
    mean = np.add.reduceat(x, starts) / kept_sizes
    d = x - np.repeat(mean, kept_sizes)
    m2 = np.add.reduceat(d * d, starts)
    m3 = np.add.reduceat(d * d * d, starts)
    flat = np.maximum.reduceat(x, starts) == np.minimum.reduceat(x, starts)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        accel = np.where(flat | (m2 <= 0), 0.0, m3 / (6 * m2**1.5))
    accel = np.nan_to_num(accel, nan=0.0, posinf=0.0, neginf=0.0)
    alpha = 1 - level
    lo_k, hi_k = np.empty(len(mean)), np.empty(len(mean))
    for g0, g1, means in bootstrap_means(
        x,
        kept_sizes,
        strata_sizes=strata_sizes,
        n_resamples=n_resamples,
        seed=seed,
        binary=binary,
        max_bytes=max_bytes,
    ):
        if method == "percentile":
            q = np.array([alpha / 2, 1 - alpha / 2])
            lo_k[g0:g1], hi_k[g0:g1] = _row_quantiles(means, np.broadcast_to(q, (g1 - g0, 2)))
        else:
            q = _bca_levels(means, mean[g0:g1], accel[g0:g1], alpha)
            lo_k[g0:g1], hi_k[g0:g1] = _row_quantiles(means, q)
    lo_k[flat], hi_k[flat] = x[starts][flat], x[starts][flat]
    low[keep], high[keep] = lo_k, hi_k
    return low, high


# -- internals ---------------------------------------------------------------------------------


def _binomial_sums(
    k: FloatArray,
    n: npt.NDArray[np.int64],
    n_resamples: int,
    rng: np.random.Generator,
    as_means: bool,
) -> FloatArray:
    # Strata with equal (n, k) have equal resampling distributions: draw once per distinct pair.
    pairs, inverse = np.unique(
        np.stack([n, np.rint(k).astype(np.int64)]), axis=1, return_inverse=True
    )
    draws = rng.binomial(
        pairs[0][:, None], (pairs[1] / pairs[0])[:, None], size=(pairs.shape[1], n_resamples)
    ).astype(np.float64)
    if as_means:
        draws /= pairs[0][:, None]
    return draws[inverse.ravel()]


def _multinomial_sums(
    x: FloatArray,
    s_start: npt.NDArray[np.int64],
    span: tuple[int, int],
    ssize: npt.NDArray[np.int64],
    n_resamples: int,
    seeding: tuple[int, int],
    cache: dict[tuple[int, int], FloatArray],
    as_means: bool,
) -> FloatArray:
    """Resampled sums (means when ``as_means``) of strata ``span``, shape (strata, B)."""
    s0, s1 = span
    base, max_bytes = seeding
    sizes = ssize[s0:s1]
    unique = np.unique(sizes)
    out = None if len(unique) == 1 else np.empty((s1 - s0, n_resamples))
    for n in (int(u) for u in unique):
        idx = np.flatnonzero(sizes == n)
        block = x[s_start[s0 + idx][:, None] + np.arange(n)]
        # The weights depend only on (seed, n, chunk), so every group chunk sees the same ones;
        # they are cached while they fit in the memory budget.
        step = max(1, max_bytes // (8 * n))
        parts = []
        for j in range(0, n_resamples, step):
            w = cache.get((n, j))
            if w is None:
                b = min(step, n_resamples - j)
                counts = np.random.default_rng([base, n, j]).multinomial(n, np.full(n, 1 / n), b)
                w = np.ascontiguousarray(counts.T, dtype=np.float64)
                if as_means:
                    w /= n
                if n * n_resamples * 8 <= max_bytes:
                    cache[(n, j)] = w
            parts.append(block @ w)
        result = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)
        if out is None:
            return result
        out[idx] = result
    assert out is not None
    return out


def _bca_levels(
    means: FloatArray, theta: FloatArray, accel: FloatArray, alpha: float
) -> FloatArray:
    b = means.shape[1]
    # Ties count half (percentileofscore "mean", as scipy >= 1.15): 0/1 data ties a lot.
    # A resample equal to the sample is a tie in exact arithmetic; compare with a tolerance so
    # rounding (which differs between a matrix product and a sum) cannot break the tie.
    tol = (1e-10 * np.abs(means).max(axis=1) + 1e-300)[:, None]
    below = np.count_nonzero(means < theta[:, None] - tol, axis=1)
    share = (below + np.count_nonzero(means <= theta[:, None] + tol, axis=1)) / (2 * b)
    z0 = special.ndtri(np.clip(share, 0.5 / b, 1 - 0.5 / b))
    za = special.ndtri(np.array([alpha / 2, 1 - alpha / 2]))
    num = z0[:, None] + za[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        q = special.ndtr(z0[:, None] + num / (1 - accel[:, None] * num))
    return np.asarray(np.where(np.isfinite(q), q, 0.5))


def _row_quantiles(means: FloatArray, q: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Linear-interpolated quantiles (numpy's default method) at per-row levels ``q`` (G, 2).

    Works in place: ``means`` is the caller's scratch buffer, and a copy would double the cost.
    """
    b = means.shape[1]
    pos = np.clip(q, 0, 1) * (b - 1)
    lo = np.floor(pos).astype(np.int64)
    frac = pos - lo
    k1, k2 = int(lo[0, 0]), int(lo[0, 1])
    if (lo == lo[0]).all() and k1 < k2 < b - 1:
        # Shared positions (the percentile method): two single-kth partitions, the second on
        # the upper part only, plus row minima for the neighbours, beat a multi-kth partition
        # or a sort several times over.
        means.partition(k1, axis=1)
        upper = means[:, k1 + 1 :]
        upper.partition(k2 - k1 - 1, axis=1)
        v1, v1n = means[:, k1], upper.min(axis=1)
        v2, v2n = upper[:, k2 - k1 - 1], upper[:, k2 - k1 :].min(axis=1)
        return v1 + frac[:, 0] * (v1n - v1), v2 + frac[:, 1] * (v2n - v2)
    means.sort(axis=1)
    hi = np.minimum(lo + 1, b - 1)
    v_lo = np.take_along_axis(means, lo, axis=1)
    v_hi = np.take_along_axis(means, hi, axis=1)
    out = v_lo + frac * (v_hi - v_lo)
    return out[:, 0], out[:, 1]


def _codes(a: ArrayLike, axis: int | None = None) -> npt.NDArray[np.int64]:
    """Dense integer codes of ``a`` (of its columns with ``axis=1``)."""
    inverse = np.unique(np.asarray(a), axis=axis, return_inverse=True)[1]
    return np.asarray(inverse, dtype=np.int64).ravel()


def _f(a: ArrayLike) -> FloatArray:
    return np.asarray(a, dtype=np.float64)


def _check_level(level: float) -> None:
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1 (exclusive), got {level!r}")
