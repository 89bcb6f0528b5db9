"""The beta-binomial model of a suite's task successes, fitted for many suites at once.

Task ``i`` of a suite succeeds ``k_i`` times in ``n_i`` episodes, ``k_i ~ Binomial(n_i, p_i)``
with ``p_i ~ Beta(a, b)`` (the suite's prior), so ``k_i`` is beta-binomial. The prior of each
group (a run on a suite) is the ``(a, b)`` maximizing that likelihood. Three regimes, named per
group in ``pooling``:

- ``partial``: the likelihood has an interior maximum (the tasks' counts are overdispersed
  against one common rate);
- ``complete``: no overdispersion (the likelihood's slope in ``1 / (a + b)`` is <= 0 at the
  binomial end, where the maximum then is, ``a + b`` infinite; also every task 0 or every
  task n): the prior is degenerate, a point mass at the pooled rate ``sum k / sum n`` (the
  method-of-moments answer too: no spread beyond binomial);
- ``none``: every task all-or-nothing (``k`` 0 or ``n``, both kinds): the maximum is at
  ``a + b -> 0`` (a prior of point masses at 0 and 1).

:mod:`hylo_analytics.stats.shrinkage` shrinks the tasks' rates with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from hylo_analytics._lazy import LazyModule
from hylo_analytics.errors import InputError
from hylo_analytics.stats.closed_form import _f

if TYPE_CHECKING:
    from scipy import optimize, special
else:  # scipy is imported on first use
    optimize = LazyModule("scipy.optimize")
    special = LazyModule("scipy.special")

__all__ = ["POOLING", "BetaBinomialFit", "beta_binomial_loglik", "fit_beta_binomial"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
ArrayLike = npt.ArrayLike
POOLING: tuple[str, ...] = ("partial", "complete", "none")
_LOG_MIN, _LOG_MAX = np.log(1e-6), np.log(1e9)  # a and b are kept within [1e-6, 1e9]
_MAX_ITER = 100
_MAX_HALVINGS = 30


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
