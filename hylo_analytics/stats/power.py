"""Power and sample size of a paired comparison: how many episodes per run a comparison needs.

Each model is the test :mod:`hylo_analytics.compare` runs, so a plan is a promise about the
p-value the comparison will report:

- **binary** metrics (success): ``test="score"`` (default), the test compare's verdicts use:
  Tango's score test of δ = 0, whose statistic is ``(b - c) / sqrt(b + c)`` (the asymptotic
  McNemar test, no continuity correction), rejecting when it exceeds ``z_(1-alpha)``;
  ``test="exact"``, the exact conditional McNemar test of
  :func:`~hylo_analytics.stats.significance.mcnemar_p` (compare's ``p_mcnemar``), rejecting
  when P(X >= wins | m, 1/2) < alpha. A pair is discordant (one run succeeds, the other
  fails) with probability ``discordance`` ψ = p10 + p01, and the difference of the success
  rates is δ = p10 - p01 (p10: the candidate succeeds, the parent fails). Given m discordant
  pairs the candidate's wins are Binomial(m, (ψ + δ) / 2ψ), and either test rejects on more
  than a critical number of wins (``"two-sided"``: either tail at alpha/2), so the power is
  exact for both: it sums P(reject | m) over m ~ Binomial(n, ψ).
- **continuous** metrics: the paired t-test on differences with standard deviation ``sd``;
  its power is a noncentral t tail.

The planning vocabulary is the package's: ``alpha`` (the test's level), ``power`` (the target
probability of rejecting), ``alternative`` (``"greater"``: the candidate is better, or
``"two-sided"``). "Pairs" are episodes per run, paired by task and seed (the key).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
import numpy.typing as npt

from hylo_analytics._lazy import LazyModule
from hylo_analytics.errors import InputError
from hylo_analytics.stats.significance import Alternative

if TYPE_CHECKING:
    from scipy import optimize, stats
else:  # scipy is imported on first use: it costs half a second at startup
    optimize = LazyModule("scipy.optimize")
    stats = LazyModule("scipy.stats")

__all__ = [
    "MAX_PAIRS",
    "Plan",
    "discordance_from_marginals",
    "mcnemar_power",
    "minimum_detectable_effect",
    "minimum_detectable_effect_continuous",
    "paired_t_power",
    "pairs_for_power",
    "pairs_for_power_continuous",
    "plan_binary",
    "plan_continuous",
    "plan_for",
    "points",
    "power_at",
    "smallest_detectable",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
PlanKind = Literal["binary", "continuous"]
BinaryTest = Literal["score", "exact"]
_BINARY_METHOD = {"score": "Tango score test", "exact": "exact McNemar"}
_PowerAt = Callable[[IntArray], FloatArray]

MAX_PAIRS = 1_000_000
_TAIL = 1e-14  # mass of Binomial(n, ψ) left out of the power sum, on each side
_CELLS = 4_000_000  # pmf cells evaluated per block: bounds memory for long ranges of n
_SETTLE = 1_000  # sizes checked beyond a candidate answer for a later dip in power


@dataclass(frozen=True)
class Plan:
    """The pairs a comparison needs: ``n_pairs`` reach ``power`` >= ``target_power``."""

    kind: PlanKind
    n_pairs: int
    delta: float
    alpha: float
    power: float
    target_power: float
    alternative: Alternative
    method: str
    discordance: float | None = None
    sd: float | None = None

    def __post_init__(self) -> None:
        need = {"binary": "discordance", "continuous": "sd"}.get(self.kind)
        if need is None:
            raise InputError(f"Plan.kind must be 'binary' or 'continuous', got {self.kind!r}")
        if getattr(self, need) is None:
            raise InputError(f"a {self.kind} Plan needs {need}")

    def __str__(self) -> str:
        if self.kind == "binary":
            what = f"{points(self.delta)} points (discordance {self.discordance:.3f})"
        else:
            what = f"{self.delta:+.4g} (sd of differences {self.sd:.4g})"
        side = "one-sided" if self.alternative == "greater" else "two-sided"
        return (
            f"To detect {what} with power {self.target_power:.2f} at {side} alpha "
            f"{self.alpha:g} ({self.method}): {self.n_pairs:,} pairs (episodes per run); "
            f"power at that size {self.power:.3f}"
        )


def points(delta: float) -> str:
    """A difference of rates in percentage points: ``+3.0``, or ``+0.43`` below one point."""
    x = 100.0 * delta
    return f"{x:+.1f}" if abs(x) >= 1 else f"{x:+.2g}"


# -- binary: the exact McNemar test ------------------------------------------------------


def discordance_from_marginals(p_parent: float, p_candidate: float, rho: float = 0.0) -> float:
    """ψ = p_c + p_p - 2·p11 for success rates whose outcomes correlate by ``rho``.

    p11 = p_c·p_p + rho·sqrt(p_c(1-p_c)p_p(1-p_p)), clipped to the joint probabilities the
    marginals allow (the Fréchet bounds). Policies that fail on the same hard episodes have
    rho > 0 and fewer discordant pairs, which is why a paired comparison needs fewer episodes.
    """
    for name, p in (("p_parent", p_parent), ("p_candidate", p_candidate)):
        if not 0.0 <= p <= 1.0:
            raise InputError(f"{name} must be a success rate in [0, 1], got {p!r}")
    if not -1.0 <= rho <= 1.0:
        raise InputError(f"rho must be a correlation in [-1, 1], got {rho!r}")
    spread = math.sqrt(p_candidate * (1 - p_candidate) * p_parent * (1 - p_parent))
    p11 = p_candidate * p_parent + rho * spread
    p11 = min(max(p11, max(0.0, p_candidate + p_parent - 1.0)), min(p_candidate, p_parent))
    return max(p_candidate + p_parent - 2.0 * p11, 0.0)


def mcnemar_power(
    n: int,
    delta: float,
    discordance: float,
    alpha: float = 0.05,
    alternative: Alternative = "greater",
    *,
    test: BinaryTest = "score",
) -> float:
    """Exact power of the McNemar-family ``test`` with ``n`` pairs (the module docstring)."""
    _check_binary(delta, discordance, alpha, alternative)
    _check_test(test)
    if n < 0:
        raise InputError(f"n must be a number of pairs >= 0, got {n!r}")
    return float(_power_grid(np.array([n]), delta, discordance, alpha, alternative, test)[0])


def pairs_for_power(
    delta: float,
    discordance: float,
    *,
    power: float = 0.8,
    alpha: float = 0.05,
    alternative: Alternative = "greater",
    max_n: int = MAX_PAIRS,
    test: BinaryTest = "score",
) -> int:
    """The smallest n from which the power of ``test`` stays >= ``power``.

    Exact power saw-tooths in n (the critical number of wins moves in whole steps), most when
    ψ is near 1; "stays" is checked over the next ``min(n, 1000)`` sizes, beyond which the
    teeth have died out. A bisection from the Connor (1987) normal approximation
    ``n = [z_a·sqrt(ψ) + z_b·sqrt(ψ - δ²)]² / δ²`` finds a crossing; a vectorized scan then
    moves past any later dip.
    """
    _check_binary(delta, discordance, alpha, alternative)
    _check_target(power)
    _check_test(test)
    delta = _detectable(delta, alternative)

    def power_at(ns: IntArray) -> FloatArray:
        return _power_grid(ns, delta, discordance, alpha, alternative, test)

    start = _connor(delta, discordance, alpha, power, alternative)
    n = _crossing(power_at, power, start, 1, max_n)
    while True:  # a Python loop over dips, each handled by one vectorized scan
        ns = np.arange(n, min(n + min(n, _SETTLE), max_n) + 1)
        low = np.flatnonzero(power_at(ns) < power)
        if low.size == 0:
            return n
        if ns[low[-1]] >= max_n:
            raise _too_many(max_n)
        n = int(ns[low[-1]]) + 1


def minimum_detectable_effect(
    n: int,
    discordance: float,
    *,
    power: float = 0.8,
    alpha: float = 0.05,
    alternative: Alternative = "greater",
    test: BinaryTest = "score",
) -> float:
    """The smallest δ in (0, ψ] ``test`` detects with ``power`` from ``n`` pairs.

    Power grows with δ (each discordant pair is more likely a win), so a root search on δ
    settles it. A ``ValueError`` says when even δ = ψ (every discordant pair a win) falls short.
    """
    _check_binary(0.0, discordance, alpha, alternative)
    _check_target(power)
    if n < 1:
        raise InputError(f"n must be a number of pairs >= 1, got {n!r}")

    def gap(d: float) -> float:
        return mcnemar_power(n, d, discordance, alpha, alternative, test=test) - power

    if gap(0.0) >= 0:  # a target at or below the size: no difference is needed
        return 0.0
    if gap(discordance) < 0:
        raise InputError(
            f"{n} pairs cannot reach power {power} at discordance {discordance:.4g}: even a "
            f"difference of {discordance:.4g} (every discordant pair a win) falls short"
        )
    return float(optimize.brentq(gap, 0.0, discordance, xtol=1e-12))


def plan_binary(
    delta: float,
    discordance: float,
    *,
    power: float = 0.8,
    alpha: float = 0.05,
    alternative: Alternative = "greater",
    max_n: int = MAX_PAIRS,
    test: BinaryTest = "score",
) -> Plan:
    """:func:`pairs_for_power` with the power it achieves, as a :class:`Plan`."""
    n = pairs_for_power(
        delta, discordance, power=power, alpha=alpha, alternative=alternative, max_n=max_n,
        test=test,
    )  # fmt: skip
    return Plan(
        kind="binary",
        n_pairs=n,
        delta=delta,
        alpha=alpha,
        power=mcnemar_power(n, delta, discordance, alpha, alternative, test=test),
        target_power=power,
        alternative=alternative,
        method=_BINARY_METHOD[test],
        discordance=discordance,
    )


def _power_grid(
    ns: IntArray,
    delta: float,
    psi: float,
    alpha: float,
    alternative: Alternative,
    test: BinaryTest = "score",
) -> FloatArray:
    """Exact power at each n of ``ns``: E[P(reject | M)] for M ~ Binomial(n, ψ).

    P(reject | m) does not depend on n, so it is computed once over every m the sum needs;
    each n then sums its binomial band of m (the rest holds < 1e-14 of the mass), in blocks
    of at most ``_CELLS`` cells.
    """
    lo = stats.binom.ppf(_TAIL, ns, psi).astype(np.int64)
    hi = stats.binom.isf(_TAIL, ns, psi).astype(np.int64)
    lo, hi = np.minimum(lo, ns), np.minimum(hi, ns)  # ψ = 1 puts all the mass at m = n
    m0 = int(lo.min())
    m = np.arange(m0, int(hi.max()) + 1)
    reject = _reject_given(m, (psi + delta) / (2.0 * psi), alpha, alternative, test)
    width = int((hi - lo).max()) + 1
    rows = max(1, _CELLS // width)
    out = np.empty(ns.size)
    for at in range(0, ns.size, rows):  # blocks of rows, each one vectorized call
        block = slice(at, at + rows)
        band = lo[block, None] + np.arange(width)
        inside = band <= hi[block, None]
        band = np.where(inside, band, lo[block, None])
        pmf = np.where(inside, stats.binom.pmf(band, ns[block, None], psi), 0.0)
        out[block] = (pmf * reject[band - m0]).sum(axis=1)
    return np.asarray(np.clip(out, 0.0, 1.0), dtype=np.float64)


def _reject_given(
    m: IntArray, q: float, alpha: float, alternative: Alternative, test: BinaryTest = "score"
) -> FloatArray:
    """P(``test`` rejects | m discordant pairs), wins ~ Binomial(m, q)."""
    level = alpha if alternative == "greater" else alpha / 2
    j = _critical(m, level) if test == "exact" else _score_critical(m, level)
    upper = stats.binom.sf(j, m, q)
    if alternative == "greater":
        return np.asarray(upper, dtype=np.float64)
    # the lower region mirrors the upper one (the null is symmetric); both cannot hold at once
    return np.asarray(upper + stats.binom.cdf(m - j - 1, m, q), dtype=np.float64)


def _critical(m: IntArray, level: float) -> IntArray:
    """Per m, the largest j with P(X >= j | m, 1/2) >= level: the test rejects on wins > j.

    ``isf`` lands on j up to rounding; two vectorized corrections settle rounding and the
    strict ``p < level`` rule (no rejection at all gives j = m).
    """
    j = stats.binom.isf(level, m, 0.5)
    j = np.where(stats.binom.sf(j - 1, m, 0.5) < level, j - 1, j)
    j = np.where(stats.binom.sf(j, m, 0.5) < level, j, j + 1)
    return np.asarray(np.minimum(j, m), dtype=np.int64)


def _score_critical(m: IntArray, level: float) -> IntArray:
    """Per m, the score test's critical wins: ``(2 w - m) / sqrt(m) > z`` (strictly, as
    ``p < level``) holds exactly for ``w > floor((m + z sqrt(m)) / 2)``; m = 0 never rejects."""
    z = float(stats.norm.isf(level))
    j = np.floor((m + z * np.sqrt(m)) / 2)
    return np.asarray(np.clip(j, 0, m), dtype=np.int64)


def _check_test(test: str) -> None:
    if test not in _BINARY_METHOD:
        raise InputError(f"test must be 'score' or 'exact', got {test!r}")


def _connor(delta: float, psi: float, alpha: float, power: float, alternative: str) -> int:
    """Connor's (1987) normal-approximation sample size for McNemar's test."""
    z_a = _z(alpha, alternative)
    z_b = float(stats.norm.ppf(power))
    n = (z_a * math.sqrt(psi) + z_b * math.sqrt(max(psi - delta**2, 0.0))) ** 2 / delta**2
    return max(1, math.ceil(n))


# -- continuous: the paired t-test -------------------------------------------------------


def paired_t_power(
    n: int,
    delta: float,
    sd: float,
    alpha: float = 0.05,
    alternative: Alternative = "greater",
) -> float:
    """Power of the paired t-test with ``n`` pairs: a noncentral t tail beyond the critical t."""
    _check_continuous(sd, alpha, alternative)
    if n < 2:
        raise InputError(f"the paired t-test needs n >= 2 pairs, got {n!r}")
    return float(_t_power(np.array([n]), delta, sd, alpha, alternative)[0])


def pairs_for_power_continuous(
    delta: float,
    sd: float,
    *,
    power: float = 0.8,
    alpha: float = 0.05,
    alternative: Alternative = "greater",
    max_n: int = MAX_PAIRS,
) -> int:
    """The smallest n >= 2 whose paired t-test power is >= ``power`` (it grows with n)."""
    _check_continuous(sd, alpha, alternative)
    _check_target(power)
    delta = _detectable(delta, alternative)
    start = math.ceil(((_z(alpha, alternative) + float(stats.norm.ppf(power))) * sd / delta) ** 2)

    def power_at(ns: IntArray) -> FloatArray:
        return _t_power(ns, delta, sd, alpha, alternative)

    return _crossing(power_at, power, max(start, 2), 2, max_n)


def minimum_detectable_effect_continuous(
    n: int,
    sd: float,
    *,
    power: float = 0.8,
    alpha: float = 0.05,
    alternative: Alternative = "greater",
) -> float:
    """The smallest δ > 0 the paired t-test detects with ``power`` from ``n`` pairs."""
    _check_continuous(sd, alpha, alternative)
    _check_target(power)
    if n < 2:
        raise InputError(f"the paired t-test needs n >= 2 pairs, got {n!r}")

    def gap(d: float) -> float:
        return paired_t_power(n, d, sd, alpha, alternative) - power

    if gap(0.0) >= 0:  # a target at or below alpha: no difference is needed
        return 0.0
    top = sd
    while gap(top) < 0:  # power -> 1 as δ grows: a few doublings bracket the root
        top *= 2.0
    return float(optimize.brentq(gap, 0.0, top, xtol=1e-12 * sd, rtol=1e-14))


def plan_continuous(
    delta: float,
    sd: float,
    *,
    power: float = 0.8,
    alpha: float = 0.05,
    alternative: Alternative = "greater",
    max_n: int = MAX_PAIRS,
) -> Plan:
    """:func:`pairs_for_power_continuous` with the power it achieves, as a :class:`Plan`."""
    n = pairs_for_power_continuous(
        delta, sd, power=power, alpha=alpha, alternative=alternative, max_n=max_n
    )
    return Plan(
        kind="continuous",
        n_pairs=n,
        delta=delta,
        alpha=alpha,
        power=paired_t_power(n, delta, sd, alpha, alternative),
        target_power=power,
        alternative=alternative,
        method="paired t-test",
        sd=sd,
    )


def power_at(
    n: int, delta: float, spread: float, *, kind: PlanKind, alpha: float, alternative: Alternative
) -> float:
    """Power of ``n`` pairs for ``delta``: exact McNemar (``spread`` = discordance) or the
    paired t-test (``spread`` = sd of the differences). The one switch between the tests."""
    if kind == "binary":
        return mcnemar_power(n, delta, spread, alpha, alternative)
    return paired_t_power(n, delta, spread, alpha, alternative)


def smallest_detectable(
    n: int,
    spread: float,
    *,
    kind: PlanKind,
    power: float,
    alpha: float,
    alternative: Alternative,
) -> float:
    """:func:`minimum_detectable_effect` or its continuous twin, by ``kind``."""
    options = {"power": power, "alpha": alpha, "alternative": alternative}
    if kind == "binary":
        return minimum_detectable_effect(n, spread, **options)  # type: ignore[arg-type]
    return minimum_detectable_effect_continuous(n, spread, **options)  # type: ignore[arg-type]


def plan_for(
    delta: float,
    spread: float,
    *,
    kind: PlanKind,
    power: float,
    alpha: float,
    alternative: Alternative,
) -> Plan:
    """:func:`plan_binary` or :func:`plan_continuous`, by ``kind``."""
    options = {"power": power, "alpha": alpha, "alternative": alternative}
    if kind == "binary":
        return plan_binary(delta, spread, **options)  # type: ignore[arg-type]
    return plan_continuous(delta, spread, **options)  # type: ignore[arg-type]


def _t_power(
    ns: IntArray, delta: float, sd: float, alpha: float, alternative: Alternative
) -> FloatArray:
    df = ns - 1.0
    nc = delta / sd * np.sqrt(ns)
    level = alpha if alternative == "greater" else alpha / 2
    crit = stats.t.isf(level, df)
    out = stats.nct.sf(crit, df, nc)
    if alternative == "two-sided":
        out = out + stats.nct.cdf(-crit, df, nc)
    return np.asarray(out, dtype=np.float64)


# -- shared ------------------------------------------------------------------------------


def _crossing(power_at: _PowerAt, target: float, start: int, floor: int, max_n: int) -> int:
    """The smallest n >= ``floor`` with power >= ``target``, for power rising in n.

    Brackets the answer by doubling and halving from ``start`` (a normal approximation),
    then bisects on whole numbers. Where power is not monotone this is *a* crossing:
    power(n - 1) < target <= power(n).
    """
    hi = min(max(start, floor), max_n)
    while _at(power_at, hi) < target:
        if hi >= max_n:
            raise _too_many(max_n)
        hi = min(2 * hi, max_n)
    lo = hi // 2
    while lo >= floor and _at(power_at, lo) >= target:
        hi, lo = lo, lo // 2
    lo = max(lo, floor - 1)  # power(lo) < target, or floor - 1: below every size
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if _at(power_at, mid) >= target else (mid, hi)
    return hi


def _at(power_at: _PowerAt, n: int) -> float:
    return float(power_at(np.array([n]))[0])


def _z(alpha: float, alternative: str) -> float:
    return float(stats.norm.isf(alpha if alternative == "greater" else alpha / 2))


def _too_many(max_n: int) -> ValueError:
    return ValueError(
        f"the target power needs more than max_n={max_n:,} pairs; a larger effect or "
        "discordance, or a larger max_n, gives a plan"
    )


def _detectable(delta: float, alternative: Alternative) -> float:
    """The effect a sample size is planned for: > 0 one-sided, |δ| > 0 two-sided."""
    if alternative == "two-sided" and delta != 0:
        return abs(delta)
    if delta > 0:
        return delta
    raise InputError(
        f"delta must be > 0 to plan a one-sided test for an improvement, got {delta!r}"
        if alternative == "greater"
        else "delta must be non-zero: no number of pairs detects a difference of 0"
    )


def _check_alpha_alternative(alpha: float, alternative: str) -> None:
    if not 0.0 < alpha < 1.0:
        raise InputError(f"alpha must be in (0, 1), got {alpha!r}")
    if alternative not in ("greater", "two-sided"):
        raise InputError(f"alternative must be 'greater' or 'two-sided', got {alternative!r}")


def _check_binary(delta: float, psi: float, alpha: float, alternative: str) -> None:
    _check_alpha_alternative(alpha, alternative)
    if not 0.0 <= psi <= 1.0:
        raise InputError(f"discordance must be a probability in (0, 1], got {psi!r}")
    if psi == 0.0:
        raise InputError(
            "discordance 0 means every pair is a tie, and no number of pairs detects a "
            "difference; assume a discordance (see discordance_from_marginals)"
        )
    if not abs(delta) <= psi:
        raise InputError(
            f"|delta| = {abs(delta):.4g} exceeds the discordance {psi:.4g}: a difference of "
            "success rates is at most the share of discordant pairs (delta = p10 - p01, "
            "discordance = p10 + p01)"
        )


def _check_continuous(sd: float, alpha: float, alternative: str) -> None:
    _check_alpha_alternative(alpha, alternative)
    if not sd > 0 or math.isinf(sd):
        raise InputError(f"sd (of the paired differences) must be finite and > 0, got {sd!r}")


def _check_target(power: float) -> None:
    if not 0.0 < power < 1.0:
        raise InputError(f"power (the target) must be in (0, 1), got {power!r}")
