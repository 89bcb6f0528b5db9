"""Prediction-powered inference (PPI++): a rate from a few trusted grades and many judge grades.

Where every key carries a judge's grade (a VLM judge, any grader) and only some carry a
trusted one (a person, a simulation oracle), the judge's mean is precise but biased and the
trusted mean unbiased but wide. PPI++ (Angelopoulos, Duchi & Zrnic 2023, "PPI++: Efficient
prediction-powered inference") takes the judge's mean over the ``N`` keys without a trusted
grade and corrects it by the judge's error measured on the ``n`` keys with one:

    theta = lam * mean_U(judge) + mean_L(trusted - lam * judge)

unbiased for any ``lam`` when the labelled keys are a random sample of the keys (the
judge's error is then measured on keys like the others). Its variance is
``lam**2 var(judge) / N + var(trusted - lam judge) / n``; ``lam`` is tuned to minimise it,

    lam = cov(trusted, judge) / ((1 + n / N) var(judge)),   clipped to [0, 1],

so a useless judge (no covariance with the truth) gives ``lam = 0``, the classical mean of
the labelled keys, and a good judge ``lam`` near 1 (plain PPI). The interval is the CLT one,
``theta -/+ z se``. Every formula is ``ppi_py``'s (``ppi_mean_pointestimate``,
``ppi_mean_ci``): the covariance over the labelled keys and the standard deviations with
``ddof=0``, the judge's variance over all keys with ``ddof=1``; a test holds the two equal.

A paired difference of two policies (:func:`ppi_paired`) is PPI++ of the per-key difference:
``trusted = trusted_a - trusted_b`` on the keys both have trusted grades of (labelled),
``judge = judge_a - judge_b`` on every key both share, one ``lam`` tuned on the difference
(the rectifier is the difference's), which is ``ppi_py`` fed the differences.

Every function is vectorized over groups (policies, suites, pairs): one flat array of keys
with a group code each, reduced by ``numpy.bincount``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from hylo_analytics._lazy import LazyModule
from hylo_analytics.errors import InputError
from hylo_analytics.stats.closed_form import DEFAULT_LEVEL, _check_level, z_value

if TYPE_CHECKING:
    from scipy import special
else:  # scipy is imported on first use: it costs half a second at startup
    special = LazyModule("scipy.special")

__all__ = ["PPIEstimate", "ppi_mean", "ppi_paired"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class PPIEstimate:
    """Per group: the PPI++ estimate with its interval and the two it improves on.

    ``estimate, stderr, low, high``: PPI++ (``lam`` the power-tuning weight used);
    ``classical*``: the mean of the trusted grades alone (labelled keys, the CLT interval
    ``ppi_py.classical_mean_ci`` gives); ``judge*``: the judge's mean over every key as if it
    were the truth (precise, and biased by the judge's error: its interval covers the judge's
    rate, not the true one). ``n_labelled`` / ``n_unlabelled``: keys with / without a trusted
    grade. ``p_value``: the two-sided z test of ``estimate == 0`` (for a difference). NaN
    where a group has fewer than two labelled keys.
    """

    estimate: FloatArray
    stderr: FloatArray
    low: FloatArray
    high: FloatArray
    lam: FloatArray
    classical: FloatArray
    classical_stderr: FloatArray
    classical_low: FloatArray
    classical_high: FloatArray
    judge: FloatArray
    judge_stderr: FloatArray
    judge_low: FloatArray
    judge_high: FloatArray
    n_labelled: IntArray
    n_unlabelled: IntArray
    p_value: FloatArray

    @property
    def effective_n(self) -> FloatArray:
        """The trusted grades the classical mean would need for PPI++'s variance:
        ``n * (classical_stderr / stderr) ** 2`` (the judge's worth, in labels)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return self.n_labelled * (self.classical_stderr / self.stderr) ** 2

    @property
    def width_ratio(self) -> FloatArray:
        """PPI++'s interval width over the classical one's (below 1: the judge helped)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return self.stderr / self.classical_stderr


def ppi_mean(
    trusted: npt.ArrayLike,
    judge: npt.ArrayLike,
    group: npt.ArrayLike | None = None,
    *,
    n_groups: int | None = None,
    lam: float | None = None,
    level: float = DEFAULT_LEVEL,
) -> PPIEstimate:
    """PPI++ of each group's mean from one row per key.

    ``trusted``: the trusted grade, NaN where the key has none (unlabelled); ``judge``: the
    judge's grade of every key (finite: a caller fills a judge's abstention, as
    ``compare.calibration`` does); ``group``: each key's group code in ``0..n_groups-1``
    (default one group). ``lam``: None tunes it per group (PPI++); 1 is plain PPI, 0 the
    classical mean. A group with no unlabelled key gets ``lam = 0``, as does one whose judge
    is constant (no variance to borrow). ``level``: the intervals' two-sided coverage.
    """
    _check_level(level)
    y = np.asarray(trusted, dtype=np.float64)
    f = np.asarray(judge, dtype=np.float64)
    if y.shape != f.shape or y.ndim != 1:
        raise InputError(f"ppi_mean: trusted {y.shape} and judge {f.shape} must be 1-d, alike")
    if not np.isfinite(f).all():
        raise InputError("ppi_mean: judge has NaN or infinite values; fill abstentions first")
    if lam is not None and not 0 <= lam <= 1:
        raise InputError(f"ppi_mean: lam must be in [0, 1] or None (tuned), got {lam!r}")
    g = np.zeros(len(y), np.int64) if group is None else np.asarray(group, dtype=np.int64)
    if g.shape != y.shape:
        raise InputError(f"ppi_mean: group {g.shape} must match trusted {y.shape}")
    k = n_groups if n_groups is not None else int(g.max(initial=-1)) + 1
    if len(g) and (g.min() < 0 or g.max() >= k):
        raise InputError(f"ppi_mean: group codes must lie in 0..{k - 1}")
    lab = np.isfinite(y)
    gl, gu, yl, fl, fu = g[lab], g[~lab], y[lab], f[lab], f[~lab]
    n = np.bincount(gl, minlength=k)
    big_n = np.bincount(gu, minlength=k)
    with np.errstate(divide="ignore", invalid="ignore"):
        m_y = np.bincount(gl, yl, k) / n
        m_fl = np.bincount(gl, fl, k) / n
        m_fu = np.where(big_n > 0, np.bincount(gu, fu, k) / big_n, 0.0)
        m_all = (np.bincount(gl, fl, k) + np.bincount(gu, fu, k)) / (n + big_n)
        dy, dfl, dfu = yl - m_y[gl], fl - m_fl[gl], fu - m_fu[gu]
        var_y = np.bincount(gl, dy * dy, k) / n
        var_fl = np.bincount(gl, dfl * dfl, k) / n
        cov = np.bincount(gl, dy * dfl, k) / n
        var_fu = np.bincount(gu, dfu * dfu, k) / np.maximum(big_n, 1)
        ss_all = np.bincount(gl, (fl - m_all[gl]) ** 2, k) + np.bincount(
            gu, (fu - m_all[gu]) ** 2, k
        )
        var_all = ss_all / (n + big_n - 1)  # ddof=1 over every key, as ppi_py's np.cov
        if lam is None:
            tuned = cov / ((1 + n / big_n) * var_all)
            weight = np.clip(np.where(np.isfinite(tuned), tuned, 0.0), 0.0, 1.0)
        else:
            weight = np.full(k, float(lam))
        weight = np.where(big_n > 0, weight, 0.0)
        estimate = weight * m_fu + m_y - weight * m_fl
        resid = np.maximum(var_y + weight**2 * var_fl - 2 * weight * cov, 0.0)
        stderr = np.sqrt(weight**2 * var_fu / np.maximum(big_n, 1) + resid / n)
        c_se = np.sqrt(var_y / n)
        j_se = np.sqrt(ss_all / (n + big_n) / (n + big_n))
    few = n < 2
    estimate, stderr, m_y, c_se, weight = (
        np.where(few, np.nan, a) for a in (estimate, stderr, m_y, c_se, weight)
    )
    z = z_value(level)
    return PPIEstimate(
        estimate=estimate,
        stderr=stderr,
        low=estimate - z * stderr,
        high=estimate + z * stderr,
        lam=weight,
        classical=m_y,
        classical_stderr=c_se,
        classical_low=m_y - z * c_se,
        classical_high=m_y + z * c_se,
        judge=m_all,
        judge_stderr=j_se,
        judge_low=m_all - z * j_se,
        judge_high=m_all + z * j_se,
        n_labelled=n.astype(np.int64),
        n_unlabelled=big_n.astype(np.int64),
        p_value=_two_sided(estimate, stderr),
    )


def _two_sided(estimate: FloatArray, stderr: FloatArray) -> FloatArray:
    """The z test's two-sided p-value; a zero stderr gives 1 at a zero estimate, else 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.abs(estimate) / stderr
    t = np.where(np.isnan(t) & (stderr == 0), np.where(estimate == 0, 0.0, np.inf), t)
    return np.asarray(2 * special.ndtr(-t), dtype=np.float64)


def ppi_paired(
    trusted_a: npt.ArrayLike,
    judge_a: npt.ArrayLike,
    trusted_b: npt.ArrayLike,
    judge_b: npt.ArrayLike,
    group: npt.ArrayLike | None = None,
    *,
    n_groups: int | None = None,
    lam: float | None = None,
    level: float = DEFAULT_LEVEL,
) -> PPIEstimate:
    """PPI++ of each group's paired difference ``a - b``, one row per key both share.

    A key is labelled when both policies have a trusted grade of it; the judge's difference
    is the prediction of the trusted difference, and one ``lam`` is tuned on the difference
    (its variance ``lam**2 var(dj) / N + var(dt - lam dj) / n`` minimised), so the judge's
    errors both policies share cancel in the rectifier. Options as :func:`ppi_mean`.
    """
    ta, tb = np.asarray(trusted_a, np.float64), np.asarray(trusted_b, np.float64)
    ja, jb = np.asarray(judge_a, np.float64), np.asarray(judge_b, np.float64)
    if not ta.shape == tb.shape == ja.shape == jb.shape:
        raise InputError("ppi_paired: the four arrays must be alike (one row per shared key)")
    return ppi_mean(ta - tb, ja - jb, group, n_groups=n_groups, lam=lam, level=level)
