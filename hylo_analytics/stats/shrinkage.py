"""Small-n pooling: per-task success rates shrunk toward their suite (empirical Bayes).

With 10-50 episodes per task (LIBERO, SimplerEnv, LeRobot evaluations) a task's raw rate
``k / n`` is noisy: 7/10 has a Wilson interval of 0.40-0.89. The tasks of one suite inform
each other through the suite's Beta(a, b) prior, estimated from their counts by marginal
likelihood (:mod:`hylo_analytics.stats.beta_binomial`, which also names the three regimes,
``partial``, ``complete`` and ``none``). Each task's estimate is its posterior mean ``(k + a)
/ (n + a + b)``: the raw rate moved toward the prior mean ``a / (a + b)`` by the weight ``(a
+ b) / (n + a + b)`` (a prior "worth" ``a + b`` episodes); the pooled rate for every task
where the pooling is complete, the raw rate where it is none. Every suite of a call (runs x
suites: thousands) is computed at once, in arrays.

The interval. The plain empirical-Bayes interval (``interval="plain"``), the equal-tailed
interval of ``Beta(k + a, n - k + b)``, treats the estimated ``(a, b)`` as known and
under-covers (Morris 1983): 0.76-0.88 at 10 tasks of 10 episodes unless the rates are
U-shaped (``benchmarks/bench_smalln.py``), worst where the fit lands at or near complete
pooling while the tasks do differ (there it is the pooled count's Wilson interval, as narrow
as a suite's). Laird and Louis' (1987) parametric bootstrap (``interval="bootstrap"``:
suites drawn from the fitted prior, ``(a*, b*)`` refitted on each, the task's posteriors
mixed over the refits) recovers 3-4 points at most, since it draws from the same
over-confident fit. The default, ``interval="hierarchical"``, integrates the prior out
instead, the Bayesian reading of Morris' adjustment: a flat prior on the prior mean and on
the intra-task correlation ``rho = 1 / (1 + a + b)`` (proper, and flat from complete
pooling, rho = 0, to none, rho = 1), the posterior of every task a mixture of ``Beta(k + a,
n - k + b)`` over a grid of ``(a, b)`` weighted by the likelihood; 0.94-0.98 where the tasks
differ, conservative (0.99-1.00) where they do not (a point mass), and narrower than the raw
Wilson interval on average everywhere. Mixtures are reported by the equal-tailed bounds of
the beta of the same mean and variance. The shrunk rate stays the plug-in posterior mean,
and the bounds are widened to hold it where a mixture's sit off it (the all-or-nothing edge:
a raw 0 or 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
import numpy.typing as npt

from hylo_analytics._lazy import LazyModule
from hylo_analytics.errors import InputError
from hylo_analytics.stats.beta_binomial import BetaBinomialFit, _cells, _fit
from hylo_analytics.stats.closed_form import _check_level, wilson, z_value
from hylo_analytics.stats.methods import DEFAULT_SEED, Seed

if TYPE_CHECKING:
    from scipy import special
else:  # scipy is imported on first use
    special = LazyModule("scipy.special")

__all__ = [
    "DEFAULT_BOOTSTRAP",
    "INTERVALS",
    "ShrinkInterval",
    "ShrunkRates",
    "shrink_rates",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
ArrayLike = npt.ArrayLike
ShrinkInterval = Literal["hierarchical", "bootstrap", "plain"]
INTERVALS: tuple[str, ...] = ("hierarchical", "bootstrap", "plain")
#: Refits of the prior for the Laird-Louis interval (the mixture's first two moments are all
#: it takes from them).
DEFAULT_BOOTSTRAP = 200
_CELLS_PER_CHUNK = 4_000_000  # (cells x draws or grid points) held at once: ~32 MB a float
# the hierarchical interval's grid: strengths x prior means per group (bounds within 5e-4 of
# a 96 x 64 grid's on suites of every shape: tests/stats/test_shrinkage.py)
_GRID_SHRINK, _GRID_MEAN = 24, 16
_GRID_SPAN = 8.0  # log M from log nbar - 8 to + 8: beyond, no rate moves by 1e-3
_METHODS = {
    "hierarchical": "hierarchical (flat mean and icc)",
    "bootstrap": "laird-louis bootstrap",
    "plain": "eb posterior",
}


@dataclass(frozen=True)
class ShrunkRates:
    """Per cell (task): the raw rate and Wilson interval, the shrunk rate and its interval,
    the prior's weight in the shrunk rate; ``fit``: the groups' priors."""

    raw: FloatArray
    raw_low: FloatArray
    raw_high: FloatArray
    shrunk: FloatArray
    low: FloatArray
    high: FloatArray
    weight: FloatArray
    fit: BetaBinomialFit
    method: str


def shrink_rates(
    successes: ArrayLike,
    n: ArrayLike,
    groups: ArrayLike | None = None,
    *,
    level: float = 0.95,
    interval: ShrinkInterval = "hierarchical",
    n_resamples: int = DEFAULT_BOOTSTRAP,
    seed: Seed = DEFAULT_SEED,
) -> ShrunkRates:
    """Each cell's raw rate with its Wilson interval and its shrunk rate with its interval.

    The prior per group is :func:`fit_beta_binomial`'s; the shrunk rate is the posterior mean
    (the pooled rate where ``complete``, the raw rate where ``none``), the interval as the
    module docstring says (``interval``: ``hierarchical``; ``bootstrap``, Laird-Louis over
    ``n_resamples`` refits drawn with ``seed``; ``plain``, the Beta posterior's; with the last
    two a ``complete`` group's tasks get the pooled count's Wilson interval, a ``none``
    group's their own). ``weight`` is the prior's share of the shrunk rate, ``(a + b) / (n +
    a + b)`` (1 complete, 0 none).
    """
    _check_level(level)
    if interval not in INTERVALS:
        raise InputError(f"shrink: unknown interval {interval!r}; known: {', '.join(INTERVALS)}")
    if interval == "bootstrap" and n_resamples < 2:
        raise InputError(f"shrink: n_resamples must be at least 2, got {n_resamples}")
    k, nn, g, n_groups = _cells(successes, n, groups)
    fit = _fit(k, nn, g, n_groups)
    raw_low, raw_high = wilson(k, nn, level)
    shrunk, _, weight = _posterior(k, nn, fit.mean[g], fit.strength[g])
    kk = np.bincount(g, weights=k, minlength=n_groups)
    total = np.bincount(g, weights=nn, minlength=n_groups)
    pooled_low, pooled_high = wilson(kk, total, level)
    if interval == "hierarchical":
        low, high = _beta_matched(*_hierarchical(k, nn, g, n_groups), level)
    else:
        regime = fit.pooling[g]
        low = np.where(regime == "complete", pooled_low[g], raw_low)
        high = np.where(regime == "complete", pooled_high[g], raw_high)
        part = regime == "partial"
        if interval == "plain" and part.any():
            alpha = k[part] + fit.a[g[part]]
            beta = nn[part] - k[part] + fit.b[g[part]]
            low[part] = special.betaincinv(alpha, beta, (1 - level) / 2)
            high[part] = special.betaincinv(alpha, beta, (1 + level) / 2)
        elif part.any():
            rng = np.random.default_rng(seed)
            mix = _laird_louis(k, nn, g, fit, part, n_resamples, rng)
            low[part], high[part] = _beta_matched(*mix, level)
    # the bounds hold the point: the shrunk rate is the plug-in posterior mean, the interval
    # of a mixture may sit a hair off it (or, all-or-nothing tasks, off a raw 0 or 1)
    low = np.minimum(low, shrunk)
    high = np.maximum(high, shrunk)
    return ShrunkRates(raw=k / nn, raw_low=raw_low, raw_high=raw_high, shrunk=shrunk,
                       low=low, high=high, weight=weight, fit=fit,
                       method=_METHODS[interval])  # fmt: skip


# -- the posterior and its interval ---------------------------------------------------------


def _posterior(
    k: FloatArray, n: FloatArray, mean: FloatArray, strength: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Posterior mean, variance and the prior's weight ``M / (n + M)`` of each cell under a
    prior of ``mean`` and ``strength`` M (``inf``: a point mass; 0: no information)."""
    with np.errstate(divide="ignore"):
        weight = 1 / (1 + n / strength)
    post = weight * mean + (1 - weight) * k / n
    var = post * (1 - post) / (n + strength + 1)
    return post, var, weight


def _laird_louis(
    k: FloatArray,
    n: FloatArray,
    g: IntArray,
    fit: BetaBinomialFit,
    part: npt.NDArray[np.bool_],
    n_resamples: int,
    rng: np.random.Generator,
) -> tuple[FloatArray, FloatArray]:
    """The mean and variance of each ``partial`` cell's posterior mixed over ``n_resamples``
    refits of its group's prior on suites drawn from the fitted prior (same tasks, same
    ``n``), in chunks of groups so the draws stay within :data:`_CELLS_PER_CHUNK`."""
    cells = np.flatnonzero(part)
    order = np.argsort(g[cells], kind="stable")
    cells = cells[order]
    groups, starts = np.unique(g[cells], return_index=True)
    bounds = np.append(starts, len(cells))
    mix_mean, mix_var = np.empty(len(cells)), np.empty(len(cells))
    per_chunk = max(1, _CELLS_PER_CHUNK // max(n_resamples, 1))
    lo = 0
    while lo < len(groups):
        hi = int(np.searchsorted(bounds[1:], bounds[lo] + per_chunk, side="right"))
        hi = max(hi, lo + 1)
        span = slice(int(bounds[lo]), int(bounds[hi]))
        c = cells[span]
        local = np.searchsorted(groups[lo:hi], g[c])
        ids = groups[lo:hi]
        m1, m2 = _mixture(k[c], n[c], local, fit.a[ids], fit.b[ids], n_resamples, rng)
        mix_mean[span], mix_var[span] = m1, m2
        lo = hi
    out_mean, out_var = np.empty(len(cells)), np.empty(len(cells))
    out_mean[order], out_var[order] = mix_mean, mix_var
    return out_mean, out_var


def _mixture(
    k: FloatArray,
    n: FloatArray,
    g: IntArray,
    a: FloatArray,
    b: FloatArray,
    draws: int,
    rng: np.random.Generator,
) -> tuple[FloatArray, FloatArray]:
    """One chunk of :func:`_laird_louis` (``a``, ``b`` per group of the chunk, ``g`` the
    cells' codes in it): ``draws`` suites per group, refitted together."""
    n_groups, cells = len(a), len(k)
    p = rng.beta(np.repeat(a[g], draws), np.repeat(b[g], draws))
    p = np.nan_to_num(p, nan=0.5)  # a beta draw of two tiny shapes can come back nan
    nd = np.repeat(n, draws)
    kd = rng.binomial(nd.astype(np.int64), np.clip(p, 0, 1)).astype(np.float64)
    gd = np.repeat(g, draws) * draws + np.tile(np.arange(draws), cells)
    refit = _fit(kd, nd, gd, n_groups * draws, loglik=False)
    # each cell's observed (k, n) under each draw's prior: (cells, draws)
    which = g[:, None] * draws + np.arange(draws)[None, :]
    post, var, _ = _posterior(k[:, None], n[:, None], refit.mean[which], refit.strength[which])
    return post.mean(axis=1), var.mean(axis=1) + post.var(axis=1)


def _hierarchical(
    k: FloatArray, n: FloatArray, g: IntArray, n_groups: int
) -> tuple[FloatArray, FloatArray]:
    """Each cell's posterior mean and variance with the prior's ``(mean, a + b)`` integrated
    out under a flat prior on the mean and on the intra-task correlation ``rho = 1 / (1 + a
    + b)`` (proper, and flat from complete pooling, rho = 0, to none, rho = 1), on a grid.

    The grid, per group: :data:`_GRID_SHRINK` strengths ``M``, ``log(M / nbar)`` evenly over
    +-:data:`_GRID_SPAN` (``nbar`` the mean episodes per task: the likelihood varies on that
    scale), each with :data:`_GRID_MEAN` means at the normal quantiles of a logit-normal twice
    as wide as the pooled rate's spread at that ``M``; the weights are the likelihood times
    the prior over the grid's density (importance quadrature).
    """
    mix_mean, mix_var = np.empty(len(k)), np.empty(len(k))
    order = np.argsort(g, kind="stable")
    sizes = np.bincount(g, minlength=n_groups)
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    per_chunk = max(1, _CELLS_PER_CHUNK // (_GRID_SHRINK * _GRID_MEAN))
    first = 0
    while first < n_groups:
        last = int(np.searchsorted(bounds, bounds[first] + per_chunk, side="right")) - 1
        last = min(max(last, first + 1), n_groups)
        cells = order[bounds[first] : bounds[last]]
        m1, m2 = _grid_moments(k[cells], n[cells], g[cells] - first, last - first)
        mix_mean[cells], mix_var[cells] = m1, m2
        first = last
    return mix_mean, mix_var


def _grid_moments(
    k: FloatArray, n: FloatArray, g: IntArray, n_groups: int
) -> tuple[FloatArray, FloatArray]:
    """One chunk of :func:`_hierarchical` (group codes 0..n_groups-1 within it); the cells
    equal in (group, k, n) are computed once (ten tasks of 50 episodes take a few values)."""
    m = np.bincount(g, minlength=n_groups).astype(float)
    total = np.bincount(g, weights=n, minlength=n_groups)
    side = int(n.max(initial=0)) + 1
    code = (g * side + k.astype(np.int64)) * side + n.astype(np.int64)
    _, first, back = np.unique(code, return_index=True, return_inverse=True)
    count = np.bincount(back.ravel()).astype(float)
    kk, nn, gg = k[first], n[first], g[first]
    nbar = np.where(m > 0, total / np.maximum(m, 1), 1.0)
    rate = (np.bincount(g, weights=k, minlength=n_groups) + 0.5) / (np.maximum(total, 0) + 1)
    # log M / nbar (the log-odds of the shrinkage nbar's task gets) evenly on +-_GRID_SPAN
    odds = _GRID_SPAN * ((np.arange(_GRID_SHRINK) + 0.5) / _GRID_SHRINK * 2 - 1)
    strength = nbar[:, None] * np.exp(odds)  # (groups, S)
    # the prior over the grid: rho = 1 / (1 + M) flat is p(M) = (1 + M)^-2, dM = M d(log M)
    log_prior = -2 * np.log1p(strength) + np.log(strength)
    spread = (
        2
        * np.sqrt(1 / (np.maximum(total, 1) * rate * (1 - rate)))[:, None]
        * np.sqrt(1 + (nbar[:, None] - 1) / (strength + 1))
    )  # the logit's sd, doubled
    z = special.ndtri((np.arange(_GRID_MEAN) + 0.5) / _GRID_MEAN)
    centre = special.logit(rate)[:, None]
    # the logit stays within +-30, where a mean and its complement are both representable
    spread = np.minimum(spread, (30 - np.abs(centre)) / np.abs(z).max())
    logit = centre[:, :, None] + spread[:, :, None] * z  # (groups, S, L)
    # log q: the logit-normal density, -log mean - log(1 - mean) its Jacobian
    log_q = (
        -0.5 * z**2 - np.log(spread)[:, :, None] + np.logaddexp(0, -logit) + np.logaddexp(0, logit)
    )
    a = (special.expit(logit) * strength[:, :, None]).reshape(n_groups, -1)
    b = (special.expit(-logit) * strength[:, :, None]).reshape(n_groups, -1)
    points = a.shape[1]
    k, n, g = kk, nn, gg  # the distinct cells from here on
    own = special.betaln(k[:, None] + a[g], (n - k)[:, None] + b[g])  # (cells, points)
    flat = (g[:, None] * points + np.arange(points)).ravel()
    weights = (own * count[:, None]).ravel()
    loglik = np.bincount(flat, weights=weights, minlength=n_groups * points)
    loglik = loglik.reshape(n_groups, points) - m[:, None] * special.betaln(a, b)
    log_w = loglik + np.repeat(log_prior, _GRID_MEAN, axis=1) - log_q.reshape(n_groups, -1)
    w = np.exp(log_w - log_w.max(axis=1, keepdims=True))
    w /= w.sum(axis=1, keepdims=True)
    big = np.repeat(strength, _GRID_MEAN, axis=1)[g]
    post = (k[:, None] + a[g]) / (n[:, None] + big)
    second = post * (1 - post) / (n[:, None] + big + 1) + post * post
    wc = w[g]
    first_moment = (wc * post).sum(axis=1)
    var = np.maximum((wc * second).sum(axis=1) - first_moment**2, 0.0)
    return first_moment[back.ravel()], var[back.ravel()]


def _beta_matched(mean: FloatArray, var: FloatArray, level: float) -> tuple[FloatArray, FloatArray]:
    """Equal-tailed bounds of the beta with this mean and variance; a normal interval where
    the beta would be too narrow for its quantile function (a + b > 1e7), the point where
    the variance is 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        size = mean * (1 - mean) / var - 1
    ok = np.isfinite(size) & (size > 0) & (size < 1e7) & (mean > 0) & (mean < 1)
    s = np.where(ok, size, 1.0)
    m = np.where(ok, mean, 0.5)
    lo = special.betaincinv(m * s, (1 - m) * s, (1 - level) / 2)
    hi = special.betaincinv(m * s, (1 - m) * s, (1 + level) / 2)
    half = z_value(level) * np.sqrt(np.maximum(var, 0))
    lo = np.where(ok, lo, np.clip(mean - half, 0, 1))
    hi = np.where(ok, hi, np.clip(mean + half, 0, 1))
    return np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
