"""Intervals and tests for the difference of two paired proportions, vectorized over groups.

Robot evals live near 0 and 1 (95 % vs 97 % success), where the percentile bootstrap of the
paired differences collapses: three tied pairs give [0, 0], and at n = 20 it covers about half
the time. Score intervals do not: they invert a test whose variance is estimated under the
hypothesised difference, so a run of ties still leaves an honest width.

Notation (a paired 2x2 table of n pairs, candidate x parent): ``b`` pairs where only the
candidate succeeded, ``c`` where only the parent did; the difference is
``delta = (b - c) / n`` (candidate - parent).

- :func:`tango_ci`: Tango's (1998) asymptotic score interval, the default for 0/1 metrics
  (Fagerland, Lydersen & Laake 2014 recommend it; coverage holds near the boundaries).
- :func:`newcombe_ci`: Newcombe's (1998) hybrid score interval (method 10: the two marginal
  Wilson intervals combined with the estimated correlation), closed form.
- :func:`tango_p`: the score test of ``delta = delta0`` (one-sided), the equivalence (TOST)
  building block: "unchanged within +-m" needs both ``delta > -m`` and ``delta < m``.

Golden values (``tests/stats/test_paired.py``) are the worked example of Fagerland, Lydersen &
Laake, *Statistical Analysis of Contingency Tables* (2017), chapter 8 (Cavo et al. 2012:
table [[59, 6], [16, 80]]), as their R package ``contingencytables`` prints them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import numpy as np
import numpy.typing as npt

from hylo_analytics._lazy import LazyModule
from hylo_analytics.stats.closed_form import _f, wilson, z_value

if TYPE_CHECKING:
    from scipy import special
else:
    special = LazyModule("scipy.special")

__all__ = ["newcombe_ci", "tango_ci", "tango_p"]

FloatArray = npt.NDArray[np.float64]
ArrayLike = npt.ArrayLike

_ITERATIONS = 60  # bisection on [-1, 1]: 2**-60 is below double precision


def _tango_statistic(b: FloatArray, c: FloatArray, n: FloatArray, d0: FloatArray) -> FloatArray:
    """Tango's score statistic for ``delta = d0``, with p21 at its restricted MLE."""
    big_a = 2 * n
    big_b = -b - c + (2 * n - b + c) * d0
    big_c = -c * d0 * (1 - d0)
    with np.errstate(divide="ignore", invalid="ignore"):
        p21 = (np.sqrt(np.maximum(big_b * big_b - 4 * big_a * big_c, 0.0)) - big_b) / (2 * big_a)
        var = n * (2 * p21 + d0 * (1 - d0))
        t = (b - c - n * d0) / np.sqrt(var)
    # a zero variance happens only at the boundary of the parameter space: the sign decides
    num = b - c - n * d0
    return np.where(np.isfinite(t), t, np.where(num == 0, 0.0, np.where(num > 0, np.inf, -np.inf)))


def _distinct(
    *columns: FloatArray,
) -> tuple[tuple[FloatArray, ...], npt.NDArray[np.intp]] | None:
    """The distinct rows of equal-length count columns and each row's index among them, or
    None when there are too few rows to gain: a ranking's two million pairs of a few hundred
    keys hold tens of thousands of distinct tables, so each root is found once per table."""
    size = columns[0].size
    if size < 4096:
        return None
    stacked = np.stack([np.ravel(c) for c in columns])
    if not (np.isfinite(stacked).all() and (stacked == np.rint(stacked)).all()):
        return None
    ints = stacked.astype(np.int64)
    low = ints.min(axis=1)
    spans = ints.max(axis=1) - low + 1
    if float(np.prod(spans.astype(np.float64))) >= 2.0**62:
        return None
    code = np.zeros(size, dtype=np.int64)
    for row, lo, span in zip(ints, low, spans, strict=True):
        code = code * span + (row - lo)
    _, first, back = np.unique(code, return_index=True, return_inverse=True)
    return tuple(np.ravel(c)[first] for c in columns), back


def tango_ci(
    b: ArrayLike, c: ArrayLike, n: ArrayLike, level: float = 0.95
) -> tuple[FloatArray, FloatArray]:
    """Tango's score interval for ``(b - c) / n``; ``nan`` where ``n == 0``.

    The statistic falls as the hypothesised difference rises, so each bound is one root,
    found by bisection for every group at once (once per distinct table). All pairs
    discordant one way give the bound -1 or 1 exactly.
    """
    bb, cc, nn = np.broadcast_arrays(_f(b), _f(c), _f(n))
    distinct = _distinct(bb, cc, nn)
    if distinct is not None:
        (ub, uc, un), back = distinct
        low, high = _tango_ci(ub, uc, un, level)
        return low[back].reshape(bb.shape), high[back].reshape(bb.shape)
    return _tango_ci(bb, cc, nn, level)


def _tango_ci(
    bb: FloatArray, cc: FloatArray, nn: FloatArray, level: float
) -> tuple[FloatArray, FloatArray]:
    z = z_value(level)
    empty = nn <= 0
    safe = np.where(empty, 1.0, nn)
    bounds = []
    for target in (z, -z):
        lo, hi = np.full(bb.shape, -1.0), np.full(bb.shape, 1.0)
        for _ in range(_ITERATIONS):
            mid = (lo + hi) / 2
            above = _tango_statistic(bb, cc, safe, mid) > target
            lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
        bounds.append((lo + hi) / 2)
    low = np.where(cc >= safe, -1.0, bounds[0])
    high = np.where(bb >= safe, 1.0, bounds[1])
    return np.where(empty, np.nan, low), np.where(empty, np.nan, high)


def tango_p(
    b: ArrayLike,
    c: ArrayLike,
    n: ArrayLike,
    delta0: ArrayLike,
    alternative: Literal["greater", "less"] = "greater",
) -> FloatArray:
    """One-sided score-test p of ``H0: delta <= delta0`` (``greater``) or ``>= delta0``.

    The two one-sided tests of equivalence within ``+-m`` are ``tango_p(..., -m, "greater")``
    and ``tango_p(..., m, "less")``; "unchanged" needs both below alpha (their maximum is the
    TOST p-value).
    """
    bb, cc, nn, d0 = np.broadcast_arrays(_f(b), _f(c), _f(n), _f(delta0))
    if d0.size and (d0 == d0.flat[0]).all():  # one hypothesis for all: once per table
        distinct = _distinct(bb, cc, nn)
        if distinct is not None:
            (ub, uc, un), back = distinct
            got = _tango_p(ub, uc, un, np.full(ub.shape, d0.flat[0]), alternative)
            return np.asarray(got[back].reshape(bb.shape), dtype=np.float64)
    return _tango_p(bb, cc, nn, d0, alternative)


def _tango_p(
    bb: FloatArray,
    cc: FloatArray,
    nn: FloatArray,
    d0: FloatArray,
    alternative: Literal["greater", "less"],
) -> FloatArray:
    empty = nn <= 0
    t = _tango_statistic(bb, cc, np.where(empty, 1.0, nn), d0)
    p = special.ndtr(-t) if alternative == "greater" else special.ndtr(t)
    return np.asarray(np.where(empty, np.nan, p), dtype=np.float64)


def newcombe_ci(
    a: ArrayLike, b: ArrayLike, c: ArrayLike, d: ArrayLike, level: float = 0.95
) -> tuple[FloatArray, FloatArray]:
    """Newcombe's hybrid score interval (method 10) for ``(b - c) / n``, ``n = a + b + c + d``.

    ``a`` pairs succeeded on both sides, ``d`` failed on both. The correlation estimate
    ``(ad - bc) / sqrt(...)`` is moved towards 0 by ``n / 2`` when positive (Newcombe's
    correction) and is 0 when a margin is empty, as Newcombe and ``contingencytables`` define
    it.
    """
    aa, bb, cc, dd = np.broadcast_arrays(_f(a), _f(b), _f(c), _f(d))
    n = aa + bb + cc + dd
    l1, u1 = wilson(aa + bb, n, level)
    l2, u2 = wilson(aa + cc, n, level)
    with np.errstate(divide="ignore", invalid="ignore"):
        p1, p2 = (aa + bb) / n, (aa + cc) / n
        denom = np.sqrt((aa + bb) * (cc + dd) * (aa + cc) * (bb + dd))
        # Newcombe's correlation estimate, with his correction towards 0 by n/2
        cross = aa * dd - bb * cc
        cross = np.where(cross > n / 2, cross - n / 2, np.where(cross >= 0, 0.0, cross))
        phi = np.where(denom > 0, cross / denom, 0.0)
        diff = p1 - p2
        down = np.sqrt(
            np.maximum((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2, 0.0)
        )
        up = np.sqrt(
            np.maximum((u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2, 0.0)
        )
    empty = n <= 0
    low = np.clip(diff - down, -1.0, 1.0)
    high = np.clip(diff + up, -1.0, 1.0)
    return np.where(empty, np.nan, low), np.where(empty, np.nan, high)
