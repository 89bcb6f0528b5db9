"""Store.trend: the store's runs ordered by version or by a run field, its figures the same as
Store.aggregate's and Store.compare's, at 3 versions and at 2,000; the chart drawn at both;
hostile names inert."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest
from hostile_data import AGENT, CORPUS, assert_nothing_injected, write_hostile_runs

import hylo_analytics as ha
from hylo_analytics import charts
from hylo_analytics.compare.trends import Trend
from hylo_analytics.errors import ComparabilityError, InputError
from hylo_analytics.testing import SynthConfig, write_dataset

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def sample_trend(sample_store: ha.Store) -> Trend:
    return sample_store.trend(progress=False)


def test_the_sample_trend_is_aggregate_and_compare(
    sample_store: ha.Store, sample_trend: Trend
) -> None:
    assert sample_trend.versions == ("1.0.0", "1.1.0", "1.2.0-rc1")
    agg = sample_store.aggregate(by=["agent_version", "task_id"], metrics=["success"])
    got = sample_trend.rates.join(
        agg, left_on=["version", "task_id"], right_on=["agent_version", "task_id"]
    )
    assert got.height == sample_trend.rates.height == 30
    for ours, theirs in (("rate", "mean"), ("ci_low", "ci_low_right"),
                         ("ci_high", "ci_high_right"), ("n", "n_valid")):  # fmt: skip
        assert (got[ours] - got[theirs]).abs().max() == pytest.approx(0, abs=1e-12), ours
    reg = sample_trend.regressions.filter("regressed")
    assert reg.select("task_id", "version", "best_version").rows() == [
        ("tabletop/pour_cup", "1.2.0-rc1", "1.0.0")  # the sample's planted regression
    ]
    runs = sample_store.runs().select("run_id", "agent_version")
    by_version = dict(zip(runs["agent_version"], runs["run_id"], strict=True))
    one = (
        sample_store.compare(by_version["1.2.0-rc1"], by_version["1.0.0"], by=["task_id"])
        .filter(pl.col("task_id") == "tabletop/pour_cup")
        .row(0, named=True)
    )
    row = reg.row(0, named=True)
    assert row["p_worse"] == pytest.approx(one["p_worse"], rel=1e-12)
    assert row["diff"] == pytest.approx(one["mean_diff"], rel=1e-12)
    assert row["n_pairs"] == one["n_pairs"]
    flipped = sample_store.flips(by_version["1.2.0-rc1"], by_version["1.0.0"])
    mine = sample_trend.flips.select("key", "change").sort("key")
    pairs = flipped.filter(pl.col("task_id") == "tabletop/pour_cup").select("key", "change")
    assert mine.equals(pairs.sort("key"))


def test_a_selector_names_every_run_it_matches(sample_store: ha.Store) -> None:
    two = sample_store.trend(["version=1.0.0", "version=1.2.0-rc1"], progress=False)
    assert two.versions == ("1.0.0", "1.2.0-rc1")
    every = sample_store.trend(["agent=octo-ft"], progress=False)
    assert every.versions == ("1.0.0", "1.1.0", "1.2.0-rc1")


def test_order_by_a_numeric_metadata_field(tmp_path: Path, sample_dir: Path) -> None:
    steps = {"1.0.0": 3000, "1.1.0": 200, "1.2.0-rc1": 1000}  # not the versions' order
    for run in sample_dir.iterdir():
        if not (run / "evallog.json").exists():
            continue
        shutil.copytree(run, tmp_path / "logs" / run.name)
        log = json.loads((run / "evallog.json").read_text())
        log["metadata"] = {"training_step": steps[log["agent"]["version"]]}
        (tmp_path / "logs" / run.name / "evallog.json").write_text(json.dumps(log))
    store = ha.open_store(tmp_path / "s")
    store.ingest(tmp_path / "logs", progress=False)
    trend = store.trend(order="metadata.training_step", progress=False)
    assert trend.versions == ("200", "1000", "3000") and trend.order_rule == "numeric"
    assert "ordered by metadata.training_step (numeric)" in trend.describe()
    with pytest.raises(InputError, match="cannot order by"):
        store.trend(order="metadata.x') or 1=1 --", progress=False)
    with pytest.raises(ha.HyloError, match=r"have no 'extra\.nothing'"):
        store.trend(order="extra.nothing", progress=False)


def test_runs_of_one_suite_with_two_digests_are_refused(tmp_path: Path, sample_dir: Path) -> None:
    for i, run in enumerate(sorted(p for p in sample_dir.iterdir() if p.is_dir())):
        shutil.copytree(run, tmp_path / "logs" / run.name)
        path = tmp_path / "logs" / run.name / "evallog.json"
        log = json.loads(path.read_text())
        log["benchmark"]["digest"] = f"sha256:{i % 2}"
        path.write_text(json.dumps(log))
    store = ha.open_store(tmp_path / "s")
    store.ingest(tmp_path / "logs", progress=False)
    with pytest.raises(ComparabilityError, match="2 benchmark digests"):
        store.trend(progress=False)
    assert len(store.trend(force=True, progress=False).versions) == 3


@pytest.mark.slow
def test_the_chart_at_three_versions(sample_trend: Trend, tmp_path: Path) -> None:
    chart = charts.trend(sample_trend)
    spec = chart.to_dict()
    assert len(spec["concat"]) == 10 and spec["columns"] == 2
    assert spec["concat"][0]["title"]["text"] == "tabletop/pour_cup"  # the regressed first
    assert charts.save(chart, tmp_path / "t.png").read_bytes()[:8] == PNG
    few = charts.trend(sample_trend, max_tasks=3).to_dict()
    assert len(few["concat"]) == 3 and "showing 3 of 10 tasks" in few["title"]["subtitle"][-1]


def test_many_versions_are_binned_per_task() -> None:
    """10 versions in 4 bins: positions 0-2, 3-4, 5-7, 8-9 (position * 4 // 10), each bin's
    mean rate and position, its lowest and highest bound, its n, its first and last version."""
    from hylo_analytics.charts.trends import _binned

    rates = pl.DataFrame(
        {
            "task": ["a"] * 10 + ["b"] * 10,
            "version": [f"v{i}" for i in range(10)] * 2,
            "position": list(range(10)) * 2,
            "rate": [i / 10 for i in range(10)] + [1 - i / 10 for i in range(10)],
            "ci_low": [i / 10 - 0.05 for i in range(10)] * 2,
            "ci_high": [i / 10 + 0.05 for i in range(10)] * 2,
            "n": [10] * 20,
        }
    )
    got = _binned(rates, 10, bins=4)
    a = got.filter(pl.col("task") == "a")
    assert a["position"].to_list() == [1.0, 3.5, 6.0, 8.5]
    assert a["rate"].to_list() == pytest.approx([0.1, 0.35, 0.6, 0.85])
    assert a["ci_low"].to_list() == pytest.approx([-0.05, 0.25, 0.45, 0.75])
    assert a["ci_high"].to_list() == pytest.approx([0.25, 0.45, 0.75, 0.95])
    assert a["n"].to_list() == [30, 20, 30, 20]
    assert a["version"].to_list() == [
        "v0 \u2013 v2",
        "v3 \u2013 v4",
        "v5 \u2013 v7",
        "v8 \u2013 v9",
    ]
    b = got.filter(pl.col("task") == "b")
    assert b["rate"].to_list() == pytest.approx([0.9, 0.65, 0.4, 0.15])


@pytest.fixture(scope="module")
def store_2000(tmp_path_factory: pytest.TempPathFactory) -> ha.Store:
    root = tmp_path_factory.mktemp("trend2000")
    write_dataset(root / "logs", SynthConfig(runs=2000, tasks=3, seeds=8, traces_per_run=0))
    store = ha.open_store(root / "store")
    store.ingest(root / "logs", progress=False)
    return store


@pytest.mark.slow
def test_two_thousand_versions(store_2000: ha.Store, tmp_path: Path) -> None:
    trend = store_2000.trend(progress=False)
    assert len(trend.versions) == 2000
    at = {v: i for i, v in enumerate(trend.versions)}
    assert at["1.2.0-rc1"] < at["2.3.0"] < at["2.294.0"] < at["2.1999.0"]  # not text order
    assert trend.rates.height == 3 * 2000 and trend.tests.height == 3 * 1999
    assert (trend.tests["family_size"] <= 3).all()
    for row in trend.regressions.iter_rows(named=True):
        tests = trend.tests.filter(task_id=row["task_id"])
        regressed = tests.filter(verdict="regressed")
        assert row["regressed"] == (regressed.height > 0)
        if row["regressed"]:
            assert row["position"] == regressed["position"].min()
    scan = store_2000.trend(family="scan", progress=False)
    assert (scan.tests["family_size"] == 3 * 1999).all()
    assert scan.regressions["regressed"].sum() <= trend.regressions["regressed"].sum()
    chart = charts.trend(trend)
    labels = [
        layer for layer in chart.to_dict()["concat"][0]["layer"] if layer["mark"]["type"] == "text"
    ]
    assert len(json.loads(labels[-1]["data"]["values"])) <= 6  # the axis thinned
    line = chart.to_dict()["concat"][0]["layer"][1]
    assert len(json.loads(line["data"]["values"])) == 440  # a point per pixel column
    assert "mean rate of each 4.5 consecutive versions" in chart.to_dict()["title"]["subtitle"][0]
    assert charts.save(chart, tmp_path / "t.png").read_bytes()[:8] == PNG


@pytest.mark.slow
def test_hostile_names_stay_text(tmp_path: Path) -> None:
    write_hostile_runs(tmp_path / "logs")
    store = ha.open_store(tmp_path / "s")
    store.ingest(tmp_path / "logs", progress=False)
    trend = store.trend([f"agent={AGENT}"], progress=False)
    assert trend.versions == ("2", CORPUS[3])  # natural order: a number before a word
    page = charts.save(charts.trend(trend), tmp_path / "t.html").read_text()
    assert_nothing_injected(page, scripts=2)
    assert charts.save(charts.trend(trend), tmp_path / "t.png").read_bytes()[:8] == PNG
    assert_nothing_injected(trend._repr_html_(), scripts=0)
