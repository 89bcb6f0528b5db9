"""A paired difference pooled over suites: its weights, its test and its interval.

A paper averages its suites (LIBERO's four, each 1/4), so the pooled effect is the
suite-weighted paired difference ``Delta = sum_s w_s delta_s`` with ``delta_s = (b_s - c_s)
/ n_s`` (``b_s`` pairs where only the candidate succeeded, ``c_s`` only the parent, ``n_s``
pairs in suite ``s``).

- :func:`suite_weights`: ``1/S`` per suite (``"suite"``) or ``n_s / N`` (``"episodes"``).
- :func:`sign_flip_p`: the stratified sign-flip test of ``Delta``: under "no difference"
  each discordant pair's sign is a fair coin, independently, so ``Delta* = sum_s w_s (2 X_s -
  m_s) / n_s`` with ``X_s ~ Binomial(m_s, 1/2)``, ``m_s = b_s + c_s``. Its statistic is
  ``Delta`` itself, so it tests the printed difference. Exact (the per-suite binomials
  convolved on the lattice the steps ``w_s / n_s`` span) while the lattice is small, Monte
  Carlo with a seed otherwise. Weighting by episodes makes every step ``1/N``: the test is
  then the exact McNemar test of the summed ``b`` and ``c`` (pooled McNemar), which weights
  a suite by its discordant pairs, not by ``1/S``.
- :func:`pooled_bootstrap`: numeric metrics: the stratified paired bootstrap (keys resampled
  within suites) of the same ``Delta``, its percentile intervals and its p from the same
  draws.
- :func:`mover_ci`: the MOVER interval (Zou & Donner 2008) of ``Delta`` from each suite's
  interval ``[l_s, u_s]`` around ``d_s``: ``D - sqrt(sum w_s^2 (d_s - l_s)^2)``,
  ``D + sqrt(sum w_s^2 (u_s - d_s)^2)``. With one suite it is that suite's interval.

Golden values (``tests/compare/test_pooled.py``): the exact p against brute force over every
sign assignment, MOVER by hand from :func:`~hylo_analytics.stats.tango_ci`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Literal

import numpy as np
import numpy.typing as npt

from hylo_analytics._lazy import LazyModule
from hylo_analytics.errors import InputError
from hylo_analytics.stats.bootstrap import _row_quantiles, bootstrap_means
from hylo_analytics.stats.methods import DEFAULT_SEED, Seed

if TYPE_CHECKING:
    from scipy import stats
else:
    stats = LazyModule("scipy.stats")

__all__ = [
    "PooledBootstrap",
    "SignFlip",
    "Weighting",
    "mover_ci",
    "pooled_bootstrap",
    "sign_flip_p",
    "suite_weights",
]

FloatArray = npt.NDArray[np.float64]
Weighting = Literal["suite", "episodes"]

# the exact distribution is convolved while its lattice and the work stay this small
_MAX_LATTICE = 2_000_000
_MAX_WORK = 5_000_000  # about 10 ms of numpy adds
_DENOMINATOR = 100_000  # the largest denominator a ratio of steps may have to be a lattice


def suite_weights(n: npt.ArrayLike, weights: Weighting = "suite") -> FloatArray:
    """Each suite's weight, summing to 1: ``1/S`` (``suite``, as papers average suites) or
    ``n_s / N`` (``episodes``: the episode-pooled difference). Empty suites weigh 0."""
    nn = np.asarray(n, dtype=np.float64)
    if weights == "suite":
        w = (nn > 0).astype(np.float64)
    elif weights == "episodes":
        w = nn.copy()
    else:
        raise InputError(f"weights must be 'suite' or 'episodes', got {weights!r}")
    total = w.sum()
    return w / total if total > 0 else w


@dataclass(frozen=True)
class SignFlip:
    """The stratified sign-flip test of ``Delta``: one-sided p each way, two-sided p, and
    how it was computed (``exact`` or ``monte carlo``, with the draws and seed)."""

    p_greater: float
    p_less: float
    p_two_sided: float
    method: str


def sign_flip_p(
    b: npt.ArrayLike,
    c: npt.ArrayLike,
    n: npt.ArrayLike,
    weights: npt.ArrayLike,
    *,
    n_draws: int = 100_000,
    seed: Seed = DEFAULT_SEED,
) -> SignFlip:
    """The stratified sign-flip p of ``Delta = sum w_s (b_s - c_s) / n_s``.

    ``p_greater`` is ``P(Delta* >= Delta)``, ``p_less`` ``P(Delta* <= Delta)``, the
    two-sided p doubles the smaller (the null is symmetric). Exact when the steps ``w_s /
    n_s`` lie on a small integer lattice (they do for equal suites, and for ``episodes``),
    else ``n_draws`` seeded Monte-Carlo draws, ``(1 + hits) / (1 + n_draws)``.
    """
    bb = np.asarray(b, dtype=np.int64)
    cc = np.asarray(c, dtype=np.int64)
    nn = np.asarray(n, dtype=np.float64)
    ww = np.asarray(weights, dtype=np.float64)
    keep = (nn > 0) & (bb + cc > 0) & (ww > 0)
    bb, cc, m = bb[keep], cc[keep], (bb + cc)[keep]
    steps = ww[keep] / nn[keep]
    if m.size == 0:
        return SignFlip(1.0, 1.0, 1.0, "exact")
    grid = _lattice(steps)
    if grid is not None and _small(grid, m):
        p_hi, p_lo = _exact(grid, bb, m)
        method = "exact"
    else:
        p_hi, p_lo = _monte_carlo(steps, grid, bb, m, n_draws, seed)
        method = f"monte carlo ({n_draws} draws, seed {seed})"
    two = min(1.0, 2.0 * min(p_hi, p_lo))
    return SignFlip(min(p_hi, 1.0), min(p_lo, 1.0), two, method)


def _lattice(steps: FloatArray) -> npt.NDArray[np.int64] | None:
    """Integers ``g_s`` proportional to ``steps`` (None when no small lattice holds them)."""
    top = float(steps.max())
    ratios = [Fraction(float(s) / top).limit_denominator(_DENOMINATOR) for s in steps]
    if any(abs(float(r) * top - s) > 1e-12 * top for r, s in zip(ratios, steps, strict=True)):
        return None
    common = math.lcm(*(r.denominator for r in ratios))
    if common > _MAX_LATTICE:
        return None
    return np.array([r.numerator * (common // r.denominator) for r in ratios], dtype=np.int64)


def _small(grid: npt.NDArray[np.int64], m: npt.NDArray[np.int64]) -> bool:
    length = np.cumsum(grid * m) + 1
    return bool(length[-1] <= _MAX_LATTICE and np.sum(length * (m + 1)) <= _MAX_WORK)


def _exact(
    grid: npt.NDArray[np.int64], b: npt.NDArray[np.int64], m: npt.NDArray[np.int64]
) -> tuple[float, float]:
    """``P(V >= v)`` and ``P(V <= v)`` for ``V = sum g_s X_s`` (``Delta*`` up to an affine
    map), by convolving each suite's binomial onto the lattice, one shift per value of
    ``X_s``."""
    pmf = np.ones(1)
    for g, ms in zip(grid.tolist(), m.tolist(), strict=True):
        probs = stats.binom.pmf(np.arange(ms + 1), ms, 0.5)
        out = np.zeros(pmf.size + g * ms)
        for k, pk in enumerate(probs.tolist()):
            out[g * k : g * k + pmf.size] += pk * pmf
        pmf = out
    v = int(np.dot(grid, b))
    return float(pmf[v:].sum()), float(pmf[: v + 1].sum())


def _monte_carlo(
    steps: FloatArray,
    grid: npt.NDArray[np.int64] | None,
    b: npt.NDArray[np.int64],
    m: npt.NDArray[np.int64],
    n_draws: int,
    seed: Seed,
) -> tuple[float, float]:
    """Seeded draws of ``X_s``; on the lattice when there is one, so ties are exact."""
    rng = np.random.default_rng(seed)
    scale = grid.astype(np.float64) if grid is not None else steps
    observed = float(np.dot(scale, b))
    tol = 0.0 if grid is not None else 1e-9 * float(np.dot(scale, m))
    hi = lo = 0
    chunk = max(1, 2_000_000 // m.size)
    for start in range(0, n_draws, chunk):
        x = rng.binomial(m, 0.5, size=(min(chunk, n_draws - start), m.size))
        v = x @ scale
        hi += int(np.count_nonzero(v >= observed - tol))
        lo += int(np.count_nonzero(v <= observed + tol))
    return (1 + hi) / (1 + n_draws), (1 + lo) / (1 + n_draws)


def mover_ci(
    estimates: npt.ArrayLike,
    lows: npt.ArrayLike,
    highs: npt.ArrayLike,
    weights: npt.ArrayLike,
) -> tuple[float, float]:
    """The MOVER interval of ``sum w_s d_s`` from the suites' intervals ``[l_s, u_s]``
    (Zou & Donner 2008), clipped to ``[-1, 1]``: each side adds the suites' distances to
    their own bound in quadrature, so an asymmetric suite interval stays asymmetric."""
    d, lo, hi, w = (np.asarray(a, dtype=np.float64) for a in (estimates, lows, highs, weights))
    keep = w > 0
    d, lo, hi, w = d[keep], lo[keep], hi[keep], w[keep]
    total = float(np.dot(w, d))
    down = math.sqrt(float(np.sum((w * (d - lo)) ** 2)))
    up = math.sqrt(float(np.sum((w * (hi - d)) ** 2)))
    return max(-1.0, total - down), min(1.0, total + up)


@dataclass(frozen=True)
class PooledBootstrap:
    """The stratified paired bootstrap of ``Delta``: its value, percentile bounds per level
    (in the order asked), and the share of draws at or below / at or above 0 (the p of
    "not greater" / "not less", ``(1 + hits) / (1 + draws)``, so the test agrees with the
    percentile interval it inverts)."""

    estimate: float
    bounds: tuple[tuple[float, float], ...]
    p_greater: float
    p_less: float


def pooled_bootstrap(
    differences: npt.ArrayLike,
    strata_sizes: npt.ArrayLike,
    weights: npt.ArrayLike,
    *,
    levels: tuple[float, ...],
    n_resamples: int = 10_000,
    seed: Seed = DEFAULT_SEED,
) -> PooledBootstrap:
    """Resample the paired differences within each suite (consecutive ``strata_sizes``) and
    weigh the suites' means by ``weights``.

    One call of :func:`~hylo_analytics.stats.bootstrap_means`, stratified: each difference
    of suite ``s`` is scaled by ``w_s N / n_s``, so the resampled grand mean is the
    resampled ``sum w_s mean_s`` exactly (the strata of one group draw independently).
    """
    x = np.asarray(differences, dtype=np.float64)
    sizes = np.asarray(strata_sizes, dtype=np.int64)
    w = np.asarray(weights, dtype=np.float64)
    keep = sizes > 0
    sizes, w = sizes[keep], w[keep]
    total = int(sizes.sum())
    scaled = x * np.repeat(w * total / sizes, sizes)
    estimate = float(scaled.mean())
    if np.all(scaled == scaled[0]):  # nothing varies: every resample is the sample
        return PooledBootstrap(estimate, tuple((estimate, estimate) for _ in levels),
                               1.0 if estimate <= 0 else 1 / (1 + n_resamples),
                               1.0 if estimate >= 0 else 1 / (1 + n_resamples))  # fmt: skip
    ((_, _, means),) = list(
        bootstrap_means(
            scaled, [total], strata_sizes=sizes, n_resamples=n_resamples, seed=seed,
            binary=False,
        )
    )  # fmt: skip
    tol = 1e-12 * max(1.0, float(np.abs(scaled).max()))
    p_greater = (1 + int(np.count_nonzero(means <= tol))) / (1 + n_resamples)
    p_less = (1 + int(np.count_nonzero(means >= -tol))) / (1 + n_resamples)
    bounds = []
    for level in levels:
        alpha = 1 - level
        q = np.array([[alpha / 2, 1 - alpha / 2]])
        lo, hi = _row_quantiles(means.copy(), q)
        bounds.append((float(lo[0]), float(hi[0])))
    return PooledBootstrap(estimate, tuple(bounds), p_greater, p_less)
