"""aggregate_scores(): counts and skip breakdown, statistics, intervals, reducers, store input."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hylo_analytics as ha
from hylo_analytics import stats as iv
from hylo_analytics.aggregate import STATISTICS, aggregate_scores

SCORES = pl.DataFrame(
    {
        "run_id": ["r1"] * 6 + ["r2"] * 4,
        "task_id": ["t1", "t1", "t1", "t2", "t2", "t2", "t1", "t1", "t2", "t2"],
        "key": ["t1#1", "t1#2", "t1#3", "t2#1", "t2#2", "t2#3", "t1#1", "t1#2", "t2#1", "t2#2"],
        "metric": ["success"] * 10,
        "value": [1.0, 0.0, None, 1.0, 1.0, None, 1.0, 1.0, 0.0, None],
        "skip_reason": [None, None, "error", None, None, "timeout", None, None, None, "error"],
        # the episode errored (its sample status): such an abstention is a failure
        "errored": [False, False, True, False, False, False, False, False, False, True],
    }
)


def _row(df: pl.DataFrame, **where: str) -> dict:
    for k, v in where.items():
        df = df.filter(pl.col(k) == v)
    assert df.height == 1, df
    return df.row(0, named=True)


def test_counts_skip_breakdown_and_the_errors_policy():
    out = aggregate_scores(SCORES, by=["run_id"])
    r1 = _row(out, run_id="r1")
    assert r1["errors"] == "exclude"  # a frame naming no harness: hylo's convention
    assert (r1["n_total"], r1["n_valid"], r1["n_skipped"]) == (6, 4, 2)
    assert r1["skip_breakdown"] == [
        {"reason": "error", "count": 1},
        {"reason": "timeout", "count": 1},
    ]
    assert r1["coverage"] == pytest.approx(4 / 6)
    assert r1["mean"] == pytest.approx(3 / 4)  # abstentions excluded
    assert r1["n_errors"] == 1
    assert r1["ci_method"] == "wilson" and r1["ci_level"] == 0.95
    lo, hi = iv.wilson([3], [4])
    assert (r1["ci_low"], r1["ci_high"]) == pytest.approx((lo[0], hi[0]))
    assert r1["reducer"] == "mean"
    # errors as failures: the errored key is a valid 0, the timeout (not an error) stays
    # out; the interval is on the same denominator as the mean
    f1 = _row(aggregate_scores(SCORES, by=["run_id"], errors="failure"), run_id="r1")
    assert f1["errors"] == "failure" and f1["n_errors"] == 1
    assert (f1["n_total"], f1["n_valid"], f1["n_skipped"]) == (6, 5, 1)
    assert f1["skip_breakdown"] == [{"reason": "timeout", "count": 1}]
    assert f1["mean"] == pytest.approx(3 / 5)
    lo, hi = iv.wilson([3], [5])
    assert (f1["ci_low"], f1["ci_high"]) == pytest.approx((lo[0], hi[0]))
    assert f1["std"] == pytest.approx(np.std([1, 0, 0, 1, 1], ddof=1))


def test_the_default_policy_is_the_harness_convention():
    by_format = SCORES.with_columns(
        source_format=pl.when(pl.col("run_id") == "r1")
        .then(pl.lit("vla-eval"))
        .otherwise(pl.lit("inspect.eval"))
    )
    out = aggregate_scores(by_format, by=["run_id"])
    assert _row(out, run_id="r1")["errors"] == "failure"
    assert _row(out, run_id="r1")["mean"] == pytest.approx(3 / 5)
    assert _row(out, run_id="r2")["errors"] == "exclude"
    assert _row(out, run_id="r2")["mean"] == pytest.approx(2 / 3)
    pooled = aggregate_scores(by_format, by=[]).row(0, named=True)
    assert pooled["errors"] == "mixed" and pooled["n_valid"] == 5 + 3
    with pytest.raises(ValueError, match="did you mean 'failure'"):
        aggregate_scores(SCORES, errors="failures")  # type: ignore[arg-type]


def test_a_count_metric_has_no_value_for_an_error_under_either_policy():
    steps = SCORES.with_columns(metric=pl.lit("steps"), value=pl.col("value") * 10)
    for errors in ("failure", "exclude"):
        r1 = _row(aggregate_scores(steps, by=["run_id"], errors=errors), run_id="r1")
        assert (r1["n_valid"], r1["n_errors"], r1["n_skipped"]) == (4, 1, 2)
        assert r1["mean"] == pytest.approx(30 / 4)


def test_errors_as_failures_needs_to_know_the_errors():
    out = aggregate_scores(SCORES.drop("errored"), by=["run_id"], errors="failure")
    assert out["n_errors"].to_list() == [None, None]
    assert out["mean"].to_list() == pytest.approx([3 / 4, 2 / 3])


def test_columns_are_the_documented_ones():
    out = aggregate_scores(SCORES, by=["run_id", "task_id"])
    assert out.columns == [
        "run_id", "task_id", "metric", "reducer", "n_total", "n_valid", "n_skipped", "n_errors",
        "errors", "skip_breakdown", "coverage", "mean", "std",
        "stderr", "median", "p95", "min", "max", "iqm", "optimality_gap", "normalized_mean",
        "ci_low", "ci_high", "ci_level", "ci_method", "higher_is_better",
    ]  # fmt: skip
    assert out.schema["skip_breakdown"] == pl.List(
        pl.Struct({"reason": pl.String, "count": pl.Int64})
    )
    few = aggregate_scores(SCORES, statistics=["mean", "iqm"])
    assert "std" not in few.columns and "iqm" in few.columns
    assert aggregate_scores(SCORES, statistics=["median"]).columns[10:12] == ["mean", "median"]
    with pytest.raises(ValueError, match="unknown statistics \\['mode'\\]"):
        aggregate_scores(SCORES, statistics=["mode"])


def test_statistics_against_numpy_and_scipy():
    x = [3.0, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5]
    df = pl.DataFrame({"run_id": "r", "metric": "return", "value": x})
    r = aggregate_scores(df, ci="none").row(0, named=True)
    a = np.array(x)
    assert r["mean"] == pytest.approx(a.mean())
    assert r["std"] == pytest.approx(a.std(ddof=1))
    assert r["stderr"] == pytest.approx(a.std(ddof=1) / np.sqrt(len(a)))
    assert r["median"] == 4.0
    assert r["p95"] == pytest.approx(np.quantile(a, 0.95))
    assert (r["min"], r["max"]) == (1.0, 9.0)
    assert r["iqm"] == pytest.approx(3.857142857142857)  # scipy.stats.trim_mean(x, 0.25)
    # rliable: mean(max(1 - x, 0)) for a higher-is-better metric
    assert r["optimality_gap"] == pytest.approx(0.0)
    assert r["ci_low"] is None and r["ci_method"] == "none"
    assert (
        aggregate_scores(df.with_columns(metric=pl.lit("steps")), ci="none")["optimality_gap"][0]
        is None
    )


def test_group_without_valid_values_stays_visible():
    df = pl.DataFrame(
        {"run_id": ["a", "a"], "metric": ["steps", "steps"], "value": [None, None]},
        schema_overrides={"value": pl.Float64},
    )
    r = aggregate_scores(df).row(0, named=True)
    assert (r["n_total"], r["n_valid"], r["coverage"]) == (2, 0, 0.0)
    assert r["mean"] is None and r["ci_low"] is None
    assert r["skip_breakdown"] == [{"reason": "abstained", "count": 2}]


def test_valid_flag_and_nan_are_skips_with_reasons():
    df = pl.DataFrame(
        {
            "run_id": "a",
            "metric": "return",
            "value": [1.0, float("nan"), 3.0, 5.0],
            "valid": [True, True, False, None],
        }
    )
    r = aggregate_scores(df).row(0, named=True)
    assert r["n_valid"] == 2 and r["mean"] == 3.0
    assert r["skip_breakdown"] == [{"reason": "invalid", "count": 1}, {"reason": "nan", "count": 1}]


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["r1", "r2", "r3"]),
            st.sampled_from(["success", "steps"]),
            st.one_of(st.none(), st.sampled_from([0.0, 1.0])),
            st.sampled_from([None, "error", "timeout"]),
        ),
        min_size=1,
        max_size=60,
    )
)
@pytest.mark.slow
def test_reconciliation_invariant(rows):
    df = pl.DataFrame(
        rows, schema=["run_id", "metric", "value", "skip_reason"], orient="row"
    ).with_columns(pl.col("value").cast(pl.Float64))
    out = aggregate_scores(df, reducer=None, ci="none")
    skipped = out["skip_breakdown"].list.eval(pl.element().struct.field("count")).list.sum()
    assert (out["n_total"] == out["n_valid"] + skipped).all()
    assert (out["n_skipped"] == skipped).all()
    assert out["n_total"].sum() == df.height
    assert out["n_valid"].sum() == df["value"].is_not_null().sum()


def test_reducer_collapses_epochs_and_is_recorded():
    df = pl.DataFrame(
        {
            "run_id": "r",
            "key": ["a", "a", "a", "b", "b", "b", "c"],
            "metric": "success",
            "value": [1.0, 0.0, 0.0, 1.0, 1.0, None, None],
        }
    )
    mean = aggregate_scores(df).row(0, named=True)
    assert mean["reducer"] == "mean" and mean["n_total"] == 3 and mean["n_valid"] == 2
    assert mean["mean"] == pytest.approx((1 / 3 + 1) / 2)
    assert mean["skip_breakdown"] == [{"reason": "abstained", "count": 1}]
    p2 = aggregate_scores(df, reducer="pass@2", ci="none").row(0, named=True)
    assert p2["reducer"] == "pass_at_k(2)"
    assert p2["mean"] == pytest.approx((2 / 3 + 1) / 2)  # a: 1 - C(2,2)/C(3,2); b: 1
    raw = aggregate_scores(df, reducer=None).row(0, named=True)
    assert raw["reducer"] == "none" and raw["n_total"] == 7


def test_metrics_filter_resolves_aliases_and_rejects_unknown_names():
    df = SCORES.with_columns(metric=pl.lit("success_rate"))
    out = aggregate_scores(df, metrics=["success"])
    assert out["metric"].unique().to_list() == ["success"]
    with pytest.raises(ValueError, match=r"no scores of metric\(s\) \['sucess'\]; .* success"):
        aggregate_scores(SCORES, metrics=["sucess"])
    with pytest.raises(ValueError, match=r"did you mean 'success' for 'sucess'\?"):
        aggregate_scores(SCORES, metrics=["sucess"])


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="no column\\(s\\) \\['agent'\\]"):
        aggregate_scores(SCORES, by=["agent"])
    with pytest.raises(ValueError, match="ci='wilson' needs 0/1 values but metric 'steps'"):
        aggregate_scores(SCORES.with_columns(metric=pl.lit("steps")), ci="wilson")
    with pytest.raises(ValueError, match="unknown ci method 'exact'"):
        aggregate_scores(SCORES, ci="exact")  # type: ignore[arg-type]


def test_bootstrap_is_seeded_and_per_metric_methods_mix():
    rng = np.random.default_rng(0)
    df = pl.concat(
        [
            pl.DataFrame({"run_id": "r", "metric": "steps", "value": rng.poisson(20, 50) * 1.0}),
            pl.DataFrame(
                {"run_id": "r", "metric": "success", "value": rng.integers(0, 2, 50) * 1.0}
            ),
        ]
    )
    kw = {"ci": {"steps": "bca", "success": "clopper_pearson"}, "n_resamples": 2000}
    a = aggregate_scores(df, seed=1, **kw)
    b = aggregate_scores(df, seed=1, **kw)
    c = aggregate_scores(df, seed=2, **kw)
    assert a.equals(b)
    steps = _row(a, metric="steps")
    assert steps["ci_method"] == "bca" and steps["ci_low"] < steps["mean"] < steps["ci_high"]
    assert _row(c, metric="steps")["ci_low"] != steps["ci_low"]
    assert _row(a, metric="success")["ci_method"] == "clopper_pearson"


def test_stratified_bootstrap_and_clustered_stderr_by_task():
    df = pl.DataFrame(
        {
            "run_id": "r",
            "task_id": ["a"] * 10 + ["b"] * 10,
            "metric": "success",
            "value": [0.0] * 10 + [1.0] * 10,
        }
    )
    strat = aggregate_scores(df, ci="percentile", stratify="task_id", cluster="task_id").row(
        0, named=True
    )
    assert strat["ci_low"] == strat["ci_high"] == 0.5
    assert strat["n_clusters"] == 2
    # residual sums per task: -5 and +5 -> sqrt(50) / 20; corrected x sqrt(2 / 1)
    assert strat["stderr_clustered"] == pytest.approx(np.sqrt(50) / 20)
    assert strat["stderr_clustered_corrected"] == pytest.approx(np.sqrt(100) / 20)
    plain = aggregate_scores(df, ci="percentile").row(0, named=True)
    assert plain["ci_high"] - plain["ci_low"] > 0.3


def test_normalized_mean_and_gap_use_the_normalizer():
    from hylo_analytics.metrics import MetricSpec, default_registry

    reg = default_registry().with_spec(
        MetricSpec(id="score", normalizer="minmax:0:10", higher_is_better=True)
    )
    df = pl.DataFrame({"run_id": "r", "metric": "score", "value": [2.0, 10.0]})
    r = aggregate_scores(df, registry=reg, ci="none").row(0, named=True)
    assert r["normalized_mean"] == pytest.approx(0.6)
    assert r["optimality_gap"] == pytest.approx((0.8 + 0.0) / 2)


def test_store_input_and_source_filter(sample_store):
    out = aggregate_scores(sample_store, by=["run_id"], metrics=["success"], n_resamples=500)
    assert out.height == 3
    assert (out["n_total"] == 200).all()
    assert out["skip_breakdown"].list.len().min() >= 1
    none = aggregate_scores(sample_store, by=["run_id"], source="scorer:success")
    assert none.height == 0
    lazy = aggregate_scores(sample_store.table("scores"), by=["run_id"], metrics=["success"])
    assert lazy.select("run_id", "mean").equals(out.select("run_id", "mean"))


def test_statistics_constant_is_the_output_order():
    out = aggregate_scores(SCORES)
    assert [c for c in out.columns if c in STATISTICS] == list(STATISTICS)


def test_bootstrap_values_go_to_their_own_group_whatever_the_row_order():
    rng = np.random.default_rng(3)
    df = pl.DataFrame(
        {
            "run_id": ["z"] * 30 + ["a"] * 30 + [None] * 30,
            "task_id": rng.choice(["t1", "t2"], 90),
            "metric": "return",
            "value": np.concatenate(
                [rng.normal(100, 1, 30), rng.normal(0, 1, 30), rng.normal(50, 1, 30)]
            ),
        }
    ).sample(fraction=1.0, shuffle=True, seed=1)
    for stratify in (None, "task_id"):
        out = aggregate_scores(df, ci="bca", n_resamples=500, stratify=stratify)
        assert out["run_id"].to_list() == ["a", "z", None]
        for row in out.iter_rows(named=True):
            assert row["ci_low"] < row["mean"] < row["ci_high"]
            assert row["ci_high"] - row["ci_low"] < 2


def test_binary_metric_with_fractional_values_falls_back_to_hall():
    df = pl.DataFrame({"run_id": "r", "metric": "success", "value": [0.0, 0.5, 1.0, 1.0]})
    r = aggregate_scores(df, n_resamples=300).row(0, named=True)
    assert r["ci_method"] == "hall"


def test_two_sources_of_one_key_are_not_averaged_as_epochs():
    df = pl.DataFrame(
        {
            "run_id": "r",
            "key": ["a", "a", "b"],
            "source": ["evallog", "scorer:success", "evallog"],
            "metric": "success",
            "value": [1.0, 0.0, 1.0],
        }
    )
    assert aggregate_scores(df)["n_total"][0] == 3
    assert aggregate_scores(df, source="evallog")["mean"][0] == 1.0


def test_metric_in_by_is_not_grouped_twice():
    out = aggregate_scores(SCORES, by=["metric", "run_id", "run_id"])
    assert out.columns[:2] == ["run_id", "metric"] and out.height == 2


def test_a_misspelt_column_gets_the_nearest_run_or_score_column(sample_store: ha.Store) -> None:
    with pytest.raises(ValueError, match="did you mean 'agent_version' for 'agent_versio'"):
        sample_store.aggregate(by=["agent_versio"])


def test_wald_warns_where_it_fails_and_continuous_defaults_to_hall() -> None:
    few = pl.DataFrame({"run_id": "r", "metric": "success", "value": [1.0] * 19 + [0.0]})
    with pytest.warns(iv.StatisticsWarning, match="use 'wilson'"):
        aggregate_scores(few, ci="normal")
    many = pl.DataFrame({"run_id": "r", "metric": "success", "value": [1.0, 0.0] * 30})
    assert aggregate_scores(many, ci="normal")["ci_method"].item() == "normal"  # no warning
    lat = pl.DataFrame({"run_id": "r", "metric": "latency_p95", "value": [1.0, 2.0, 9.0] * 10})
    assert aggregate_scores(lat)["ci_method"].item() == "hall"
    # the bootstrap-t stays available by name
    assert aggregate_scores(lat, ci="studentized", n_resamples=200)["ci_method"].item() == (
        "studentized"
    )


def test_bootstrap_interval_does_not_depend_on_row_order() -> None:
    """A store's parallel scan returns rows in any order: the interval must not follow it."""
    rng = np.random.default_rng(7)
    frame = pl.DataFrame(
        {
            "run_id": ["a"] * 60 + ["b"] * 60,
            "key": [f"t#{i}" for i in range(60)] * 2,
            "metric": ["steps"] * 120,
            "value": rng.lognormal(3, 1, 120),
        }
    )
    first = aggregate_scores(frame, ci="percentile", n_resamples=500)
    for seed in range(3):
        shuffled = frame.sample(fraction=1.0, shuffle=True, seed=seed)
        again = aggregate_scores(shuffled, ci="percentile", n_resamples=500)
        assert again["ci_low"].to_list() == first["ci_low"].to_list()
        assert again["ci_high"].to_list() == first["ci_high"].to_list()


def test_reduce_is_the_deprecated_name_of_reducer() -> None:
    """``reduce=`` (issue 30: ``reducer=`` as compare names it) warns and means the same."""
    df = pl.DataFrame(
        {"run_id": ["r"] * 4, "key": ["a", "a", "b", "b"], "metric": ["success"] * 4,
         "value": [1.0, 0.0, 1.0, 1.0]}
    )  # fmt: skip
    new = aggregate_scores(df, reducer="max")
    with pytest.warns(DeprecationWarning, match="reduce= is deprecated: pass reducer="):
        old = aggregate_scores(df, reduce="max")
    assert old.equals(new)
