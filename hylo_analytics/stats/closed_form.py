"""Confidence intervals and standard errors in closed form, vectorized over groups.

Every function takes arrays (one entry per group) and returns arrays, so one call covers all
the groups of an aggregate. Conventions shared by the whole :mod:`hylo_analytics.stats`
package:

- ``level`` is the two-sided coverage (0.95 gives the 2.5 % and 97.5 % bounds);
- a group with no valid value gets ``nan`` bounds; it is never treated as 0;
- binomial bounds are exact at the boundaries: 0 successes give a lower bound of exactly 0,
  ``n`` successes an upper bound of exactly 1.

The SQL views compute the same Wilson bounds with the DuckDB macros ``wilson_low`` /
``wilson_high`` (created with the views, see :mod:`hylo_analytics._sql`), from the ``z`` this
module gives; a test holds the two equal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from hylo_analytics._lazy import LazyModule
from hylo_analytics.errors import InputError

if TYPE_CHECKING:
    from scipy import special, stats
else:  # scipy is imported on first use: it costs half a second at startup
    special = LazyModule("scipy.special")
    stats = LazyModule("scipy.stats")

__all__ = [
    "DEFAULT_LEVEL",
    "StatisticsWarning",
    "clopper_pearson",
    "clustered_stderr",
    "hall_ci",
    "normal_ci",
    "wilson",
    "z_value",
]

FloatArray = npt.NDArray[np.float64]
ArrayLike = npt.ArrayLike

DEFAULT_LEVEL = 0.95


class StatisticsWarning(UserWarning):
    """A statistic was asked for where it is known to mislead (e.g. a Wald interval on a few
    0/1 values); the result is returned, with this warning naming the better choice."""


# scipy's ndtri(0.975), written out: every store opened builds the SQL macros from the default
# level's z, and importing scipy.special for it was a third of opening a store (a test holds
# the literal equal to scipy's value, bit for bit)
_DEFAULT_Z = 1.959963984540054


def z_value(level: float) -> float:
    """The standard normal quantile for a two-sided interval of coverage ``level``."""
    _check_level(level)
    if level == DEFAULT_LEVEL:
        return _DEFAULT_Z
    return float(special.ndtri(0.5 + level / 2))


def wilson(
    successes: ArrayLike, n: ArrayLike, level: float = 0.95
) -> tuple[FloatArray, FloatArray]:
    """Wilson score interval for a binomial proportion (good coverage even near 0 and 1)."""
    k, nn = _f(successes), _f(n)
    z = z_value(level)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = k / nn
        denom = 1 + z * z / nn
        centre = (p + z * z / (2 * nn)) / denom
        half = z * np.sqrt(p * (1 - p) / nn + z * z / (4 * nn * nn)) / denom
    # At k = 0 (k = n) the bound is exactly 0 (1); rounding would leave it a hair inside.
    low = np.where(k <= 0, 0.0, np.clip(centre - half, 0, 1))
    high = np.where(k >= nn, 1.0, np.clip(centre + half, 0, 1))
    empty = nn <= 0
    return np.where(empty, np.nan, low), np.where(empty, np.nan, high)


def clopper_pearson(
    successes: ArrayLike, n: ArrayLike, level: float = 0.95
) -> tuple[FloatArray, FloatArray]:
    """Clopper-Pearson "exact" interval: beta quantiles, conservative (coverage >= level)."""
    _check_level(level)
    k, nn = _f(successes), _f(n)
    alpha = 1 - level
    empty = nn <= 0
    safe_n = np.where(empty, 1.0, nn)
    with np.errstate(invalid="ignore"):
        low = np.where(k > 0, stats.beta.ppf(alpha / 2, k, safe_n - k + 1), 0.0)
        high = np.where(k < safe_n, stats.beta.ppf(1 - alpha / 2, k + 1, safe_n - k), 1.0)
    return np.where(empty, np.nan, low), np.where(empty, np.nan, high)


def normal_ci(
    mean: ArrayLike, stderr: ArrayLike, level: float = 0.95
) -> tuple[FloatArray, FloatArray]:
    """``mean -/+ z * stderr`` (the CLT interval Miller 2024 recommends for large evals)."""
    m, se = _f(mean), _f(stderr)
    z = z_value(level)
    return m - z * se, m + z * se


def hall_ci(
    mean: ArrayLike,
    std: ArrayLike,
    skewness: ArrayLike,
    n: ArrayLike,
    level: float = 0.95,
) -> tuple[FloatArray, FloatArray]:
    """Hall's (1992) skewness-corrected t interval for a mean, from each group's moments.

    The t statistic ``T = sqrt(n) (mean - mu) / std`` of skewed data is itself skewed; Hall's
    monotone cubic ``g(T) = T + a T**2 + a**2 T**3 / 3 + a / 2`` with ``a = skewness / (3
    sqrt(n))`` removes the first (``n**-1/2``) term of its Edgeworth expansion, and the interval
    is ``{mu : |g(T)| <= q}``, ``q`` the t quantile on ``n - 1`` degrees of freedom (closer to
    nominal at n = 20 than the normal one: ``benchmarks/bench_coverage.py``). The inverse is
    in closed form, ``g^-1(u) = 3 (u - b) / (r**2 + r + 1)`` with ``r = cbrt(1 + 3 a (u -
    b))``, so bounds cost nothing per resample: ``mean - std / sqrt(n) * g^-1(+-q)``.

    ``std`` has ddof 1; ``skewness`` is the plug-in ``m3 / m2**1.5`` (central moments over
    ``n``; ``scipy.stats.skew(x)``), 0 taken where it is not finite (all values equal). With
    skewness 0 this is exactly the t interval; right skew moves both bounds up, the upper one
    more. A group of one value, or none, gets ``nan`` bounds; a flat group its mean twice.
    """
    m, s, nn = _f(mean), _f(std), _f(n)
    # a flat group, or values so close their moments underflow, has no skewness: t
    g = np.nan_to_num(np.where(s > 0, _f(skewness), 0.0), nan=0.0, posinf=0.0, neginf=0.0)
    _check_level(level)
    with np.errstate(divide="ignore", invalid="ignore"):
        # stdtrit is t.ppf without importing scipy.stats (seconds at a cold start)
        q = special.stdtrit(np.where(nn > 1, nn - 1, np.nan), 0.5 + level / 2)
        a = g / (3 * np.sqrt(nn))
        se = s / np.sqrt(nn)
    low = m - se * _hall_inverse(q, a)
    high = m - se * _hall_inverse(-q, a)
    return np.where(nn > 1, low, np.nan), np.where(nn > 1, high, np.nan)


def _hall_inverse(u: FloatArray, a: FloatArray) -> FloatArray:
    """``g^-1(u)`` of Hall's cubic, written so ``a`` near 0 loses no precision (the plain
    ``(cbrt(1 + 3 a (u - b)) - 1) / a`` cancels) and ``a = 0`` gives ``u`` exactly."""
    c = u - a / 2
    with np.errstate(invalid="ignore"):
        r = np.cbrt(1 + 3 * a * c)
        return np.asarray(np.where(a == 0, c, 3 * c / (r * r + r + 1)), dtype=np.float64)


def clustered_stderr(
    values: ArrayLike,
    clusters: ArrayLike,
    groups: ArrayLike | None = None,
    *,
    small_sample: bool = False,
) -> FloatArray:
    """Cluster-robust standard error of the mean, per group (Miller 2024, "Adding Error Bars").

    ``SE = sqrt(sum_c (sum_{i in c} (x_i - xbar))**2) / n``: questions of one task (cluster)
    are correlated, so residuals are summed within a cluster before squaring. With
    ``small_sample=True`` the variance is multiplied by ``G / (G - 1)`` (G = clusters in the
    group), the usual correction that keeps it from being too small with few clusters; a group
    with one cluster then has an undefined (nan) error. With one value per cluster and the
    correction off, this is the plain ``std(ddof=0) / sqrt(n)``.
    """
    x = _f(values)
    g = _codes(np.zeros(len(x)) if groups is None else groups)
    n_groups = int(g.max()) + 1 if len(x) else 0
    c = _codes(np.stack([g, _codes(clusters)]), axis=1)
    n = np.bincount(g, minlength=n_groups).astype(float)
    mean = np.bincount(g, weights=x, minlength=n_groups) / n
    resid_sum = np.bincount(c, weights=x - mean[g])
    cluster_group = np.zeros(len(resid_sum), dtype=np.int64)
    cluster_group[c] = g
    var = np.bincount(cluster_group, weights=resid_sum**2, minlength=n_groups)
    if small_sample:
        n_clusters = np.bincount(cluster_group, minlength=n_groups).astype(float)
        with np.errstate(divide="ignore", invalid="ignore"):
            var = np.where(n_clusters > 1, var * n_clusters / (n_clusters - 1), np.nan)
    return np.asarray(np.sqrt(var) / n, dtype=np.float64)


# -- helpers shared by the package ------------------------------------------------------


def _codes(a: ArrayLike, axis: int | None = None) -> npt.NDArray[np.int64]:
    """Dense integer codes of ``a`` (of its columns with ``axis=1``)."""
    inverse = np.unique(np.asarray(a), axis=axis, return_inverse=True)[1]
    return np.asarray(inverse, dtype=np.int64).ravel()


def _f(a: ArrayLike) -> FloatArray:
    return np.asarray(a, dtype=np.float64)


def _check_level(level: float) -> None:
    if not 0 < level < 1:
        raise InputError(f"level must be between 0 and 1 (exclusive), got {level!r}")
