"""The tests of a paired difference: McNemar, Wilcoxon, Holm and BH (golden values, scipy)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from statsmodels.stats.multitest import multipletests

from hylo_analytics.stats import (
    benjamini_hochberg,
    holm,
    mcnemar_exact,
    mcnemar_p,
    signed_rank_p,
    wilcoxon_p,
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


def _differences(kind: int, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == 0:  # continuous: no ties, no zeros (the exact distribution up to 50 pairs)
        return rng.normal(0.3, 1.0, n)
    if kind == 1:  # small integers: ties and zeros (sign-flip distribution up to 13 pairs)
        return rng.integers(-3, 4, n).astype(float)
    if kind == 2:  # a 0/1 metric's differences
        return rng.integers(-1, 2, n).astype(float)
    return np.round(rng.normal(0.2, 1.0, n), 1)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(st.integers(0, 3), st.integers(1, 70), st.integers(0, 2**32 - 1))
def test_wilcoxon_equals_scipy_defaults(kind: int, n: int, seed: int) -> None:
    d = _differences(kind, n, seed)
    if not np.any(d != 0):
        assert wilcoxon_p(d) == 1.0  # no evidence either way
        return
    for alternative in ("greater", "two-sided"):
        want = stats.wilcoxon(d, alternative=alternative).pvalue
        got = wilcoxon_p(d, alternative=alternative)  # type: ignore[arg-type]
        assert got == pytest.approx(want, rel=1e-9, abs=1e-12)


def test_signed_rank_blocks_many_groups_at_once() -> None:
    groups = [_differences(k % 4, 5 + 7 * k, k) for k in range(12)]
    rows = []
    for g, d in enumerate(groups):
        nz = d[d != 0]
        values, inverse, size = np.unique(np.abs(nz), return_inverse=True, return_counts=True)
        pos = np.bincount(inverse.ravel(), weights=nz > 0, minlength=len(values))
        rows += [(g, int(t), int(k)) for t, k in zip(size, pos, strict=True)]
    g, t, k = (np.array(c) for c in zip(*rows, strict=True))
    got = signed_rank_p(g, t, k, [d.size for d in groups], alternative="two-sided")
    want = [stats.wilcoxon(d).pvalue if np.any(d != 0) else 1.0 for d in groups]
    np.testing.assert_allclose(got, want, rtol=1e-9)


def test_binary_signed_rank_is_the_sign_test() -> None:
    # all |d| tie at 1: with at most 13 pairs the exact sign-flip p is McNemar's exact p
    for wins, losses in [(5, 0), (4, 1), (7, 3), (2, 2)]:
        d = np.array([1.0] * wins + [-1.0] * losses + [0.0])
        assert wilcoxon_p(d) == pytest.approx(mcnemar_exact(wins, losses), rel=1e-12)


def test_holm_and_bh_equal_statsmodels() -> None:
    p = np.random.default_rng(3).uniform(0, 0.2, 40)
    np.testing.assert_allclose(holm(p), multipletests(p, method="holm")[1])
    np.testing.assert_allclose(benjamini_hochberg(p), multipletests(p, method="fdr_bh")[1])


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0, 1, allow_nan=False), st.integers(0, 4)), min_size=1, max_size=40
    )
)
def test_family_wise_adjustment_is_per_family(
    rows: list[tuple[float, int]],
) -> None:
    """Each family is adjusted on its own: the overall row never depends on the task rows."""
    p = np.array([r[0] for r in rows])
    fam = np.array([r[1] for r in rows])
    # the ungrouped functions equal statsmodels (test above); statsmodels itself runs
    # gc.collect() per call, too slow for a property test
    for fn in (holm, benjamini_hochberg):
        got = fn(p, fam)
        for f in np.unique(fam):
            np.testing.assert_array_equal(got[fam == f], fn(p[fam == f]))


def test_family_wise_adjustment_on_a_fixed_example_equals_statsmodels() -> None:
    rng = np.random.default_rng(4)
    p, fam = rng.uniform(size=40) ** 3, rng.integers(0, 4, 40)
    p[0] = 1e-300  # tiny p-values survive (no offset arithmetic)
    for fn, method in ((holm, "holm"), (benjamini_hochberg, "fdr_bh")):
        got = fn(p, fam)
        for f in np.unique(fam):
            np.testing.assert_allclose(got[fam == f], multipletests(p[fam == f], method=method)[1])
