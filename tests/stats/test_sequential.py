"""The anytime-valid paired test: golden e-values (quadrature), error rates under peeking, power.

The simulations are seeded and vectorized: sequences of discordant pairs as a matrix, the
cumulative wins by ``cumsum``, every look of every sequence evaluated in one call.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, special, stats

from hylo_analytics.stats.sequential import (
    DEFAULT_PRIOR,
    SequentialAlternative,
    confidence_sequence,
    e_value,
    log_e_value,
    sequential_test,
)

N_SEQ, HORIZON = 4000, 500
IntArray = npt.NDArray[np.int64]
Walks = tuple[IntArray, IntArray]


def _walks(theta: float, n_seq: int = N_SEQ, horizon: int = HORIZON, seed: int = 0) -> Walks:
    """Cumulative wins and losses after each of ``horizon`` discordant pairs, per sequence."""
    rng = np.random.default_rng(seed)
    wins = np.cumsum(rng.uniform(size=(n_seq, horizon)) < theta, axis=1, dtype=np.int64)
    return wins, np.arange(1, horizon + 1, dtype=np.int64) - wins


@pytest.fixture(scope="module")
def null_walks() -> Walks:
    return _walks(0.5)


def _on_grid(
    fn: Callable[[IntArray, IntArray], npt.NDArray[Any]], wins: IntArray, losses: IntArray
) -> npt.NDArray[Any]:
    """``fn`` at every look, evaluated once per distinct (wins, losses) and looked up.

    The e-value is a function of the counts only; 4000 walks of 500 pairs visit 2 million
    looks but only ~125 000 distinct counts, and betaincc costs ~1.6 µs a call.
    """
    top = int(max(wins.max(), losses.max())) + 1
    grid_w, grid_l = np.meshgrid(np.arange(top), np.arange(top), indexing="ij")
    table = fn(grid_w, grid_l)
    return np.asarray(table[wins, losses])


def _quad_log_e(w: int, lo: int, prior: tuple[float, float], lo_th: float, hi_th: float) -> float:
    """log ∫ (2θ)^w (2(1-θ))^l π(θ) dθ over (lo_th, hi_th), π renormalized there; scaled."""
    a, b = prior

    def log_f(th: float) -> float:
        return (
            w * math.log(2 * th)
            + lo * math.log(2 - 2 * th)
            + (a - 1) * math.log(th)
            + (b - 1) * math.log(1 - th)
        )

    grid = np.linspace(lo_th, hi_th, 2001)[1:-1]
    peak = max(log_f(float(t)) for t in grid)
    mode = (w + a - 1) / (w + lo + a + b - 2) if w + lo + a + b > 2 else 0.5
    pts = [p for p in (mode,) if lo_th < p < hi_th]

    def num(th: float) -> float:
        return math.exp(log_f(th) - peak)

    def den(th: float) -> float:
        return float(th ** (a - 1) * (1 - th) ** (b - 1))

    top = integrate.quad(num, lo_th, hi_th, points=pts or None, epsabs=0, epsrel=1e-12, limit=500)
    bottom = integrate.quad(den, lo_th, hi_th, epsabs=0, epsrel=1e-12, limit=500)
    return float(peak + math.log(top[0]) - math.log(bottom[0]))


CASES = [(0, 0), (5, 0), (0, 5), (7, 3), (3, 7), (30, 12), (12, 30), (0, 1100), (250, 240)]
PRIORS = [(1.0, 1.0), (0.5, 0.5), (3.0, 1.5), (10.0, 10.0)]
ALTERNATIVES: tuple[SequentialAlternative, ...] = ("greater", "less", "two-sided")
BOUNDS = {"two-sided": (0.0, 1.0), "greater": (0.5, 1.0), "less": (0.0, 0.5)}


@pytest.mark.parametrize("prior", PRIORS)
@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_e_value_equals_quadrature(
    alternative: SequentialAlternative, prior: tuple[float, float]
) -> None:
    w, lo = np.array(CASES).T
    got = log_e_value(w, lo, alternative=alternative, prior=prior)
    want = [_quad_log_e(int(x), int(y), prior, *BOUNDS[alternative]) for x, y in CASES]
    # log E to 1e-9 absolute is E to 1e-9 relative
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)


def test_e_value_of_no_data_is_one_and_golden_values() -> None:
    for alt in ALTERNATIVES:
        assert e_value(0, 0, alternative=alt, prior=(2.0, 0.7)) == pytest.approx(1.0, abs=1e-15)
    # by hand, uniform prior: 5 wins to 0 -> 2^5 ∫_{1/2}^1 θ^5 dθ / (1/2) = 2^6 (1 - 2^-6) / 6
    assert e_value(5, 0) == pytest.approx((2**6 - 1) / 6, rel=1e-13)
    # two-sided: 2^5 / 6
    assert e_value(5, 0, alternative="two-sided") == pytest.approx(32 / 6, rel=1e-13)


def test_extreme_counts_stay_finite() -> None:
    """Tails far below double precision are handled: no -inf, no overflow, no warnings."""
    big = log_e_value([0, 2, 3000, 20000], [5000, 3000, 2, 0])
    assert np.all(np.isfinite(big))
    assert big[2] == pytest.approx(_quad_log_e(3000, 2, DEFAULT_PRIOR, 0.5, 1.0), abs=1e-8)
    assert big[0] == pytest.approx(_quad_log_e(0, 5000, DEFAULT_PRIOR, 0.5, 1.0), abs=1e-8)


def _first_hit(hit: npt.NDArray[np.bool_]) -> IntArray:
    """1-based index of the first True per row, ``HORIZON + 1`` when none."""
    first: IntArray = np.where(hit.any(axis=1), hit.argmax(axis=1) + 1, hit.shape[1] + 1)
    return first


@pytest.mark.parametrize("alternative", ALTERNATIVES)
@pytest.mark.parametrize("alpha", [0.05, 0.1])
def test_type_one_error_under_continuous_monitoring(
    null_walks: Walks, alpha: float, alternative: SequentialAlternative
) -> None:
    """Looking after every one of 500 pairs and stopping at E >= 1/alpha keeps alpha."""
    wins, losses = null_walks

    def log_e(w: IntArray, lo: IntArray) -> npt.NDArray[np.float64]:
        return log_e_value(w, lo, alternative=alternative)

    rejected = (_on_grid(log_e, wins, losses) >= math.log(1 / alpha)).any(axis=1)
    assert rejected.mean() <= alpha + 2 * math.sqrt(alpha * (1 - alpha) / N_SEQ)


@pytest.mark.parametrize("alpha", [0.05, 0.1])
def test_peeking_at_a_fixed_n_p_value_does_not(null_walks: Walks, alpha: float) -> None:
    """The exact McNemar test, valid at one planned n, checked after every pair instead."""
    wins, losses = null_walks

    def p_value(w: IntArray, lo: IntArray) -> npt.NDArray[np.float64]:
        return np.asarray(stats.binom.sf(w - 1, w + lo, 0.5))

    hit = _on_grid(p_value, wins, losses) < alpha
    assert hit[:, -1].mean() <= alpha + 2 * math.sqrt(alpha * (1 - alpha) / N_SEQ)  # one look
    assert hit.any(axis=1).mean() > 2 * alpha  # every look


def test_power_at_theta_three_quarters() -> None:
    wins, losses = _walks(0.75, n_seq=2000, horizon=200, seed=1)
    hit = _on_grid(log_e_value, wins, losses) >= math.log(20)
    assert hit.any(axis=1).mean() > 0.95  # rejected in most sequences by 200 pairs
    assert np.median(_first_hit(hit)) < 50


@pytest.mark.slow
@pytest.mark.parametrize("theta", [0.5, 0.3, 0.8])
def test_confidence_sequence_covers_at_all_times(theta: float) -> None:
    n_seq, alpha = 1000, 0.1
    wins, losses = _walks(theta, n_seq=n_seq, horizon=300, seed=2)
    low = _on_grid(lambda w, lo: confidence_sequence(w, lo, alpha=alpha)[0], wins, losses)
    high = _on_grid(lambda w, lo: confidence_sequence(w, lo, alpha=alpha)[1], wins, losses)
    covered = ((low <= theta) & (theta <= high)).all(axis=1)
    assert covered.mean() >= 1 - alpha - 2 * math.sqrt(alpha * (1 - alpha) / n_seq)
    phat = wins / (wins + losses)
    assert np.all((low <= phat) & (phat <= high))


def test_confidence_sequence_bounds_sit_on_the_threshold() -> None:
    w, lo, alpha, (a, b) = np.array([3, 20, 50]), np.array([9, 4, 50]), 0.05, DEFAULT_PRIOR
    low, high = confidence_sequence(w, lo, alpha=alpha)
    log_mix = special.betaln(a + w, b + lo) - special.betaln(a, b)
    for bound in (low, high):
        ratio = log_mix - w * np.log(bound) - lo * np.log1p(-bound)
        np.testing.assert_allclose(ratio, math.log(1 / alpha), atol=1e-9)
    assert confidence_sequence([0], [0]) == (np.array([0.0]), np.array([1.0]))
    low0, high0 = confidence_sequence([0], [5])
    assert low0[0] == 0.0 and 0 < high0[0] < 1


def test_sequential_test_stops_once_and_the_rejection_stands() -> None:
    wins = [0, 5, 10, 10, 10]
    losses = [0, 0, 0, 10, 30]  # the e-value falls back after the stop
    res = sequential_test(wins, losses, n_pairs=[0, 8, 15, 30, 60], alpha=0.05)
    assert res.stopped_at == 2
    assert res.rejected.tolist() == [False, False, True, True, True]
    assert res.e_value[-1] < res.threshold
    frame = res.to_frame()
    assert frame.columns[:5] == ["look", "n_pairs", "n_discordant", "wins", "losses"]
    assert frame["threshold"].to_list() == [20.0] * 5
    assert math.isnan(frame["delta_low"][0])  # no pairs yet: no difference to bound
    # delta = psi (2 theta - 1) with psi = 10 / 15 at look 2
    assert frame["delta_low"][2] == pytest.approx(10 / 15 * (2 * frame["cs_low"][2] - 1))
    none = sequential_test([1, 2], [1, 2])
    assert none.stopped_at is None and none.to_frame()["n_pairs"].null_count() == 2


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"wins": [3, 2], "losses": [0, 1]}, "wins fell from 3 at look 0 to 2 at look 1"),
        ({"wins": [1.5], "losses": [0]}, "nonnegative integer"),
        ({"wins": [-1], "losses": [0]}, "nonnegative integer"),
        ({"wins": [1, 2], "losses": [0]}, "2 looks but losses has 1"),
        ({"wins": [1], "losses": [1], "n_pairs": [1]}, ">= wins \\+ losses"),
        ({"wins": [1], "losses": [1], "alpha": 1.0}, "alpha"),
        ({"wins": [1], "losses": [1], "alternative": "better"}, "alternative"),
        ({"wins": [1], "losses": [1], "prior": (0.0, 1.0)}, "prior"),
    ],
)
def test_sequential_test_refuses_bad_input(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        sequential_test(**kwargs)  # type: ignore[arg-type]


counts = st.integers(min_value=0, max_value=400)
priors = st.tuples(st.floats(0.2, 20.0), st.floats(0.2, 20.0))


@settings(max_examples=200, deadline=None)
@given(w=counts, lo=counts, prior=priors)
def test_greater_grows_with_wins_and_falls_with_losses(
    w: int, lo: int, prior: tuple[float, float]
) -> None:
    e = log_e_value([w, w + 1, w], [lo, lo, lo + 1], prior=prior)
    assert e[1] > e[0] > e[2]


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(w=counts, lo=counts, prior=priors)
def test_less_mirrors_greater(w: int, lo: int, prior: tuple[float, float]) -> None:
    g = log_e_value(w, lo, alternative="greater", prior=prior)
    le = log_e_value(lo, w, alternative="less", prior=prior[::-1])
    assert g == pytest.approx(le, abs=1e-9)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(w=counts, lo=counts, a=st.floats(0.2, 20.0))
def test_two_sided_is_the_average_of_the_halves(w: int, lo: int, a: float) -> None:
    """A symmetric prior puts half its mass on each side, so E = (E_greater + E_less) / 2."""
    prior = (a, a)
    two = log_e_value(w, lo, alternative="two-sided", prior=prior)
    halves = np.logaddexp(
        log_e_value(w, lo, alternative="greater", prior=prior),
        log_e_value(w, lo, alternative="less", prior=prior),
    ) - math.log(2)
    assert two == pytest.approx(halves, abs=1e-8)


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(w=counts, lo=counts, alpha=st.sampled_from([0.01, 0.05, 0.2]))
def test_confidence_sequence_holds_the_estimate(w: int, lo: int, alpha: float) -> None:
    low, high = confidence_sequence(w, lo, alpha=alpha)
    centre = w / (w + lo) if w + lo else 0.5
    assert 0.0 <= low <= centre <= high <= 1.0
