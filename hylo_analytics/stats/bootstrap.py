"""The bootstrap: one engine for every interval that resamples, vectorized over groups.

Groups are laid out contiguously in one value array (``sizes`` gives each group's length); a
paired difference is just another input (the per-pair differences). What is resampled is the
empirical distribution of each group (or of each stratum inside a group), and the cheapest
exact way to draw a resampled sum is chosen from the data:

- 0/1 data, and paired differences of it (-1, 0 or 1): a resampled sum depends only on how
  often each value is drawn, a Multinomial(n, observed frequencies), drawn as a binomial (two
  chained binomials for three values), nothing per value. Groups with the same counts are
  bootstrapped once, each from a generator seeded by its counts, so a group's interval
  depends only on its own values and the seed, never on the other groups of the call;
- anything else, unstratified: exact Multinomial(n, 1/n) resamples built from one shared
  Poisson(1) count per cell and resample (the same counts for every group and size, drawn in
  fixed tiles) plus about ``0.8 sqrt(n)`` balls added or taken away per resample and size
  (see :func:`_coupled_means`), so the bulk is one matrix product for all groups whatever
  their sizes. Each group's interval is an exact bootstrap interval that depends only on its
  values and the seed; only the Monte-Carlo noise is correlated across groups (common random
  numbers), so do not difference two groups' resamples.
- stratified (``strata_sizes``): each stratum is resampled on its own, 0/1 strata as
  binomials, others by a Multinomial(n, 1/n) weight matrix per (size, position). The draws
  of a stratum are seeded by its position in its group (and its size, or its (n, k)), so the strata of one group are independent (sharing
  draws between equal strata would correlate them and inflate the interval several times),
  while the i-th strata of two groups share common random numbers as above.

Parameters are named as everywhere in :mod:`hylo_analytics.stats`: ``level``,
``n_resamples``, ``seed`` (an int, ``None`` or a :class:`numpy.random.Generator`; the same seed
and inputs give the same interval).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
import numpy.typing as npt

from hylo_analytics._lazy import LazyModule
from hylo_analytics.errors import InputError
from hylo_analytics.stats._coupled import (  # noqa: F401  (tests read the two paths)
    _DEFAULT_MAX_BYTES,
    _coupled_means_general,
    _coupled_means_integral,
    _integral,
)
from hylo_analytics.stats._resample import (
    _SMALL_LEVELS,
    _chunked_means,
    _discrete_means,
)
from hylo_analytics.stats.closed_form import _check_level, _f
from hylo_analytics.stats.methods import DEFAULT_RESAMPLES, DEFAULT_SEED, Seed

if TYPE_CHECKING:
    from scipy import special
else:  # scipy is imported on first use: it costs half a second at startup
    special = LazyModule("scipy.special")

__all__ = [
    "DEFAULT_RESAMPLES",
    "BootstrapMethod",
    "BootstrapTest",
    "Seed",
    "bootstrap_ci",
    "bootstrap_cis",
    "bootstrap_means",
    "bootstrap_test",
]

FloatArray = npt.NDArray[np.float64]
ArrayLike = npt.ArrayLike
BootstrapMethod = Literal["percentile", "bca", "studentized"]


def bootstrap_means(
    values: ArrayLike,
    sizes: ArrayLike,
    *,
    strata_sizes: ArrayLike | None = None,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: Seed = DEFAULT_SEED,
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
    chunks = _chunked_means(
        values, sizes, strata_sizes, n_resamples, seed, binary, max_bytes, squares=False
    )
    for g0, g1, means, _ in chunks:
        yield g0, g1, means


def bootstrap_ci(
    values: ArrayLike,
    sizes: ArrayLike,
    *,
    method: BootstrapMethod = "percentile",
    level: float = 0.95,
    strata_sizes: ArrayLike | None = None,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: Seed = DEFAULT_SEED,
    binary: bool | None = None,
    max_bytes: int = _DEFAULT_MAX_BYTES,
) -> tuple[FloatArray, FloatArray]:
    """Bootstrap interval of the mean of every group (percentile or BCa), in one pass.

    Groups of size 0 get ``nan``. ``studentized`` (bootstrap-t) resamples the t statistic
    ``(mean* - mean) / se*`` and keeps its coverage on skewed data (lognormal latencies),
    where percentile and BCa intervals of a mean fall short at small n; it is the default for
    continuous metrics. BCa follows Efron (1987) as ``scipy.stats.bootstrap``
    does: bias correction ``z0`` from the share of resampled means below the mean (ties count
    half), acceleration from the jackknife, which for the mean is
    ``sum d**3 / (6 * (sum d**2) ** 1.5)`` with ``d = x - xbar`` (for 0/1 data
    ``(1 - 2p) / (6 sqrt(n p (1 - p)))``). For a stratified bootstrap the acceleration uses the
    pooled group values (an approximation). Groups whose values are all equal get the
    zero-width interval at that value.
    """
    return bootstrap_cis(
        values,
        sizes,
        levels=(level,),
        method=method,
        strata_sizes=strata_sizes,
        n_resamples=n_resamples,
        seed=seed,
        binary=binary,
        max_bytes=max_bytes,
    )[0]


def bootstrap_cis(
    values: ArrayLike,
    sizes: ArrayLike,
    *,
    levels: Sequence[float],
    method: BootstrapMethod = "percentile",
    strata_sizes: ArrayLike | None = None,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: Seed = DEFAULT_SEED,
    binary: bool | None = None,
    max_bytes: int = _DEFAULT_MAX_BYTES,
) -> list[tuple[FloatArray, FloatArray]]:
    """:func:`bootstrap_ci` at several ``levels`` from one set of resamples: the same bounds
    as one call per level with the same seed (the same draws), for the cost of one."""
    bounds, _ = _bootstrap(
        values, sizes, levels, method, strata_sizes, n_resamples, seed, binary, max_bytes, None
    )
    return bounds


@dataclass(frozen=True)
class BootstrapTest:
    """Intervals of every group's mean and the test they invert, from the same resamples.

    ``p_greater`` is the one-sided p of ``H0: mean <= null`` (the alternative: above it),
    ``p_less`` of ``H0: mean >= null``; each rejects at ``alpha`` where the ``1 - 2 alpha``
    interval of the same method excludes ``null`` on that side (up to the resampling grain),
    so a verdict and the interval printed beside it describe one estimand.
    """

    bounds: list[tuple[FloatArray, FloatArray]]
    p_greater: FloatArray
    p_less: FloatArray

    @property
    def p_two_sided(self) -> FloatArray:
        return np.asarray(np.minimum(1.0, 2 * np.minimum(self.p_greater, self.p_less)), np.float64)


def bootstrap_test(
    values: ArrayLike,
    sizes: ArrayLike,
    *,
    levels: Sequence[float],
    method: BootstrapMethod = "percentile",
    null: float = 0.0,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: Seed = DEFAULT_SEED,
    binary: bool | None = None,
    max_bytes: int = _DEFAULT_MAX_BYTES,
) -> BootstrapTest:
    """:func:`bootstrap_cis` and the test of ``mean = null`` each interval inverts.

    - ``percentile``: ``p_greater = (1 + #{mean* <= null}) / (B + 1)`` (and ``>=`` for
      ``p_less``): the share of resampled means on the null's side, the percentile
      interval's inversion, kept above 0 by the usual ``+1``;
    - ``bca``: the ``alpha`` at which the BCa bound reaches ``null``: with ``F`` the share of
      resampled means at or below ``null``, ``w = ndtri(F) - z0``,
      ``p_greater = ndtr(w / (1 + a w) - z0)`` (the percentile share when ``z0 = a = 0``);
    - ``studentized``: the bootstrap-t test, ``(1 + #{t* >= t_obs}) / (B + 1)`` with
      ``t_obs = (mean - null) / se``.

    A group whose values are all equal gets ``1`` on the side its value does not pass and
    the smallest p on the other (``1`` on both at ``null``). Empty groups get ``nan``.
    """
    if not levels:
        raise InputError("bootstrap_test needs at least one level; pass levels=[0.95]")
    bounds, p = _bootstrap(
        values, sizes, levels, method, None, n_resamples, seed, binary, max_bytes, null
    )
    assert p is not None
    return BootstrapTest(bounds, p[0], p[1])


def _bootstrap(
    values: ArrayLike,
    sizes: ArrayLike,
    levels: Sequence[float],
    method: BootstrapMethod,
    strata_sizes: ArrayLike | None,
    n_resamples: int,
    seed: Seed,
    binary: bool | None,
    max_bytes: int,
    null: float | None,
) -> tuple[list[tuple[FloatArray, FloatArray]], tuple[FloatArray, FloatArray] | None]:
    """The bounds at every level, and with ``null`` the p-values of :class:`BootstrapTest`."""
    for level in levels:
        _check_level(level)
    if method not in ("percentile", "bca", "studentized"):
        raise InputError(
            f"bootstrap method must be 'percentile', 'bca' or 'studentized', got {method!r}"
        )
    x = _f(values)
    size = np.asarray(sizes, dtype=np.int64)
    low = [np.full(len(size), np.nan) for _ in levels]
    high = [np.full(len(size), np.nan) for _ in levels]
    p_up, p_down = np.full(len(size), np.nan), np.full(len(size), np.nan)
    tested = None if null is None else (p_up, p_down)

    def done() -> tuple[list[tuple[FloatArray, FloatArray]], tuple[FloatArray, FloatArray] | None]:
        return list(zip(low, high, strict=True)), tested

    keep = size > 0
    if not keep.any():
        return done()
    kept_sizes = size[keep]
    if strata_sizes is not None and not keep.all():
        raise InputError(
            "stratified bootstrap needs every group to have values; drop the empty groups first"
        )
    starts = np.concatenate([[0], np.cumsum(kept_sizes)[:-1]])
    if binary is None:
        binary = bool(np.all((x == 0) | (x == 1)))
    if method == "studentized":
        if strata_sizes is not None:
            raise InputError("the studentized bootstrap is not stratified; use 'percentile'")
        bounds, p_t = _studentized(x, kept_sizes, levels, n_resamples, seed, max_bytes, null)
        for k, (lo_t, hi_t) in enumerate(bounds):
            low[k][keep], high[k][keep] = lo_t, hi_t
        if p_t is not None:
            p_up[keep], p_down[keep] = p_t
        return done()
    if strata_sizes is None:
        # groups of 0/1 values or of their paired differences go by counts, group by group,
        # so that the path a group takes does not depend on the other groups of the call
        small = np.logical_and.reduceat((x == -1) | (x == 0) | (x == 1), starts)
        if small.any():
            kept = np.flatnonzero(keep)
            base = int(np.random.default_rng(seed).integers(2**62))  # as bootstrap_means
            in_small = None if small.all() else np.repeat(small, kept_sizes)
            xs = x if in_small is None else x[in_small]
            st = (
                starts
                if in_small is None
                else np.concatenate([[0], np.cumsum(kept_sizes[small])[:-1]])
            )
            ones = np.add.reduceat(xs == 1, st) if len(xs) else np.zeros(0, np.int64)
            minus = np.add.reduceat(xs == -1, st) if len(xs) else np.zeros(0, np.int64)
            counts = np.stack([minus, kept_sizes[small] - ones - minus, ones], axis=1)
            values_of = _SMALL_LEVELS[1]
            for k, level in enumerate(levels):
                # the draws are the same at every level: the test is read from the first
                lo_s, hi_s, p_s = _counts_ci(
                    values_of, counts, method, level, n_resamples, base, max_bytes,
                    null if k == 0 else None,
                )  # fmt: skip
                low[k][kept[small]], high[k][kept[small]] = lo_s, hi_s
                if p_s is not None:
                    p_up[kept[small]], p_down[kept[small]] = p_s
            if in_small is not None:
                others, p_o = _bootstrap(
                    x[~in_small], kept_sizes[~small], levels, method, None, n_resamples,
                    seed, False, max_bytes, null,
                )  # fmt: skip
                for k, (lo_o, hi_o) in enumerate(others):
                    low[k][kept[~small]], high[k][kept[~small]] = lo_o, hi_o
                if p_o is not None:
                    p_up[kept[~small]], p_down[kept[~small]] = p_o
            return done()
    mean = np.add.reduceat(x, starts) / kept_sizes
    d = x - np.repeat(mean, kept_sizes)
    m2 = np.add.reduceat(d * d, starts)
    m3 = np.add.reduceat(d * d * d, starts)
    flat = np.maximum.reduceat(x, starts) == np.minimum.reduceat(x, starts)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        accel = np.where(flat | (m2 <= 0), 0.0, m3 / (6 * m2**1.5))
    accel = np.nan_to_num(accel, nan=0.0, posinf=0.0, neginf=0.0)
    lo_k = [np.empty(len(mean)) for _ in levels]
    hi_k = [np.empty(len(mean)) for _ in levels]
    pk_up, pk_down = np.empty(len(mean)), np.empty(len(mean))
    for g0, g1, means in bootstrap_means(
        x,
        kept_sizes,
        strata_sizes=strata_sizes,
        n_resamples=n_resamples,
        seed=seed,
        binary=binary,
        max_bytes=max_bytes,
    ):
        if null is not None:  # counts do not depend on the order the quantiles leave
            pk_up[g0:g1], pk_down[g0:g1] = _draws_p(means, mean[g0:g1], accel[g0:g1], null, method)
        for k, level in enumerate(levels):
            # the quantiles work in place, reordering each row: the next level reads the same
            # resampled means, in another order
            alpha = 1 - level
            if method == "percentile":
                q = np.broadcast_to(np.array([alpha / 2, 1 - alpha / 2]), (g1 - g0, 2))
            else:
                q = _bca_levels(means, mean[g0:g1], accel[g0:g1], alpha)
            lo_k[k][g0:g1], hi_k[k][g0:g1] = _row_quantiles(means, q)
    for k in range(len(levels)):
        lo_k[k][flat], hi_k[k][flat] = x[starts][flat], x[starts][flat]
        low[k][keep], high[k][keep] = lo_k[k], hi_k[k]
    p_up[keep], p_down[keep] = pk_up, pk_down
    return done()


def _draws_p(
    means: FloatArray, theta: FloatArray, accel: FloatArray, null: float, method: BootstrapMethod
) -> tuple[FloatArray, FloatArray]:
    """The one-sided p-values of ``mean = null`` that the ``method``'s interval inverts, from
    resampled means (G, B): see :func:`bootstrap_test`."""
    b = means.shape[1]
    tol = (1e-10 * np.maximum(np.abs(means).max(axis=1), abs(null)) + 1e-300)[:, None]
    at_most = np.count_nonzero(means <= null + tol, axis=1)
    at_least = np.count_nonzero(means >= null - tol, axis=1)
    if method == "percentile":
        return (1 + at_most) / (b + 1), (1 + at_least) / (b + 1)
    # BCa: the bound passes null where its quantile level passes the share of draws on the
    # null's side (ties there count: a bound sitting on null does not exclude it)
    z0 = _bca_z0(means, theta)

    def level_at(share: FloatArray) -> FloatArray:
        w = special.ndtri(np.clip(share, 0.5 / b, 1 - 0.5 / b)) - z0
        denom = 1 + accel * w
        with np.errstate(divide="ignore", invalid="ignore"):
            u = np.where(denom > 0, w / denom, np.where(w < 0, -np.inf, np.inf))
        return np.asarray(special.ndtr(u - z0), dtype=np.float64)

    up, down = level_at(at_most / b), 1 - level_at((b - at_least) / b)
    # a group without spread: its interval is its value
    flat = means.min(axis=1) == means.max(axis=1)
    value = means[:, 0]
    up = np.where(flat, np.where(value > null, 1 / (b + 1), 1.0), up)
    down = np.where(flat, np.where(value < null, 1 / (b + 1), 1.0), down)
    return up, down


# -- internals ---------------------------------------------------------------------------------


def _studentized(
    x: FloatArray,
    sizes: npt.NDArray[np.int64],
    levels: Sequence[float],
    n_resamples: int,
    seed: Seed,
    max_bytes: int,
    null: float | None = None,
) -> tuple[list[tuple[FloatArray, FloatArray]], tuple[FloatArray, FloatArray] | None]:
    """Bootstrap-t bounds: ``mean - t*_(1-a/2) se, mean - t*_(a/2) se``, and with ``null``
    the bootstrap-t test of ``mean = null`` (:func:`bootstrap_test`).

    The resampled means of ``x`` and of ``x**2`` come from the same multinomial weights
    (they are seeded by size and chunk only), so each resample's standard error is its own.
    A group of one value, or of equal values, gets the zero-width interval at its mean.
    """
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    if np.any(np.diff(sizes) < 0) and _integral([x, x * x], starts, sizes):
        # Every group's draws depend on its size and values only and integer sums are exact
        # (_integral): groups ordered by size leave each chunk few sizes to draw corrections
        # for, and give the same bounds.
        order = np.argsort(sizes, kind="stable")
        moved = np.concatenate([[0], np.cumsum(sizes[order])[:-1]]) - starts[order]
        at = np.arange(len(x)) - np.repeat(moved, sizes[order])
        bounds, p = _studentized(x[at], sizes[order], levels, n_resamples, seed, max_bytes, null)
        back = np.argsort(order)
        p_back = None if p is None else (p[0][back], p[1][back])
        return [(lo[back], hi[back]) for lo, hi in bounds], p_back
    mean = np.add.reduceat(x, starts) / sizes
    var = np.add.reduceat((x - np.repeat(mean, sizes)) ** 2, starts) / np.maximum(sizes - 1, 1)
    se = np.sqrt(var / sizes)
    lo = [mean.copy() for _ in levels]
    hi = [mean.copy() for _ in levels]
    b = n_resamples
    # a group without spread: its interval is its value, so the test rejects on its side
    smallest = np.where(mean > (null or 0.0), 1 / (b + 1), 1.0)
    p_up, p_down = smallest.copy(), np.where(mean < (null or 0.0), 1 / (b + 1), 1.0)
    common = int(np.random.default_rng(seed).integers(2**62))  # the seed of earlier versions
    chunks = _chunked_means(x, sizes, None, n_resamples, common, False, max_bytes, squares=True)
    for g0, g1, m1, m2 in chunks:
        assert m2 is not None
        n = sizes[g0:g1, None].astype(np.float64)
        # t = (m1 - mean) / sqrt(max(m2 - m1**2, 0) * n / max(n - 1, 1) / n), operation for
        # operation, in place: (G, B) arrays are memory-bound, so fewer temporaries is faster
        t = np.multiply(m1, m1)
        np.subtract(m2, t, out=t)
        np.maximum(t, 0.0, out=t)
        t *= n
        t /= np.maximum(n - 1, 1)
        t /= n
        np.sqrt(t, out=t)
        centred = np.subtract(m1, mean[g0:g1, None], out=m1)
        with np.errstate(divide="ignore", invalid="ignore"):
            np.divide(centred, t, out=t)
        # a resample of one repeated value has no spread: its t is +-infinite (0 when it
        # sits on the mean), kept finite so the partition-based quantiles stay exact
        bad = ~np.isfinite(t)
        if bad.any():
            t[bad] = np.sign(centred[bad]) * 1e300
        if null is not None:
            spread = se[g0:g1] > 0
            with np.errstate(divide="ignore", invalid="ignore"):
                t_obs = ((mean[g0:g1] - null) / se[g0:g1])[:, None]
            up = (1 + np.count_nonzero(t >= t_obs, axis=1)) / (b + 1)
            down = (1 + np.count_nonzero(t <= t_obs, axis=1)) / (b + 1)
            p_up[g0:g1] = np.where(spread, up, p_up[g0:g1])
            p_down[g0:g1] = np.where(spread, down, p_down[g0:g1])
        for k, level in enumerate(levels):
            alpha = 1 - level
            q = np.broadcast_to(np.array([alpha / 2, 1 - alpha / 2]), (g1 - g0, 2))
            q_lo, q_hi = _row_quantiles(t, q)
            ok = (se[g0:g1] > 0) & (np.abs(q_lo) < 1e299) & (np.abs(q_hi) < 1e299)
            lo[k][g0:g1] = np.where(ok, mean[g0:g1] - q_hi * se[g0:g1], mean[g0:g1])
            hi[k][g0:g1] = np.where(ok, mean[g0:g1] - q_lo * se[g0:g1], mean[g0:g1])
    return list(zip(lo, hi, strict=True)), (None if null is None else (p_up, p_down))


def _bca_z0(means: FloatArray, theta: FloatArray) -> FloatArray:
    """BCa's bias correction: the normal quantile of the share of resampled means below
    the estimate."""
    b = means.shape[1]
    # Ties count half (percentileofscore "mean", as scipy >= 1.15): 0/1 data ties a lot.
    # A resample equal to the sample is a tie in exact arithmetic; compare with a tolerance so
    # rounding (which differs between a matrix product and a sum) cannot break the tie.
    tol = (1e-10 * np.abs(means).max(axis=1) + 1e-300)[:, None]
    below = np.count_nonzero(means < theta[:, None] - tol, axis=1)
    share = (below + np.count_nonzero(means <= theta[:, None] + tol, axis=1)) / (2 * b)
    return np.asarray(special.ndtri(np.clip(share, 0.5 / b, 1 - 0.5 / b)))


def _bca_levels(
    means: FloatArray, theta: FloatArray, accel: FloatArray, alpha: float
) -> FloatArray:
    z0 = _bca_z0(means, theta)
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


def _counts_ci(
    levels: FloatArray,
    counts: npt.NDArray[np.int64],
    method: BootstrapMethod,
    level: float,
    n_resamples: int,
    base: int,
    max_bytes: int,
    null: float | None = None,
) -> tuple[FloatArray, FloatArray, tuple[FloatArray, FloatArray] | None]:
    """The bootstrap interval of groups given as counts of ``levels`` (shape (G, k)), and
    with ``null`` the test it inverts (:func:`bootstrap_test`).

    A group's resampling distribution depends only on its counts, so each distinct count
    vector is bootstrapped once and its interval handed to every group that has it; the mean
    and the BCa acceleration come from the counts too, so nothing is done per value.
    """
    rows, inverse = np.unique(counts, axis=0, return_inverse=True)
    n = rows.sum(axis=1).astype(np.float64)
    mean = rows @ levels / n
    d = levels[None, :] - mean[:, None]
    m2 = (rows * d**2).sum(axis=1)
    m3 = (rows * d**3).sum(axis=1)
    flat = (rows > 0).sum(axis=1) == 1
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        accel = np.where(flat | (m2 <= 0), 0.0, m3 / (6 * m2**1.5))
    alpha = 1 - level
    lo, hi = np.empty(len(rows)), np.empty(len(rows))
    p_up, p_down = np.empty(len(rows)), np.empty(len(rows))
    step = max(1, max_bytes // (8 * n_resamples))
    for r0 in range(0, len(rows), step):
        r1 = min(len(rows), r0 + step)
        means = _discrete_means(levels, rows[r0:r1], n_resamples, base)
        if null is not None:
            p_up[r0:r1], p_down[r0:r1] = _draws_p(means, mean[r0:r1], accel[r0:r1], null, method)
        if method == "percentile":
            q = np.broadcast_to(np.array([alpha / 2, 1 - alpha / 2]), (r1 - r0, 2))
        else:
            q = _bca_levels(means, mean[r0:r1], accel[r0:r1], alpha)
        lo[r0:r1], hi[r0:r1] = _row_quantiles(means, q)
    lo[flat], hi[flat] = mean[flat], mean[flat]
    inv = inverse.ravel()
    return lo[inv], hi[inv], (None if null is None else (p_up[inv], p_down[inv]))
