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

__all__ = [
    "DEFAULT_PENALTY",
    "bradley_terry",
    "key_scores",
    "sandwich_covariance",
    "stratified_meat",
    "win_counts",
]

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


# --- the games of a (keys x policies) values matrix, and the sandwich over keys --------------
#
# A key is a game between every two policies that both have a value for it: the higher value
# wins (NaN: no valid value, no game). Win counts and each key's score contribution are
# matrix products over keys, one per distinct value when the values take few (0/1: one
# product), else comparisons in blocks of keys: never a loop over policies or pairs.

_MAX_LEVELS = 32  # a product per level beats pairwise comparisons up to about this many
_BLOCK_CELLS = 2**24  # keys x N x N comparisons held at once (16 MB of booleans)


def _values(values: npt.ArrayLike) -> FloatArray:
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 2:
        raise InputError(f"values must be (keys, policies), got shape {v.shape}")
    return v


def _levels(v: FloatArray) -> FloatArray | None:
    """The distinct valid values of ``v`` when they are few enough to count by products."""
    found = np.unique(v[~np.isnan(v)])
    return found if len(found) <= _MAX_LEVELS else None


def _blocks(v: FloatArray) -> range:
    step = max(1, _BLOCK_CELLS // max(1, v.shape[1] ** 2))
    return range(0, v.shape[0], step)


def win_counts(values: npt.ArrayLike) -> FloatArray:
    """``W[i, j]``: the keys on which policy ``i``'s value is above ``j``'s, both valid.

    ``values`` is (keys, policies) with NaN where a policy has no valid value; a higher value
    wins (negate a metric to minimize). ``W + W.T`` is every decisive game, ties excluded.
    """
    v = _values(values)
    n = v.shape[1]
    out = np.zeros((n, n))
    levels = _levels(v)
    if levels is not None:
        valid = ~np.isnan(v)
        for a in levels[1:]:  # each level beats the valid values below it
            at = (v == a).astype(np.float32)
            below = (valid & (v < a)).astype(np.float32)
            out += (at.T @ below).astype(np.float64)
        return out
    blocks = _blocks(v)
    for k in blocks:
        block = v[k : k + blocks.step]
        out += (block[:, :, None] > block[:, None, :]).sum(axis=0)  # NaN compares False
    return out


def key_scores(theta: npt.ArrayLike, values: npt.ArrayLike) -> FloatArray:
    """Each key's term of the Bradley-Terry log-likelihood's gradient at ``theta``, (keys, N).

    ``g[k, i] = sum_j w_kij (1 - p_ij) - w_kji p_ij`` with ``w_kij`` = 1 when ``i`` beat
    ``j`` on key ``k`` and ``p_ij`` the model's probability that ``i`` beats ``j``; every row
    sums to 0 (a game adds to one side what it takes from the other). Their spread over keys
    is the meat of :func:`sandwich_covariance`.
    """
    v = _values(values)
    t = np.asarray(theta, dtype=np.float64)
    # float64: the terms' spread is the interval (a row sums to 0 to 1e-12, not 1e-6)
    p = special.expit(t[:, None] - t[None, :])
    q = 1 - p
    out = np.zeros(v.shape)
    levels = _levels(v)
    if levels is not None:
        valid = ~np.isnan(v)
        for a in levels[1:]:
            at = (v == a).astype(np.float64)
            below = (valid & (v < a)).astype(np.float64)
            out += at * (below @ q.T) - below * (at @ p.T)
        return out
    blocks = _blocks(v)
    for k in blocks:
        block = v[k : k + blocks.step]
        won = (block[:, :, None] > block[:, None, :]).astype(np.float64)
        out[k : k + len(block)] = np.einsum("kij,ij->ki", won, q) - np.einsum("kji,ij->ki", won, p)
    return out


def stratified_meat(
    scores: npt.ArrayLike, stratum: npt.ArrayLike, sizes: npt.ArrayLike
) -> tuple[FloatArray, FloatArray]:
    """A block of keys' part of the sandwich's meat: ``(sum_k c_s g_k g_k', per-stratum sums)``.

    ``stratum`` names each key's stratum (0..S-1) and ``sizes`` every stratum's key count
    ``n_s`` (all its keys, undecisive ones included: the bootstrap resamples them too);
    ``c_s = n_s / (n_s - 1)`` (0 for a stratum of one key, which a resample cannot vary).
    Sum the parts of every block and give them to :func:`sandwich_covariance`, which centres
    each stratum: the variance of a stratified resample of keys, in closed form.
    """
    g = np.asarray(scores, dtype=np.float64)
    s = np.asarray(stratum, dtype=np.int64)
    n = np.asarray(sizes, dtype=np.float64)
    c = np.where(n > 1, n / np.maximum(n - 1, 1), 0.0)
    weighted = g * np.sqrt(c[s])[:, None]
    sums = np.zeros((len(n), g.shape[1]))
    np.add.at(sums, s, g)
    return weighted.T @ weighted, sums


def sandwich_covariance(
    theta: npt.ArrayLike,
    wins: npt.ArrayLike,
    meat: npt.ArrayLike,
    stratum_sums: npt.ArrayLike,
    sizes: npt.ArrayLike,
    *,
    penalty: float = DEFAULT_PENALTY,
) -> FloatArray:
    """The covariance of the fitted log-strengths over resamples of keys within strata.

    ``H^-1 B H^-1``: ``H`` the penalized objective's Hessian at ``theta`` (the fit of
    ``wins``), ``B`` the stratified spread of the keys' score terms (:func:`stratified_meat`'s
    parts, summed over blocks, centred here per stratum). The estimating equation of the fit
    is a sum over keys, so this is the variance a stratified bootstrap of keys estimates,
    without refitting N strengths per resample (at N = 2,000 each fit is a second).
    """
    t = np.asarray(theta, dtype=np.float64)
    w = np.array(wins, dtype=np.float64)
    n_items = len(t)
    w = w * (1 - np.eye(n_items))
    games = w + w.T
    _, hess = _derivatives(t[None], w[None], games[None], penalty)
    sums = np.asarray(stratum_sums, dtype=np.float64)
    n = np.asarray(sizes, dtype=np.float64)
    c = np.where(n > 1, n / np.maximum(n - 1, 1), 0.0)
    scale = np.where(n > 0, c / np.where(n > 0, n, 1.0), 0.0)
    spread = np.asarray(meat, dtype=np.float64) - (sums * scale[:, None]).T @ sums
    inv = np.linalg.inv(hess[0])
    cov: FloatArray = inv @ spread @ inv
    return (cov + cov.T) / 2
