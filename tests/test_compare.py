"""paired_compare, the exact McNemar p and the paired bootstrap (golden values from scipy)."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hylo_analytics.compare import (
    PairedComparison,
    bootstrap_mean_ci,
    higher_is_better,
    mcnemar_exact,
    mcnemar_p,
    paired_compare,
)

WINS = [5, 0, 7, 3, 10, 1, 12]
LOSSES = [0, 5, 2, 3, 4, 0, 20]
# computed once with scipy.stats.binomtest(k, k + m, 0.5, alternative=...) and, for mid-p,
# binom.sf(k) + pmf(k) / 2 (two-sided: twice the smaller mid tail, capped at 1)
GOLDEN = {
    ("greater", False): [
        0.03125,
        1.0,
        0.08984375,
        0.65625,
        0.08978271484375,
        0.5,
        0.9449079174082726,
    ],
    ("two-sided", False): [
        0.0625,
        0.0625,
        0.1796875,
        1.0,
        0.1795654296875,
        1.0,
        0.21532714972272515,
    ],
    ("greater", True): [
        0.015625,
        0.984375,
        0.0546875,
        0.5,
        0.059234619140624986,
        0.25,
        0.918622171273455,
    ],
    ("two-sided", True): [
        0.03125,
        0.03125,
        0.109375,
        1.0,
        0.11846923828124997,
        0.5,
        0.16275565745309006,
    ],
}


@pytest.mark.parametrize(("alternative", "mid_p"), list(GOLDEN))
def test_mcnemar_golden(alternative: str, mid_p: bool) -> None:
    got = mcnemar_p(WINS, LOSSES, alternative=alternative, mid_p=mid_p)  # type: ignore[arg-type]
    np.testing.assert_allclose(got, GOLDEN[(alternative, mid_p)], rtol=1e-12)


def test_mcnemar_anchor_values() -> None:
    assert mcnemar_exact(5, 0) == 1 / 32
    for alt in ("greater", "two-sided"):
        for mid in (False, True):
            assert mcnemar_exact(0, 0, alternative=alt, mid_p=mid) == 1.0  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="alternative"):
        mcnemar_exact(1, 2, alternative="less")  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 40), st.integers(0, 40))
def test_mcnemar_invariants(k: int, m: int) -> None:
    one = mcnemar_exact(k, m)
    two = mcnemar_exact(k, m, alternative="two-sided")
    mid = mcnemar_exact(k, m, mid_p=True)
    assert 0.0 < one <= 1.0 and 0.0 < two <= 1.0
    assert mid <= one
    if k > m:
        assert two == pytest.approx(min(1.0, 2 * one))


def test_paired_compare_drops_abstentions_and_counts() -> None:
    cand = {"a#1": 1.0, "a#2": 1.0, "b#1": None, "b#2": 0.0, "c#1": 1.0, "only_c": 1.0}
    par = {"a#1": 0.0, "a#2": 1.0, "b#1": 1.0, "b#2": None, "c#1": 0.0, "only_p": 0.0}
    pc = paired_compare(cand, par)
    assert (pc.n_pairs, pc.candidate_wins, pc.parent_wins, pc.ties) == (3, 2, 0, 1)
    assert pc.n_dropped == 2 and pc.n_unmatched == 2
    assert pc.p_value == 0.25
    assert pc.mean_diff == pytest.approx(2 / 3)


def test_paired_compare_five_to_zero() -> None:
    cand = {f"t#{i}": 1.0 for i in range(5)}
    par = {f"t#{i}": 0.0 for i in range(5)}
    assert paired_compare(cand, par).p_value == 1 / 32
    assert paired_compare(par, cand).p_value == 1.0
    assert paired_compare(cand, cand).p_value == 1.0


def test_direction_decides_wins() -> None:
    cand = {"a": 10.0, "b": 12.0, "c": 30.0}
    par = {"a": 20.0, "b": 15.0, "c": 30.0}
    steps = paired_compare(cand, par, metric="steps")
    assert (steps.candidate_wins, steps.parent_wins, steps.ties) == (2, 0, 1)
    assert not steps.higher_is_better
    assert paired_compare(cand, par).candidate_wins == 0
    assert paired_compare(cand, par, direction="minimize").candidate_wins == 2
    assert higher_is_better("success") and not higher_is_better("latency_p95")
    with pytest.raises(ValueError, match="direction"):
        higher_is_better("x", "up")  # type: ignore[arg-type]


def test_continuous_metrics_bootstrap_and_wilcoxon() -> None:
    from scipy import stats

    d = np.array([1.5, -0.5, 2.0, 2.0, 0.0, 3.0, -1.0, 0.5, 2.5, 1.0])
    par = {f"k{i}": 10.0 for i in range(d.size)}
    cand = {f"k{i}": 10.0 + x for i, x in enumerate(d)}
    pc = paired_compare(cand, par, n_boot=4000, seed=1)
    assert pc.mean_diff == pytest.approx(d.mean())
    assert pc.ci_low < pc.mean_diff < pc.ci_high
    assert pc.wilcoxon_p == pytest.approx(stats.wilcoxon(d, alternative="greater").pvalue)
    again = paired_compare(cand, par, n_boot=4000, seed=1)
    assert (again.ci_low, again.ci_high) == (pc.ci_low, pc.ci_high)
    # a minimize metric flips the Wilcoxon direction, not the reported difference
    lower = paired_compare(cand, par, direction="minimize", n_boot=200)
    assert lower.mean_diff == pytest.approx(d.mean()) and lower.wilcoxon_p > 0.5


def test_frames_are_accepted_and_duplicates_refused() -> None:
    cand = pl.DataFrame({"key": ["a", "b", "c"], "value": [1.0, None, 1.0]})
    par = pl.DataFrame({"key": ["a", "b", "c"], "value": [0.0, 1.0, 1.0]})
    pc = paired_compare(cand, par)
    assert (pc.n_pairs, pc.candidate_wins, pc.ties, pc.n_dropped) == (2, 1, 1, 1)
    dup = pl.DataFrame({"key": ["a", "a"], "value": [1.0, 0.0]})
    with pytest.raises(ValueError, match="duplicated key"):
        paired_compare(dup, par)
    with pytest.raises(ValueError, match="lacks column"):
        paired_compare(pl.DataFrame({"k": ["a"]}), par)


def test_no_pairs_gives_nan_difference_not_zero() -> None:
    pc = paired_compare({"a": None}, {"a": 1.0})
    assert pc.n_pairs == 0 and pc.p_value == 1.0
    assert math.isnan(pc.mean_diff) and math.isnan(pc.ci_low)


def test_bootstrap_groups_and_invariants() -> None:
    d = np.array([1.0, 1.0, 1.0, 0.0, 2.0, 4.0])
    g = np.array([0, 0, 0, 1, 1, 1])
    lo, hi = bootstrap_mean_ci(d, g, n_boot=3000, seed=3)
    assert lo[0] == hi[0] == 1.0  # a constant group has a degenerate interval
    assert 0.0 <= lo[1] < 2.0 < hi[1] <= 4.0
    with pytest.raises(ValueError, match="sorted"):
        bootstrap_mean_ci(d, g[::-1])


def test_printing() -> None:
    pc = paired_compare({"a": 1.0, "b": 1.0}, {"a": 0.0, "b": 1.0}, n_boot=50)
    text = str(pc)
    assert "1 | parent wins 0 | ties 1" in text and "McNemar" in text
    html = pc._repr_html_()
    assert html.startswith("<table>") and "<td>2</td>" in html
    assert isinstance(pc, PairedComparison) and pc.as_dict()["n_pairs"] == 2


def test_multinomial_bootstrap_matches_resampling() -> None:
    rng = np.random.default_rng(9)
    d = np.concatenate([rng.choice([-1.0, 0.0, 1.0], 80, p=[0.2, 0.5, 0.3]), np.zeros(0)])
    d2 = rng.choice([-1.0, 0.0, 1.0], 30, p=[0.5, 0.3, 0.2])
    diffs = np.concatenate([d, d2])
    groups = np.repeat([0, 1], [80, 30])
    fast = bootstrap_mean_ci(diffs, groups, n_boot=20000, seed=1)
    slow = bootstrap_mean_ci(diffs, groups, n_boot=20000, seed=1, discrete_max=0)
    np.testing.assert_allclose(fast[0], slow[0], atol=0.02)
    np.testing.assert_allclose(fast[1], slow[1], atol=0.02)
    with pytest.raises(ValueError, match="n_boot"):
        bootstrap_mean_ci(diffs, groups, n_boot=0)
