"""Critical differences: golden values against scipy, scikit-posthocs and autorank, and the
invariants of ranks and cliques (hypothesis)."""

from __future__ import annotations

import itertools

import numpy as np
import numpy.typing as npt
import pandas as pd
import pytest
import scikit_posthocs as sp
from autorank import autorank
from autorank._util import get_sorted_rank_groups
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, special, stats

from hylo_analytics.errors import InputError
from hylo_analytics.stats.critical_difference import (
    CD_METHODS,
    block_ranks,
    critical_difference_test,
    friedman_test,
    nemenyi_cd,
    nemenyi_p,
    rank_cliques,
    studentized_range_sf,
    wilcoxon_pairs,
)


def _matrix(n: int, k: int, seed: int, kind: str = "continuous") -> npt.NDArray[np.float64]:
    """Blocks x policies: policy j about 0.3 j better; ``ties`` rounds to integers,
    ``rates`` are successes out of 10 episodes (many ties and zero differences)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, k)) + 0.3 * np.arange(k)
    if kind == "ties":
        return np.round(x)
    if kind == "rates":
        return rng.binomial(10, special.expit(x / 3 - 0.5)) / 10
    return x


def _square(
    k: int, order: npt.NDArray[np.int64], i: npt.ArrayLike, j: npt.ArrayLike, values: npt.ArrayLike
) -> npt.NDArray[np.float64]:
    """Pair values (positions in ``order``) as the symmetric k x k matrix of the columns."""
    out = np.ones((k, k))
    out[order[i], order[j]] = values
    out[order[j], order[i]] = values
    return out


CASES = [(10, 5, "continuous"), (20, 6, "ties"), (60, 4, "continuous"), (12, 5, "ties"),
         (30, 7, "continuous"), (25, 8, "rates"), (8, 4, "rates"), (55, 5, "rates")]  # fmt: skip


@pytest.mark.parametrize(("n", "k", "kind"), CASES)
def test_friedman_is_scipys(n: int, k: int, kind: str) -> None:
    x = _matrix(n, k, n * k, kind)
    got = friedman_test(block_ranks(x))
    want = stats.friedmanchisquare(*x.T)
    assert got.statistic == pytest.approx(want.statistic, rel=1e-13)
    assert got.p == pytest.approx(want.pvalue, rel=1e-10, abs=1e-300)
    # Iman-Davenport (Demšar 2006, eq. 3), by hand
    f = (n - 1) * want.statistic / (n * (k - 1) - want.statistic)
    assert got.f_statistic == pytest.approx(f, rel=1e-12)
    assert got.f_df == (k - 1, (k - 1) * (n - 1))
    assert got.f_p == pytest.approx(stats.f.sf(f, k - 1, (k - 1) * (n - 1)), rel=1e-10)


@pytest.mark.parametrize(("n", "k", "kind"), CASES)
def test_nemenyi_is_scikit_posthocs(n: int, k: int, kind: str) -> None:
    x = _matrix(n, k, n + k, kind)
    found = critical_difference_test(x, test="nemenyi")
    got = _square(k, found.order, found.i, found.j, found.p)
    want = sp.posthoc_nemenyi_friedman(x).to_numpy()
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-13)
    q = stats.studentized_range.ppf(0.95, k, np.inf)
    assert found.cd == pytest.approx(q / np.sqrt(2) * np.sqrt(k * (k + 1) / (6 * n)), rel=1e-14)
    assert ((found.rank_diff > found.cd) == found.significant).all()
    assert set(found.method) == {CD_METHODS.index("studentized range")}


@pytest.mark.parametrize(("n", "k", "kind"), CASES)
def test_wilcoxon_holm_is_scikit_posthocs(n: int, k: int, kind: str) -> None:
    x = _matrix(n, k, 3 * n + k, kind)
    found = critical_difference_test(x, test="wilcoxon")
    # rates tie as their integer successes do (see test_rates_tie_as_the_counts_do)
    exact = np.round(x * 10) if kind == "rates" else x
    columns = [exact[:, c] for c in range(k)]
    raw = sp.posthoc_wilcoxon(columns).to_numpy()
    adjusted = sp.posthoc_wilcoxon(columns, p_adjust="holm").to_numpy()
    np.testing.assert_allclose(_square(k, found.order, found.i, found.j, found.p), raw,
                               rtol=1e-12, atol=1e-15)  # fmt: skip
    np.testing.assert_allclose(_square(k, found.order, found.i, found.j, found.p_holm),
                               adjusted, rtol=1e-12, atol=1e-15)  # fmt: skip
    assert (found.significant == (found.p_holm < 0.05)).all()
    for p, a, b, stat in zip(found.p, found.i, found.j, found.statistic, strict=True):
        one = stats.wilcoxon(exact[:, found.order[a]], exact[:, found.order[b]])
        assert (p, stat) == pytest.approx((one.pvalue, one.statistic), rel=1e-12)


def test_wilcoxon_chooses_the_method_scipy_chooses() -> None:
    """Exact up to 50 blocks without ties or zeros; every sign flip up to 13 with them; the
    normal approximation otherwise (and past 50 blocks)."""
    names = {
        "exact": _matrix(30, 3, 1),
        "permutation": _matrix(12, 3, 2, "ties"),
        "normal": _matrix(60, 3, 3),
    }
    for method, x in names.items():
        found = wilcoxon_pairs(x, [0, 0, 1], [1, 2, 2])
        assert {CD_METHODS[m] for m in found.method} == {method}, method
    ties = wilcoxon_pairs(_matrix(20, 3, 4, "ties"), [0], [1])
    assert CD_METHODS[int(ties.method[0])] == "normal"
    same = wilcoxon_pairs(np.ones((5, 2)), [0], [1])  # scipy: NaN, here no evidence
    assert same.p[0] == 1.0 and CD_METHODS[int(same.method[0])] == "none"


def test_rates_tie_as_the_counts_do() -> None:
    """0.7 - 0.6 and 0.8 - 0.7 are one difference: the ranks are those of the integer
    successes, not of two floats an ulp apart (scipy on the rates splits the tie)."""
    rng = np.random.default_rng(5)
    counts = rng.binomial(10, 0.5, size=(18, 2)).astype(float)
    found = wilcoxon_pairs(counts / 10, [0], [1])
    want = stats.wilcoxon(counts[:, 0], counts[:, 1])
    assert found.p[0] == pytest.approx(want.pvalue, rel=1e-12)
    assert found.statistic[0] == want.statistic
    split = stats.wilcoxon(counts[:, 0] / 10, counts[:, 1] / 10)  # the tie split by ulps
    assert split.pvalue != pytest.approx(want.pvalue, rel=1e-3)


def test_autorank_nonparametric() -> None:
    """autorank forced to its nonparametric branch (Friedman + Nemenyi): the same mean
    ranks, Friedman p and cliques; its CD to statsmodels' qsturng (an interpolated table,
    about five digits)."""
    x = _matrix(20, 6, 11)
    frame = pd.DataFrame(x, columns=[f"p{c}" for c in range(6)])
    result = autorank(frame, alpha=0.05, order="descending", force_mode="nonparametric")
    assert (result.omnibus, result.posthoc) == ("friedman", "nemenyi")
    found = critical_difference_test(x, maximize=True)
    np.testing.assert_allclose(
        result.rankdf["meanrank"].to_numpy(),
        found.avg_rank[[int(c[1:]) for c in result.rankdf.index]],
        rtol=1e-14,
    )
    assert found.friedman.p == pytest.approx(result.pvalue, rel=1e-12)
    assert found.cd == pytest.approx(result.cd, rel=2e-5)
    _, names, groups = get_sorted_rank_groups(result, False)
    theirs = {frozenset(names[a : b + 1]) for a, b in groups}
    ordered = [f"p{c}" for c in found.order]
    ours = {frozenset(ordered[a : b + 1])
            for a, b in zip(found.clique_first, found.clique_last, strict=True) if b > a}  # fmt: skip
    assert ours == theirs and len(ours) > 1


@pytest.mark.parametrize("k", [2, 3, 10, 200, 2000])
def test_studentized_range_tail(k: int) -> None:
    q = np.linspace(0, 12, 61)
    np.testing.assert_allclose(
        studentized_range_sf(q, k), stats.studentized_range.sf(q, k, np.inf), atol=1e-10
    )


@pytest.mark.parametrize(("k", "q"), [(2000, 5.0), (2000, 7.5), (200, 6.0), (3, 5.0)])
def test_studentized_range_against_adaptive_quadrature(k: int, q: float) -> None:
    """The same integral by adaptive quadrature, to 1e-13 (scipy's own sf is off by ~1e-11
    at k = 2,000: its 1 - cdf)."""

    def integrand(z: float) -> float:
        top, low = special.ndtr(z), special.ndtr(z - q)
        inner = 1.0 if low >= top else -np.expm1((k - 1) * np.log1p(-low / top))
        density = k * np.exp(-z * z / 2 - 0.5 * np.log(2 * np.pi) + (k - 1) * special.log_ndtr(z))
        return float(density * inner)

    want = integrate.quad(integrand, -12, 12, points=[0, 2, 3, 4, 5, 6, 8], limit=500,
                          epsabs=1e-16, epsrel=1e-13)[0]  # fmt: skip
    assert studentized_range_sf(np.array([q]), k)[0] == pytest.approx(want, abs=1e-13)


def test_nemenyi_p_is_one_quadrature_per_distinct_difference() -> None:
    diffs = np.array([0.0, 1.5, 1.5, 3.0])
    p = nemenyi_p(diffs, 5, 10)
    assert p[0] == 1.0 and p[1] == p[2] and p[3] < p[1]


def test_refusals() -> None:
    with pytest.raises(InputError, match="without NaN"):
        block_ranks([[1.0, np.nan]])
    with pytest.raises(InputError, match="test must be"):
        critical_difference_test(np.ones((3, 3)), test="bonferroni")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="alpha"):
        nemenyi_cd(3, 10, alpha=1.5)


def test_degenerate_blocks() -> None:
    tied = friedman_test(block_ranks(np.ones((6, 4))))  # every block tied throughout
    assert (tied.statistic, tied.p) == (0.0, 1.0)
    agree = friedman_test(block_ranks(np.tile(np.arange(4.0), (6, 1))))  # full agreement
    assert agree.f_statistic == np.inf and agree.f_p == 0.0


# -- invariants -------------------------------------------------------------------------

matrices = st.integers(min_value=2, max_value=9).flatmap(
    lambda k: st.lists(
        st.lists(st.integers(min_value=0, max_value=4), min_size=k, max_size=k),
        min_size=2,
        max_size=14,
    )
)


@settings(max_examples=60, deadline=None)
@given(matrices)
def test_ranks_sum_and_reverse(rows: list[list[int]]) -> None:
    x = np.asarray(rows, dtype=np.float64)
    k = x.shape[1]
    up, down = block_ranks(x, maximize=True), block_ranks(x, maximize=False)
    np.testing.assert_allclose(up.sum(axis=1), k * (k + 1) / 2)
    np.testing.assert_allclose(up + down, k + 1)  # reversing the direction reverses ranks
    best = x.argmax(axis=1)
    assert (up[np.arange(len(x)), best] == up.min(axis=1)).all()  # 1 is the best
    assert friedman_test(up).statistic == pytest.approx(friedman_test(down).statistic)


def _brute_cliques(significant: npt.NDArray[np.bool_]) -> set[tuple[int, ...]]:
    """Every maximal set of positions no pair of which is significant (a brute force)."""
    k = len(significant)
    sets = [
        s
        for r in range(1, k + 1)
        for s in itertools.combinations(range(k), r)
        if not any(significant[a, b] for a, b in itertools.combinations(s, 2))
    ]
    return {s for s in sets if not any(set(s) < set(t) for t in sets)}


@settings(max_examples=60, deadline=None)
@given(matrices, st.sampled_from(["nemenyi", "wilcoxon"]), st.sampled_from([0.05, 0.3, 0.6]))
def test_cliques_are_maximal(rows: list[list[int]], test: str, alpha: float) -> None:
    x = np.asarray(rows, dtype=np.float64)
    found = critical_difference_test(x, test=test, alpha=alpha)  # type: ignore[arg-type]
    k = x.shape[1]
    sig = np.zeros((k, k), dtype=bool)
    sig[found.i, found.j] = sig[found.j, found.i] = found.significant
    runs = list(zip(found.clique_first.tolist(), found.clique_last.tolist(), strict=True))
    covered = set()
    for a, b in runs:
        inside = sig[a : b + 1, a : b + 1]
        assert not inside.any()  # no pair of a clique differs
        if b + 1 < k:  # cannot grow to the right ...
            assert sig[a : b + 2, a : b + 2].any()
        if a > 0:  # ... nor to the left
            assert sig[a - 1 : b + 1, a - 1 : b + 1].any()
        covered |= set(range(a, b + 1))
    assert covered == set(range(k))  # every policy is in a clique (maybe of one)
    if test == "nemenyi":  # an interval relation: the runs are all the maximal cliques
        assert set(map(tuple, (range(a, b + 1) for a, b in runs))) == _brute_cliques(sig)


def test_rank_cliques_by_hand() -> None:
    # 0, 1, 2 alike, 3 and 4 alike, each of the first three differs from each of the last two
    i, j = np.triu_indices(5, 1)
    significant = (i <= 2) & (j >= 3)
    first, last = rank_cliques(5, i, j, significant)
    assert list(zip(first.tolist(), last.tolist(), strict=True)) == [(0, 2), (3, 4)]
    # 0 and 2 alike but 1 differs from both: no bar may span 1 (runs are contiguous)
    first, last = rank_cliques(3, [0, 0, 1], [1, 2, 2], [True, False, True])
    assert list(zip(first.tolist(), last.tolist(), strict=True)) == [(0, 0), (1, 1), (2, 2)]
