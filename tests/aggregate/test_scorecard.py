"""scorecard(): aggregators honoured (golden values), statistics, weights, primary, gaps shown."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
from scipy import stats as sps

import hylo_analytics as ha
from hylo_analytics.aggregate.scorecard import Scorecard, scorecard
from hylo_analytics.metrics import (
    AGGREGATORS,
    BenchmarkSpec,
    EvaluationProtocolSpec,
    MetricSpec,
)

RNG = np.random.default_rng(7)
LAT = np.round(RNG.lognormal(3.0, 0.8, size=37), 3)  # skewed: every aggregator differs
GOLDEN = {
    "mean": float(np.mean(LAT)),
    "median": float(np.median(LAT)),
    "sum": float(np.sum(LAT)),
    "min": float(np.min(LAT)),
    "max": float(np.max(LAT)),
    "p95": float(np.quantile(LAT, 0.95)),
    "iqm": float(sps.trim_mean(LAT, 0.25)),
}
# Two abstentions (null, NaN) that no aggregator may count, and a second metric.
FRAME = pl.DataFrame(
    {
        "run_id": ["r1"] * (len(LAT) + 2) + ["r1"] * 4,
        "metric": ["lat"] * (len(LAT) + 2) + ["ok"] * 4,
        "value": [*LAT.tolist(), None, float("nan"), 1.0, 0.0, 1.0, 1.0],
    }
)
OK = MetricSpec(id="ok", kind="binary", higher_is_better=True, primary=True)


def _row(card: Scorecard, metric: str, run: str = "r1") -> dict:
    df = card.metrics.filter((pl.col("metric") == metric) & (pl.col("run_id") == run))
    assert df.height == 1, df
    return df.row(0, named=True)


def test_golden_values_differ():
    assert len(set(np.round(list(GOLDEN.values()), 6))) == len(GOLDEN) == len(AGGREGATORS)


@pytest.mark.parametrize("aggregator", AGGREGATORS)
def test_the_reported_value_is_the_aggregator_against_numpy_and_scipy(aggregator):
    lat = MetricSpec(id="lat", aggregator=aggregator, higher_is_better=False)
    row = _row(scorecard(FRAME, metrics=[OK, lat], n_resamples=200), "lat")
    assert row["aggregator"] == aggregator
    assert row["value"] == pytest.approx(GOLDEN[aggregator], rel=1e-12)
    assert (row["n_valid"], row["n_total"]) == (len(LAT), len(LAT) + 2)
    assert row["coverage"] == pytest.approx(len(LAT) / (len(LAT) + 2))


def test_median_spec_on_the_store_reports_the_engines_median_not_the_mean(sample_store):
    spec = MetricSpec(id="steps", aggregator="median", higher_is_better=False, kind="count")
    card = sample_store.scorecard(metrics=[get_success(), spec], n_resamples=200)
    agg = sample_store.aggregate(metrics=["steps"], n_resamples=200)
    for run, median, mean in agg.select("run_id", "median", "mean").iter_rows():
        row = _row(card, "steps", run)
        assert row["value"] == median != mean
        assert row["ci_low"] is None and row["ci_method"] is None  # a mean's interval: not shown


def get_success() -> MetricSpec:
    return ha.default_registry().get("success")


def test_statistics_are_the_specs_and_the_interval_is_the_mean_one(sample_store):
    succ = get_success()  # statistics ("mean", "stderr", "ci")
    steps = MetricSpec(id="steps", statistics=("median", "iqm", "std"), kind="count")
    card = scorecard(sample_store, metrics=[succ, steps], n_resamples=200)
    agg = sample_store.aggregate(n_resamples=200)
    for metric, names in (("success", ["mean", "stderr"]), ("steps", ["median", "iqm", "std"])):
        for run in card.overall["run_id"]:
            row = _row(card, metric, run)
            want = agg.filter((pl.col("run_id") == run) & (pl.col("metric") == metric)).row(
                0, named=True
            )
            assert [s["name"] for s in row["statistics"]] == names
            assert [s["value"] for s in row["statistics"]] == [want[n] for n in names]
            if metric == "success":  # aggregator mean: the engine's Wilson interval
                assert (row["ci_low"], row["ci_high"], row["ci_method"]) == (
                    want["ci_low"], want["ci_high"], "wilson",
                )  # fmt: skip


def test_weighted_score_is_direction_aware():
    frame = pl.DataFrame(
        {
            "run_id": ["a"] * 8 + ["b"] * 8,
            "metric": ["win", "win", "crash", "crash", "ms", "ms", "free", "free"] * 2,
            "value": [1, 1, 0, 1, 100, 300, 5, 7, 0, 1, 0, 0, 400, 400, 1, 1],
        }
    ).with_columns(pl.col("value").cast(pl.Float64))
    specs = [
        MetricSpec(id="win", kind="binary", higher_is_better=True, primary=True, weight=2),
        MetricSpec(id="crash", kind="binary", higher_is_better=False),  # normalized 1 - rate
        MetricSpec(id="ms", normalizer="inverse_minmax:0:500", higher_is_better=False),
        MetricSpec(id="free", weight=0),  # shown, but not in the score (and no normalizer)
    ]
    card = scorecard(frame, metrics=specs, n_resamples=200)
    a, b = card.overall.sort("run_id").iter_rows(named=True)
    # a: win 1.0, crash 0.5 -> 0.5, ms mean 200 -> 0.6;  b: win 0.5, crash 0 -> 1, ms 0.2
    assert a["score"] == pytest.approx((2 * 1.0 + 0.5 + 0.6) / 4)
    assert b["score"] == pytest.approx((2 * 0.5 + 1.0 + 0.2) / 4)
    assert a["complete"] and a["incomplete_metrics"] == [] and a["weight_coverage"] == 1.0
    assert (a["primary_metric"], a["primary_value"], b["primary_value"]) == ("win", 1.0, 0.5)
    assert _row(card, "crash", "a")["normalized_value"] == 0.5
    assert _row(card, "free", "a")["status"] == "no_normalizer"
    assert _row(card, "win", "a")["primary"] and not _row(card, "ms", "a")["primary"]


def test_an_incomplete_scorecard_shows_its_gaps_and_never_averages_them_away():
    frame = pl.DataFrame(
        {
            "run_id": ["a", "a", "a", "b", "b"],
            "metric": ["win", "win", "judge", "win", "judge"],
            "value": [1.0, 0.0, None, 1.0, 0.5],
        }
    )
    specs = [
        MetricSpec(id="win", kind="binary", higher_is_better=True, primary=True),
        MetricSpec(id="judge", normalizer="minmax:0:1"),
        MetricSpec(id="speed", normalizer="minmax:0:1", weight=2),  # in no run at all
    ]
    card = scorecard(frame, metrics=specs, n_resamples=200)
    a, b = card.overall.sort("run_id").iter_rows(named=True)
    assert a["score"] is None and not a["complete"]
    assert a["incomplete_metrics"] == ["judge", "speed"]
    assert a["score_available"] == 0.5 and a["weight_coverage"] == 0.25
    assert b["incomplete_metrics"] == ["speed"] and b["score_available"] == 0.75
    assert _row(card, "judge", "a")["status"] == "abstained"
    assert _row(card, "judge", "a")["n_total"] == 1 and _row(card, "judge", "a")["n_valid"] == 0
    assert _row(card, "speed", "b")["status"] == "missing"
    assert _row(card, "speed", "b")["n_total"] == 0
    flat = card.to_frame().filter(pl.col("row") == "overall")
    assert flat["status"].to_list() == ["incomplete", "incomplete"]
    assert flat["value"].to_list() == [None, None]


@pytest.mark.parametrize(
    ("specs", "found"),
    [
        ([MetricSpec(id="a"), MetricSpec(id="b")], "found none among"),
        ([MetricSpec(id="a", primary=True), MetricSpec(id="b", primary=True)], r"found 2 \(a, b\)"),
    ],
)
def test_exactly_one_primary_metric(specs, found):
    frame = pl.DataFrame({"run_id": ["r"] * 2, "metric": ["a", "b"], "value": [1.0, 2.0]})
    with pytest.raises(ValueError, match=f"exactly one metric must be primary, {found}"):
        scorecard(frame, metrics=specs)


def test_default_metrics_are_the_registrys_present_in_the_store(sample_store):
    card = ha.scorecard(sample_store, n_resamples=200)
    assert [s.id for s in card.specs] == ["success", "steps", "safety_interventions"]
    assert card.primary == "success" and card.overall.height == 3
    # steps and safety_interventions declare no normalizer: the score is shown as incomplete
    assert card.overall["score"].null_count() == 3
    assert card.overall["score_available"].to_list() == card.overall["primary_value"].to_list()


def test_benchmark_protocol_file_and_run_selection(sample_store, tmp_path):
    steps = MetricSpec(id="steps", aggregator="min", normalizer="inverse_minmax:0:100")
    bench = BenchmarkSpec(name="tabletop", metrics=(get_success(), steps))
    card = sample_store.scorecard("run-octo-ft-1.1", bench, n_resamples=200)
    assert card.overall["run_id"].to_list() == ["run-octo-ft-1.1.0-0001"]
    assert _row(card, "steps", "run-octo-ft-1.1.0-0001")["aggregator"] == "min"
    assert card.overall["complete"].to_list() == [True]
    proto = EvaluationProtocolSpec(name="quick", metric_ids=("success_rate",))  # an alias
    quick = sample_store.scorecard(metrics=proto, n_resamples=200)
    assert [s.id for s in quick.specs] == ["success"]
    assert quick.overall["score"].to_list() == quick.overall["primary_value"].to_list()
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(bench.to_dict()))
    from_file = sample_store.scorecard("run-octo-ft-1.1", str(path), n_resamples=200)
    assert from_file.metrics.equals(card.metrics)
    with pytest.raises(ValueError, match="names no metric_ids"):
        sample_store.scorecard(metrics=EvaluationProtocolSpec(name="empty"))


def test_frame_errors_name_what_is_wrong():
    with pytest.raises(ValueError, match=r"no scores of run\(s\) \['zz'\]"):
        scorecard(FRAME, runs="zz", metrics=[OK])
    with pytest.raises(ValueError, match=r"no column\(s\) \['run_id'\]"):
        scorecard(FRAME.drop("run_id"), metrics=[OK])
    with pytest.raises(ValueError, match="'ok' is listed twice"):
        scorecard(FRAME, metrics=[OK, "ok"])
    with pytest.raises(TypeError, match="expected a polars frame or a Store"):
        scorecard({"run_id": []}, metrics=[OK])  # type: ignore[arg-type]


def test_outputs_for_notebooks_json_and_csv(sample_store):
    card = sample_store.scorecard(n_resamples=200)
    page = card._repr_html_()
    assert "primary metric <code>success</code>" in page and page.count("<table") == 2
    d = json.loads(json.dumps(card.to_dict()))
    assert d["schema_version"] == "hylo.scorecard/v1" and d["primary"] == "success"
    assert [len(r["metrics"]) for r in d["runs"]] == [3, 3, 3]
    flat = card.to_frame()
    assert flat.height == 9 + 3 and flat["statistics"].dtype == pl.String
    assert "Scorecard(primary='success'" in repr(card)


def test_a_registry_is_a_catalogue_even_when_it_is_small():
    from hylo_analytics.metrics import MetricRegistry

    card = scorecard(FRAME, metrics=MetricRegistry([OK]), n_resamples=200)
    assert [s.id for s in card.specs] == ["ok"]  # the registry's metrics the data holds
    reg = MetricRegistry([OK, MetricSpec(id="lat", aggregator="max"), MetricSpec(id="absent")])
    card = scorecard(FRAME, metrics=reg, n_resamples=200)
    assert [s.id for s in card.specs] == ["ok", "lat"]
    assert _row(card, "lat")["value"] == GOLDEN["max"]
