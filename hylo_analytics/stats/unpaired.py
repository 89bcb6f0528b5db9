"""Intervals and tests for the difference of two independent proportions, vectorized.

A harness that published only "0.45 of 200" names no sample, so two such runs cannot be
paired: what is left is the difference of two rates of independent samples of the same
benchmark. ``rank`` compares policies that share no key this way (their ranking "from
counts").

Notation: ``k1`` of ``n1`` (the candidate), ``k2`` of ``n2`` (the parent); the difference is
``delta = k1 / n1 - k2 / n2``.

- :func:`score_diff_ci`: the Miettinen-Nurminen (1985) asymptotic score interval, whose
  variance is estimated under the hypothesised difference (the restricted MLE, in closed form
  after Farrington & Manning 1990), with the ``N / (N - 1)`` factor: it keeps its coverage
  near 0 and 1, where the Wald interval collapses.
- :func:`score_diff_p`: the score test it inverts (one-sided), the verdict's and the
  equivalence (TOST) building block.

Golden values (``tests/stats/test_unpaired.py``): the restricted MLE maximized by scipy and
the interval found by ``brentq`` one table at a time, and statsmodels' ``method="score"``
test of ``delta = 0`` (pooled). statsmodels' score interval is not a reference: its cubic's
linear coefficient reads ``count0`` where ``nobs0`` belongs (statsmodels issue #10269), so
its restricted MLE is off whenever ``delta0 != 0``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import numpy as np
import numpy.typing as npt

from hylo_analytics._lazy import LazyModule
from hylo_analytics.stats.closed_form import _f, z_value

if TYPE_CHECKING:
    from scipy import special
else:
    special = LazyModule("scipy.special")

__all__ = ["score_diff_ci", "score_diff_p"]

FloatArray = npt.NDArray[np.float64]
ArrayLike = npt.ArrayLike

_ITERATIONS = 60  # bisection on [-1, 1]: 2**-60 is below double precision


def _score_statistic(
    k1: FloatArray, n1: FloatArray, k2: FloatArray, n2: FloatArray, d0: FloatArray
) -> FloatArray:
    """The Miettinen-Nurminen statistic of ``delta = d0``: the observed difference minus
    ``d0`` over its standard error at the rates' MLE restricted to that difference."""
    n, k = n1 + n2, k1 + k2
    with np.errstate(divide="ignore", invalid="ignore"):
        # the restricted MLE of the parent's rate: the root of a cubic (Farrington-Manning)
        c3 = 3 * n
        b2 = (n1 + 2 * n2) * d0 - n - k
        b1 = (n2 * d0 - n - 2 * k2) * d0 + k
        b0 = k2 * d0 * (1 - d0)
        q = (b2 / c3) ** 3 - b1 * b2 / (6 * n * n) + b0 / (2 * n)
        # q = 0 takes the positive branch (statsmodels' sign(q) gives 0 there and a nan)
        p = np.where(q < 0, -1.0, 1.0) * np.sqrt(np.maximum((b2 / c3) ** 2 - b1 / c3, 0.0))
        ratio = np.where(p != 0, q / np.where(p != 0, p, 1.0) ** 3, 0.0)
        a = (np.pi + np.arccos(np.clip(ratio, -1.0, 1.0))) / 3
        r2 = np.where(d0 == 0, k / n, np.clip(2 * p * np.cos(a) - b2 / c3, 0.0, 1.0))
        r1 = r2 + d0
        var = (r1 * (1 - r1) / n1 + r2 * (1 - r2) / n2) * n / (n - 1)
        num = k1 / n1 - k2 / n2 - d0
        t = num / np.sqrt(np.maximum(var, 0.0))
    # a zero variance happens only at the boundary of the parameter space: the sign decides
    return np.where(np.isfinite(t), t, np.where(num == 0, 0.0, np.where(num > 0, np.inf, -np.inf)))


def score_diff_ci(
    k1: ArrayLike, n1: ArrayLike, k2: ArrayLike, n2: ArrayLike, level: float = 0.95
) -> tuple[FloatArray, FloatArray]:
    """The Miettinen-Nurminen score interval of ``k1 / n1 - k2 / n2``; ``nan`` where a side
    has no sample. The statistic falls as the hypothesised difference rises, so each bound
    is one root, found by bisection for every group at once."""
    a1, m1, a2, m2 = np.broadcast_arrays(_f(k1), _f(n1), _f(k2), _f(n2))
    empty = (m1 <= 0) | (m2 <= 0)
    s1, s2 = np.where(empty, 1.0, m1), np.where(empty, 1.0, m2)
    z = z_value(level)
    bounds = []
    for target in (z, -z):
        lo, hi = np.full(a1.shape, -1.0), np.full(a1.shape, 1.0)
        for _ in range(_ITERATIONS):
            mid = (lo + hi) / 2
            above = _score_statistic(a1, s1, a2, s2, mid) > target
            lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
        bounds.append((lo + hi) / 2)
    return np.where(empty, np.nan, bounds[0]), np.where(empty, np.nan, bounds[1])


def score_diff_p(
    k1: ArrayLike,
    n1: ArrayLike,
    k2: ArrayLike,
    n2: ArrayLike,
    delta0: ArrayLike = 0.0,
    alternative: Literal["greater", "less"] = "greater",
) -> FloatArray:
    """One-sided score-test p of ``H0: delta <= delta0`` (``greater``) or ``>= delta0``; the
    two one-sided tests of equivalence within ``+-m`` are ``delta0=-m, "greater"`` and
    ``delta0=m, "less"``."""
    a1, m1, a2, m2, d0 = np.broadcast_arrays(_f(k1), _f(n1), _f(k2), _f(n2), _f(delta0))
    empty = (m1 <= 0) | (m2 <= 0)
    t = _score_statistic(a1, np.where(empty, 1.0, m1), a2, np.where(empty, 1.0, m2), d0)
    p = special.ndtr(-t) if alternative == "greater" else special.ndtr(t)
    return np.asarray(np.where(empty, np.nan, p), dtype=np.float64)
