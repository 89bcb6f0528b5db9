"""The bootstrap: one engine for every interval that resamples, vectorized over groups.

Groups are laid out contiguously in one value array (``sizes`` gives each group's length); a
paired difference is just another input (the per-pair differences). What is resampled is the
empirical distribution of each group (or of each stratum inside a group), and the cheapest
exact way to draw a resampled sum is chosen from the data:

- 0/1 data: a resampled sum is Binomial(n, k/n), drawn directly (nothing per value);
- few distinct values (at most ``_DISCRETE_MAX``, e.g. paired differences of a 0/1 metric,
  which are -1, 0 or 1): a resampled sum depends only on how often each value is drawn, a
  Multinomial(n, observed frequencies), drawn as a chain of binomials; groups with the same
  counts share their draws;
- anything else: ``x @ w`` with ``w ~ Multinomial(n, 1/n)``; one weight matrix per distinct
  group size is shared by every group of that size (common random numbers), which turns the
  bootstrap into a matrix product. Each group's interval is an exact bootstrap interval; only
  the Monte-Carlo noise is correlated across groups of equal size, so do not difference two
  groups' resamples.

Parameters are named as everywhere in :mod:`hylo_analytics.stats`: ``level``,
``n_resamples``, ``seed`` (an int, ``None`` or a :class:`numpy.random.Generator`; the same seed
and inputs give the same interval).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
import numpy.typing as npt

from hylo_analytics._lazy import LazyModule
from hylo_analytics.stats.intervals import _check_level, _f

if TYPE_CHECKING:
    from scipy import special
else:  # scipy is imported on first use: it costs half a second at startup
    special = LazyModule("scipy.special")

__all__ = ["DEFAULT_RESAMPLES", "BootstrapMethod", "Seed", "bootstrap_ci", "bootstrap_means"]

FloatArray = npt.NDArray[np.float64]
ArrayLike = npt.ArrayLike
Seed = int | np.random.Generator | None
BootstrapMethod = Literal["percentile", "bca"]

DEFAULT_RESAMPLES = 10_000
_DEFAULT_MAX_BYTES = 64 * 2**20


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
    plain = len(ssize) == len(gsize)
    # Without strata each stratum is a group; a group with few distinct values is drawn as
    # counts of those values, any other by the shared weights.
    runs = _group_runs(x, gsize) if plain else None
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
    weights: dict[tuple[int, int], FloatArray] = {}
    g0 = 0
    while g0 < len(gsize):
        # Strata, not groups, bound the memory: pick as many groups as fit.
        limit = g_first[g0] + rows_per_chunk
        g1 = max(g0 + 1, int(np.searchsorted(strata_of_group, limit, side="right")))
        s0, s1 = int(g_first[g0]), int(strata_of_group[g1 - 1])
        if runs is not None:
            sums = np.empty((g1 - g0, n_resamples))
            few = runs.n_levels[g0:g1] <= _DISCRETE_MAX
            if few.any():
                sums[few] = _discrete_means(runs, np.flatnonzero(few) + g0, n_resamples, base)
            if not few.all():
                sums[~few] = _multinomial_sums(
                    x, s_start, (s0, s1), ssize, n_resamples, (base, max_bytes), weights, True, ~few
                )
        elif binary:
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
    if strata_sizes is None:
        # A group's resampling distribution depends only on how often it holds each value when
        # it holds few distinct ones (0/1 data: on (n, k)): bootstrap each distinct count
        # vector once and hand its interval to every group that has it.
        levels, codes = _discrete(x)
        if levels is not None and codes is not None:
            counts = _value_counts(codes, kept_sizes, len(levels))
            rows, inverse = np.unique(counts, axis=0, return_inverse=True)
            if len(rows) < len(kept_sizes):
                n_u = rows.sum(axis=1)
                lo_u, hi_u = bootstrap_ci(
                    np.repeat(np.tile(levels, len(rows)), rows.ravel()),
                    n_u,
                    method=method,
                    level=level,
                    n_resamples=n_resamples,
                    seed=seed,
                    binary=binary,
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
    rows: npt.NDArray[np.bool_] | None = None,
) -> FloatArray:
    """Resampled sums (means when ``as_means``) of strata ``span`` (those of ``rows``)."""
    s0, s1 = span
    base, max_bytes = seeding
    sizes = ssize[s0:s1] if rows is None else ssize[s0:s1][rows]
    starts = s_start[s0:s1] if rows is None else s_start[s0:s1][rows]
    unique = np.unique(sizes)
    out = None if len(unique) == 1 else np.empty((len(sizes), n_resamples))
    for n in (int(u) for u in unique):
        idx = np.flatnonzero(sizes == n)
        block = x[starts[idx][:, None] + np.arange(n)]
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


_DISCRETE_MAX = 32


def _discrete(x: FloatArray) -> tuple[FloatArray | None, npt.NDArray[np.int64] | None]:
    """The distinct values of ``x`` and each value's code, when there are few of them."""
    if len(x) == 0:
        return None, None
    levels, codes = np.unique(x, return_inverse=True)
    if len(levels) > _DISCRETE_MAX:
        return None, None
    return levels, np.asarray(codes, dtype=np.int64).ravel()


def _value_counts(
    codes: npt.NDArray[np.int64], sizes: npt.NDArray[np.int64], k: int
) -> npt.NDArray[np.int64]:
    """How often each of ``k`` values occurs in each group of ``sizes`` (shape (G, k))."""
    g = np.repeat(np.arange(len(sizes)), sizes)
    return np.bincount(g * k + codes, minlength=len(sizes) * k).reshape(len(sizes), k)


@dataclass(frozen=True)
class _Runs:
    """The distinct values of every group and how often each occurs (groups back to back)."""

    value: FloatArray
    count: npt.NDArray[np.int64]
    first: npt.NDArray[np.int64]  # index of each group's first distinct value
    n_levels: npt.NDArray[np.int64]


def _group_runs(x: FloatArray, sizes: npt.NDArray[np.int64]) -> _Runs:
    g = np.repeat(np.arange(len(sizes)), sizes)
    order = np.lexsort((x, g))
    xs, gs = x[order], g[order]
    new = np.ones(len(xs), dtype=bool)
    new[1:] = (xs[1:] != xs[:-1]) | (gs[1:] != gs[:-1])
    start = np.flatnonzero(new)
    count = np.diff(np.append(start, len(xs)))
    n_levels = np.bincount(gs[start], minlength=len(sizes))
    first = np.concatenate([[0], np.cumsum(n_levels)[:-1]]).astype(np.int64)
    return _Runs(xs[start], count, first, n_levels)


def _discrete_means(
    runs: _Runs, groups: npt.NDArray[np.int64], n_resamples: int, base: int
) -> FloatArray:
    """Resampled means of ``groups``, each drawn as counts of its distinct values.

    Multinomial(n, counts / n) as a chain of binomials: X_j ~ Bin(n - X_1 - ... - X_{j-1},
    c_j / (n - c_1 - ... - c_{j-1})). Each group's draws come from a generator seeded by
    ``base`` and its counts, so a group's resamples (and interval) depend only on its own
    values and the seed, never on the other groups of the call.
    """
    out = np.empty((len(groups), n_resamples))
    for i, g in enumerate(groups):
        cut = slice(int(runs.first[g]), int(runs.first[g] + runs.n_levels[g]))
        values, counts = runs.value[cut], runs.count[cut]
        order = np.argsort(-counts, kind="stable")  # big classes first: fewer draws left
        n = int(counts.sum())
        rng = np.random.default_rng([base, *counts[order].tolist()])
        left = np.full(n_resamples, n, dtype=np.int64)
        total = np.zeros(n_resamples)
        remaining = n
        for j in order[:-1]:
            draw = rng.binomial(left, counts[j] / remaining)
            total += draw * values[j]
            left -= draw
            remaining -= int(counts[j])
        total += left * values[order[-1]]
        out[i] = total / n
    return out
