"""trend_scores: the rates are aggregate's, the tests compare's, Holm is statsmodels', and the
regression point is the first version worse than the best earlier one; on a literal frame
whose every figure is computed by hand."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from statsmodels.stats.multitest import multipletests

from hylo_analytics.compare import compare_scores, trend_scores
from hylo_analytics.compare.trends import Trend
from hylo_analytics.errors import InputError, SelectionError

Z = 1.959963984540054  # the 97.5 % normal quantile
# natural order 1.0 < 1.1 < 1.2 < 1.10 (text order would put 1.10 before 1.2)
VERSIONS = ("1.0", "1.1", "1.2", "1.10")
# per task and version (in natural order): the keys k0..k9 that succeeded
PASSING = {
    "a": (range(5), range(6), range(6), range(7)),  # improves: no regression
    "b": (range(9), range(9), range(9), range(1)),  # 90 %, 90 %, 90 %, then 10 %
    "c": (range(4), range(3), range(4), range(3)),  # 40 / 30 / 40 / 30 %: noise
}


def _frame(errored_key: bool = False) -> pl.DataFrame:
    """One run per version, 10 keys per task; with ``errored_key`` the run of 1.10 timed out
    on b's k8 (a harness error: no value)."""
    rows = []
    for task, passing in PASSING.items():
        for version, ok in zip(VERSIONS, passing, strict=True):
            for k in range(10):
                value: float | None = float(k in ok)
                errored = errored_key and task == "b" and version == "1.10" and k == 8
                rows.append(
                    {"run_id": f"r-{version}", "agent_version": version, "task_id": task,
                     "key": f"{task}#{k}", "metric": "success",
                     "value": None if errored else value, "errored": errored,
                     "skip_reason": "harness error: timeout" if errored else None}
                )  # fmt: skip
    return pl.DataFrame(rows)


def _wilson(k: int, n: int) -> tuple[float, float]:
    p, z2 = k / n, Z * Z
    mid, half = p + z2 / (2 * n), Z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    lo, hi = (mid - half) / (1 + z2 / n), (mid + half) / (1 + z2 / n)
    return (0.0 if k == 0 else lo), (1.0 if k == n else hi)


@pytest.fixture(scope="module")
def trend() -> Trend:
    return trend_scores(_frame())


def test_versions_in_natural_order_and_rates_by_hand(trend: Trend) -> None:
    assert trend.versions == VERSIONS and trend.order == "agent_version"
    assert trend.order_rule == "natural version order"
    assert trend.rates.height == 12
    for row in trend.rates.iter_rows(named=True):
        k = len(PASSING[row["task_id"]][row["position"]])
        assert row["version"] == VERSIONS[row["position"]]
        assert (row["n"], row["n_runs"], row["ci_method"]) == (10, 1, "wilson")
        assert row["rate"] == pytest.approx(k / 10)
        lo, hi = _wilson(k, 10)
        assert row["ci_low"] == pytest.approx(lo, abs=1e-12)
        assert row["ci_high"] == pytest.approx(hi, abs=1e-12)


def test_the_best_earlier_version_is_the_running_best_the_earliest_on_ties(trend: Trend) -> None:
    best = {
        (r["task_id"], r["version"]): r["best_version"] for r in trend.tests.iter_rows(named=True)
    }
    # a: 50 % then 60 % (1.1), tied by 1.2: the earliest of the tie
    assert [best["a", v] for v in VERSIONS[1:]] == ["1.0", "1.1", "1.1"]
    assert [best["b", v] for v in VERSIONS[1:]] == ["1.0", "1.0", "1.0"]  # three at 90 %
    assert [best["c", v] for v in VERSIONS[1:]] == ["1.0", "1.0", "1.0"]  # 40 % first
    assert trend.tests.height == 9  # every version after the first, per task


def test_the_regression_point_is_planted_where_it_is(trend: Trend) -> None:
    reg = {r["task_id"]: r for r in trend.regressions.iter_rows(named=True)}
    assert [t for t, r in reg.items() if r["regressed"]] == ["b"]
    b = reg["b"]
    assert (b["version"], b["best_version"], b["position"], b["best_position"]) == (
        "1.10", "1.0", 3, 0,
    )  # fmt: skip
    # 8 keys lost, none won: Tango's statistic at 0 is (b - c) / sqrt(b + c) = -8 / sqrt(8)
    assert (b["n_pairs"], b["wins"], b["losses"]) == (10, 0, 8)
    p = 0.5 * math.erfc(math.sqrt(8) / math.sqrt(2))
    assert b["p_worse"] == pytest.approx(p, rel=1e-9)
    assert b["diff"] == pytest.approx(-0.8) and b["family_size"] == 3
    assert b["ci_adj_level"] == pytest.approx(1 - 0.1 / 3)  # Bonferroni over the 3 tasks
    assert b["ci_adj_high"] < 0 < b["p_adjusted"] < 0.05
    assert "1.10 is worse than 1.0" in b["note"]
    assert reg["a"]["version"] is None and "no version significantly worse" in reg["a"]["note"]
    assert reg["c"]["regressed"] is False


def test_holm_over_each_versions_tasks_is_statsmodels(trend: Trend) -> None:
    for (version,), rows in trend.tests.group_by("version"):
        want = multipletests(rows["p_worse"].to_numpy(), method="holm")[1]
        np.testing.assert_allclose(rows["p_adjusted"].to_numpy(), want, rtol=1e-12)
        assert set(rows["family_size"].to_list()) == {3}, version


def test_the_scan_adjusts_over_every_test_at_once() -> None:
    scan = trend_scores(_frame(), family="scan")
    want = multipletests(scan.tests["p_worse"].to_numpy(), method="holm")[1]
    np.testing.assert_allclose(scan.tests["p_adjusted"].to_numpy(), want, rtol=1e-12)
    assert set(scan.tests["family_size"].to_list()) == {9}
    assert scan.regressions.filter("regressed")["task_id"].to_list() == ["b"]  # 8:0 holds
    assert scan.family == "scan" and "all 9 tests" in scan.describe()


@pytest.mark.parametrize("errors", [None, "failure"])
def test_each_test_is_compares_for_its_couple(errors: str | None) -> None:
    frame = _frame(errored_key=True)
    trend = trend_scores(frame, errors=errors)  # type: ignore[arg-type]
    for version, parent in (("1.10", "1.0"), ("1.1", "1.0")):
        one = compare_scores(
            frame, candidates=f"r-{version}", parent=f"r-{parent}", by=["task_id"],
            errors=errors,  # type: ignore[arg-type]
        ).filter(pl.col("task_id") == "b").row(0, named=True)  # fmt: skip
        got = trend.tests.filter(task_id="b", version=version).row(0, named=True)
        assert got["best_version"] == parent
        for ours, theirs in (("n_pairs", "n_pairs"), ("wins", "candidate_wins"),
                             ("losses", "parent_wins"), ("n_dropped", "n_dropped"),
                             ("test", "test"), ("errors", "errors")):  # fmt: skip
            assert got[ours] == one[theirs], ours
        for ours, theirs in (("p_worse", "p_worse"), ("diff", "mean_diff"),
                             ("ci_low", "ci_low"), ("ci_high", "ci_high"),
                             ("rate", "mean_candidate"), ("best_rate", "mean_parent")):  # fmt: skip
            assert got[ours] == pytest.approx(one[theirs], rel=1e-12), ours
    b = trend.tests.filter(task_id="b", version="1.10").row(0, named=True)
    # the timeout: a failure under errors="failure", a dropped pair otherwise
    assert (b["n_pairs"], b["losses"], b["n_dropped"]) == (
        (10, 8, 0) if errors == "failure" else (9, 7, 1)
    )


def test_flips_at_the_regression_point_label_the_harness_error() -> None:
    trend = trend_scores(_frame(errored_key=True), errors="failure")
    flips = trend.flips
    assert flips["key"].sort().to_list() == [f"b#{k}" for k in range(1, 9)]
    assert set(flips["change"]) == {"regression"} and set(flips["version"]) == {"1.10"}
    assert (flips["value"] == 0).all() and (flips["best_value"] == 1).all()
    timed_out = flips.filter(pl.col("key") == "b#8").row(0, named=True)
    assert timed_out["errored"] and not timed_out["best_errored"]
    assert "a harness error at 1.10 (counted as a failure)" in timed_out["note"]
    assert flips.filter(pl.col("key") != "b#8")["errored"].not_().all()
    reg = trend.regressions.filter("regressed").row(0, named=True)
    assert reg["n_errors"] == 1 and "were harness errors, counted as failures" in reg["note"]
    excluded = trend_scores(_frame(errored_key=True))  # the key is dropped: no flip
    assert "b#8" not in excluded.flips["key"].to_list()
    assert "left out (errors=exclude)" in excluded.regressions.filter("regressed")["note"][0]


def test_runs_sharing_a_version_are_pooled_by_their_mean_per_key() -> None:
    frame = _frame()
    seed = frame.filter(pl.col("agent_version") == "1.0").with_columns(
        run_id=pl.lit("r-1.0-seed2"),
        value=pl.when(pl.col("key") == "a#0").then(0.0).otherwise("value"),
    )
    both = pl.concat([frame, seed])
    trend = trend_scores(both)
    a0 = trend.rates.filter(task_id="a", version="1.0").row(0, named=True)
    assert (a0["n"], a0["n_runs"]) == (10, 2)  # keys, not episodes
    assert a0["rate"] == pytest.approx((0.5 + 4) / 10)  # a#0 is 1 and 0: its mean 0.5
    pooled = both.with_columns(run_id=pl.col("agent_version"))  # the pooling rule, stated
    one = compare_scores(pooled, candidates="1.1", parent="1.0", by=["task_id"], seed=0)
    row = one.filter(pl.col("task_id") == "a").row(0, named=True)
    got = trend.tests.filter(task_id="a", version="1.1").row(0, named=True)
    assert got["p_worse"] == pytest.approx(row["p_worse"], rel=1e-12)
    assert got["ci_low"] == pytest.approx(row["ci_low"], rel=1e-12)
    assert got["test"] == row["test"]  # a 0.5 is not 0/1: the bootstrap, as compare


def test_a_numeric_order_and_a_minimized_metric() -> None:
    steps = {"early": 10.0, "mid": 50.0, "late": 900.0}  # text order: early, late, mid
    fails = {"early": 1, "mid": 2, "late": 9}
    frame = pl.DataFrame(
        [{"run_id": v, "ckpt": v, "step": s, "task_id": "t", "key": f"k{k}",
          "metric": "failed", "value": float(k < fails[v])}
         for v, s in steps.items() for k in range(10)]
    )  # fmt: skip
    trend = trend_scores(frame, version="ckpt", order_by="step", directions={"failed": "minimize"},
                         metric="failed")  # fmt: skip
    assert trend.versions == ("early", "mid", "late") and trend.order_rule == "numeric"
    assert trend.order == "step" and trend.direction == "minimize"
    reg = trend.regressions.row(0, named=True)
    assert (reg["version"], reg["best_version"]) == ("late", "early")  # the lowest is best


def test_what_a_trend_refuses() -> None:
    frame = _frame()
    with pytest.raises(InputError, match="no direction known for 'odd'"):
        trend_scores(frame.with_columns(metric=pl.lit("odd")), metric="odd")
    with pytest.raises(SelectionError, match="a trend needs two"):
        trend_scores(frame.filter(pl.col("agent_version") == "1.0"))
    with pytest.raises(SelectionError, match="no scores of 'steps'"):
        trend_scores(frame, metric="steps")
    with pytest.raises(InputError, match="family must be one of"):
        trend_scores(frame, family="all")  # type: ignore[arg-type]
    with pytest.raises(SelectionError, match=r"1 run\(s\) have no 'agent_version'"):
        trend_scores(frame.with_columns(
            agent_version=pl.when(pl.col("run_id") == "r-1.0").then(None).otherwise("agent_version")
        ))  # fmt: skip
