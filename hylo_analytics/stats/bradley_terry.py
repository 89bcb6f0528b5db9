"""Bradley-Terry strengths from win-count matrices, penalized, vectorized over matrices.

The model: policy ``i`` beats policy ``j`` with probability ``1 / (1 + exp(-(t_i - t_j)))``,
``t`` the log-strengths. The fit minimizes the negative log-likelihood of the win counts plus
an L2 penalty ``penalty * sum(t ** 2)`` (the objective of ``choix.opt_pairwise`` with
``alpha=penalty``, the cross-check of the tests). The penalty is a Normal(0, 1 / (2 penalty))
prior on each log-strength: without it a policy that never loses has an infinite strength
(the likelihood keeps rising as it runs away). Because the likelihood only sees differences,
the penalized optimum has ``sum(t) == 0``: the strengths come out centred.

:data:`DEFAULT_PENALTY` is 0.01, a prior standard deviation of ~7 on the log scale: odds of
e^10 between two policies are not a priori surprising, so the prior moves a strength
estimated from tens of discordant pairs by a few hundredths at most, while a policy with no
loss gets a large but finite strength (10 wins and no loss against one rival: t = 2.6 each
way, odds e^5.2 ~ 180).

Newton's method with a backtracking line search on the ``N``-dimensional strictly convex
problem, for a whole stack of matrices (bootstrap resamples) at once: N is small (policies),
so each step is one batched ``N x N`` solve.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from hylo_analytics._lazy import LazyModule
from hylo_analytics.errors import InputError

if TYPE_CHECKING:
    from scipy import special
else:  # scipy is imported on first use
    special = LazyModule("scipy.special")

__all__ = ["DEFAULT_PENALTY", "bradley_terry"]

FloatArray = npt.NDArray[np.float64]
DEFAULT_PENALTY = 0.01
_MAX_ITER = 100
_MAX_HALVINGS = 50


def bradley_terry(
    wins: npt.ArrayLike, *, penalty: float = DEFAULT_PENALTY, tol: float = 1e-10
) -> FloatArray:
    """Log-strengths (summing to 0) of the penalized Bradley-Terry fit of ``wins``.

    Parameters
    ----------
    wins : ``(..., N, N)``; ``wins[..., i, j]`` is how often ``i`` beat ``j`` (the diagonal
        is ignored). Leading axes are independent problems (e.g. bootstrap resamples).
    penalty : the L2 penalty ``alpha`` (> 0) of ``alpha * sum(t ** 2)``; see the module.
    tol : the fit stops when every gradient component is below ``tol`` times the largest
        number of comparisons of a pair (or 1).

    Returns
    -------
    ``(..., N)`` log-strengths.
    """
    w = np.array(wins, dtype=np.float64)
    if w.ndim < 2 or w.shape[-1] != w.shape[-2]:
        raise InputError(f"wins must be (..., N, N), got shape {w.shape}")
    if not penalty > 0:
        raise InputError(f"penalty must be > 0 (a never-beaten policy is infinite), got {penalty}")
    if (w < 0).any() or not np.isfinite(w).all():
        raise InputError("wins must be finite and >= 0")
    n_items = w.shape[-1]
    w = w * (1 - np.eye(n_items))
    games = w + np.swapaxes(w, -1, -2)
    scale = max(float(games.max(initial=0.0)), 1.0)
    batch = w.shape[:-2]
    w, games = w.reshape(-1, n_items, n_items), games.reshape(-1, n_items, n_items)
    theta = np.zeros((w.shape[0], n_items))
    active = np.arange(w.shape[0])  # the problems not yet converged
    for _ in range(_MAX_ITER):
        wa = w[active]
        grad, hess = _derivatives(theta[active], wa, games[active], penalty)
        done = np.abs(grad).max(axis=-1, initial=0.0) < tol * scale
        active, grad, hess, wa = active[~done], grad[~done], hess[~done], wa[~done]
        if not active.size:
            break
        step = np.linalg.solve(hess, grad[..., None])[..., 0]
        theta[active] = _line_search(theta[active], step, grad, wa, penalty)
    theta -= theta.mean(axis=-1, keepdims=True)  # exact centring: only rounding moves it
    return theta.reshape(*batch, n_items)


def _objective(theta: FloatArray, w: FloatArray, penalty: float) -> FloatArray:
    diff = theta[..., :, None] - theta[..., None, :]
    loss: FloatArray = (w * np.logaddexp(0.0, -diff)).sum(axis=(-1, -2))
    out: FloatArray = loss + penalty * (theta**2).sum(-1)
    return out


def _derivatives(
    theta: FloatArray, w: FloatArray, games: FloatArray, penalty: float
) -> tuple[FloatArray, FloatArray]:
    """The objective's gradient and Hessian (a weighted graph Laplacian plus the penalty)."""
    p = special.expit(theta[..., :, None] - theta[..., None, :])
    grad = (games * p - w).sum(-1) + 2 * penalty * theta
    m = games * p * (1 - p)
    hess = -m
    idx = np.arange(theta.shape[-1])
    hess[..., idx, idx] = m.sum(-1) - m[..., idx, idx] + 2 * penalty
    return grad, hess


def _line_search(
    theta: FloatArray, step: FloatArray, grad: FloatArray, w: FloatArray, penalty: float
) -> FloatArray:
    """``theta - t * step`` with ``t`` halved per problem until the Armijo condition holds."""
    f0 = _objective(theta, w, penalty)
    slope = (grad * step).sum(-1)  # > 0: the step descends
    t = np.ones(theta.shape[:-1])
    for _ in range(_MAX_HALVINGS):
        cand = theta - t[..., None] * step
        # the rounding allowance: near the optimum the decrease is below the objective's ulp
        slack = 1e-12 * np.abs(f0)
        ok = _objective(cand, w, penalty) <= f0 - 1e-4 * t * slope + slack
        if ok.all():
            break
        t = np.where(ok, t, t / 2)
    return theta - t[..., None] * step
