"""An anytime-valid paired test: look after every batch, stop when the evidence is in.

A fixed-n p-value (:func:`~hylo_analytics.stats.mcnemar_p`) is valid at one pre-planned look
only; checking it after every batch and stopping at the first ``p < alpha`` rejects far more
often than ``alpha`` under "no difference" (see ``docs/sequential.md``). The statistic here is
an *e-process* on the discordant pairs: under H0 each discordant pair is a candidate win with
probability 1/2, independently, and the beta-mixture likelihood ratio

    E(w, l) = ∫ (2θ)^w (2(1-θ))^l π(θ) dθ

(``w`` candidate wins, ``l`` losses so far, ``π`` a Beta prior) is a nonnegative martingale
under H0 with ``E(0, 0) = 1``. Ville's inequality gives ``P(sup_t E_t >= 1/alpha) <= alpha``,
so rejecting the first time ``E >= 1/alpha`` controls the type-I error at *any* stopping time,
however often one looks. ``E`` depends only on the cumulative counts, so a look needs only
them. ``alternative`` picks the prior's support: ``"greater"`` truncates it to θ > 1/2
(candidate better), ``"less"`` to θ < 1/2, ``"two-sided"`` keeps all of (0, 1).

Inverting the two-sided mixture at every θ gives a confidence sequence for θ, the candidate's
win probability among discordant pairs: intervals that hold the true θ at all looks at once
with probability at least ``1 - alpha``.

Validity needs the pairs' order of arrival not to depend on their outcome (episodes that fail
slowly and so arrive late break it) and counts that only grow between looks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
import numpy.typing as npt
import polars as pl

from hylo_analytics._lazy import LazyModule
from hylo_analytics.errors import InputError

if TYPE_CHECKING:
    from scipy import special
else:  # scipy is imported on first use: it costs half a second at startup
    special = LazyModule("scipy.special")

__all__ = [
    "DEFAULT_PRIOR",
    "SequentialAlternative",
    "SequentialTest",
    "confidence_sequence",
    "e_value",
    "log_e_value",
    "sequential_test",
]

SequentialAlternative = Literal["greater", "less", "two-sided"]
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

# Beta(1, 1): uniform over the alternative's half. No effect size to guess; in simulation its
# median stopping time is within about 15% of priors tuned to θ = 0.6 or 0.75.
DEFAULT_PRIOR: tuple[float, float] = (1.0, 1.0)
_ALTERNATIVES = ("greater", "less", "two-sided")
_LOG2 = float(np.log(2.0))
_TINY_TAIL = 1e-280  # betaincc is accurate down to here; below it nears underflow
_BISECTIONS = 60


def _check(alternative: str, prior: tuple[float, float], alpha: float | None = None) -> None:
    if alternative not in _ALTERNATIVES:
        raise InputError(f"alternative must be one of {_ALTERNATIVES}, got {alternative!r}")
    if len(prior) != 2 or not all(np.isfinite(p) and p > 0 for p in prior):
        raise InputError(f"prior must be two positive Beta parameters (a, b), got {prior!r}")
    if alpha is not None and not 0 < alpha < 1:
        raise InputError(f"alpha must be in (0, 1), got {alpha!r}")


def _counts(wins: npt.ArrayLike, losses: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    w, lo = np.broadcast_arrays(np.asarray(wins, np.float64), np.asarray(losses, np.float64))
    if not (np.all(np.isfinite(w)) and np.all(np.isfinite(lo))):
        raise InputError("wins and losses must be finite counts")
    if np.any(w < 0) or np.any(lo < 0):
        raise InputError("wins and losses must be nonnegative counts")
    return w, lo


def _log_upper(a: FloatArray, b: FloatArray) -> FloatArray:
    """log ∫_{1/2}^1 θ^(a-1) (1-θ)^(b-1) dθ, also where the mass above 1/2 underflows.

    That is ``betaln + log(betaincc)`` while ``betaincc`` is a normal double; below, DLMF
    8.17.8 gives ``2^-(a+b) / b · 2F1(a+b, 1; b+1; 1/2)``, whose series is summed here
    (scipy's ``hyp2f1`` is unreliable at these parameters).
    """
    a, b = np.broadcast_arrays(a, b)
    tail = special.betaincc(a, b, 0.5)
    small = tail < _TINY_TAIL
    out = np.empty(a.shape, np.float64)
    big = ~small
    out[big] = special.betaln(a[big], b[big]) + np.log(tail[big])
    s, t = a[small], b[small]
    out[small] = -(s + t) * _LOG2 - np.log(t) + np.log(_hyp2f1_half(s + t, t + 1.0))
    return out


def _hyp2f1_half(c: FloatArray, d: FloatArray) -> FloatArray:
    """``2F1(c, 1; d; 1/2)`` by its series, for ``c < 2d`` (the terms then shrink from the start).

    Only reached where the tail underflows, which puts the posterior mean far below 1/2 and so
    the term ratio ``(c + k) / (2 (d + k))`` well below 1: a few hundred terms up to 10^5 pairs.
    """
    term = np.ones(c.shape)
    total = np.ones(c.shape)
    k = 0.0
    while np.any(term > 1e-17 * total):
        term = term * (c + k) / (2.0 * (d + k))
        total += term
        k += 1.0
    return total


def log_e_value(
    wins: npt.ArrayLike,
    losses: npt.ArrayLike,
    *,
    alternative: SequentialAlternative = "greater",
    prior: tuple[float, float] = DEFAULT_PRIOR,
) -> FloatArray:
    """The log of the beta-mixture e-value of ``wins`` to ``losses`` discordant pairs.

    Vectorized over (broadcast) arrays of counts. ``prior = (a, b)`` is the Beta prior on θ,
    truncated to θ > 1/2 (``"greater"``) or θ < 1/2 (``"less"``) and renormalized.
    """
    _check(alternative, prior)
    w, lo = _counts(wins, losses)
    a, b = (np.full(w.shape, p, np.float64) for p in prior)
    n_log2 = (w + lo) * _LOG2
    if alternative == "two-sided":
        return np.asarray(special.betaln(a + w, b + lo) - special.betaln(a, b) + n_log2)
    if alternative == "less":  # θ -> 1 - θ swaps wins with losses and a with b
        w, lo, a, b = lo, w, b, a
    return _log_upper(a + w, b + lo) - _log_upper(a, b) + n_log2


def e_value(
    wins: npt.ArrayLike,
    losses: npt.ArrayLike,
    *,
    alternative: SequentialAlternative = "greater",
    prior: tuple[float, float] = DEFAULT_PRIOR,
) -> FloatArray:
    """``exp(log_e_value(...))``: the evidence against H0 as a betting payoff (1 = none)."""
    return np.exp(log_e_value(wins, losses, alternative=alternative, prior=prior))


def confidence_sequence(
    wins: npt.ArrayLike,
    losses: npt.ArrayLike,
    *,
    alpha: float = 0.05,
    prior: tuple[float, float] = DEFAULT_PRIOR,
) -> tuple[FloatArray, FloatArray]:
    """Bounds of ``{θ : mixture / θ^w (1-θ)^l < 1/alpha}``, the (1 - alpha) sequence for θ.

    For each θ the ratio is a martingale under θ, so by Ville's inequality the true θ lies in
    every one of these intervals at once with probability >= 1 - alpha. The log-ratio is
    convex in θ with its minimum at w / (w + l), so each bound is found by bisection on one
    side of it (vectorized).
    """
    _check("two-sided", prior, alpha)
    w, lo = _counts(wins, losses)
    a, b = prior
    log_mix = special.betaln(a + w, b + lo) - special.betaln(a, b)
    cut = np.log(1.0 / alpha)
    n = w + lo
    centre = np.divide(w, n, out=np.full(w.shape, 0.5), where=n > 0)

    def inside(theta: FloatArray) -> npt.NDArray[np.bool_]:
        with np.errstate(divide="ignore", invalid="ignore"):
            ll = special.xlogy(w, theta) + special.xlog1py(lo, -theta)
        return np.asarray(log_mix - ll < cut)

    def bound(outer: float) -> FloatArray:
        # the first θ from centre towards ``outer`` that leaves the set (or ``outer`` itself)
        edge = np.full(w.shape, outer)
        out_ok = inside(edge)
        inner, far = centre.copy(), edge
        for _ in range(_BISECTIONS):
            mid = 0.5 * (inner + far)
            ok = inside(mid)
            inner = np.where(ok, mid, inner)
            far = np.where(ok, far, mid)
        return np.where(out_ok, edge, inner)

    return bound(0.0), bound(1.0)


@dataclass(frozen=True, eq=False)
class SequentialTest:
    """An e-process evaluated at every look (arrays have one entry per look).

    ``rejected[i]`` is True from the first look whose e-value reached ``threshold = 1/alpha``
    (``stopped_at``, or None): that is the look to stop at, and the rejection stands even if
    later e-values fall back. ``cs_low``/``cs_high`` bound θ, the candidate's win probability
    among discordant pairs, at every look simultaneously; ``delta_low``/``delta_high``
    translate them to the difference in success rates, ``ψ̂ (2θ - 1)`` with the observed
    discordance ``ψ̂ = n_discordant / n_pairs`` plugged in (approximate, unlike the test).
    The intervals are two-sided: a one-sided test can stop while ``cs_low`` is still below 1/2.
    """

    wins: IntArray
    losses: IntArray
    n_pairs: IntArray | None
    log_e_value: FloatArray
    cs_low: FloatArray
    cs_high: FloatArray
    alpha: float
    alternative: SequentialAlternative
    prior: tuple[float, float]

    @property
    def n_discordant(self) -> IntArray:
        return self.wins + self.losses

    @property
    def e_value(self) -> FloatArray:
        return np.exp(self.log_e_value)

    @property
    def threshold(self) -> float:
        return 1.0 / self.alpha

    @property
    def rejected(self) -> npt.NDArray[np.bool_]:
        return np.maximum.accumulate(self.log_e_value >= np.log(self.threshold))

    @property
    def stopped_at(self) -> int | None:
        hit = np.flatnonzero(self.rejected)
        return int(hit[0]) if hit.size else None

    @property
    def delta_low(self) -> FloatArray:
        return self._delta(self.cs_low)

    @property
    def delta_high(self) -> FloatArray:
        return self._delta(self.cs_high)

    def _delta(self, theta: FloatArray) -> FloatArray:
        if self.n_pairs is None:
            return np.full(theta.shape, np.nan)
        psi = np.divide(
            self.n_discordant,
            self.n_pairs,
            out=np.full(theta.shape, np.nan),
            where=self.n_pairs > 0,
        )
        return np.asarray(psi * (2.0 * theta - 1.0) + 0.0)  # + 0.0: never -0.0

    def to_frame(self) -> pl.DataFrame:
        """One row per look: counts, e-value, threshold, decision, the two intervals."""
        n = self.wins.shape[0]
        return pl.DataFrame(
            {
                "look": np.arange(n),
                "n_pairs": self.n_pairs if self.n_pairs is not None else [None] * n,
                "n_discordant": self.n_discordant,
                "wins": self.wins,
                "losses": self.losses,
                "e_value": self.e_value,
                "log_e_value": self.log_e_value,
                "threshold": np.full(n, self.threshold),
                "rejected": self.rejected,
                "cs_low": self.cs_low,
                "cs_high": self.cs_high,
                "delta_low": self.delta_low,
                "delta_high": self.delta_high,
            },
            schema_overrides={"n_pairs": pl.Int64},
        )


def _cumulative(name: str, values: npt.ArrayLike) -> IntArray:
    arr = np.atleast_1d(np.asarray(values))
    if arr.ndim != 1 or not np.all(np.isfinite(arr)) or np.any(arr < 0) or np.any(arr % 1):
        raise InputError(f"{name} must be a 1-d array of nonnegative integer counts, got {arr!r}")
    out = arr.astype(np.int64)
    down = np.flatnonzero(np.diff(out) < 0)
    if down.size:
        i = int(down[0]) + 1
        raise InputError(
            f"{name} fell from {out[i - 1]} at look {i - 1} to {out[i]} at look {i}: the counts "
            "must be cumulative (pairs seen earlier were changed or removed)"
        )
    return out


def sequential_test(
    wins: npt.ArrayLike,
    losses: npt.ArrayLike,
    *,
    n_pairs: npt.ArrayLike | None = None,
    alpha: float = 0.05,
    alternative: SequentialAlternative = "greater",
    prior: tuple[float, float] = DEFAULT_PRIOR,
) -> SequentialTest:
    """The e-process at every look, from the cumulative discordant counts at each look.

    Parameters
    ----------
    wins, losses : cumulative candidate wins and losses among the discordant pairs, one entry
        per look (non-decreasing: a look may add pairs, never drop them).
    n_pairs : cumulative pairs incl. ties, per look; needed only for ``delta_low/high``.
    alpha : the type-I error, controlled over all looks at once; reject at ``E >= 1/alpha``.
    alternative : "greater" (candidate better), "less" (worse) or "two-sided".
    prior : the Beta(a, b) mixing prior on θ (see :data:`DEFAULT_PRIOR`).
    """
    _check(alternative, prior, alpha)
    w, lo = _cumulative("wins", wins), _cumulative("losses", losses)
    if w.shape != lo.shape:
        raise InputError(
            f"wins has {w.size} looks but losses has {lo.size}; give one count of each per look"
        )
    pairs = None
    if n_pairs is not None:
        pairs = _cumulative("n_pairs", n_pairs)
        if pairs.shape != w.shape or np.any(pairs < w + lo):
            raise InputError("n_pairs must have one entry per look and be >= wins + losses")
    low, high = confidence_sequence(w, lo, alpha=alpha, prior=prior)
    return SequentialTest(
        wins=w,
        losses=lo,
        n_pairs=pairs,
        log_e_value=log_e_value(w, lo, alternative=alternative, prior=prior),
        cs_low=low,
        cs_high=high,
        alpha=alpha,
        alternative=alternative,
        prior=(float(prior[0]), float(prior[1])),
    )
