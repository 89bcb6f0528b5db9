"""Pareto fronts: hand-checked cases, an O(N^2) brute force over hypothesis inputs, and the
bootstrap's P(on the front) against a plain loop over the same draws (exact equality)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hylo_analytics.errors import InputError
from hylo_analytics.stats.pareto import (
    dominated_by,
    key_resamples,
    pareto_bootstrap,
    pareto_front,
    policy_resamples,
    shares_keys,
)


def _brute_front(quality: list[float], cost: list[float]) -> list[bool]:
    """The definition, one pair at a time: on the front unless some other policy is at least
    as good on both and strictly better on one (NaN: never on it, dominates nothing)."""
    out = []
    for i, (qi, ci) in enumerate(zip(quality, cost, strict=True)):
        if math.isnan(qi) or math.isnan(ci):
            out.append(False)
            continue
        beaten = False
        for j, (qj, cj) in enumerate(zip(quality, cost, strict=True)):
            if j == i or math.isnan(qj) or math.isnan(cj):
                continue
            if qj >= qi and cj <= ci and (qj > qi or cj < ci):
                beaten = True
        out.append(not beaten)
    return out


# -- the front, by hand ---------------------------------------------------------------------


def test_five_policies_by_hand() -> None:
    """A cheapest, B better for more, C dominated by B (worse and dearer), D the best and the
    dearest, E as good as B but dearer: dominated by an equal (on quality)."""
    quality = [0.5, 0.7, 0.6, 0.9, 0.7]
    cost = [1.0, 2.0, 3.0, 5.0, 4.0]
    assert pareto_front(quality, cost).tolist() == [True, True, False, True, False]
    assert dominated_by(quality, cost).tolist() == [0, 0, 1, 0, 1]  # C by B; E by B


def test_ties() -> None:
    # two policies at one point: neither dominates the other, both are on the front
    assert pareto_front([0.7, 0.7, 0.5], [2.0, 2.0, 1.0]).tolist() == [True, True, True]
    # equal cost: only the best quality; equal quality: only the cheapest
    assert pareto_front([0.6, 0.8], [2.0, 2.0]).tolist() == [False, True]
    assert pareto_front([0.8, 0.8], [3.0, 2.0]).tolist() == [False, True]
    # a duplicate of a dominated point stays dominated
    assert pareto_front([0.9, 0.5, 0.5], [1.0, 2.0, 2.0]).tolist() == [True, False, False]


def test_one_policy_nan_and_nothing() -> None:
    assert pareto_front([0.3], [7.0]).tolist() == [True]
    # NaN is never on the front and dominates nothing: B stays on it beside A's NaN
    assert pareto_front([np.nan, 0.4, 0.2], [1.0, 2.0, np.nan]).tolist() == [False, True, False]
    assert pareto_front(np.zeros((3, 0)), np.zeros((3, 0))).shape == (3, 0)


def test_one_policy_bootstrap() -> None:
    got = pareto_bootstrap([1.0, 0.0, 1.0, 1.0], [3.0, 5.0, 4.0, 4.0], policy=[0] * 4,
                           key=[0, 1, 2, 3], n_resamples=200)  # fmt: skip
    assert got.on_front.tolist() == [True] and got.p_front.tolist() == [1.0]
    assert got.quality.tolist() == [0.75] and got.cost.tolist() == [4.0]
    assert got.quality_low[0] <= 0.75 <= got.quality_high[0]
    assert got.n_quality.tolist() == [4] and got.pairing == "paired"


@st.composite
def _points(draw: st.DrawFn) -> tuple[list[list[float]], list[list[float]]]:
    """1-4 resamples of 1-9 policies, qualities and costs from a few values (NaN among them)."""
    b, n = draw(st.integers(1, 4)), draw(st.integers(1, 9))
    rows = [(0.0, 1.0, 2.0, 3.0, math.nan), (0.0, 1.0, 2.0, math.nan)]
    return tuple(  # type: ignore[return-value]
        draw(st.lists(st.lists(st.sampled_from(v), min_size=n, max_size=n), min_size=b, max_size=b))
        for v in rows
    )


@settings(max_examples=300, deadline=None)
@given(_points())
def test_the_front_is_the_brute_force_definition(
    data: tuple[list[list[float]], list[list[float]]],
) -> None:
    """Few distinct values: ties on cost, on quality and on both are the common case."""
    quality, cost = data
    got = pareto_front(np.array(quality), np.array(cost))  # every resample row at once
    for row, (q, c) in enumerate(zip(quality, cost, strict=True)):
        want = _brute_front(q, c)
        assert got[row].tolist() == want
        ok = ~(np.isnan(q) | np.isnan(c))
        assert ((dominated_by(q, c) == 0) & ok).tolist() == want
        # turning a metric's direction is negating it
        flipped = pareto_front(-np.array(q), -np.array(c))
        assert flipped.tolist() == _brute_front([-x for x in q], [-x for x in c])


# -- the bootstrap against a plain loop -----------------------------------------------------


def _case(seed: int = 5) -> dict[str, np.ndarray]:
    """6 policies x 12 keys in 2 suites; 0/1 quality and whole-number costs (sums exact in any
    order, so two implementations' means agree to the bit); a few values abstained."""
    rng = np.random.default_rng(seed)
    n_pol, n_keys = 6, 12
    key, policy = (a.ravel() for a in np.meshgrid(np.arange(n_keys), np.arange(n_pol),
                                                  indexing="ij"))  # fmt: skip
    skill = np.array([0.3, 0.5, 0.5, 0.7, 0.8, 0.6])[policy]
    quality = (rng.random(len(key)) < skill).astype(float)
    cost = rng.integers(5, 30, len(key)).astype(float) + np.round(10 * skill)
    quality[rng.random(len(key)) < 0.1] = np.nan
    cost[rng.random(len(key)) < 0.1] = np.nan
    stratum = (np.arange(n_keys) >= 7).astype(np.int64)  # suites of 7 and 5 keys
    return {"key": key, "policy": policy, "quality": quality, "cost": cost, "stratum": stratum}


def _loop_mean(values: dict[int, float], drawn: list[int], stratum: list[int]) -> float:
    """One policy's mean over drawn keys: per suite the mean of its valid drawn values, then
    the average over the suites with one, in suite order (as a reference would write it)."""
    means = []
    for s in sorted(set(stratum)):
        got = [values[k] for k in drawn if stratum[k] == s and k in values]
        got = [v for v in got if not math.isnan(v)]
        if got:
            total = 0.0
            for v in got:
                total += v
            means.append(total / len(got))
    if not means:
        return math.nan
    total = 0.0
    for m in means:
        total += m
    return total / len(means)


def _loop_reference(
    case: dict[str, np.ndarray], draws: list[list[int]], unpaired: bool = False
) -> tuple[list[float], list[list[float]], list[list[float]]]:
    """P(on the front) and the resampled means by plain loops over resamples and policies."""
    n_pol = int(case["policy"].max()) + 1
    stratum = case["stratum"].tolist()
    rows = list(zip(case["policy"].tolist(), case["key"].tolist(), strict=True))
    hits = [0] * n_pol
    q_means, c_means = [], []
    for drawn in draws:
        qs, cs = [], []
        for p in range(n_pol):
            mine = [i for i, (pp, _) in enumerate(rows) if pp == p]
            if unpaired:  # the draw holds row positions: keep this policy's
                picked = [rows[i][1] for i in drawn if rows[i][0] == p]
                q_of = {rows[i][1]: case["quality"][i] for i in mine}
                c_of = {rows[i][1]: case["cost"][i] for i in mine}
                qs.append(_loop_mean(q_of, picked, stratum))
                cs.append(_loop_mean(c_of, picked, stratum))
            else:
                q_of = {rows[i][1]: float(case["quality"][i]) for i in mine}
                c_of = {rows[i][1]: float(case["cost"][i]) for i in mine}
                qs.append(_loop_mean(q_of, drawn, stratum))
                cs.append(_loop_mean(c_of, drawn, stratum))
        for p, on in enumerate(_brute_front(qs, cs)):
            hits[p] += on
        q_means.append(qs)
        c_means.append(cs)
    return [h / len(draws) for h in hits], q_means, c_means


def _sorted_case(case: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The rows in the order the unpaired draw indexes them: (suite, policy, key)."""
    order = np.lexsort((case["key"], case["policy"], case["stratum"][case["key"]]))
    return {k: (v if k == "stratum" else v[order]) for k, v in case.items()}


@pytest.mark.parametrize("pairing", ["paired", "unpaired"])
def test_p_front_equals_a_plain_loop_over_the_same_draws(pairing: str) -> None:
    case = _sorted_case(_case())
    n_resamples, seed = 300, 11
    got = pareto_bootstrap(case["quality"], case["cost"], policy=case["policy"], key=case["key"],
                           key_stratum=case["stratum"], pairing=pairing,  # type: ignore[arg-type]
                           n_resamples=n_resamples, seed=seed)  # fmt: skip
    if pairing == "paired":
        chunks = key_resamples(case["stratum"], n_resamples, seed, width=6)
    else:
        group = case["stratum"][case["key"]] * 6 + case["policy"]
        start = np.flatnonzero(np.diff(group, prepend=-1) != 0)
        chunks = policy_resamples(start, len(group), n_resamples, seed)
    draws = [row.tolist() for chunk in chunks for row in chunk]
    assert len(draws) == n_resamples
    p_front, q_means, c_means = _loop_reference(case, draws, unpaired=pairing == "unpaired")
    assert got.p_front.tolist() == p_front  # exact: same draws, same means, same front
    assert got.pairing == pairing
    for resampled, low, high in ((q_means, got.quality_low, got.quality_high),
                                 (c_means, got.cost_low, got.cost_high)):  # fmt: skip
        m = np.array(resampled)  # np.quantile where no resample lacks a mean, as the engine
        tail = (1 - 0.95) / 2  # 0.025000000000000022, as the engine computes it
        lo, hi = (np.nanquantile if np.isnan(m).any() else np.quantile)(m, [tail, 1 - tail], axis=0)
        np.testing.assert_array_equal(low, lo)
        np.testing.assert_array_equal(high, hi)
    # the point estimates: the loop over every key once
    every = list(range(12))
    point, _, _ = _loop_reference(case, [every], unpaired=False)
    assert got.on_front.tolist() == [bool(p) for p in point]


def test_the_loop_reference_can_fail() -> None:
    """Another seed gives other draws: the exact equality above is not vacuous."""
    case = _sorted_case(_case())
    got = pareto_bootstrap(case["quality"], case["cost"], policy=case["policy"], key=case["key"],
                           key_stratum=case["stratum"], n_resamples=300, seed=12)  # fmt: skip
    draws = [r.tolist() for c in key_resamples(case["stratum"], 300, 11, width=6) for r in c]
    assert got.p_front.tolist() != _loop_reference(case, draws)[0]


# -- invariants -----------------------------------------------------------------------------


def _matrix_rows(quality: np.ndarray, cost: np.ndarray) -> dict[str, np.ndarray]:
    key, policy = (a.ravel() for a in np.meshgrid(np.arange(quality.shape[0]),
                                                  np.arange(quality.shape[1]), indexing="ij"))  # fmt: skip
    return {"quality": quality.ravel(), "cost": cost.ravel(), "key": key, "policy": policy}


def test_a_dearer_copy_is_never_on_a_paired_front() -> None:
    """Policy 1 is policy 0 costing one more on every key: on every paired resample it is
    dominated (equal quality, dearer), so its P(on the front) is 0; resampled unpaired, the
    two are independent and it is on some fronts."""
    rng = np.random.default_rng(2)
    q0 = (rng.random(40) < 0.6).astype(float)
    c0 = rng.integers(10, 40, 40).astype(float)
    quality = np.stack([q0, q0, (rng.random(40) < 0.5).astype(float)], axis=1)
    cost = np.stack([c0, c0 + 1, rng.integers(10, 40, 40).astype(float)], axis=1)
    rows = _matrix_rows(quality, cost)
    args = (rows["quality"], rows["cost"])
    paired = pareto_bootstrap(*args, policy=rows["policy"], key=rows["key"], n_resamples=500)
    assert paired.pairing == "paired" and paired.p_front[1] == 0.0 and paired.p_front[0] > 0.5
    unpaired = pareto_bootstrap(*args, policy=rows["policy"], key=rows["key"],
                                pairing="unpaired", n_resamples=500)  # fmt: skip
    assert unpaired.p_front[1] > 0.05


def test_relabelling_permutes_and_directions_turn() -> None:
    rng = np.random.default_rng(4)
    quality = (rng.random((30, 8)) < rng.uniform(0.2, 0.9, 8)).astype(float)
    cost = rng.gamma(3.0, 1.0, (30, 8)) * rng.uniform(0.5, 2, 8)
    rows = _matrix_rows(quality, cost)
    base = pareto_bootstrap(rows["quality"], rows["cost"], policy=rows["policy"],
                            key=rows["key"], n_resamples=400, seed=3)  # fmt: skip
    perm = rng.permutation(8)
    inverse = np.argsort(perm)
    moved = pareto_bootstrap(rows["quality"], rows["cost"], policy=inverse[rows["policy"]],
                             key=rows["key"], n_resamples=400, seed=3)  # fmt: skip
    np.testing.assert_array_equal(moved.p_front[inverse], base.p_front)
    np.testing.assert_array_equal(moved.cost_low[inverse], base.cost_low)
    turned = pareto_bootstrap(-rows["quality"], -rows["cost"], policy=rows["policy"],
                              key=rows["key"], quality_higher=False, cost_lower=False,
                              n_resamples=400, seed=3)  # fmt: skip
    np.testing.assert_array_equal(turned.p_front, base.p_front)
    np.testing.assert_allclose(turned.quality_high, -base.quality_low, rtol=1e-12)  # interpolated
    assert ((base.p_front >= 0) & (base.p_front <= 1)).all()
    assert (base.quality_low <= base.quality).all() and (base.quality <= base.quality_high).all()
    assert (base.p_front[base.on_front] > 0).all()


def test_auto_pairing_follows_the_keys() -> None:
    # two policies, each on its own keys: unpaired; on the same keys (one abstaining): paired
    assert not shares_keys([0, 0, 1, 1], [0, 1, 2, 3], [0, 0, 0, 0])
    assert shares_keys([0, 0, 1, 1], [0, 1, 0, 1], [0, 0])
    # suites of their own: each policy holds every key of its suite, so paired is exact
    assert shares_keys([0, 0, 1, 1], [0, 1, 2, 3], [0, 0, 1, 1])
    got = pareto_bootstrap([1.0, 0.0, 1.0, 1.0], [1.0, 2.0, 3.0, 4.0], policy=[0, 0, 1, 1],
                           key=[0, 1, 2, 3], n_resamples=50)  # fmt: skip
    assert got.pairing == "unpaired"


def test_refusals() -> None:
    one = {"policy": [0, 0], "key": [0, 0]}
    with pytest.raises(InputError, match="two rows of one key"):
        pareto_bootstrap([1.0, 0.0], [1.0, 2.0], **one)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="pairing"):
        pareto_bootstrap([1.0], [1.0], policy=[0], key=[0], pairing="both")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="one value per row"):
        pareto_bootstrap([1.0, 0.0], [1.0], policy=[0, 0], key=[0, 1])
    with pytest.raises(ValueError, match="level"):
        pareto_bootstrap([1.0], [1.0], policy=[0], key=[0], level=1.5)


def test_two_thousand_policies_in_seconds() -> None:
    """The issue's scale: 2,000 policies x 500 shared keys x 1,000 resamples, paired."""
    rng = np.random.default_rng(0)
    n_pol, n_keys = 2_000, 500
    skill = rng.uniform(0.2, 0.9, n_pol)
    quality = (rng.random((n_keys, n_pol)) < skill).astype(float)
    cost = rng.gamma(2.0, 1.0, (n_keys, n_pol)) * (1 + skill)
    rows = _matrix_rows(quality, cost)
    got = pareto_bootstrap(rows["quality"], rows["cost"], policy=rows["policy"],
                           key=rows["key"], n_resamples=1_000)  # fmt: skip
    assert got.pairing == "paired" and got.on_front.sum() >= 1
    assert ((dominated_by(got.quality, got.cost) == 0) == got.on_front).all()  # 4M pairs
