"""Repeated measurement on a fake timer: deterministic statistics, budget, recording."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

import hylo_analytics as ha
from hylo_analytics.derive import record_measurement
from hylo_analytics.derive.measure import Measurement, MeasurementBudget, measure_callable


class FakeTimer:
    """Reports the given durations in order and counts the calls it timed."""

    def __init__(self, durations: Iterable[float]) -> None:
        self._durations = iter(durations)
        self.calls = 0

    def __call__(self, fn: Callable[[], object]) -> float:
        fn()
        self.calls += 1
        return next(self._durations)


def test_stats_on_a_fake_timer() -> None:
    # golden values computed once with numpy (std ddof=1, percentile linear) and
    # scipy.stats.median_abs_deviation; pinned here as literals
    timer = FakeTimer([9.0, 9.0, 1.0, 2.0, 3.0, 4.0, 100.0])
    calls: list[int] = []
    m = measure_callable(
        lambda: calls.append(1), MeasurementBudget(warmup=2, repetitions=5), timer=timer
    )
    assert len(calls) == 7 and timer.calls == 7  # warmup runs the function too
    assert m.samples == (1.0, 2.0, 3.0, 4.0, 100.0)  # warmup not recorded
    assert (m.count, m.min, m.max, m.mean, m.median) == (5, 1.0, 100.0, 22.0, 3.0)
    assert m.p95 == pytest.approx(80.8, rel=1e-12)
    assert m.std == pytest.approx(43.617656975128774, rel=1e-12)
    assert m.mad == 1.0
    assert m.relative_noise == pytest.approx(1.0 / 3.0)  # one outlier barely moves it
    assert m.stopped_by == "repetitions" and m.warmup == 2


def test_second_golden_set() -> None:
    m = Measurement.from_samples([0.010, 0.012, 0.011, 0.013, 0.011, 0.030])
    assert m.std == pytest.approx(0.007661592523751181, rel=1e-12)
    assert m.p95 == pytest.approx(0.02575, rel=1e-12)
    assert m.median == pytest.approx(0.0115)
    assert m.mean == pytest.approx(0.0145)
    assert m.relative_noise == pytest.approx(0.001 / 0.0115)
    assert m.min <= m.median <= m.p95 <= m.max


def test_max_seconds_stops_early_but_keeps_one_sample() -> None:
    timer = FakeTimer([0.5, 0.5, 0.5, 0.5, 0.5, 0.5])
    m = measure_callable(lambda: None, MeasurementBudget(1, 10, max_seconds=1.6), timer=timer)
    # warmup 0.5, then 0.5 (1.0), 0.5 (1.5), 0.5 (2.0 >= 1.6): three recorded samples
    assert m.count == 3 and m.stopped_by == "max_seconds"
    one = measure_callable(
        lambda: None, MeasurementBudget(1, 10, max_seconds=0.1), timer=FakeTimer([5.0, 5.0])
    )
    assert one.count == 1 and one.std is None and one.samples == (5.0,)


def test_zero_median_has_no_relative_noise() -> None:
    m = Measurement.from_samples([0.0, 0.0, 1.0])
    assert m.relative_noise is None


def test_default_timer_measures_real_time() -> None:
    m = measure_callable(lambda: sum(range(1000)), MeasurementBudget(warmup=1, repetitions=3))
    assert m.count == 3 and m.min > 0
    assert "n=3" in str(m) and "<table>" in m._repr_html_()


@pytest.mark.parametrize(
    ("kwargs", "path"),
    [
        ({"warmup": -1}, "budget.warmup"),
        ({"repetitions": 0}, "budget.repetitions"),
        ({"max_seconds": 0.0}, "budget.max_seconds"),
    ],
)
def test_budget_validation(kwargs: dict[str, float], path: str) -> None:
    with pytest.raises(ha.ConfigError) as info:
        MeasurementBudget(**kwargs)  # type: ignore[arg-type]
    assert info.value.path == path


def test_record_measurement_as_scores(tmp_path: Path) -> None:
    store = ha.open_store(tmp_path / "s")
    m = Measurement.from_samples([1.0, 2.0, 3.0, 4.0, 100.0], warmup=2)
    record_measurement(store.parquet, "search", {"t#1": m, "t#2": m}, run_id="r")
    record_measurement(store.parquet, "search", {"t#1": m, "t#2": m}, run_id="r")  # replaces
    rows = store.sql(
        "select key, metric, value, source, source_kind, metadata from stg_scores "
        "where key = 't#1' order by metric"
    )
    assert rows["metric"].to_list() == [
        "search",
        "search.count",
        "search.mad",
        "search.max",
        "search.mean",
        "search.min",
        "search.p95",
        "search.relative_noise",
        "search.std",
    ]
    assert set(rows["source"]) == {"measure:search"}
    assert set(rows["source_kind"]) == {"observation"}
    head = rows.row(0, named=True)
    assert head["value"] == 3.0
    meta = json.loads(head["metadata"])
    assert meta["samples"] == [1.0, 2.0, 3.0, 4.0, 100.0] and meta["p95"] == pytest.approx(80.8)
    assert store.sql("select count(*) as n from stg_scores")["n"][0] == 18
    # a run-level measurement (key null), usable by a per-run policy
    record_measurement(store.parquet, "warm", Measurement.from_samples([2.0]), run_id="r2")
    ev = ha.evaluate_policies(store, [ha.Policy("p95", "warm.p95", must_less=1.0, per="run")])
    assert ev.results.filter(run_id="r2")["passed"].to_list() == [False]
