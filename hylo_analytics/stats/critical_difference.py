"""Critical differences across blocks: average ranks, Friedman, Nemenyi and Wilcoxon-Holm.

The data convention is a (blocks x policies) matrix with no gaps: one value per block (a task,
a suite) and policy, the policy's mean there. Within each block the policies are ranked, 1
the best, ties sharing their mid rank; a policy's *average rank* is its mean over the blocks
(Demšar 2006, "Statistical comparisons of classifiers over multiple data sets"). The ranks
need no common scale across blocks, which is why they compare policies over tasks as
different as "open the drawer" and "stack three cups".

- :func:`friedman_test`: do the average ranks differ more than chance? Friedman's chi-square
  with the tie correction (``scipy.stats.friedmanchisquare``'s statistic) and the
  Iman-Davenport F, which Demšar recommends (the chi-square is conservative).
- :func:`nemenyi_cd`: two policies differ when their average ranks are more than
  ``CD = q_alpha / sqrt(2) * sqrt(k (k + 1) / (6 N))`` apart, ``q_alpha`` the studentized
  range's upper quantile with infinite degrees of freedom; :func:`nemenyi_p` is each pair's
  p (scikit-posthocs' ``posthoc_nemenyi_friedman``).
- :func:`wilcoxon_pairs`: the alternative Benavoli, Corani and Mangili (2016, "Should we really
  use post-hoc tests based on mean-ranks?") recommend: each pair's Wilcoxon signed-rank test on
  its per-block values, as ``scipy.stats.wilcoxon`` computes it (the method chosen as scipy
  chooses it), Holm-adjusted over all pairs by the caller. Unlike the mean-rank tests, a
  pair's verdict does not move when other policies join the comparison.
- :func:`rank_cliques`: the bars of the diagram, the maximal runs of consecutive policies (in
  average-rank order) no pair of which is significantly different.

:func:`critical_difference_test` runs them all on one matrix. Every step is vectorized over the
k (k - 1) / 2 pairs: at 2,000 policies that is 1,999,000 pairs.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
import numpy.typing as npt

from hylo_analytics._lazy import LazyModule
from hylo_analytics.errors import InputError
from hylo_analytics.stats.significance import SIGNED_RANK_METHODS, holm, signed_ranks

if TYPE_CHECKING:
    from scipy import special, stats
else:  # scipy is imported on first use
    special = LazyModule("scipy.special")
    stats = LazyModule("scipy.stats")

__all__ = [
    "CD_METHODS",
    "CD_TESTS",
    "CDTest",
    "CriticalDifferenceStats",
    "Friedman",
    "SignedRankPairs",
    "block_ranks",
    "critical_difference_test",
    "friedman_test",
    "nemenyi_cd",
    "nemenyi_p",
    "rank_cliques",
    "studentized_range_sf",
    "wilcoxon_pairs",
]

CDTest = Literal["nemenyi", "wilcoxon"]
CD_TESTS: tuple[str, ...] = ("nemenyi", "wilcoxon")
#: The names of a pair's ``method`` codes: the signed-rank methods as scipy names them
#: (:data:`~hylo_analytics.stats.significance.SIGNED_RANK_METHODS`), then Nemenyi's.
CD_METHODS: tuple[str, ...] = (*SIGNED_RANK_METHODS, "studentized range")
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

_SNAP_BITS = 36  # values closer than 2**-36 of the largest magnitude are one value (ties)
_PAIR_CHUNK = 50_000  # pairs whose differences are ranked at once (x blocks: ~20 MB)
_QUAD_NODES = 128  # Gauss-Legendre nodes of the studentized range integral (1e-14)
_NEGLIGIBLE = 1e-20  # ... over the z where its density exceeds this
_Q_CHUNK = 20_000  # ranges integrated at once (x nodes: ~40 MB)


def _step(values: FloatArray) -> float:
    """The grid on which two numbers are one: 2**-36 of the largest magnitude (a power of
    two, so the rounding is exact), far above float noise (2**-52) and below any real
    difference of means: a mean summed in another order, or 0.7 - 0.6 against 0.8 - 0.7, is
    the tie it is, not two values an ulp apart."""
    finite = np.abs(values[np.isfinite(values)])
    top = float(finite.max()) if finite.size else 0.0
    return float(2.0 ** (np.ceil(np.log2(top)) - _SNAP_BITS)) if top > 0 else 1.0


def _units(values: FloatArray, step: float) -> IntArray:
    """``values`` as integer multiples of ``step`` (:func:`_step`): ranks are then sorts of
    integers, and equal numbers are equal."""
    return np.asarray(np.rint(values / step), dtype=np.int64)


def block_ranks(values: npt.ArrayLike, *, maximize: bool = True) -> FloatArray:
    """Each block's ranks (rows of ``values``: blocks x policies), 1 the best; ties share
    their mid rank. ``maximize``: a higher value is better (else a lower one)."""
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 2 or np.isnan(x).any():
        raise InputError("block_ranks: values must be a blocks x policies matrix without NaN")
    units = _units(x, _step(x))
    ranked = stats.rankdata(-units if maximize else units, method="average", axis=1)
    return np.asarray(ranked, dtype=np.float64)


@dataclass(frozen=True)
class Friedman:
    """Friedman's test of ``k`` policies over ``n_blocks`` blocks: ``statistic`` (the tie-
    corrected chi-square, ``df`` = k - 1, ``p``) and the Iman-Davenport ``f_statistic``
    (F with ``f_df`` = (k - 1, (k - 1)(N - 1)), ``f_p``)."""

    statistic: float
    df: int
    p: float
    f_statistic: float
    f_df: tuple[int, int]
    f_p: float
    n_blocks: int
    k: int


def friedman_test(ranks: npt.ArrayLike) -> Friedman:
    """Friedman's chi-square and the Iman-Davenport F of a blocks x policies rank matrix
    (:func:`block_ranks`). Every block tied throughout gives chi-square 0 and p = 1; perfect
    agreement of the blocks an infinite F with p = 0."""
    r = np.asarray(ranks, dtype=np.float64)
    n, k = r.shape
    if n < 1 or k < 2:
        raise InputError(f"friedman_test: needs >= 1 block and >= 2 policies, got {r.shape}")
    # per block, the sum over its tie groups of t^3 - t, from the sum of squared mid ranks
    ties = float(np.sum(12 * (k * (k + 1) * (2 * k + 1) / 6 - (r * r).sum(axis=1))))
    c = 1 - ties / (k * (k * k - 1) * n)
    ssbn = float(np.sum(r.sum(axis=0) ** 2))
    chi2 = (12.0 / (k * n * (k + 1)) * ssbn - 3 * n * (k + 1)) / c if c > 1e-12 else 0.0
    chi2 = max(chi2, 0.0)
    df1, df2 = k - 1, (k - 1) * (n - 1)
    room = n * (k - 1) - chi2
    if df2 == 0:
        f, f_p = float("nan"), float("nan")
    elif room <= 1e-9 * n * k:
        f, f_p = float("inf"), 0.0
    else:
        f = (n - 1) * chi2 / room
        f_p = float(stats.f.sf(f, df1, df2))
    return Friedman(chi2, df1, float(stats.chi2.sf(chi2, df1)), f, (df1, df2), f_p, n, k)


def nemenyi_cd(k: int, n_blocks: int, alpha: float = 0.05) -> float:
    """The Nemenyi critical difference of average ranks: ``q_alpha / sqrt(2) * sqrt(k (k + 1)
    / (6 N))``, ``q_alpha`` the (1 - alpha) quantile of the studentized range of k means
    with infinite degrees of freedom (Demšar 2006, section 3.2.2)."""
    _check_alpha(alpha)
    q = float(stats.studentized_range.ppf(1 - alpha, k, np.inf))
    return float(q / np.sqrt(2.0) * np.sqrt(k * (k + 1) / (6.0 * n_blocks)))


def studentized_range_sf(q: npt.ArrayLike, k: int) -> FloatArray:
    """P(range of k standard normals > q): the studentized range with infinite degrees of
    freedom, ``k * integral phi(z) (Phi(z)^(k-1) - (Phi(z) - Phi(z - q))^(k-1)) dz``.

    Gauss-Legendre quadrature over the z where the integrand is not negligible (below 1e-20
    outside: [-6.6, 9.6] for k = 2, [2.0, 10.3] for k = 2,000), all ``q`` at once: scipy's
    ``studentized_range.sf`` integrates one value at a time (45 us each: 9 s for the
    distinct rank differences of 2,000 policies). The tail is computed as a tail
    (``expm1``), not as ``1 - cdf``, so small p-values keep their digits; it agrees with an
    adaptive ``scipy.integrate.quad`` of the same integral to 1e-14, and with scipy's
    ``studentized_range.sf`` to 1e-11 (scipy's own error at k = 2,000).
    """
    qs = np.abs(np.asarray(q, dtype=np.float64))
    z, weight = _range_nodes(k)
    top = special.ndtr(z)
    flat = qs.ravel()
    out = np.empty(flat.size)
    for s in range(0, flat.size, _Q_CHUNK):
        low = special.ndtr(z[None, :] - flat[s : s + _Q_CHUNK, None])
        with np.errstate(divide="ignore", invalid="ignore"):
            inner = -np.expm1((k - 1) * np.log1p(-low / top))
        out[s : s + _Q_CHUNK] = np.where(low >= top, 1.0, inner) @ weight
    return np.asarray(np.clip(out, 0.0, 1.0).reshape(qs.shape))


@functools.cache
def _range_nodes(k: int) -> tuple[FloatArray, FloatArray]:
    """Quadrature nodes and weights (times ``k phi(z) Phi(z)^(k-1)``, the density of the
    largest of k normals) on the interval where that density exceeds 1e-20."""
    grid = np.linspace(-12.0, 12.0, 4801)
    log_density = np.log(k) - grid * grid / 2 - 0.5 * np.log(2 * np.pi)
    log_density += (k - 1) * special.log_ndtr(grid)
    inside = np.flatnonzero(log_density > np.log(_NEGLIGIBLE))
    lo, hi = grid[max(inside[0] - 1, 0)], grid[min(inside[-1] + 1, grid.size - 1)]
    x, w = np.polynomial.legendre.leggauss(_QUAD_NODES)
    z = lo + (x + 1) * (hi - lo) / 2
    density = k * np.exp(-z * z / 2) / np.sqrt(2 * np.pi) * np.exp((k - 1) * special.log_ndtr(z))
    return z, w * (hi - lo) / 2 * density


def nemenyi_p(rank_diff: npt.ArrayLike, k: int, n_blocks: int) -> FloatArray:
    """Nemenyi p of average-rank differences: ``P(range > |diff| / sqrt(k (k + 1) / (6 N))
    * sqrt(2))`` (scikit-posthocs' ``posthoc_nemenyi_friedman``). Already adjusted for all
    the pairs (a single-step test), so it takes no Holm. Each distinct difference is
    integrated once."""
    d = np.abs(np.asarray(rank_diff, dtype=np.float64))
    q = d / np.sqrt(k * (k + 1) / (6.0 * n_blocks)) * np.sqrt(2.0)
    distinct, back = np.unique(q, return_inverse=True)
    p = studentized_range_sf(distinct, k)
    p[distinct == 0] = 1.0  # equal average ranks: no evidence at all (the integral gives 1)
    return np.asarray(p[back.ravel()].reshape(d.shape))


@dataclass(frozen=True)
class SignedRankPairs:
    """The Wilcoxon signed-rank test of each pair: ``p`` (two-sided), ``statistic`` (scipy's:
    ``min(r_plus, r_minus)``), ``n`` (blocks whose difference is not zero) and ``method``
    (codes into :data:`CD_METHODS`: scipy's method names)."""

    p: FloatArray
    statistic: FloatArray
    n: IntArray
    method: IntArray


def wilcoxon_pairs(values: npt.ArrayLike, i: npt.ArrayLike, j: npt.ArrayLike) -> SignedRankPairs:
    """``scipy.stats.wilcoxon(values[:, i], values[:, j])`` for every pair at once.

    ``values``: blocks x policies; ``i``, ``j``: the pairs' columns. scipy's defaults: zero
    differences are dropped (``zero_method="wilcox"``), no continuity correction, and the
    method is scipy's choice per pair (:func:`~hylo_analytics.stats.significance.
    signed_ranks`): the exact null for N <= 50 blocks with no tie and no zero among the
    pair's differences, the exact sign-flip distribution for N <= 13 with ties or zeros, the
    normal approximation (tie-corrected) otherwise. A pair equal on every block has p = 1
    (scipy: NaN). The differences of a chunk of pairs are ranked by one sort along the
    block axis; ranks are never computed one pair at a time.
    """
    x = np.asarray(values, dtype=np.float64)
    step = _step(x)
    a, b = np.asarray(i, dtype=np.int64), np.asarray(j, dtype=np.int64)
    n_blocks = x.shape[0]
    cols = np.ascontiguousarray(x.T)  # policies x blocks: a pair's differences, one row
    p, stat = np.empty(a.size), np.empty(a.size)
    n, method = np.empty(a.size, dtype=np.int64), np.empty(a.size, dtype=np.int64)
    for s in range(0, a.size, _PAIR_CHUNK):
        # differences as scipy takes them, then on the grid: equal differences tie
        d = _units(cols[a[s : s + _PAIR_CHUNK]] - cols[b[s : s + _PAIR_CHUNK]], step)
        group, size, positive = _tie_blocks(d)
        totals = np.full(len(d), n_blocks, dtype=np.int64)
        found = signed_ranks(group, size, positive, totals, alternative="two-sided")
        r_minus = found.n * (found.n + 1) / 2 - found.r_plus
        p[s : s + len(d)] = found.p
        stat[s : s + len(d)] = np.minimum(found.r_plus, r_minus)
        n[s : s + len(d)], method[s : s + len(d)] = found.n, found.method
    return SignedRankPairs(p, stat, n, method)


def _tie_blocks(d: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """The tie blocks :func:`~hylo_analytics.stats.significance.signed_ranks` reads, of each
    row of (integer) differences: per distinct non-zero ``|d|`` (ascending within the row),
    its row, how many differences share it and how many of them are positive.

    One sort of ``2 |d| + (d > 0)`` per row puts each magnitude's differences together (the
    zeros first); a block runs from one start to the next, or to its row's end."""
    width = d.shape[1]
    key = np.sort(2 * np.abs(d) + (d > 0), axis=1).ravel()
    mag, positive = key >> 1, key & 1
    starts = mag > 0
    starts[1:] &= mag[1:] != mag[:-1]
    starts[::width] = mag[::width] > 0  # a row's first difference starts a block
    first = np.flatnonzero(starts)
    row = first // width
    end = np.minimum(np.append(first[1:], key.size), (row + 1) * width)
    ups = np.concatenate([[0], np.cumsum(positive)])
    return row, end - first, ups[end] - ups[first]


def rank_cliques(
    k: int, i: npt.ArrayLike, j: npt.ArrayLike, significant: npt.ArrayLike
) -> tuple[IntArray, IntArray]:
    """The cliques of ``k`` policies in average-rank order: ``(first, last)`` positions of
    each maximal run of consecutive policies no pair of which is ``significant`` (pairs
    ``i < j`` by position). A run [a, b] is a clique when no policy in it is significantly
    different from a later one up to b; its end is the smallest "first significant
    partner" from a on, minus one (a suffix minimum), and it is maximal when that end
    passes the previous run's. A policy different from both neighbours is a clique of one.
    """
    a, b = np.asarray(i, dtype=np.int64), np.asarray(j, dtype=np.int64)
    sig = np.asarray(significant, dtype=bool)
    lo, hi = np.minimum(a, b)[sig], np.maximum(a, b)[sig]
    first = np.full(k, k, dtype=np.int64)
    np.minimum.at(first, lo, hi)
    end = np.minimum.accumulate(first[::-1])[::-1] - 1
    grows = end > np.concatenate([[-1], end[:-1]])
    starts = np.flatnonzero(grows)
    return starts.astype(np.int64), end[starts].astype(np.int64)


@dataclass(frozen=True)
class CriticalDifferenceStats:
    """What :func:`critical_difference_test` finds. Positions are in ``order`` (best first).

    ``avg_rank`` (per policy, in the input's column order); ``order`` (the columns sorted by
    average rank, stable); ``friedman``; ``cd`` (Nemenyi's, whatever the test); per pair
    ``i < j`` (positions): ``rank_diff`` (>= 0), ``p``, ``p_holm`` (Wilcoxon; NaN under
    Nemenyi, whose p is adjusted already), ``significant``, ``statistic`` (Nemenyi: the
    studentized range q; Wilcoxon: scipy's W), ``n`` (Wilcoxon: non-zero differences) and
    ``method`` (codes into :data:`CD_METHODS`); the cliques as ``clique_first`` / ``clique_last`` positions.
    """

    avg_rank: FloatArray
    order: IntArray
    friedman: Friedman
    cd: float
    test: str
    alpha: float
    i: IntArray
    j: IntArray
    rank_diff: FloatArray
    p: FloatArray
    p_holm: FloatArray
    significant: npt.NDArray[np.bool_]
    statistic: FloatArray
    n: IntArray
    method: IntArray
    clique_first: IntArray
    clique_last: IntArray


def critical_difference_test(
    values: npt.ArrayLike,
    *,
    maximize: bool = True,
    test: CDTest = "nemenyi",
    alpha: float = 0.05,
) -> CriticalDifferenceStats:
    """Average ranks, Friedman's test, the post-hoc test of every pair and the cliques of a
    blocks x policies matrix (no NaN; ``maximize``: higher is better).

    ``test``: ``nemenyi`` (a pair differs when its average ranks are more than the critical
    difference apart; the classic diagram) or ``wilcoxon`` (each pair's signed-rank test on
    its block values, Holm over all pairs, significant when ``p_holm < alpha``).
    """
    if test not in CD_TESTS:
        raise InputError(f"critical_difference_test: test must be one of {CD_TESTS}, got {test!r}")
    _check_alpha(alpha)
    x = np.asarray(values, dtype=np.float64)
    ranks = block_ranks(x, maximize=maximize)
    n_blocks, k = ranks.shape
    sums2 = np.rint(2 * ranks.sum(axis=0))  # twice the rank sums: integers, exact
    avg = sums2 / (2 * n_blocks)
    order = np.argsort(sums2, kind="stable").astype(np.int64)
    i, j = (np.asarray(v, dtype=np.int64) for v in np.triu_indices(k, 1))
    # from the integer sums: equal differences are equal floats (one quadrature each)
    diff = (sums2[order][j] - sums2[order][i]) / (2 * n_blocks)
    cd = nemenyi_cd(k, n_blocks, alpha)
    if test == "nemenyi":
        p = nemenyi_p(diff, k, n_blocks)
        p_holm = np.full(diff.size, np.nan)
        significant = diff > cd
        statistic = diff / np.sqrt(k * (k + 1) / (6.0 * n_blocks)) * np.sqrt(2.0)
        n = np.full(diff.size, n_blocks, dtype=np.int64)
        method = np.full(diff.size, CD_METHODS.index("studentized range"), dtype=np.int64)
    else:
        found = wilcoxon_pairs(x, order[i], order[j])
        p, statistic, n, method = found.p, found.statistic, found.n, found.method
        p_holm = holm(p)
        significant = p_holm < alpha
    first, last = rank_cliques(k, i, j, significant)
    return CriticalDifferenceStats(
        avg_rank=avg, order=order, friedman=friedman_test(ranks), cd=cd, test=test,
        alpha=alpha, i=i, j=j, rank_diff=diff, p=p, p_holm=p_holm, significant=significant,
        statistic=statistic, n=n, method=method, clique_first=first, clique_last=last,
    )  # fmt: skip


def _check_alpha(alpha: float) -> None:
    if not 0 < alpha < 1:
        raise InputError(f"alpha must be in (0, 1), got {alpha}")
