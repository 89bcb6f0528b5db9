"""Repeated samples: pass@k and pass^k against hand computations, exact fractions and
Inspect's own reducers; the variance split against statsmodels' ANOVA and mixed model."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from inspect_ai import scorer
from inspect_ai.scorer._reducer import reducer
from statsmodels.formula.api import mixedlm, ols
from statsmodels.stats.anova import anova_lm

from hylo_analytics.stats import wilson, z_value
from hylo_analytics.stats.repeated import (
    epochs_to_halve,
    pass_at,
    pass_curves,
    pass_hat,
    variance_split,
    width_at,
)

# -- the estimators -------------------------------------------------------------------------


def test_hand_values() -> None:
    # n = 5, c = 2: 1 - C(3, k) / C(5, k) and C(2, k) / C(5, k)
    assert pass_at(5, 2, [1, 2, 3, 4, 5]).tolist() == pytest.approx([0.4, 0.7, 0.9, 1.0, 1.0])
    assert pass_hat(5, 2, [1, 2, 3]).tolist() == pytest.approx([0.4, 0.1, 0.0])
    assert np.isnan(pass_at(3, 1, 4)) and np.isnan(pass_hat(3, 1, 4))  # too few samples
    assert pass_hat(0, 0, 1).shape == () and np.isnan(pass_hat(0, 0, 1))
    with pytest.raises(ValueError, match="0 <= c <= n"):
        pass_at(3, 4, 1)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 400), st.data())
def test_equal_to_exact_fractions(n: int, data: st.DataObject) -> None:
    c = data.draw(st.integers(0, n))
    k = data.draw(st.integers(1, min(n, 60)))
    hat = Fraction(math.comb(c, k), math.comb(n, k))
    at = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
    assert float(pass_hat(n, c, k)) == pytest.approx(float(hat), rel=1e-12, abs=1e-300)
    assert float(pass_at(n, c, k)) == pytest.approx(float(at), rel=1e-12, abs=1e-15)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 60), st.data())
def test_invariants(n: int, data: st.DataObject) -> None:
    c = data.draw(st.integers(0, n))
    ks = np.arange(1, n + 1)
    at, hat = pass_at(n, c, ks), pass_hat(n, c, ks)
    assert at[0] == pytest.approx(c / n) and hat[0] == pytest.approx(c / n)  # k = 1: the rate
    assert np.all(np.diff(at) >= -1e-15) and np.all(np.diff(hat) <= 1e-15)  # monotone in k
    assert np.all(hat <= at + 1e-15) and np.all((at >= 0) & (at <= 1))


def _inspect(reduce: object, values: list[float]) -> float:
    scores = [scorer.Score(value=v) for v in values]
    return float(reduce(scores).value)  # type: ignore[operator]


@pytest.mark.parametrize("n", [1, 2, 5, 8, 13])
def test_equal_to_inspect_reducers(n: int) -> None:
    """Inspect's own ``pass_at`` and ``pass_k`` reducers, to 12 digits, for every c and k."""
    for c in range(n + 1):
        values = [1.0] * c + [0.0] * (n - c)
        for k in range(1, n + 1):
            assert float(pass_at(n, c, k)) == pytest.approx(
                _inspect(reducer.pass_at(k), values), abs=1e-12
            )
            assert float(pass_hat(n, c, k)) == pytest.approx(
                _inspect(reducer.pass_k(k), values), abs=1e-12
            )


# -- the curves ---------------------------------------------------------------------------


def test_curves_by_hand_and_the_items_left_out() -> None:
    # one group: items (n, c) = (3, 1), (3, 3), (2, 0)
    got = pass_curves([3, 3, 2], [1, 3, 0], [0, 0, 0], method="normal")
    assert got.k.tolist() == [1, 2, 3]
    assert got.pass_at_k.tolist() == pytest.approx([4 / 9, 5 / 9, 1.0])
    assert got.pass_hat_k.tolist() == pytest.approx([4 / 9, 1 / 3, 0.5])
    assert got.n_items.tolist() == [3, 3, 2] and got.n_items_short.tolist() == [0, 0, 1]
    assert got.n_samples.tolist() == [8, 8, 6]
    # normal: the mean -/+ z sd / sqrt(m) of the items' estimates (k = 2)
    items = np.array([2 / 3, 1.0, 0.0])
    half = z_value(0.95) * items.std(ddof=1) / np.sqrt(3)
    assert got.pass_at_k_low[1] == pytest.approx(max(5 / 9 - half, 0.0))
    assert got.pass_at_k_high[1] == pytest.approx(min(5 / 9 + half, 1.0))
    assert got.ci_method == "normal (over items)"


def test_wilson_at_the_effective_sample_size() -> None:
    rng = np.random.default_rng(3)
    n = rng.integers(2, 7, 40)
    c = rng.binomial(n, rng.uniform(size=40))
    got = pass_curves(n, c, np.zeros(40, dtype=int), ks=[1, 2])
    for j, k in enumerate((1, 2)):
        keep = n >= k
        f = pass_at(n[keep], c[keep], k)
        p, m = f.mean(), keep.sum()
        n_eff = min(p * (1 - p) / (f.var(ddof=1) / m), n[keep].sum())
        lo, hi = wilson(p * n_eff, n_eff)
        assert got.pass_at_k_low[j] == pytest.approx(float(lo))
        assert got.pass_at_k_high[j] == pytest.approx(float(hi))
    # every item at 1 (pass@k near 1): Wilson at the items, never a zero-width interval
    ones = pass_curves([5] * 20, [4] * 20, [0] * 20, ks=[5])
    assert ones.pass_at_k[0] == 1.0 and ones.pass_at_k_high[0] == 1.0
    assert ones.pass_at_k_low[0] == pytest.approx(float(wilson(20, 20)[0]))


def test_a_group_is_its_own_alone_or_among_others() -> None:
    rng = np.random.default_rng(0)
    n = rng.integers(3, 6, 300)
    c = rng.binomial(n, rng.beta(0.5, 0.5, 300))
    group = np.repeat([0, 1, 2], 100)
    for method in ("wilson", "percentile"):
        every = pass_curves(n, c, group, method=method, n_resamples=2000, seed=5)
        alone = pass_curves(n[100:200], c[100:200], np.zeros(100, int), method=method,
                            n_resamples=2000, seed=5)  # fmt: skip
        mine = every.group == 1
        assert every.k[mine].tolist() == alone.k.tolist()
        for name in ("pass_at_k", "pass_at_k_low", "pass_hat_k_high"):
            assert getattr(every, name)[mine] == pytest.approx(getattr(alone, name), rel=1e-12)
        for lo, mid, hi in (
            (every.pass_at_k_low, every.pass_at_k, every.pass_at_k_high),
            (every.pass_hat_k_low, every.pass_hat_k, every.pass_hat_k_high),
        ):
            assert np.all((lo <= mid + 1e-12) & (mid <= hi + 1e-12))


def test_the_bootstrap_is_the_bootstrap_over_items() -> None:
    """The percentile band from the (n, c) counts is the one of resampling items one by one
    (within Monte-Carlo error)."""
    rng = np.random.default_rng(1)
    n = np.full(30, 4)
    c = rng.binomial(4, rng.beta(1, 1, 30))
    got = pass_curves(n, c, np.zeros(30, int), method="percentile", n_resamples=20_000, seed=2)
    f = pass_at(n, c, 2)
    idx = np.random.default_rng(9).integers(0, 30, size=(20_000, 30))
    naive = np.quantile(f[idx].mean(axis=1), [0.025, 0.975])
    assert got.pass_at_k_low[1] == pytest.approx(naive[0], abs=0.01)
    assert got.pass_at_k_high[1] == pytest.approx(naive[1], abs=0.01)


def test_asked_k_beyond_every_item_is_a_row_with_no_estimate() -> None:
    got = pass_curves([2, 2], [1, 2], [0, 0], ks=[1, 3])
    assert got.k.tolist() == [1, 3]
    assert got.n_items.tolist() == [2, 0] and got.n_items_short.tolist() == [0, 2]
    assert np.isnan(got.pass_at_k[1]) and np.isnan(got.pass_at_k_low[1])
    with pytest.raises(ValueError, match="k must be >= 1"):
        pass_curves([2], [1], [0], ks=[0])
    with pytest.raises(ValueError, match="method"):
        pass_curves([2], [1], [0], method="hall")  # type: ignore[arg-type]


# -- the variance split -------------------------------------------------------------------


def _balanced(m: int, e: int, seed: int, spread: float = 1.0) -> pd.DataFrame:
    """Two runs, ``m`` items, ``e`` epochs each: 0/1 values with item effects."""
    rng = np.random.default_rng(seed)
    skill = rng.normal(0, spread, m)
    rows = []
    for run, shift in (("a", 0.4), ("b", 0.0)):
        p = 1 / (1 + np.exp(-(skill + shift + rng.normal(0, 0.5, m))))
        rows += [
            {"item": f"i{i}", "run": run, "y": float(rng.random() < p[i])}
            for i in range(m)
            for _ in range(e)
        ]
    return pd.DataFrame(rows)


def _moments(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.groupby(["run", "item"])["y"].agg(["mean", "var", "count"]).reset_index()


def test_one_side_is_the_one_way_anova() -> None:
    """The split of one run's mean: ``var_total = MS_between / e``, ``var_within = MS_within
    / e`` (statsmodels' ANOVA table, to 12 digits) and the between part the REML variance
    component of the item (statsmodels' MixedLM: equal on a balanced design)."""
    frame = _balanced(40, 4, 0, spread=2.0).query("run == 'a'")
    table = anova_lm(ols("y ~ C(item)", data=frame).fit())
    ms_between, ms_within = table["mean_sq"].iloc[0], table["mean_sq"].iloc[1]
    mom = _moments(frame)
    split = variance_split(np.zeros(len(mom), int), mom["mean"], mom["var"], mom["count"])
    assert split.var_total[0] == pytest.approx(ms_between / 4, rel=1e-12)
    assert split.var_within[0] == pytest.approx(ms_within / 4, rel=1e-12)
    assert split.var_between[0] == pytest.approx((ms_between - ms_within) / 4, rel=1e-12)
    fit = mixedlm("y ~ 1", frame, groups=frame["item"]).fit(reml=True)
    assert split.var_between[0] == pytest.approx(float(fit.cov_re.iloc[0, 0]), rel=1e-4)
    assert split.var_within[0] * 4 == pytest.approx(fit.scale, rel=1e-4)
    assert split.estimate[0] == pytest.approx(frame["y"].mean())


def test_paired_difference_is_the_two_way_anova() -> None:
    """Two runs on the same items: the item x run interaction carries the between part of
    the difference, ``var_total = 2 MS_int / e``, ``var_within = 2 MS_resid / e``
    (statsmodels' two-way ANOVA table, to 12 digits)."""
    frame = _balanced(30, 3, 1)
    table = anova_lm(ols("y ~ C(item) * C(run)", data=frame).fit())
    ms_int = table.loc["C(item):C(run)", "mean_sq"]
    ms_resid = table.loc["Residual", "mean_sq"]
    mom = _moments(frame)
    a, b = mom[mom["run"] == "a"], mom[mom["run"] == "b"]
    split = variance_split(np.zeros(30, int), a["mean"], a["var"], a["count"],
                           b["mean"], b["var"], b["count"])  # fmt: skip
    assert split.var_total[0] == pytest.approx(2 * ms_int / 3, rel=1e-12)
    assert split.var_within[0] == pytest.approx(2 * ms_resid / 3, rel=1e-12)
    assert split.var_between_raw[0] == pytest.approx(2 * (ms_int - ms_resid) / 3, rel=1e-12)
    d = a["mean"].to_numpy() - b["mean"].to_numpy()
    assert split.estimate[0] == pytest.approx(d.mean())
    assert split.ci_width[0] == pytest.approx(2 * z_value(0.95) * d.std(ddof=1) / np.sqrt(30))


def test_unbalanced_by_hand_and_single_epochs_pooled() -> None:
    # side a: items with (mean, var, n) = (0.5, 1/3, 4), (1, 0, 2), (0, nan, 1)
    split = variance_split([0, 0, 0], [0.5, 1.0, 0.0], [1 / 3, 0.0, np.nan], [4, 2, 1])
    pooled = (3 * (1 / 3) + 1 * 0.0) / 4  # the side's pooled within variance, df 3 + 1
    within = np.mean([(1 / 3) / 4, 0.0 / 2, pooled / 1])
    assert split.var_within[0] == pytest.approx(within)
    assert split.var_total[0] == pytest.approx(np.var([0.5, 1.0, 0.0], ddof=1))
    assert split.n_single[0] == 1 and split.epochs[0] == pytest.approx(7 / 3)


def test_epochs_to_halve() -> None:
    # within only: four times the epochs halve the width
    split = variance_split([0] * 4, [0.4, 0.6, 0.4, 0.6], [0.5] * 4, [2] * 4)
    assert split.var_between[0] == 0.0
    factor, count = epochs_to_halve(split)
    assert factor[0] == 4.0 and count[0] == 8.0
    assert float(width_at(split, 8)[0]) == pytest.approx(split.ci_width[0] / 2)
    assert float(width_at(split, 2, items=16)[0]) == pytest.approx(split.ci_width[0] / 2)
    # between and within: r = 4 W / (W - 3 B), and the width at r e0 is half
    rng = np.random.default_rng(4)
    mu = rng.uniform(0.3, 0.7, 200)
    sp = variance_split(np.zeros(200, int), mu, np.full(200, 1.0), np.full(200, 10))
    b, w = sp.var_between[0], sp.var_within[0]
    factor, count = epochs_to_halve(sp)
    assert 3 * b < w and factor[0] == pytest.approx(4 * w / (w - 3 * b))
    assert float(width_at(sp, factor[0] * 10)[0]) == pytest.approx(sp.ci_width[0] / 2)
    assert count[0] == math.ceil(factor[0] * 10 - 1e-9)
    # between past a quarter of the total: no number of epochs halves it
    wide = variance_split(np.zeros(200, int), 3 * mu, np.full(200, 0.01), np.full(200, 10))
    factor, count = epochs_to_halve(wide)
    assert np.isinf(factor[0]) and np.isinf(count[0])
    assert wide.floor_width[0] > wide.ci_width[0] / 2


def test_the_curves_running_products_are_the_estimators() -> None:
    from hylo_analytics.stats.repeated import _by_k

    n, c = np.array([1, 5, 5, 40, 300, 300]), np.array([0, 2, 5, 17, 1, 299])
    at, hat = _by_k(n, c, 320)
    ks = np.arange(1, 321)
    for j in range(len(n)):
        want_at = np.nan_to_num(pass_at(n[j], c[j], ks))
        want_hat = np.nan_to_num(pass_hat(n[j], c[j], ks))
        assert at[j] == pytest.approx(want_at, rel=1e-12, abs=1e-300)
        assert hat[j] == pytest.approx(want_hat, rel=1e-12, abs=1e-300)
