"""Tests of a paired difference and multiple-comparison adjustments, vectorized over groups.

- :func:`mcnemar_p`: the exact McNemar test, a binomial test on the discordant pairs (wins vs
  losses, ties ignored): under "no difference" each discordant pair is a fair coin. 5 wins to 0
  gives ``p = 1/32``; no discordant pair gives ``p = 1``.
- :func:`signed_rank_p` / :func:`wilcoxon_p`: the Wilcoxon signed-rank test, which also uses
  the size of each difference. It follows ``scipy.stats.wilcoxon``'s defaults
  (``zero_method="wilcox"``, ``correction=False``, ``method="auto"``) exactly: the exact null
  distribution for at most 50 pairs without ties or zero differences, the exact sign-flip
  (permutation) distribution for at most 13 pairs otherwise, the normal approximation with the
  tie correction beyond. Groups with no non-zero difference get ``p = 1`` (no evidence).
- :func:`holm` and :func:`benjamini_hochberg`: adjusted p-values, equal to statsmodels'
  ``multipletests`` (implemented here because ``multipletests(method="holm")`` runs
  ``gc.collect()``, which costs more than everything else in a comparison).

``alternative`` is ``"greater"`` (the evidence that the candidate is better: the differences
are oriented so that positive is an improvement) or ``"two-sided"``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Literal, NamedTuple

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
    "SIGNED_RANK_METHODS",
    "Alternative",
    "SignedRanks",
    "benjamini_hochberg",
    "holm",
    "mcnemar_exact",
    "mcnemar_p",
    "signed_rank_p",
    "signed_ranks",
    "wilcoxon_p",
]

Alternative = Literal["greater", "two-sided"]
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

_EXACT_MAX = 50  # scipy: the exact distribution up to 50 pairs without ties or zeros
_PERMUTATION_MAX = 13  # scipy: all 2**n sign flips when there are ties or zeros


def _check_alternative(alternative: str) -> None:
    if alternative not in ("greater", "two-sided"):
        raise InputError(f"alternative must be 'greater' or 'two-sided', got {alternative!r}")


def mcnemar_p(
    candidate_wins: npt.ArrayLike,
    parent_wins: npt.ArrayLike,
    *,
    alternative: Alternative = "greater",
    mid_p: bool = False,
) -> FloatArray:
    """Exact McNemar p-values for arrays of win counts.

    ``greater`` is P(X >= wins), X ~ Binomial(discordant, 1/2). ``two-sided`` doubles the
    smaller tail (capped at 1; the binomial is symmetric at 1/2). ``mid_p`` counts only half of
    P(X = wins), which is less conservative. No discordant pair gives p = 1.
    """
    _check_alternative(alternative)
    k = np.asarray(candidate_wins, dtype=np.int64)
    n = k + np.asarray(parent_wins, dtype=np.int64)
    at = stats.binom.pmf(k, n, 0.5)
    tie = 0.5 * at if mid_p else at
    upper = stats.binom.sf(k, n, 0.5) + tie
    if alternative == "greater":
        p = upper
    else:
        lower = stats.binom.cdf(k - 1, n, 0.5) + tie
        p = 2.0 * np.minimum(upper, lower)
    p = np.where(n == 0, 1.0, np.minimum(p, 1.0))
    return np.asarray(p, dtype=np.float64)


def mcnemar_exact(
    candidate_wins: int,
    parent_wins: int,
    *,
    alternative: Alternative = "greater",
    mid_p: bool = False,
) -> float:
    """One exact McNemar p (see :func:`mcnemar_p`). 5 wins to 0 gives 1/32; 0:0 gives 1."""
    return float(
        mcnemar_p([candidate_wins], [parent_wins], alternative=alternative, mid_p=mid_p)[0]
    )


class SignedRanks(NamedTuple):
    """What :func:`signed_ranks` finds per group: ``p``; ``r_plus`` (the rank sum of the
    positive differences, scipy's ``r_plus``); ``n`` (non-zero differences); ``method``
    (:data:`SIGNED_RANK_METHODS` codes: 0 no non-zero difference (p = 1), 1 the exact null,
    2 the exact sign-flip distribution with ties or zeros, 3 the normal approximation)."""

    p: FloatArray
    r_plus: FloatArray
    n: IntArray
    method: IntArray


#: The names of :attr:`SignedRanks.method`'s codes, as scipy names them.
SIGNED_RANK_METHODS = ("none", "exact", "permutation", "normal")


def signed_rank_p(
    block_group: npt.ArrayLike,
    block_size: npt.ArrayLike,
    block_positive: npt.ArrayLike,
    n_pairs: npt.ArrayLike,
    *,
    alternative: Alternative = "greater",
) -> FloatArray:
    """Wilcoxon signed-rank p of every group, from the tie blocks of its differences.

    A block is one distinct non-zero ``|d|`` of a group: ``block_size`` differences share it,
    ``block_positive`` of them are positive. Blocks are sorted by group, then by ``|d|``
    ascending (so ranks can be assigned by a running count). ``n_pairs`` is each group's
    number of differences *including* zeros (it decides the method, as in scipy).
    """
    return signed_ranks(block_group, block_size, block_positive, n_pairs, alternative=alternative).p


def signed_ranks(
    block_group: npt.ArrayLike,
    block_size: npt.ArrayLike,
    block_positive: npt.ArrayLike,
    n_pairs: npt.ArrayLike,
    *,
    alternative: Alternative = "greater",
) -> SignedRanks:
    """:func:`signed_rank_p` with the statistic and the method of each group."""
    _check_alternative(alternative)
    g = np.asarray(block_group, dtype=np.int64)
    t = np.asarray(block_size, dtype=np.int64)
    pos = np.asarray(block_positive, dtype=np.int64)
    total = np.asarray(n_pairs, dtype=np.int64)
    n_groups = len(total)
    # the midrank of a block holding ranks c-t+1..c is c-(t-1)/2; twice it is an integer
    start = np.concatenate([[0], np.flatnonzero(np.diff(g)) + 1]) if len(g) else np.zeros(0, int)
    cum = np.cumsum(t)
    before = np.repeat(cum[start] - t[start], np.diff(np.append(start, len(g))))
    rank2 = 2 * (cum - before) - (t - 1)
    n = np.bincount(g, weights=t, minlength=n_groups).astype(np.int64)
    r_plus = np.bincount(g, weights=pos * rank2, minlength=n_groups) / 2
    tie = np.bincount(g, weights=t * (t * t - 1), minlength=n_groups)
    ties = tie > 0
    zeros = total > n
    exact = (total <= _PERMUTATION_MAX) | (~ties & ~zeros & (total <= _EXACT_MAX))
    exact &= n > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        z = (r_plus - n * (n + 1) / 4) / np.sqrt((n * (n + 1) * (2 * n + 1) - tie / 2) / 24)
        p = special.ndtr(-z) if alternative == "greater" else 2 * special.ndtr(-np.abs(z))
    p = np.where(n > 0, np.minimum(p, 1.0), 1.0)
    if exact.any():
        idx = np.flatnonzero(exact)
        p[idx] = _exact_ps(idx, g, t, rank2, r_plus, ties | zeros, n, alternative)
    method = np.where(exact, np.where(ties | zeros, 2, 1), np.where(n > 0, 3, 0))
    return SignedRanks(np.asarray(p, dtype=np.float64), r_plus, n, method.astype(np.int64))


def _exact_ps(
    idx: IntArray,
    g: IntArray,
    t: IntArray,
    rank2: IntArray,
    r_plus: FloatArray,
    tied: npt.NDArray[np.bool_],
    n: IntArray,
    alternative: Alternative,
) -> FloatArray:
    """Exact p of the groups ``idx``: groups whose doubled ranks are the same share one null
    distribution, so the loop is over the distinct rank patterns, each pattern's groups read
    off its tails at once. Without ties or zeros the pattern is 2, 4, ..., 2n (one per n);
    only the tied groups (at most 13 differences) have their patterns compared."""
    observed = np.rint(2 * r_plus[idx]).astype(np.int64)
    which = np.empty(len(idx), dtype=np.int64)
    plain = ~tied[idx]
    sizes, which[plain] = np.unique(n[idx][plain], return_inverse=True)
    patterns: list[tuple[int, ...]] = [tuple(range(2, 2 * int(m) + 1, 2)) for m in sizes]
    if not plain.all():
        found, which[~plain] = _tied_patterns(idx[~plain], g, t, rank2, len(r_plus))
        which[~plain] += len(patterns)
        patterns += [tuple(int(r) for r in row[row > 0]) for row in found]
    out = np.empty(len(idx))
    for s, pattern in enumerate(patterns):
        pmf = _null_pmf(pattern)
        upper = np.cumsum(pmf[::-1])[::-1]  # P(T >= s), summed from the small tail up
        lower = np.cumsum(pmf)  # P(T <= s)
        members = which == s
        obs = observed[members]
        if alternative == "greater":
            out[members] = np.minimum(upper[obs], 1.0)
        else:
            out[members] = np.minimum(2.0 * np.minimum(upper[obs], lower[obs]), 1.0)
    return out


def _tied_patterns(
    idx: IntArray, g: IntArray, t: IntArray, rank2: IntArray, n_groups: int
) -> tuple[IntArray, IntArray]:
    """The distinct doubled-rank patterns of the groups ``idx`` (ascending, zero-padded rows)
    and which of them each group has."""
    position = np.full(n_groups, -1, dtype=np.int64)
    position[idx] = np.arange(len(idx))
    mine = position[g]
    keep = mine >= 0
    row = np.repeat(mine[keep], t[keep])  # ascending: blocks come sorted by group
    ranks = np.repeat(rank2[keep], t[keep])
    counts = np.bincount(row, minlength=len(idx))
    first = np.concatenate([[0], np.cumsum(counts)[:-1]])
    patterns = np.zeros((len(idx), int(counts.max())), dtype=np.int64)
    patterns[row, np.arange(len(row)) - first[row]] = ranks
    return _distinct_rows(patterns)


def wilcoxon_p(differences: npt.ArrayLike, *, alternative: Alternative = "greater") -> float:
    """The signed-rank p of one sample of (improvement-oriented) differences."""
    d = np.asarray(differences, dtype=np.float64)
    nz = np.sort(d[d != 0], kind="stable")
    a = np.abs(nz)
    order = np.argsort(a, kind="stable")
    values, inverse, size = np.unique(a[order], return_inverse=True, return_counts=True)
    positive = np.bincount(inverse.ravel(), weights=nz[order] > 0, minlength=len(values))
    p = signed_rank_p(
        np.zeros(len(values), dtype=np.int64), size, positive, [d.size], alternative=alternative
    )
    return float(p[0])


@cache
def _null_pmf(ranks2: tuple[int, ...]) -> FloatArray:
    """P(sum of the doubled ranks of the positive differences = s), every sign a fair coin."""
    pmf = np.zeros(sum(ranks2) + 1)
    pmf[0] = 1.0
    top = 0
    for r in ranks2:
        pmf[r : top + r + 1] += pmf[: top + 1].copy()
        top += r
    total: FloatArray = pmf / 2.0 ** len(ranks2)
    return total


def _distinct_rows(rows: IntArray) -> tuple[IntArray, IntArray]:
    """``np.unique(rows, axis=0, return_inverse=True)``, fast: rows are told apart by a hash
    (a dot product with random odd weights, wrapping), checked against the row it names;
    a collision (never seen) falls back to the exact sort of whole rows, which takes ~20 s
    on the two million rows of 2,000 policies' pairs."""
    weights = np.random.default_rng(0).integers(1, 2**62, size=rows.shape[1]) * 2 + 1
    with np.errstate(over="ignore"):
        keys = rows @ weights
    _, first, which = np.unique(keys, return_index=True, return_inverse=True)
    which = which.ravel()
    distinct = rows[first]
    if not np.array_equal(distinct[which], rows):
        distinct, which = np.unique(rows, axis=0, return_inverse=True)
        which = which.ravel()
    return distinct, which.astype(np.int64)


def holm(p: npt.ArrayLike, families: npt.ArrayLike | None = None) -> FloatArray:
    """Holm step-down adjusted p-values (equal to statsmodels' ``multipletests(p, "holm")``).

    ``families`` (one label per p-value) adjusts each family on its own, in one pass: the
    overall row of a comparison is its own family, its per-task rows another.
    """
    p = np.asarray(p, dtype=np.float64)
    fam, size, rank, order = _family_ranks(p, families)
    steps = np.minimum(1.0, (size - rank) * p[order])
    out = np.empty_like(p)
    out[order] = _per_family(steps, fam, np.maximum.accumulate)
    return out


def benjamini_hochberg(p: npt.ArrayLike, families: npt.ArrayLike | None = None) -> FloatArray:
    """Benjamini-Hochberg adjusted p-values (statsmodels' ``fdr_bh``), per family as :func:`holm`."""
    p = np.asarray(p, dtype=np.float64)
    fam, size, rank, order = _family_ranks(p, families)
    steps = np.minimum(1.0, p[order] * size / (rank + 1))
    out = np.empty_like(p)
    out[order] = _per_family(steps, fam, lambda x: np.minimum.accumulate(x[::-1])[::-1])
    return out


def _per_family(
    steps: FloatArray, fam: npt.NDArray[np.int64], running: Callable[[FloatArray], FloatArray]
) -> FloatArray:
    """``running`` (a cumulative max or min) applied to each family's contiguous slice.

    A loop over families, not values: an offset trick would be one pass but would round
    p-values below 1e-16 to 0.
    """
    out = np.empty_like(steps)
    bounds = np.flatnonzero(np.diff(fam)) + 1
    for lo, hi in zip([0, *bounds.tolist()], [*bounds.tolist(), steps.size], strict=True):
        out[lo:hi] = running(steps[lo:hi])
    return out


def _family_ranks(
    p: FloatArray, families: npt.ArrayLike | None
) -> tuple[
    npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]
]:
    """Sorted by (family, p): each entry's family code, family size and rank in it."""
    if families is None:
        codes = np.zeros(p.size, dtype=np.int64)
    else:
        codes = np.unique(np.asarray(families), return_inverse=True)[1].astype(np.int64).ravel()
        if codes.size != p.size:
            raise InputError("families must give one label per p-value")
    order = np.lexsort((p, codes))
    fam = codes[order]
    counts = np.bincount(fam, minlength=int(fam.max(initial=-1)) + 1)
    first = np.concatenate([[0], np.cumsum(counts)[:-1]])
    rank = np.arange(p.size) - first[fam]
    return fam, counts[fam], rank, order
