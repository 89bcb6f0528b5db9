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
from typing import TYPE_CHECKING, Literal

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
    "Alternative",
    "benjamini_hochberg",
    "holm",
    "mcnemar_exact",
    "mcnemar_p",
    "signed_rank_p",
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
    n = np.bincount(g, weights=t, minlength=n_groups)
    r_plus = np.bincount(g, weights=pos * rank2, minlength=n_groups) / 2
    tie = np.bincount(g, weights=t.astype(np.float64) ** 3 - t, minlength=n_groups)
    ties = np.bincount(g, weights=(t > 1), minlength=n_groups) > 0
    zeros = total > n
    exact = (total <= _PERMUTATION_MAX) | (~ties & ~zeros & (total <= _EXACT_MAX))
    exact &= n > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        z = (r_plus - n * (n + 1) / 4) / np.sqrt((n * (n + 1) * (2 * n + 1) - tie / 2) / 24)
        p = special.ndtr(-z) if alternative == "greater" else 2 * special.ndtr(-np.abs(z))
    p = np.where(n > 0, np.minimum(p, 1.0), 1.0)
    if exact.any():
        idx = np.flatnonzero(exact)
        # groups with the same ranks share a null distribution (a 0/1 metric: one per n)
        for gi in idx:
            blocks = slice(*np.searchsorted(g, [gi, gi + 1]))
            ranks = tuple(np.repeat(rank2[blocks], t[blocks]).tolist())
            p[gi] = _exact_p(ranks, int(np.rint(2 * r_plus[gi])), alternative)
    return np.asarray(p, dtype=np.float64)


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


def _exact_p(ranks2: tuple[int, ...], observed2: int, alternative: Alternative) -> float:
    pmf = _null_pmf(tuple(sorted(ranks2)))
    upper = float(pmf[observed2:].sum())
    if alternative == "greater":
        return min(upper, 1.0)
    lower = float(pmf[: observed2 + 1].sum())
    return min(2.0 * min(upper, lower), 1.0)


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
