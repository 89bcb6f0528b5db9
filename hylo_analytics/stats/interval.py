"""The one interval entry point: every interval ``aggregate`` and ``compare`` report, by name.

Two data shapes, one vocabulary (:mod:`~hylo_analytics.stats.methods`): the mean of each group
(:func:`mean_interval`: Wilson, Clopper-Pearson, Wald, Hall, the bootstrap) and a paired
difference (:func:`paired_interval`: Tango's score interval, Newcombe, Wald, the bootstrap of
the differences, each with the test it inverts). The engines lay their groups out and call
these; which method ``auto`` means for a group stays theirs (it depends on the group's kind),
what a method computes is decided here once, as rliable's ``get_interval_estimates`` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import numpy as np
import numpy.typing as npt

from hylo_analytics._lazy import LazyModule
from hylo_analytics.errors import InputError
from hylo_analytics.stats import closed_form
from hylo_analytics.stats.bootstrap import BootstrapMethod, bootstrap_ci, bootstrap_test
from hylo_analytics.stats.closed_form import DEFAULT_LEVEL, z_value
from hylo_analytics.stats.clustered import ClusterRobust
from hylo_analytics.stats.methods import DEFAULT_RESAMPLES, DEFAULT_SEED, Seed
from hylo_analytics.stats.paired import newcombe_ci, tango_ci, tango_p
from hylo_analytics.stats.unpaired import score_diff_ci, score_diff_p

if TYPE_CHECKING:
    from scipy import special
else:  # scipy is imported on first use: it costs half a second at startup
    special = LazyModule("scipy.special")

__all__ = [
    "IntervalSpec",
    "PairedInterval",
    "mean_interval",
    "paired_interval",
    "unpaired_interval",
]

FloatArray = npt.NDArray[np.float64]
ArrayLike = npt.ArrayLike
Bounds = tuple[FloatArray, FloatArray]

_BOOTSTRAP = ("percentile", "bca", "studentized")
# the test each paired interval inverts, as the ``test`` column names it
_TESTS = {
    "score": "tango score",
    "newcombe": "tango score",  # Newcombe's hybrid interval inverts none: Tango's test decides
    "normal": "z",
    "percentile": "bootstrap percentile",
    "bca": "bootstrap bca",
    "studentized": "bootstrap-t",
    "cr2": "cr2 t",
}
# what the ``ci_method`` column prints for each paired method
_PAIRED_NAMES = {"score": "tango"}


@dataclass(frozen=True)
class IntervalSpec:
    """How an interval is asked for: the method and the options every method shares."""

    method: str = "auto"
    level: float = DEFAULT_LEVEL
    n_resamples: int = DEFAULT_RESAMPLES
    seed: Seed = DEFAULT_SEED


def mean_interval(
    method: str,
    n: ArrayLike,
    *,
    level: float = DEFAULT_LEVEL,
    successes: ArrayLike | None = None,
    mean: ArrayLike | None = None,
    std: ArrayLike | None = None,
    stderr: ArrayLike | None = None,
    skewness: ArrayLike | None = None,
    values: ArrayLike | None = None,
    strata_sizes: ArrayLike | None = None,
    binary: bool | None = None,
    clusters: ClusterRobust | None = None,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: Seed = DEFAULT_SEED,
) -> Bounds:
    """The interval of each group's mean by ``method`` (a concrete one, not ``auto``).

    ``n`` is each group's valid values; ``wilson`` / ``clopper_pearson`` read ``successes``,
    ``normal`` ``mean`` and ``stderr``, ``hall`` ``mean``, ``std`` (ddof 1) and ``skewness``
    (plug-in), the bootstrap methods the groups' ``values`` back to back (``n`` each, every
    ``n > 0``), ``strata_sizes`` to resample within strata and ``binary`` to name 0/1 data;
    ``cr2`` reads the groups' cluster-robust fit ``clusters``
    (:func:`~hylo_analytics.stats.clustered.cluster_robust`).
    """
    if method in ("wilson", "clopper_pearson"):
        fn = closed_form.wilson if method == "wilson" else closed_form.clopper_pearson
        return fn(_need(successes, "successes", method), n, level)
    if method == "hall":
        need = (_need(mean, "mean", method), _need(std, "std", method))
        return closed_form.hall_ci(*need, _need(skewness, "skewness", method), n, level)
    if method == "normal":
        return closed_form.normal_ci(
            _need(mean, "mean", method), _need(stderr, "stderr", method), level
        )
    if method == "cr2":
        return _fit(clusters, method).bounds(level)
    if method in _BOOTSTRAP:
        return bootstrap_ci(
            _need(values, "values", method),
            n,
            method=cast(BootstrapMethod, method),
            level=level,
            strata_sizes=strata_sizes,
            n_resamples=n_resamples,
            seed=seed,
            binary=binary,
        )
    raise InputError(f"mean_interval: no interval method {method!r}")


@dataclass(frozen=True)
class PairedInterval:
    """The interval of each group's mean paired difference at every level asked, and the
    one-sided p-values of the test it inverts (``p_greater``: the candidate above)."""

    bounds: list[Bounds]
    p_greater: FloatArray
    p_less: FloatArray
    test: str
    ci_method: str


def paired_interval(
    method: str,
    levels: Sequence[float],
    n: ArrayLike,
    *,
    wins: ArrayLike | None = None,
    losses: ArrayLike | None = None,
    both: ArrayLike | None = None,
    mean: ArrayLike | None = None,
    sd: ArrayLike | None = None,
    differences: ArrayLike | None = None,
    clusters: ClusterRobust | None = None,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: Seed = DEFAULT_SEED,
) -> PairedInterval:
    """The interval of each group's mean paired difference by ``method``, at every level.

    0/1 pairs as counts of ``n`` pairs: ``wins`` (only the candidate succeeded), ``losses``
    (only the parent), ``both`` (both succeeded, for ``newcombe``): ``score`` is Tango's
    interval and test, ``newcombe`` Newcombe's hybrid interval beside Tango's test. Any pairs:
    ``normal`` is the Wald interval of ``mean`` with the differences' ``sd`` and the z test;
    the bootstrap methods resample ``differences`` (``n`` per group, back to back, every
    ``n > 0``) once for every level and test from the same draws. Clustered pairs: ``cr2``
    is the CR2 interval and t test on Bell-McCaffrey df of the groups' fit ``clusters``
    (:func:`~hylo_analytics.stats.clustered.cluster_robust` of the differences); a group of
    one cluster has no interval and p 1 (one cluster says nothing of the clusters).
    """
    if method in ("score", "newcombe"):
        b, c = _need(wins, "wins", method), _need(losses, "losses", method)
        bb, cc, nn = (np.asarray(v, dtype=np.float64) for v in (b, c, n))
        bounds = []
        for level in levels:
            if method == "newcombe":
                a = np.asarray(_need(both, "both", method), dtype=np.float64)
                bounds.append(newcombe_ci(a, bb, cc, nn - a - bb - cc, level))
            else:
                bounds.append(tango_ci(bb, cc, nn, level))
        up, down = tango_p(bb, cc, nn, 0.0, "greater"), tango_p(bb, cc, nn, 0.0, "less")
    elif method == "normal":
        m = np.asarray(_need(mean, "mean", method), dtype=np.float64)
        s = np.asarray(_need(sd, "sd", method), dtype=np.float64)
        nn = np.asarray(n, dtype=np.float64)
        bounds = []
        for level in levels:
            half = z_value(level) * s / np.sqrt(np.where(nn > 0, nn, np.nan))
            bounds.append((m - half, m + half))
        with np.errstate(divide="ignore", invalid="ignore"):
            up, down = _z_test(m, s / np.sqrt(nn))
    elif method == "cr2":
        fit = _fit(clusters, method)
        bounds = [fit.bounds(level) for level in levels]
        up, down = (np.nan_to_num(fit.p(side), nan=1.0) for side in ("greater", "less"))
    elif method in _BOOTSTRAP:
        tested = bootstrap_test(
            _need(differences, "differences", method),
            n,
            levels=list(levels),
            method=cast(BootstrapMethod, method),
            n_resamples=n_resamples,
            seed=seed,
        )
        bounds, up, down = tested.bounds, tested.p_greater, tested.p_less
    else:
        raise InputError(f"paired_interval: no interval method {method!r}")
    name = _PAIRED_NAMES.get(method, method)
    return PairedInterval(bounds, np.asarray(up), np.asarray(down), _TESTS[method], name)


def unpaired_interval(
    method: str,
    levels: Sequence[float],
    *,
    k1: ArrayLike | None = None,
    n1: ArrayLike | None = None,
    k2: ArrayLike | None = None,
    n2: ArrayLike | None = None,
    mean: ArrayLike | None = None,
    se: ArrayLike | None = None,
) -> PairedInterval:
    """The interval of each group's difference of two independent rates, at every level,
    and the one-sided p-values of the test it inverts: ``score`` is Miettinen-Nurminen's
    of ``k1`` of ``n1`` against ``k2`` of ``n2``; ``normal`` the Wald interval and z test of
    a difference ``mean`` with standard error ``se`` (rates averaged over suites)."""
    if method == "score":
        a, b = _need(k1, "k1", method), _need(n1, "n1", method)
        c, d = _need(k2, "k2", method), _need(n2, "n2", method)
        bounds = [score_diff_ci(a, b, c, d, level) for level in levels]
        up, down = score_diff_p(a, b, c, d, 0.0, "greater"), score_diff_p(a, b, c, d, 0.0, "less")
        return PairedInterval(bounds, up, down, "miettinen-nurminen score (unpaired)",
                              "miettinen-nurminen")  # fmt: skip
    if method == "normal":
        m = np.asarray(_need(mean, "mean", method), dtype=np.float64)
        e = np.asarray(_need(se, "se", method), dtype=np.float64)
        bounds = [(m - z_value(level) * e, m + z_value(level) * e) for level in levels]
        up, down = _z_test(m, e)
        return PairedInterval(bounds, up, down, "z (unpaired)", "normal")
    raise InputError(f"unpaired_interval: no interval method {method!r}")


def _z_test(mean: FloatArray, se: FloatArray) -> tuple[FloatArray, FloatArray]:
    """The one-sided z test p-values of each ``mean`` with standard error ``se``
    (``p_greater``, ``p_less``): a zero standard error gives 0.5 at a zero mean and the
    mean's sign otherwise."""
    with np.errstate(divide="ignore", invalid="ignore"):
        t = mean / se
    t = np.where(np.isfinite(t), t, np.where(mean == 0, 0.0, np.sign(mean) * np.inf))
    return special.ndtr(-t), special.ndtr(t)


def _need(value: ArrayLike | None, name: str, method: str) -> ArrayLike:
    if value is None:
        raise InputError(f"the {method!r} interval needs {name}=")
    return value


def _fit(clusters: ClusterRobust | None, method: str) -> ClusterRobust:
    if clusters is None:
        raise InputError(f"the {method!r} interval needs clusters= (the groups' cluster fit)")
    return clusters
