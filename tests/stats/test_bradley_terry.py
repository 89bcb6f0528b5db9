"""The penalized Bradley-Terry fit: choix on the same wins and penalty, hand algebra for two
policies, and the invariants (relabelling permutes, swapping outcomes negates)."""

from __future__ import annotations

import numpy as np
import pytest

from hylo_analytics.stats.bradley_terry import DEFAULT_PENALTY, bradley_terry


def _games(wins: np.ndarray) -> list[tuple[int, int]]:
    """The win matrix as choix's (winner, loser) list."""
    i, j = np.nonzero(wins)
    return [(int(a), int(b)) for a, b in zip(i, j, strict=True) for _ in range(int(wins[a, b]))]


@pytest.mark.parametrize("penalty", [DEFAULT_PENALTY, 0.5])
@pytest.mark.parametrize("seed", [0, 1])
def test_equals_choix(penalty: float, seed: int) -> None:
    choix = pytest.importorskip("choix")
    rng = np.random.default_rng(seed)
    wins = rng.integers(0, 12, (5, 5))
    np.fill_diagonal(wins, 0)
    wins[:, 0] = 0  # policy 0 never loses: finite only through the penalty
    want = choix.opt_pairwise(5, _games(wins), alpha=penalty, tol=1e-12)
    got = bradley_terry(wins, penalty=penalty)
    assert got == pytest.approx(want, abs=1e-7)
    assert got.sum() == pytest.approx(0.0, abs=1e-12)


def test_two_policies_closed_form() -> None:
    """Unpenalized, t1 - t2 = log(w12 / w21); centred, each is half of it."""
    got = bradley_terry([[0, 30], [10, 0]], penalty=1e-10)
    assert got == pytest.approx([0.5 * np.log(3), -0.5 * np.log(3)], abs=1e-7)


def test_never_beaten_is_finite_at_the_stationary_point() -> None:
    """10 wins, no loss: t = -t2 solves 10 / (1 + e^{2t}) = 2 * alpha * t (the first-order
    condition of 10 softplus(-2t) + 2 alpha t^2)."""
    t = bradley_terry([[0, 10], [0, 0]])[0]
    assert 10 / (1 + np.exp(2 * t)) == pytest.approx(2 * DEFAULT_PENALTY * t, rel=1e-8)
    assert 2.5 < t < 2.7


def test_relabelling_permutes_and_swapping_negates() -> None:
    rng = np.random.default_rng(3)
    wins = rng.integers(0, 9, (4, 4))
    np.fill_diagonal(wins, 0)
    base = bradley_terry(wins)
    perm = np.array([2, 0, 3, 1])
    assert bradley_terry(wins[np.ix_(perm, perm)]) == pytest.approx(base[perm], abs=1e-10)
    assert bradley_terry(wins.T) == pytest.approx(-base, abs=1e-10)


def test_stacks_are_independent_problems() -> None:
    rng = np.random.default_rng(4)
    stack = rng.integers(0, 6, (7, 3, 3)).astype(float)
    one_by_one = np.stack([bradley_terry(w) for w in stack])
    assert bradley_terry(stack) == pytest.approx(one_by_one, abs=1e-10)
    assert bradley_terry(np.zeros((3, 3))) == pytest.approx([0, 0, 0])


def test_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="penalty must be > 0"):
        bradley_terry([[0, 1], [0, 0]], penalty=0)
    with pytest.raises(ValueError, match=r"\(\.\.\., N, N\)"):
        bradley_terry([1, 2])
    with pytest.raises(ValueError, match=">= 0"):
        bradley_terry([[0, -1], [0, 0]])
