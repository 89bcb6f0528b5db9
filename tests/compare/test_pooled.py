"""The pooled comparison over suites: golden values by brute force and hand algebra, and its
invariants (one suite is the single-suite comparison; swapping sides negates it)."""

from __future__ import annotations

import itertools

import numpy as np
import polars as pl
import pytest

from hylo_analytics.compare import compare_scores, pooled_compare
from hylo_analytics.stats import (
    bootstrap_ci,
    holm,
    mcnemar_p,
    mover_ci,
    pooled_bootstrap,
    sign_flip_p,
    suite_weights,
    tango_ci,
)

# (b, c, n) per suite: b pairs only the candidate succeeded, c only the parent
TABLE = [(3, 1, 10), (2, 2, 7), (0, 3, 12)]


def _brute_force(table: list[tuple[int, int, int]], w: np.ndarray) -> tuple[float, float]:
    """P(Delta* >= Delta) and P(Delta* <= Delta) over every sign of every discordant pair."""
    steps = [w[s] / n for s, (b, c, n) in enumerate(table) for _ in range(b + c)]
    observed = sum(w[s] * (b - c) / n for s, (b, c, n) in enumerate(table))
    values = np.array(
        [np.dot(signs, steps) for signs in itertools.product((1, -1), repeat=len(steps))]
    )
    return float(np.mean(values >= observed - 1e-12)), float(np.mean(values <= observed + 1e-12))


def _frame(table: list[tuple[int, int, int]], shift: int = 0) -> pl.DataFrame:
    """Two runs per suite ``S<i>`` (``c<i>`` and ``p<i>``) whose pairs have the counts of
    ``table`` (the concordant pairs split between both-succeeded and both-failed)."""
    rows = []
    for s, (b, c, n) in enumerate(table):
        outcomes = [(1, 0)] * b + [(0, 1)] * c
        rest = n - b - c
        outcomes += [(1, 1)] * (rest // 2 + shift) + [(0, 0)] * (rest - rest // 2 - shift)
        for k, (cv, pv) in enumerate(outcomes):
            rows += [(f"c{s}", f"S{s}-{k}", "success", float(cv))]
            rows += [(f"p{s}", f"S{s}-{k}", "success", float(pv))]
    return pl.DataFrame(rows, schema=["run_id", "key", "metric", "value"], orient="row")


PAIRS = {f"S{s}": (f"c{s}", f"p{s}") for s in range(len(TABLE))}


@pytest.fixture(scope="module")
def pooled() -> pl.DataFrame:
    """TABLE's pooled comparison, computed once for the tests that read it."""
    return pooled_compare(_frame(TABLE), pairs=PAIRS, candidate="X", parent="Y")


@pytest.mark.parametrize("weights", ["suite", "episodes"])
def test_the_exact_sign_flip_p_is_the_brute_force_over_every_sign(weights: str) -> None:
    n = np.array([t[2] for t in TABLE])
    w = suite_weights(n, weights)  # type: ignore[arg-type]
    want = _brute_force(TABLE, w)
    got = sign_flip_p([t[0] for t in TABLE], [t[1] for t in TABLE], n, w)
    assert got.method == "exact"
    assert (got.p_greater, got.p_less) == pytest.approx(want, rel=1e-12)
    assert got.p_two_sided == pytest.approx(min(1.0, 2 * min(want)), rel=1e-12)


def test_monte_carlo_when_the_steps_span_no_small_lattice() -> None:
    n = np.array([t[2] for t in TABLE])
    w = np.array([1.0, np.sqrt(2.0), np.pi])
    w /= w.sum()
    want = _brute_force(TABLE, w)
    b, c = [t[0] for t in TABLE], [t[1] for t in TABLE]
    got = sign_flip_p(b, c, n, w, n_draws=40_000, seed=3)
    assert got.method == "monte carlo (40000 draws, seed 3)"
    assert (got.p_greater, got.p_less) == pytest.approx(want, abs=0.01)
    assert sign_flip_p(b, c, n, w, n_draws=40_000, seed=3) == got  # seeded


def test_weighting_by_episodes_is_the_pooled_mcnemar_test() -> None:
    b, c, n = (np.array(x) for x in zip(*TABLE, strict=True))
    flip = sign_flip_p(b, c, n, suite_weights(n, "episodes"))
    assert flip.p_greater == pytest.approx(mcnemar_p([b.sum()], [c.sum()])[0], rel=1e-12)


@pytest.mark.slow
def test_weights_sum_to_one() -> None:
    for how in ("suite", "episodes"):
        assert suite_weights([10, 7, 12], how).sum() == pytest.approx(1.0)  # type: ignore[arg-type]
    assert suite_weights([10, 7, 12], "suite").tolist() == pytest.approx([1 / 3] * 3)
    assert suite_weights([10, 0, 30], "episodes").tolist() == pytest.approx([0.25, 0, 0.75])
    out = pooled_compare(_frame(TABLE), pairs=PAIRS, weights="episodes")
    assert out.filter(pl.col("level") == "suite")["weight"].sum() == pytest.approx(1.0)


def test_the_pooled_row_by_hand(pooled: pl.DataFrame) -> None:
    """Delta, MOVER over the suites' Tango intervals, the brute-force p, Holm over S + 1."""
    out = pooled
    assert out["level"].to_list() == ["suite"] * 3 + ["pooled"]
    row = out.row(3, named=True)
    b, c, n = (np.array(x, dtype=float) for x in zip(*TABLE, strict=True))
    d = (b - c) / n
    assert row["mean_diff"] == pytest.approx(d.mean(), rel=1e-12)
    lo, hi = tango_ci(b, c, n, 0.95)
    low = d.mean() - np.sqrt(np.sum((d - lo) ** 2 / 9))
    high = d.mean() + np.sqrt(np.sum((hi - d) ** 2 / 9))
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((low, high), rel=1e-12)
    assert mover_ci(d, lo, hi, np.full(3, 1 / 3)) == pytest.approx((low, high), rel=1e-12)
    # the verdict's interval: MOVER at 1 - 2 alpha / (S + 1)
    lo_a, hi_a = tango_ci(b, c, n, 1 - 0.1 / 4)
    assert (row["ci_adj_low"], row["ci_adj_high"]) == pytest.approx(
        (
            d.mean() - np.sqrt(np.sum((d - lo_a) ** 2 / 9)),
            d.mean() + np.sqrt(np.sum((hi_a - d) ** 2 / 9)),
        ),
        rel=1e-12,
    )
    assert row["ci_adj_level"] == pytest.approx(0.975)
    want = _brute_force(TABLE, np.full(3, 1 / 3))
    assert (row["p_value"], row["p_worse"]) == pytest.approx(want, rel=1e-12)
    assert row["p_pooled_mcnemar"] == pytest.approx(mcnemar_p([5], [6])[0])
    assert out["p_holm"].to_list() == pytest.approx(holm(out["p_value"].to_numpy()).tolist())
    assert set(out["family_size"]) == {4}
    assert (row["candidate"], row["parent"], row["n_pairs"]) == ("X", "Y", 29)
    assert row["weighting"] == "suite: 1/S each"
    assert row["test_method"].startswith("stratified sign-flip") and "exact" in row["test_method"]
    assert row["test"] == "stratified sign-flip"
    assert row["ci_method"] == "mover (tango per suite)"
    assert row["verdict"] == "inconclusive"


def test_the_suite_rows_are_compare_scores_rows(pooled: pl.DataFrame) -> None:
    frame, out = _frame(TABLE), pooled
    for s, (cand, par) in PAIRS.items():
        mine = out.filter(pl.col("suite") == s).row(0, named=True)
        theirs = compare_scores(frame, candidates=cand, parent=par).row(0, named=True)
        for col in ("n_pairs", "candidate_wins", "parent_wins", "mean_diff", "ci_low", "p_value"):
            assert mine[col] == theirs[col]


def test_one_suite_is_the_single_suite_comparison() -> None:
    frame = _frame([(7, 1, 20)])
    out = pooled_compare(frame, pairs={"S0": ("c0", "p0")})
    suite, pooled = out.row(0, named=True), out.row(1, named=True)
    for col in ("mean_diff", "ci_low", "ci_high", "eq_low", "eq_high", "ci_adj_low"):
        assert pooled[col] == pytest.approx(suite[col], rel=1e-12)
    assert pooled["p_value"] == pytest.approx(mcnemar_p([7], [1])[0], rel=1e-12)
    lo, hi = tango_ci([7], [1], [20], 0.95)
    assert (pooled["ci_low"], pooled["ci_high"]) == pytest.approx((lo[0], hi[0]), rel=1e-12)


def test_swapping_the_sides_negates_delta_and_swaps_the_ps(pooled: pl.DataFrame) -> None:
    frame = _frame(TABLE)
    out = pooled.row(3, named=True)
    back = pooled_compare(frame, pairs={s: (p, c) for s, (c, p) in PAIRS.items()}).row(
        3, named=True
    )
    assert back["mean_diff"] == pytest.approx(-out["mean_diff"], rel=1e-12)
    assert (back["p_value"], back["p_worse"]) == pytest.approx(
        (out["p_worse"], out["p_value"]), rel=1e-12
    )
    assert (back["ci_low"], back["ci_high"]) == pytest.approx(
        (-out["ci_high"], -out["ci_low"]), rel=1e-9
    )


@pytest.mark.slow
def test_the_errors_policy_reaches_every_suite() -> None:
    frame = _frame(TABLE).with_columns(errored=pl.lit(False))
    # the candidate's first key of suite 0 errored (no value)
    hit = (pl.col("run_id") == "c0") & (pl.col("key") == "S0-0")
    frame = frame.with_columns(
        value=pl.when(hit).then(None).otherwise("value"),
        errored=pl.when(hit).then(True).otherwise("errored"),
    )
    failure = pooled_compare(frame, pairs=PAIRS, errors="failure")
    exclude = pooled_compare(frame, pairs=PAIRS, errors="exclude")
    first = failure.row(0, named=True), exclude.row(0, named=True)
    assert [(r["errors"], r["n_pairs"], r["candidate_wins"]) for r in first] == [
        ("failure", 10, 2),
        ("exclude", 9, 2),
    ]
    assert failure.row(3, named=True)["n_pairs"] == 29
    assert exclude.row(3, named=True)["n_pairs"] == 28


@pytest.mark.slow
def test_numeric_metrics_take_the_stratified_paired_bootstrap() -> None:
    rng = np.random.default_rng(5)
    rows = []
    for s, n in enumerate((12, 20, 8)):
        for k in range(n):
            rows += [(f"c{s}", f"S{s}-{k}", "steps", float(rng.poisson(30)))]
            rows += [(f"p{s}", f"S{s}-{k}", "steps", float(rng.poisson(33 + s)))]
    frame = pl.DataFrame(rows, schema=["run_id", "key", "metric", "value"], orient="row")
    out = pooled_compare(frame, pairs=PAIRS, n_resamples=2000, seed=1)
    suites, pooled = out.filter(pl.col("level") == "suite"), out.row(3, named=True)
    assert pooled["mean_diff"] == pytest.approx(suites["mean_diff"].mean(), rel=1e-12)
    assert pooled["ci_low"] < pooled["mean_diff"] < pooled["ci_high"]
    assert pooled["ci_method"] == "stratified bootstrap (percentile)"
    assert pooled["direction"] == "minimize" and pooled["mean_diff"] < 0
    # weighting by episodes is the plain stratified bootstrap of the differences
    diffs = (
        frame.filter(pl.col("run_id").str.starts_with("c"))
        .join(frame.filter(pl.col("run_id").str.starts_with("p")), on="key")
        .with_columns(suite=pl.col("key").str.split("-").list.first())
        .sort("suite", "key")
    )
    d = (diffs["value"] - diffs["value_right"]).to_numpy()
    sizes = [12, 20, 8]
    fit = pooled_bootstrap(d, sizes, suite_weights(sizes, "episodes"), levels=(0.95,), seed=1,
                           n_resamples=2000)  # fmt: skip
    lo, hi = bootstrap_ci(d, [40], strata_sizes=sizes, n_resamples=2000, seed=1)
    assert fit.bounds[0] == pytest.approx((lo[0], hi[0]), rel=1e-12)
    # the p comes from the same draws, so it agrees with the percentile interval
    at_90 = pooled_bootstrap(d, sizes, suite_weights(sizes, "episodes"), levels=(0.9,),
                             seed=1, n_resamples=2000).bounds[0]  # fmt: skip
    assert (fit.p_less < 0.05) == (at_90[1] < 0)
    assert fit.p_less + fit.p_greater >= 1  # a draw at exactly 0 counts on both sides


def test_the_pooled_test_holds_its_level_given_the_discordant_pairs() -> None:
    """Exact: given each suite's discordant pairs, the chance the test rejects under the
    null (every sign a fair coin), summed over every outcome, is at most alpha."""
    from scipy import stats

    n = np.array([20, 50, 30])
    w = suite_weights(n)
    for m in [(2, 3, 6), (1, 2, 4), (3, 3, 3), (0, 2, 5)]:
        mm = np.array(m)
        size = 0.0
        for b in itertools.product(*(range(k + 1) for k in m)):
            bb = np.array(b)
            if sign_flip_p(bb, mm - bb, n, w).p_greater < 0.05:
                size += float(np.prod(stats.binom.pmf(bb, mm, 0.5)))
        assert size <= 0.05


def test_the_pooled_interval_covers_in_a_small_simulation() -> None:
    """Suites moving in opposite directions (+0.1, -0.1, 0) with few discordant pairs: MOVER's coverage of the true Delta; a fast version of
    benchmarks/bench_pooled_coverage.py."""
    rng = np.random.default_rng(0)
    reps, n = 400, np.array([20, 50, 30])
    delta = np.array([0.1, -0.1, 0.0])
    # each suite's chance of a pair only the candidate (b) or only the parent (c) won
    p_b = np.clip(delta, 0, None) + 0.02
    p_c = np.clip(-delta, 0, None) + 0.02
    truth = float(np.mean(p_b - p_c))
    probs = np.stack([p_b, p_c, 1 - p_b - p_c], axis=1)
    counts = np.stack([rng.multinomial(n[s], probs[s], size=reps) for s in range(3)], axis=1)
    b, c = counts[..., 0], counts[..., 1]
    lo, hi = tango_ci(b, c, n, 0.95)
    d = (b - c) / n
    w = suite_weights(n)
    centre = d @ w
    low = centre - np.sqrt(((d - lo) ** 2) @ (w**2))
    high = centre + np.sqrt(((hi - d) ** 2) @ (w**2))
    assert np.mean((low <= truth) & (truth <= high)) >= 0.93
