"""Paired comparison of two runs on the keys they share.

A paired comparison joins on the key ``"<task_id>#<seed>"``: the same task and start state
under two agents. Pairs where either side abstained (``None``) are dropped, never counted.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from dataclasses import dataclass

from scipy import stats

__all__ = ["PairedComparison", "mcnemar_exact", "paired_compare"]


def mcnemar_exact(candidate_wins: int, parent_wins: int) -> float:
    """One-sided exact McNemar p: P(X >= candidate_wins), X ~ Binomial(discordant, 1/2).

    5 wins to 0 gives 1/32; no discordant pairs gives 1.
    """
    n = candidate_wins + parent_wins
    if n == 0:
        return 1.0
    return float(stats.binom.sf(candidate_wins - 1, n, 0.5))


@dataclass(frozen=True)
class PairedComparison:
    """Wins, losses and ties over the keys both runs scored, with the McNemar p-value."""

    n_pairs: int
    candidate_wins: int
    parent_wins: int
    ties: int
    p_value: float
    n_dropped: int = 0

    def __str__(self) -> str:
        return (
            f"PairedComparison: {self.n_pairs} pairs ({self.n_dropped} dropped for abstention) | "
            f"candidate wins {self.candidate_wins}, parent wins {self.parent_wins}, "
            f"ties {self.ties} | one-sided exact McNemar p = {self.p_value:.4g}"
        )

    def _repr_html_(self) -> str:
        cells = "".join(
            f"<td>{html.escape(str(v))}</td>"
            for v in (
                self.n_pairs,
                self.candidate_wins,
                self.parent_wins,
                self.ties,
                f"{self.p_value:.4g}",
                self.n_dropped,
            )
        )
        return (
            "<table><thead><tr><th>n_pairs</th><th>candidate_wins</th><th>parent_wins</th>"
            "<th>ties</th><th>p (McNemar, one-sided)</th><th>dropped</th></tr></thead>"
            f"<tbody><tr>{cells}</tr></tbody></table>"
        )


def paired_compare(
    candidate: Mapping[str, float | None], parent: Mapping[str, float | None]
) -> PairedComparison:
    """Compare two runs key by key (higher is better); abstentions drop the pair."""
    shared = candidate.keys() & parent.keys()
    pairs = [(candidate[k], parent[k]) for k in shared]
    kept = [(c, p) for c, p in pairs if c is not None and p is not None]
    cw = sum(c > p for c, p in kept)
    pw = sum(c < p for c, p in kept)
    return PairedComparison(
        n_pairs=len(kept),
        candidate_wins=cw,
        parent_wins=pw,
        ties=len(kept) - cw - pw,
        p_value=mcnemar_exact(cw, pw),
        n_dropped=len(pairs) - len(kept),
    )
