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


# --- the games of a values matrix and the sandwich over keys --------------------------------


def _values(seed: int, keys: int, n: int, levels: int | None) -> np.ndarray:
    """Random (keys, n) values with NaN holes: on ``levels`` distinct values, or continuous."""
    rng = np.random.default_rng(seed)
    v = rng.integers(0, levels, (keys, n)).astype(float) if levels else rng.normal(size=(keys, n))
    v[rng.random((keys, n)) < 0.15] = np.nan
    return v


def _won(v: np.ndarray) -> np.ndarray:
    """(keys, n, n): 1 where policy i's value is above j's on the key (both valid)."""
    return (v[:, :, None] > v[:, None, :]).astype(float)


@pytest.mark.parametrize("levels", [2, 5, None])
def test_win_counts_count_every_decisive_game(levels: int | None) -> None:
    from hylo_analytics.stats.bradley_terry import win_counts

    v = _values(0, 300, 7, levels)
    assert win_counts(v) == pytest.approx(_won(v).sum(axis=0))


@pytest.mark.parametrize("levels", [2, 4, None])
def test_key_scores_sum_to_the_gradient(levels: int | None) -> None:
    """Each key's term of the log-likelihood's gradient: rows sum to 0, and their sum over
    keys is the gradient of sum(W log sigmoid(t_i - t_j)), by finite differences."""
    from hylo_analytics.stats.bradley_terry import key_scores, win_counts

    v = _values(1, 200, 5, levels)
    theta = np.array([0.4, -0.2, 0.0, 0.9, -1.1])
    g = key_scores(theta, v)
    assert g.shape == v.shape and np.abs(g.sum(axis=1)).max() < 1e-5
    w = win_counts(v)

    def loglik(t: np.ndarray) -> float:
        d = t[:, None] - t[None, :]
        return float(-(w * np.logaddexp(0.0, -d)).sum())

    eps = 1e-6
    numeric = [(loglik(theta + eps * e) - loglik(theta - eps * e)) / (2 * eps) for e in np.eye(5)]
    assert g.sum(axis=0) == pytest.approx(numeric, rel=1e-4, abs=1e-4)
    # brute force per key: sum_j w_kij (1 - p_ij) - w_kji p_ij
    p = 1 / (1 + np.exp(-(theta[:, None] - theta[None, :])))
    games = _won(v)
    brute = (games * (1 - p)).sum(axis=2) - (np.swapaxes(games, 1, 2) * p).sum(axis=2)
    assert g == pytest.approx(brute, abs=1e-5)


def test_the_sandwich_estimates_the_stratified_bootstrap_variance() -> None:
    """The sandwich's variances against a stratified bootstrap of keys, each resample
    refitted (2,000 resamples): within 15 % for every policy, and centred (rows sum to 0)."""
    from hylo_analytics.stats.bradley_terry import (
        key_scores,
        sandwich_covariance,
        stratified_meat,
        win_counts,
    )

    rng = np.random.default_rng(5)
    n, keys = 6, 400
    skill = np.linspace(-1, 1, n)
    stratum = np.repeat([0, 1], [150, 250])
    ease = rng.normal(0, 1, keys)
    v = (rng.random((keys, n)) < 1 / (1 + np.exp(-(skill[None, :] + ease[:, None])))).astype(float)
    theta = bradley_terry(win_counts(v))
    sizes = np.bincount(stratum)
    meat, sums = stratified_meat(key_scores(theta, v), stratum, sizes)
    cov = sandwich_covariance(theta, win_counts(v), meat, sums, sizes)
    assert np.abs(cov.sum(axis=1)).max() < 1e-8
    fits = []
    for _ in range(2000):
        pick = np.concatenate(
            [rng.choice(np.flatnonzero(stratum == s), size=m) for s, m in enumerate(sizes)]
        )
        fits.append(bradley_terry(win_counts(v[pick])))
    boot = np.var(np.array(fits), axis=0, ddof=1)
    assert np.diag(cov) == pytest.approx(boot, rel=0.15)


def test_a_stratum_of_one_key_adds_no_variance() -> None:
    from hylo_analytics.stats.bradley_terry import stratified_meat

    g = np.array([[1.0, -1.0], [0.5, -0.5], [2.0, -2.0]])
    meat, sums = stratified_meat(g, np.array([0, 0, 1]), np.array([2, 1]))
    # stratum 0: c = 2, its two keys; stratum 1: one key, weight 0
    assert meat == pytest.approx(2 * (g[:2].T @ g[:2]))
    assert sums == pytest.approx(np.array([[1.5, -1.5], [2.0, -2.0]]))
