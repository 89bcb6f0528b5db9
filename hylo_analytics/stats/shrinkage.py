"""Small-n pooling: per-task success rates shrunk toward their suite, empirical-Bayes
beta-binomial, vectorized over many suites at once.

With 10-50 episodes per task (LIBERO, SimplerEnv, LeRobot evaluations) a task's raw rate
``k / n`` is noisy: 7/10 has a Wilson interval of 0.40-0.89. The tasks of one suite inform
each other: the model is ``p_i ~ Beta(a, b)`` (the suite's prior, one per group: a run on a
suite) and ``k_i ~ Binomial(n_i, p_i)``, so ``k_i`` is beta-binomial. The prior is estimated
from the tasks' counts by marginal likelihood (:func:`fit_beta_binomial`), and each task's
estimate is its posterior mean ``(k + a) / (n + a + b)``: the raw rate moved toward the prior
mean ``a / (a + b)`` by the weight ``(a + b) / (n + a + b)`` (a prior "worth" ``a + b``
episodes). Tasks far apart in the data keep their rates (a weak prior); tasks the data cannot
tell apart are pulled together.

Three regimes, named per group in ``pooling``:

- ``partial``: the likelihood has an interior maximum (the tasks' counts are overdispersed
  against one common rate): the shrunk rates above;
- ``complete``: no overdispersion (the likelihood's slope in ``1 / (a + b)`` is <= 0 at the
  binomial end, where the maximum then is, ``a + b`` infinite; also every task 0 or every
  task n): the prior is degenerate, a point mass at the pooled rate ``sum k / sum n``, which
  is every task's shrunk rate (the method-of-moments answer too: no spread beyond binomial);
- ``none``: every task all-or-nothing (``k`` 0 or ``n``, both kinds): the maximum is at
  ``a + b -> 0`` (a prior of point masses at 0 and 1), which moves nothing: the shrunk rate
  is the raw rate.

The interval. The plain empirical-Bayes interval (``interval="plain"``), the equal-tailed
interval of ``Beta(k + a, n - k + b)``, treats the estimated ``(a, b)`` as known and
under-covers (Morris 1983): 0.76-0.88 at 10 tasks of 10 episodes in
``benchmarks/bench_smalln.py``, worst where the fit lands at or near complete pooling while
the tasks do differ (there it is the pooled count's Wilson interval, as narrow as a suite's).
Laird and Louis' (1987) parametric bootstrap (``interval="bootstrap"``: suites drawn from
the fitted prior, ``(a*, b*)`` refitted on each, the task's posteriors mixed over the refits)
recovers only a few points of it, since it draws from the same over-confident fit. The default,
``interval="hierarchical"``, integrates the prior out instead, the Bayesian reading of
Morris' adjustment: a flat prior on the prior mean and on the intra-task correlation ``rho =
1 / (1 + a + b)`` (proper, and flat from complete pooling, rho = 0, to none, rho = 1), the
posterior of every task a mixture of ``Beta(k + a, n - k + b)`` over a grid of ``(a, b)``
weighted by the likelihood; 0.94-0.98 where the tasks differ, conservative (0.99-1.00) where
they do not (a point mass), and on average narrower than the raw Wilson interval everywhere. Mixtures are
reported by the equal-tailed bounds of the beta of the same mean and variance. The shrunk
rate stays the plug-in posterior mean, and the bounds are widened to hold it where a mixture's
sit off it (the all-or-nothing edge: a raw 0 or 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
import numpy.typing as npt

from hylo_analytics._lazy import LazyModule
from hylo_analytics.errors import InputError
from hylo_analytics.stats.closed_form import _check_level, _f, wilson, z_value
from hylo_analytics.stats.methods import DEFAULT_SEED, Seed

if TYPE_CHECKING:
    from scipy import optimize, special
else:  # scipy is imported on first use
    optimize = LazyModule("scipy.optimize")
    special = LazyModule("scipy.special")

__all__ = [
    "DEFAULT_BOOTSTRAP",
    "INTERVALS",
    "POOLING",
    "BetaBinomialFit",
    "ShrinkInterval",
    "ShrunkRates",
    "beta_binomial_loglik",
    "fit_beta_binomial",
    "shrink_rates",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
ArrayLike = npt.ArrayLike
ShrinkInterval = Literal["hierarchical", "bootstrap", "plain"]
INTERVALS: tuple[str, ...] = ("hierarchical", "bootstrap", "plain")
POOLING: tuple[str, ...] = ("partial", "complete", "none")
#: Refits of the prior for the Laird-Louis interval (the mixture's first two moments are all
#: it takes from them).
DEFAULT_BOOTSTRAP = 200
_LOG_MIN, _LOG_MAX = np.log(1e-6), np.log(1e9)  # a and b are kept within [1e-6, 1e9]
_MAX_ITER = 100
_MAX_HALVINGS = 30
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
class BetaBinomialFit:
    """The prior of each group, one entry per group code.

    ``a``, ``b``: the Beta prior (``inf`` both where ``pooling`` is ``complete``, 0 both where
    it is ``none``); ``mean``: its mean (the pooled rate where ``complete``); ``strength``:
    ``a + b``, the episodes the prior is worth; ``loglik``: the beta-binomial log-likelihood
    at the fit (with its binomial coefficients: ``scipy.stats.betabinom.logpmf`` summed);
    ``n_tasks``: cells in the group; ``converged``: False where the optimizer stopped at its
    iteration limit (never seen; the last iterate is returned).
    """

    a: FloatArray
    b: FloatArray
    mean: FloatArray
    pooling: npt.NDArray[np.str_]
    loglik: FloatArray
    n_tasks: IntArray
    converged: npt.NDArray[np.bool_]

    @property
    def strength(self) -> FloatArray:
        with np.errstate(invalid="ignore"):
            return np.where(self.pooling == "complete", np.inf, self.a + self.b)


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


def beta_binomial_loglik(
    successes: ArrayLike, n: ArrayLike, a: ArrayLike, b: ArrayLike, groups: ArrayLike | None = None
) -> FloatArray:
    """Each group's beta-binomial log-likelihood at its ``(a, b)`` (one entry per group
    code), binomial coefficients included: ``sum_i log P(k_i | n_i, a, b)``."""
    k, nn = _f(successes), _f(n)
    g = _group_codes(groups, len(k))
    aa, bb = _f(a)[g], _f(b)[g]
    per_cell = _log_choose(k, nn) + special.betaln(k + aa, nn - k + bb) - special.betaln(aa, bb)
    return np.asarray(np.bincount(g, weights=per_cell, minlength=len(_f(a))), dtype=np.float64)


def fit_beta_binomial(
    successes: ArrayLike, n: ArrayLike, groups: ArrayLike | None = None
) -> BetaBinomialFit:
    """The Beta(a, b) prior of each group by marginal likelihood, every group at once.

    ``successes``, ``n``: one entry per cell (task), ``0 <= k <= n``, ``n >= 1``; ``groups``:
    the cells' group codes 0..G-1 (default: one group). The regime of each group is decided
    first, exactly (module docstring): the slope of the log-likelihood in ``1 / (a + b)`` at
    0, ``sum k(k-1) / 2p + (n-k)(n-k-1) / 2(1-p) - n(n-1) / 2`` at the pooled rate ``p``,
    says whether an interior maximum exists. The ``partial`` groups are fitted by a damped
    Newton iteration on ``(log a, log b)``, all groups in one array (the Hessian made negative
    definite where it is not, a backtracking line search), started at the method-of-moments
    estimate; a group the iteration leaves unconverged is finished by
    ``scipy.optimize.minimize`` (L-BFGS-B) on its own.
    """
    k, nn, g, n_groups = _cells(successes, n, groups)
    return _fit(k, nn, g, n_groups)


def _fit(
    k: FloatArray,
    nn: FloatArray,
    g: IntArray,
    n_groups: int,
    loglik: bool = True,
) -> BetaBinomialFit:
    """:func:`fit_beta_binomial` of checked cells; ``loglik=False`` leaves ``loglik`` nan
    (the bootstrap's refits need none)."""
    kk = np.bincount(g, weights=k, minlength=n_groups)
    total = np.bincount(g, weights=nn, minlength=n_groups)
    n_tasks = np.bincount(g, minlength=n_groups)
    with np.errstate(divide="ignore", invalid="ignore"):
        pooled = kk / total
    pooling = _regimes(k, nn, g, n_groups, pooled)
    a = np.where(pooling == "complete", np.inf, 0.0)
    b = a.copy()
    converged = np.ones(n_groups, dtype=bool)
    part = np.flatnonzero(pooling == "partial")
    if part.size:
        local = np.full(n_groups, -1)
        local[part] = np.arange(part.size)
        cells = np.flatnonzero(local[g] >= 0)
        kc, nc, gc = k[cells], nn[cells], local[g[cells]]
        u, v = _start(kc, nc, gc, part.size, pooled[part])
        u, v, ok = _newton(kc, nc, gc, u, v)
        if not ok.all():
            u, v, ok = _polish(kc, nc, gc, u, v, ok)
        a[part], b[part], converged[part] = np.exp(u), np.exp(v), ok
    mean = np.where(pooling == "partial", a / np.where(pooling == "partial", a + b, 1), pooled)
    at = (
        _loglik_at(k, nn, g, n_groups, a, b, mean, pooling) if loglik else np.full(n_groups, np.nan)
    )
    return BetaBinomialFit(a=a, b=b, mean=mean, pooling=pooling, loglik=at,
                           n_tasks=n_tasks.astype(np.int64), converged=converged)  # fmt: skip


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


# -- the fit --------------------------------------------------------------------------------


def _cells(
    successes: ArrayLike, n: ArrayLike, groups: ArrayLike | None
) -> tuple[FloatArray, FloatArray, IntArray, int]:
    k, nn = _f(successes).ravel(), _f(n).ravel()
    if k.shape != nn.shape:
        raise InputError(f"shrink: successes and n differ in length ({len(k)} vs {len(nn)})")
    bad = ~((nn >= 1) & (k >= 0) & (k <= nn))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"shrink: cell {i} has {k[i]:g} successes of {nn[i]:g}; expected 0 <= k <= n and "
            "n >= 1 (a task with no valid episode has no rate: leave it out)"
        )
    g = _group_codes(groups, len(k))
    return k, nn, g, int(g.max(initial=-1)) + 1


def _group_codes(groups: ArrayLike | None, size: int) -> IntArray:
    if groups is None:
        return np.zeros(size, dtype=np.int64)
    g = np.asarray(groups, dtype=np.int64).ravel()
    if g.shape != (size,) or (size and g.min() < 0):
        raise InputError("shrink: groups must be one code >= 0 per cell")
    return g


def _regimes(
    k: FloatArray, n: FloatArray, g: IntArray, n_groups: int, pooled: FloatArray
) -> npt.NDArray[np.str_]:
    """``partial``, ``complete`` or ``none`` per group (module docstring), decided exactly."""
    p = pooled[g]
    # the slope's terms, 0 where their pair count is (p may be 0 or 1 there)
    wins = np.where(k > 1, k * (k - 1) / 2 / np.where(p > 0, p, 1), 0.0)
    losses = np.where(n - k > 1, (n - k) * (n - k - 1) / 2 / np.where(p < 1, 1 - p, 1), 0.0)
    terms = wins + losses - n * (n - 1) / 2
    slope = np.bincount(g, weights=terms, minlength=n_groups)
    scale = np.bincount(g, weights=n * (n - 1) / 2, minlength=n_groups)
    flat = (pooled <= 0) | (pooled >= 1) | (slope <= 1e-12 * scale)
    middle = np.bincount(g, weights=((k > 0) & (k < n)).astype(float), minlength=n_groups)
    # all-or-nothing tasks of both kinds (with n >= 2, else the slope is 0): the maximum
    # is at a + b -> 0
    out = np.where(flat, "complete", np.where(middle == 0, "none", "partial"))
    return np.asarray(out, dtype="<U8")


def _start(
    k: FloatArray, n: FloatArray, g: IntArray, n_groups: int, pooled: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """The method-of-moments ``(log a, log b)``: the intra-task correlation ``rho`` from the
    rates' weighted spread (``sum n_i (p_i - p)^2`` against its binomial expectation), the
    strength ``1 / rho - 1``; where the moments see no overdispersion, a strength of 100."""
    p = pooled[g]
    spread = np.bincount(g, weights=n * (k / n - p) ** 2, minlength=n_groups)
    m = np.bincount(g, minlength=n_groups).astype(float)
    total = np.bincount(g, weights=n, minlength=n_groups)
    sq = np.bincount(g, weights=n * n, minlength=n_groups)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = (spread / (pooled * (1 - pooled)) - (m - 1)) / (total - sq / total - (m - 1))
    rho = np.where(np.isfinite(rho) & (rho > 0), rho, 1 / 101)
    strength = 1 / np.clip(rho, 1e-4, 0.99) - 1
    mean = np.clip(pooled, 1e-6, 1 - 1e-6)
    return np.log(mean * strength), np.log((1 - mean) * strength)


def _grad_hess(
    k: FloatArray, n: FloatArray, g: IntArray, n_groups: int, u: FloatArray, v: FloatArray
) -> tuple[FloatArray, ...]:
    """The gradient and Hessian of each group's log-likelihood in ``(log a, log b)``."""
    a, b = np.exp(u), np.exp(v)
    s = a + b
    m = np.bincount(g, minlength=n_groups).astype(float)
    ac, bc, sn = a[g], b[g], n + s[g]
    psi = special.digamma
    own = np.bincount(g, weights=psi(k + ac) - psi(sn), minlength=n_groups)
    da = own + m * (psi(s) - psi(a))
    db = np.bincount(g, weights=psi(n - k + bc) - psi(sn), minlength=n_groups)
    db += m * (psi(s) - psi(b))
    t_sn = np.bincount(g, weights=_trigamma(sn), minlength=n_groups)
    t = m * _trigamma(s) - t_sn
    haa = np.bincount(g, weights=_trigamma(k + ac), minlength=n_groups) - m * _trigamma(a) + t
    hbb = np.bincount(g, weights=_trigamma(n - k + bc), minlength=n_groups) - m * _trigamma(b) + t
    return a * da, b * db, a * a * haa + a * da, b * b * hbb + b * db, a * b * t


def _trigamma(x: FloatArray) -> FloatArray:
    """psi'(x) for x > 0 to ~1e-10 (the recurrence up to 8, then the asymptotic series):
    four times faster than ``scipy.special.polygamma``, and only the Newton steps use it
    (the gradient, hence the optimum, is exact)."""
    y = np.asarray(x, dtype=np.float64)
    out = np.empty_like(y)
    small = y < 8
    out[~small] = _trigamma_series(y[~small])
    ys = y[small]
    shift = np.ceil(8 - ys)
    acc = np.zeros_like(ys)
    for j in range(8):
        acc += np.where(j < shift, 1 / ((ys + j) * (ys + j)), 0.0)
    out[small] = acc + _trigamma_series(ys + shift)
    return out


def _trigamma_series(y: FloatArray) -> FloatArray:
    r = 1 / y
    r2 = r * r
    return r + r2 / 2 + r * r2 * (1 / 6 - r2 * (1 / 30 - r2 * (1 / 42 - r2 / 30)))


def _loglik(
    k: FloatArray, n: FloatArray, g: IntArray, n_groups: int, u: FloatArray, v: FloatArray
) -> FloatArray:
    """Each group's log-likelihood in ``(log a, log b)``, without the binomial coefficients."""
    a, b = np.exp(u), np.exp(v)
    own = np.bincount(g, weights=special.betaln(k + a[g], n - k + b[g]), minlength=n_groups)
    m = np.bincount(g, minlength=n_groups)
    return np.asarray(own - m * special.betaln(a, b), dtype=np.float64)


def _newton(
    k: FloatArray, n: FloatArray, g: IntArray, u: FloatArray, v: FloatArray
) -> tuple[FloatArray, FloatArray, npt.NDArray[np.bool_]]:
    """Damped Newton ascent of every group at once; the groups converged are dropped from
    the arrays as they finish, so the last iterations cost only the stragglers."""
    u, v = u.copy(), v.copy()
    done = np.zeros(len(u), dtype=bool)
    for _ in range(_MAX_ITER):
        todo = np.flatnonzero(~done)
        if not todo.size:
            break
        local = np.full(len(u), -1)
        local[todo] = np.arange(todo.size)
        cells = np.flatnonzero(local[g] >= 0)
        kc, nc, gc, m = k[cells], n[cells], local[g[cells]], todo.size
        uu, vv = u[todo].copy(), v[todo].copy()
        gu, gv, huu, hvv, huv = _grad_hess(kc, nc, gc, m, uu, vv)
        du, dv, newton = _step(gu, gv, huu, hvv, huv)
        decrement = gu * du + gv * dv
        big = np.maximum(np.abs(du), np.abs(dv))
        cap = np.where(big > 3, 3 / np.maximum(big, 1e-300), 1.0)
        du, dv = du * cap, dv * cap
        # near the optimum (a small decrement, a true Newton step) the full step is taken as
        # it is: there the log-likelihood's rounding is larger than its change
        near = (decrement < 1e-4) & newton
        step = np.ones(m)
        pending = ~near
        base = _loglik(kc, nc, gc, m, uu, vv) if pending.any() else np.zeros(m)
        for _ in range(_MAX_HALVINGS):
            trying = np.flatnonzero(pending)
            if not trying.size:
                break
            # only the groups still searching are evaluated
            code = np.cumsum(pending) - 1
            sub = np.flatnonzero(pending[gc])
            t = step[trying]
            nu = np.clip(uu[trying] + t * du[trying], _LOG_MIN, _LOG_MAX)
            nv = np.clip(vv[trying] + t * dv[trying], _LOG_MIN, _LOG_MAX)
            new = _loglik(kc[sub], nc[sub], code[gc[sub]], trying.size, nu, nv)
            good = new >= base[trying] + 1e-4 * t * decrement[trying] * cap[trying]
            uu[trying[good]], vv[trying[good]] = nu[good], nv[good]
            pending[trying[good]] = False
            step[trying[~good]] /= 2
        uu = np.where(near, np.clip(uu + du, _LOG_MIN, _LOG_MAX), uu)
        vv = np.where(near, np.clip(vv + dv, _LOG_MIN, _LOG_MAX), vv)
        moved = np.maximum(np.abs(uu - u[todo]), np.abs(vv - v[todo]))
        u[todo], v[todo] = uu, vv
        # converged: the step would gain < 1e-10 in log-likelihood (where the likelihood is
        # that flat, toward a + b -> inf, the strength moves no rate), or no step improves
        done[todo] = (decrement < 1e-10) | pending | (moved < 1e-12)
    return u, v, done


def _step(
    gu: FloatArray, gv: FloatArray, huu: FloatArray, hvv: FloatArray, huv: FloatArray
) -> tuple[FloatArray, FloatArray, npt.NDArray[np.bool_]]:
    """The ascent step from the 2 x 2 Hessian's eigen-decomposition: Newton's along each
    direction of negative curvature, a unit step up the gradient along one that is not
    (toward ``a + b -> inf`` the log-likelihood flattens convexly, and there Newton's step
    would go downhill); ``newton`` where both curvatures are negative (a true Newton step)."""
    half_tr, half_diff = (huu + hvv) / 2, (huu - hvv) / 2
    root = np.sqrt(half_diff**2 + huv**2)
    du, dv = np.zeros_like(gu), np.zeros_like(gu)
    newton = np.ones(len(gu), dtype=bool)
    for sign in (1.0, -1.0):
        lam = half_tr + sign * root
        # the eigenvector (huv, lam - huu), or (1, 0) / (0, 1) when huv is 0
        ex, ey = huv, lam - huu
        norm = np.hypot(ex, ey)
        flat = norm < 1e-300
        axis_u = (huu >= hvv) == (sign > 0)
        ex = np.where(flat, axis_u.astype(float), ex / np.where(flat, 1, norm))
        ey = np.where(flat, 1.0 - axis_u, ey / np.where(flat, 1, norm))
        c = ex * gu + ey * gv
        curved = lam < -1e-12 * (1 + np.abs(half_tr))
        size = np.where(curved, -c / np.where(curved, lam, -1), np.sign(c))
        du, dv = du + size * ex, dv + size * ey
        newton &= curved
    return du, dv, newton


def _polish(
    k: FloatArray,
    n: FloatArray,
    g: IntArray,
    u: FloatArray,
    v: FloatArray,
    ok: npt.NDArray[np.bool_],
) -> tuple[FloatArray, FloatArray, npt.NDArray[np.bool_]]:
    """The groups Newton left unconverged, one ``scipy.optimize.minimize`` each (a loop over
    the few stragglers only)."""
    u, v, ok = u.copy(), v.copy(), ok.copy()
    for i in np.flatnonzero(~ok).tolist():
        kc, nc = k[g == i], n[g == i]
        zero = np.zeros(len(kc), dtype=np.int64)

        def negative(x: FloatArray, kc: FloatArray = kc, nc: FloatArray = nc,
                     zero: IntArray = zero) -> float:  # fmt: skip
            return -float(_loglik(kc, nc, zero, 1, x[:1], x[1:])[0])

        res = optimize.minimize(negative, np.array([u[i], v[i]]), method="L-BFGS-B",
                                bounds=[(_LOG_MIN, _LOG_MAX)] * 2)  # fmt: skip
        u[i], v[i], ok[i] = res.x[0], res.x[1], bool(res.success)
    return u, v, ok


def _loglik_at(
    k: FloatArray,
    n: FloatArray,
    g: IntArray,
    n_groups: int,
    a: FloatArray,
    b: FloatArray,
    mean: FloatArray,
    pooling: npt.NDArray[np.str_],
) -> FloatArray:
    """The log-likelihood at the fit, its limits where the prior is degenerate (binomial at
    the pooled rate where complete; the all-or-nothing probabilities where none)."""
    part = (pooling == "partial")[g]
    p = mean[g]
    safe_a, safe_b = np.where(part, a[g], 1.0), np.where(part, b[g], 1.0)
    beta = special.betaln(k + safe_a, n - k + safe_b) - special.betaln(safe_a, safe_b)
    with np.errstate(divide="ignore", invalid="ignore"):
        binom = special.xlogy(k, p) + special.xlog1py(n - k, -p)
        edge = np.where(k == n, np.log(p), np.log1p(-p))
    complete = (pooling == "complete")[g]
    terms = _log_choose(k, n) + np.where(part, beta, np.where(complete, binom, edge))
    return np.asarray(np.bincount(g, weights=terms, minlength=n_groups), dtype=np.float64)


def _log_choose(k: FloatArray, n: FloatArray) -> FloatArray:
    return np.asarray(
        special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1),
        dtype=np.float64,
    )


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
