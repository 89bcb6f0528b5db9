"""Power and sample size: golden values, invariants, a seeded simulation and plans from runs."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from statsmodels.stats.power import TTestPower

import hylo_analytics as ha
from hylo_analytics.compare.planning import plan_from_runs
from hylo_analytics.stats import Alternative, mcnemar_p, tango_p, z_value
from hylo_analytics.stats.power import (
    BinaryTest,
    Plan,
    discordance_from_marginals,
    mcnemar_power,
    minimum_detectable_effect,
    minimum_detectable_effect_continuous,
    paired_t_power,
    pairs_for_power,
    pairs_for_power_continuous,
    plan_binary,
    plan_continuous,
)

SIDES: list[Alternative] = ["greater", "two-sided"]
TESTS: list[BinaryTest] = ["score", "exact"]


def rejects(wins: object, losses: object, alternative: Alternative, test: BinaryTest) -> object:
    """Whether the test rejects at 0.05, from the package's p-values (compare's own)."""
    if test == "exact":
        return mcnemar_p(wins, losses, alternative=alternative) < 0.05
    w, lo = np.asarray(wins), np.asarray(losses)
    up, down = tango_p(w, lo, w + lo, 0.0, "greater"), tango_p(w, lo, w + lo, 0.0, "less")
    p = up if alternative == "greater" else np.minimum(1.0, 2 * np.minimum(up, down))
    return np.where(w + lo > 0, p, 1.0) < 0.05


SM_SIDE = {"greater": "larger", "two-sided": "two-sided"}


def connor(delta: float, psi: float, alpha: float, power: float, alternative: Alternative) -> float:
    """Connor (1987), written out independently of the package."""
    z_a = stats.norm.isf(alpha if alternative == "greater" else alpha / 2)
    z_b = stats.norm.ppf(power)
    return float((z_a * math.sqrt(psi) + z_b * math.sqrt(psi - delta**2)) ** 2 / delta**2)


# -- binary: golden values ----------------------------------------------------------------


@pytest.mark.parametrize("test", TESTS)
@pytest.mark.parametrize("alternative", SIDES)
@pytest.mark.parametrize(("n", "delta", "psi"), [(6, 0.3, 0.5), (7, 0.2, 0.9), (8, -0.1, 0.4)])
def test_binary_power_equals_brute_force_enumeration(
    n: int, delta: float, psi: float, alternative: Alternative, test: BinaryTest
) -> None:
    # every one of the 3**n outcomes (win, loss, tie per pair), judged by the package's test
    cells = np.array(list(itertools.product([0, 1, 2], repeat=n)))
    wins, losses = (cells == 1).sum(axis=1), (cells == 2).sum(axis=1)
    prob = ((psi + delta) / 2) ** wins * ((psi - delta) / 2) ** losses
    prob = prob * (1 - psi) ** (n - wins - losses)
    reject = rejects(wins, losses, alternative, test)
    expected = float(prob[reject].sum())
    got = mcnemar_power(n, delta, psi, 0.05, alternative, test=test)
    assert got == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("test", TESTS)
@pytest.mark.parametrize("alternative", SIDES)
def test_all_discordant_power_is_the_conditional_power_for_every_m(
    alternative: Alternative, test: BinaryTest
) -> None:
    # psi = 1 makes m = n: this checks the critical value of each m up to 150
    q = 0.7
    for n in range(1, 151, 7):
        w = np.arange(n + 1)
        reject = rejects(w, n - w, alternative, test)
        expected = stats.binom.pmf(w, n, q)[reject].sum()
        got = mcnemar_power(n, 2 * q - 1, 1.0, 0.05, alternative, test=test)
        assert got == pytest.approx(expected, abs=1e-12), n


def test_hand_checkable_five_pairs() -> None:
    # 5 pairs reject one-sided at 0.05 only on 5 wins of 5 (p = 1/32): power = P(all win)
    assert mcnemar_power(5, 0.1, 0.1, test="exact") == pytest.approx(0.1**5, rel=1e-12)
    assert mcnemar_power(5, 0.0, 0.4, test="exact") == pytest.approx(0.2**5, rel=1e-12)
    # 4 of 4 gives p = 1/16: never significant
    assert mcnemar_power(4, 0.2, 0.2, test="exact") == 0.0
    # the score test: 3 of 3 gives z = sqrt(3) = 1.73 > 1.645 (2 of 2: 1.41, not), so with
    # all 3 pairs discordant the power is P(3 wins) = ((1 + delta) / 2) ** 3
    assert mcnemar_power(3, 0.2, 1.0) == pytest.approx(0.6**3, rel=1e-12)
    assert mcnemar_power(2, 0.2, 1.0) == 0.0


@pytest.mark.parametrize("alternative", SIDES)
@pytest.mark.parametrize(
    ("delta", "psi"), [(0.03, 0.05), (0.03, 0.068), (0.1, 0.26), (0.02, 0.1), (0.2, 0.5)]
)
def test_exact_pairs_are_a_little_above_connor(
    delta: float, psi: float, alternative: Alternative
) -> None:
    """The exact conditional test is conservative (its size is below alpha): 3-11 % more;
    the score test is the test Connor's formula approximates: within 10 % (8 % fewer at
    psi 0.05, where the discordant pairs are few)."""
    exact = pairs_for_power(delta, psi, alternative=alternative, test="exact")
    approx = connor(delta, psi, 0.05, 0.8, alternative)
    assert 1.0 <= exact / approx <= 1.12
    score = pairs_for_power(delta, psi, alternative=alternative)
    assert 0.9 <= score / approx <= 1.05
    assert score <= exact


def test_pairs_for_power_is_where_power_stays_above_target() -> None:
    # psi = 1: the power saw-tooths in n, and the first crossing is not the answer
    delta, psi = 0.5, 1.0
    n = pairs_for_power(delta, psi)
    ns = np.arange(1, n + 400)
    power = np.array([mcnemar_power(int(k), delta, psi) for k in ns])
    first = int(ns[np.argmax(power >= 0.8)])
    assert first < n
    assert power[ns >= n].min() >= 0.8
    assert power[ns == n - 1][0] < 0.8


def test_two_sided_is_symmetric_and_needs_more_pairs() -> None:
    assert mcnemar_power(300, -0.03, 0.06, 0.05, "two-sided") == pytest.approx(
        mcnemar_power(300, 0.03, 0.06, 0.05, "two-sided"), abs=1e-12
    )
    assert pairs_for_power(0.03, 0.06, alternative="two-sided") > pairs_for_power(0.03, 0.06)


# -- binary: invariants -------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(1, 400),
    psi=st.floats(0.01, 1.0),
    a=st.floats(0.0, 1.0),
    b=st.floats(0.0, 1.0),
    alternative=st.sampled_from(SIDES),
)
def test_power_grows_with_delta(
    n: int, psi: float, a: float, b: float, alternative: Alternative
) -> None:
    lo, hi = sorted((a * psi, b * psi))
    assert mcnemar_power(n, lo, psi, 0.05, alternative) <= (
        mcnemar_power(n, hi, psi, 0.05, alternative) + 1e-12
    )


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(0, 2000),
    psi=st.floats(0.001, 1.0),
    alpha=st.sampled_from([0.01, 0.05, 0.1, 0.25]),
    alternative=st.sampled_from(SIDES),
)
def test_size_under_no_difference_is_at_most_alpha(
    n: int, psi: float, alpha: float, alternative: Alternative
) -> None:
    assert mcnemar_power(n, 0.0, psi, alpha, alternative, test="exact") <= alpha


@pytest.mark.parametrize("alternative", SIDES)
@pytest.mark.parametrize(("delta", "psi"), [(0.03, 0.0497), (0.1, 0.26), (0.3, 0.9)])
def test_mde_at_the_planned_size_is_at_most_delta(
    delta: float, psi: float, alternative: Alternative
) -> None:
    n = pairs_for_power(delta, psi, alternative=alternative)
    mde = minimum_detectable_effect(n, psi, alternative=alternative)
    assert mde <= delta
    assert mcnemar_power(n, mde, psi, 0.05, alternative) == pytest.approx(0.8, abs=1e-9)


def test_discordance_from_marginals() -> None:
    assert discordance_from_marginals(0.95, 0.98) == pytest.approx(0.95 + 0.98 - 2 * 0.95 * 0.98)
    assert discordance_from_marginals(0.9, 0.9, rho=1.0) == pytest.approx(0.0, abs=1e-12)
    # rho = -1 is not reachable for these rates: p11 is clipped to its Fréchet bound
    assert discordance_from_marginals(0.95, 0.98, rho=-1.0) == pytest.approx(0.07)
    assert discordance_from_marginals(0.95, 0.98, rho=0.3) < discordance_from_marginals(0.95, 0.98)
    for bad in [(1.2, 0.9, 0.0), (0.9, -0.1, 0.0), (0.9, 0.9, 1.5)]:
        with pytest.raises(ValueError, match="must be"):
            discordance_from_marginals(*bad)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: pairs_for_power(0.03, 0.0), "every pair is a tie"),
        (lambda: pairs_for_power(0.05, 0.03), "exceeds the discordance"),
        (lambda: pairs_for_power(-0.01, 0.1), "must be > 0"),
        (lambda: pairs_for_power(0.0, 0.1, alternative="two-sided"), "non-zero"),
        (lambda: pairs_for_power(0.03, 0.06, power=1.0), "power"),
        (lambda: pairs_for_power(0.03, 0.06, alpha=0.0), "alpha"),
        (lambda: pairs_for_power(0.03, 0.06, alternative="less"), "alternative"),  # type: ignore[arg-type]
        (lambda: pairs_for_power(0.001, 0.5, max_n=10_000), "more than max_n"),
        (lambda: minimum_detectable_effect(3, 0.5), "cannot reach power"),
        (lambda: paired_t_power(1, 1.0, 1.0), "n >= 2"),
        (lambda: pairs_for_power_continuous(1.0, 0.0), "sd"),
    ],
)
def test_invalid_inputs_say_what_is_wrong(call: Callable[[], object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()


def test_plan_sentence() -> None:
    psi = discordance_from_marginals(0.95, 0.98, rho=0.3)
    plan = plan_binary(0.03, psi)
    assert isinstance(plan, Plan) and plan.power >= plan.target_power
    assert str(plan) == (
        "To detect +3.0 points (discordance 0.050) with power 0.80 at one-sided alpha 0.05 "
        f"(Tango score test): {plan.n_pairs} pairs (episodes per run); power at that size "
        f"{plan.power:.3f}"
    )
    assert plan.n_pairs == 310  # the exact test needs 368: it is conservative
    assert plan_binary(0.03, psi, test="exact").n_pairs == 368
    text = str(plan_continuous(2.0, 12.0, alternative="two-sided"))
    assert text.startswith("To detect +2 (sd of differences 12) with power 0.80 at two-sided")


# -- continuous: against statsmodels --------------------------------------------------------


@pytest.mark.parametrize("alternative", SIDES)
@pytest.mark.parametrize(
    ("n", "delta", "sd", "alpha"),
    [(10, 1.0, 2.0, 0.05), (57, 0.3, 1.1, 0.01), (400, 2.0, 12.0, 0.1)],
)
def test_t_power_equals_statsmodels(
    n: int, delta: float, sd: float, alpha: float, alternative: Alternative
) -> None:
    sm = TTestPower().power(delta / sd, n, alpha, alternative=SM_SIDE[alternative])
    assert paired_t_power(n, delta, sd, alpha, alternative) == pytest.approx(sm, abs=1e-6)


@pytest.mark.parametrize("alternative", SIDES)
@pytest.mark.parametrize(
    ("delta", "sd", "power"), [(2.0, 12.0, 0.8), (0.5, 1.0, 0.9), (3.0, 2.0, 0.8)]
)
def test_t_sample_size_and_mde_equal_statsmodels(
    delta: float, sd: float, power: float, alternative: Alternative
) -> None:
    sm_side = SM_SIDE[alternative]
    nobs = TTestPower().solve_power(
        delta / sd, nobs=None, alpha=0.05, power=power, alternative=sm_side
    )
    n = pairs_for_power_continuous(delta, sd, power=power, alternative=alternative)
    assert n == math.ceil(float(nobs) - 1e-9)
    effect = TTestPower().solve_power(None, nobs=n, alpha=0.05, power=power, alternative=sm_side)
    mde = minimum_detectable_effect_continuous(n, sd, power=power, alternative=alternative)
    # statsmodels' root search stops near 1e-5 in power; ours hits its power to 1e-9
    sm_power = TTestPower().power(mde / sd, n, 0.05, alternative=sm_side)
    assert sm_power == pytest.approx(power, abs=1e-9)
    assert mde == pytest.approx(float(effect) * sd, rel=1e-4)
    assert mde <= delta


# -- the simulation check -----------------------------------------------------------------


def _simulate_binary(
    n: int,
    p_parent: float,
    delta: float,
    rho: float,
    reps: int,
    alternative: Alternative,
    seed: int,
    test: BinaryTest = "score",
) -> float:
    """Empirical power: episodes drawn from the joint model, judged by the package's test."""
    p_cand = p_parent + delta
    psi = discordance_from_marginals(p_parent, p_cand, rho)
    p11 = (p_cand + p_parent - psi) / 2
    edges = np.cumsum([p11, p_cand - p11, p_parent - p11])  # cells 11, 10, 01, then 00
    cell = np.searchsorted(edges, np.random.default_rng(seed).random((reps, n)))
    wins, losses = (cell == 1).sum(axis=1), (cell == 2).sum(axis=1)
    return float(np.mean(rejects(wins, losses, alternative, test)))


@pytest.mark.parametrize(
    ("p_parent", "delta", "rho", "alternative"),
    [(0.95, 0.03, 0.3, "greater"), (0.8, 0.10, 0.0, "greater"), (0.8, 0.10, 0.0, "two-sided")],
)
def test_simulated_power_matches_the_plan(
    p_parent: float, delta: float, rho: float, alternative: Alternative
) -> None:
    psi = discordance_from_marginals(p_parent, p_parent + delta, rho)
    plan = plan_binary(delta, psi, alternative=alternative)
    empirical = _simulate_binary(plan.n_pairs, p_parent, delta, rho, 4000, alternative, seed=7)
    assert empirical == pytest.approx(plan.power, abs=0.03)
    assert empirical >= plan.target_power - 0.03


@pytest.mark.parametrize("test", TESTS)
def test_simulated_size_under_no_difference(test: BinaryTest) -> None:
    empirical = _simulate_binary(400, 0.8, 0.0, 0.2, 4000, "greater", seed=3, test=test)
    assert empirical <= 0.05 + 0.01


@pytest.mark.parametrize("alternative", SIDES)
def test_simulated_t_power_matches_the_plan(alternative: Alternative) -> None:
    plan = plan_continuous(2.0, 12.0, alternative=alternative)
    diffs = np.random.default_rng(11).normal(2.0, 12.0, size=(4000, plan.n_pairs))
    side = "greater" if alternative == "greater" else "two-sided"
    p = stats.ttest_1samp(diffs, 0.0, axis=1, alternative=side).pvalue
    empirical = float((p < 0.05).mean())
    assert empirical == pytest.approx(plan.power, abs=0.03)
    assert empirical >= plan.target_power - 0.03


# -- plans from a store -------------------------------------------------------------------


def test_plan_from_the_sample_runs(sample_store: ha.Store) -> None:
    got = plan_from_runs(sample_store.parquet, "version=1.2.0-rc1", "version=1.0.0")
    assert (got.kind, got.n_pairs, got.candidate_wins, got.parent_wins) == ("binary", 191, 65, 12)
    assert got.discordance == pytest.approx(77 / 191) and not got.assumed
    assert got.observed_diff == pytest.approx(53 / 191)
    assert got.plan is not None and got.mde is not None
    assert got.plan.n_pairs == pairs_for_power(53 / 191, 77 / 191)
    assert got.mde == pytest.approx(minimum_detectable_effect(191, 77 / 191))
    assert got.power_at_n == pytest.approx(mcnemar_power(191, 53 / 191, 77 / 191))
    again = plan_from_runs(sample_store.parquet, "version=1.2.0-rc1", "version=1.0.0", delta=0.05)
    assert again.plan is not None and again.plan.delta == 0.05
    assert json.dumps(dataclasses.asdict(again))  # serializable for --format json


def test_continuous_plan_uses_the_compared_pairs(sample_store: ha.Store) -> None:
    got = plan_from_runs(sample_store.parquet, "version=1.2.0-rc1", "version=1.0.0", metric="steps")
    # the engine's normal CI is mean +- z sd / sqrt(n) over the same pairs: the same sd
    row = sample_store.compare(
        ["version=1.2.0-rc1"], "version=1.0.0", metrics=["steps"], ci="normal"
    ).row(0, named=True)
    sd = (row["ci_high"] - row["ci_low"]) / (2 * z_value(0.95)) * math.sqrt(191)
    assert got.kind == "continuous" and got.sd == pytest.approx(sd)
    assert got.observed_diff == pytest.approx(-row["mean_diff"])  # steps: fewer is better
    assert got.plan is not None
    assert got.plan.n_pairs == pairs_for_power_continuous(-row["mean_diff"], sd)


def test_a_worse_candidate_has_no_observed_plan(sample_store: ha.Store) -> None:
    got = plan_from_runs(sample_store.parquet, "version=1.0.0", "version=1.2.0-rc1")
    assert got.plan is None and got.mde is not None
    assert "not better" in str(got)


@pytest.mark.slow
def test_all_ties_need_an_assumed_discordance(tmp_path: Path, sample_dir: Path) -> None:
    log = json.loads((sample_dir / "run-octo-ft-1.0.0-0000" / "evallog.json").read_text())
    for sample in log["samples"]:
        sample.pop("trace", None)
    store = ha.open_store(tmp_path / "s")
    for run, version in [("run-a", "1.0.0"), ("run-b", "1.0.1")]:
        (tmp_path / run).mkdir()
        log["run_id"], log["agent"]["version"] = run, version
        (tmp_path / run / "evallog.json").write_text(json.dumps(log))
        store.ingest(tmp_path / run, progress=False)
    got = plan_from_runs(store.parquet, "run-b", "run-a")
    assert got.discordance == 0.0 and got.plan is None and got.mde is None
    assert got.note is not None and "assumed discordance" in got.note
    assumed = plan_from_runs(store.parquet, "run-b", "run-a", discordance=0.1, delta=0.03)
    assert assumed.assumed and assumed.plan is not None
    assert assumed.plan.n_pairs == pairs_for_power(0.03, 0.1)


@pytest.mark.slow
def test_plan_from_real_libero_runs(real_dir: Path, tmp_path: Path) -> None:
    store = ha.open_store(tmp_path / "real")
    store.ingest(real_dir / "vla-eval-harness", progress=False)
    cand, par = "agent=pi05,benchmark=libero_spatial", "agent=xvla,benchmark=libero_spatial"
    # the harness's convention (vla-eval: a timeout is a failure): 500 pairs, pi05 worse, and
    # the observed difference is the one of those pairs (it was the 470 pairs' +0.43 points)
    harness = plan_from_runs(store.parquet, cand, par)
    assert (harness.n_pairs, harness.candidate_wins, harness.parent_wins) == (500, 9, 36)
    assert harness.observed_diff == pytest.approx((9 - 36) / 500)
    assert harness.plan is None and harness.note and "not better" in harness.note
    got = plan_from_runs(store.parquet, cand, par, errors="exclude")
    assert (got.n_pairs, got.candidate_wins, got.parent_wins) == (470, 9, 7)
    assert got.discordance == pytest.approx(16 / 470)
    assert got.observed_diff == pytest.approx(2 / 470)
    # for the observed +0.43 points, by the score test compare's verdict uses (the exact
    # McNemar would need 12,041)
    assert got.plan is not None and got.plan.n_pairs == 11_582
    assert got.mde == pytest.approx(0.0202, abs=1e-4)
    three = plan_from_runs(store.parquet, cand, par, delta=0.03, errors="exclude")
    assert three.plan is not None and three.plan.n_pairs == 184
    with pytest.raises(ValueError, match="exceeds the discordance"):
        plan_from_runs(store.parquet, cand, par, delta=0.05, errors="exclude")
