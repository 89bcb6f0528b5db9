"""WorldFoundry's Metric protocol: MetricResult, and user metrics scored over a real store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import hylo_analytics as ha
from hylo_analytics.scoring.metric_protocol import (
    METRIC_RESULT_SCHEMA_VERSION,
    Metric,
    MetricRequest,
    MetricResult,
    MetricSubject,
)

RECORDS = [
    {"sample_id": f"walk#{i}", "metric_id": "fvd", "raw_value": float(i), "valid": True}
    for i in range(1, 5)
]


@pytest.fixture()
def store(tmp_path: Path) -> ha.Store:
    p = tmp_path / "cosmos.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    s = ha.open_store(tmp_path / "s")
    assert s.ingest(p, progress=False).quarantined == 0
    return s


def _rows(store: ha.Store, metric: str) -> dict[str, dict[str, Any]]:
    df = store.sql("select * from stg_scores where metric = $m order by key", {"m": metric})
    return {r["key"]: r for r in df.iter_rows(named=True)}


# --- MetricResult -----------------------------------------------------------------------


def test_metric_result_has_exactly_the_spec_fields() -> None:
    r = MetricResult("s", "m")
    assert list(r.to_dict()) == [
        "sample_id", "metric_id", "raw_value", "normalized_value", "components", "valid",
        "coverage", "skip_reason", "diagnostics", "artifact_refs", "judge_trace",
        "schema_version",
    ]  # fmt: skip
    assert (
        r.valid is True and r.coverage == 1.0 and r.schema_version == METRIC_RESULT_SCHEMA_VERSION
    )
    with pytest.raises(AttributeError):
        r.valid = False  # type: ignore[misc]
    with pytest.raises(TypeError):
        r.components["x"] = 1  # type: ignore[index]


def test_to_dict_from_dict_round_trip() -> None:
    d = {
        "sample_id": "a#1", "metric_id": "m", "raw_value": {"t": [1, 2]}, "normalized_value": 0.5,
        "components": {"c": 1}, "valid": False, "coverage": 0.25, "skip_reason": "why",
        "diagnostics": {"d": 2}, "artifact_refs": {"v": {"uri": "x"}},
        "judge_trace": {"p": "q"}, "schema_version": "v9",
    }  # fmt: skip
    r = MetricResult.from_dict(d)
    assert r.to_dict() == d
    assert MetricResult.from_dict(json.loads(json.dumps(r.to_dict()))) == r


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        ({"valid": "yes"}, TypeError, "valid: expected a boolean, got str"),
        ({"normalized_value": "0.5"}, TypeError, "normalized_value: expected a number or null"),
        ({"normalized_value": True}, TypeError, "normalized_value: expected a number or null"),
        ({"normalized_value": float("nan")}, ValueError, "non-finite"),
        ({"coverage": "all"}, TypeError, "coverage: expected a number, got str"),
        ({"components": [1]}, TypeError, "components: expected a mapping, got list"),
        ({"artifact_refs": "x"}, TypeError, "artifact_refs: expected a mapping, got str"),
        ({"skip_reason": 3}, TypeError, "skip_reason: expected a string or null, got int"),
        ({"sample_id": 7}, TypeError, "sample_id: expected a string, got int"),
        ({"raw_value": object()}, TypeError, "raw_value: not JSON-serializable"),
        ({"extra_field": 1}, ValueError, r"unknown fields \['extra_field'\]"),
    ],
)
def test_from_dict_validates_types(change: dict[str, Any], error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        MetricResult.from_dict({"sample_id": "s", "metric_id": "m", **change})


def test_from_dict_missing_id_is_an_error() -> None:
    with pytest.raises(ValueError, match="metric_id: missing"):
        MetricResult.from_dict({"sample_id": "s"})


# --- user metrics ------------------------------------------------------------------------


class KeyLength:
    """Per sample: the key's length, with every MetricResult field filled."""

    metric_id = "key_length"
    version = "2.1"
    seen: list[tuple[MetricRequest, MetricSubject]]

    def __init__(self) -> None:
        self.seen = []

    def compute_sample(self, request: MetricRequest, result: MetricSubject) -> MetricResult:
        self.seen.append((request, result))
        n = len(request.sample_id)
        if request.sample_id == "walk#4":
            return MetricResult(
                request.sample_id, self.metric_id, raw_value="n/a", valid=False,
                skip_reason="too short", coverage=0.0,
            )  # fmt: skip
        return MetricResult(
            request.sample_id, self.metric_id, raw_value={"n": n}, normalized_value=n / 10,
            components={"chars": n}, coverage=0.5, diagnostics={"d": 1},
            artifact_refs={"video": {"uri": f"s3://{request.sample_id}"}},
            judge_trace={"prompt": "count"},
        )  # fmt: skip


def test_per_sample_metric_keeps_every_field(store: ha.Store) -> None:
    m = KeyLength()
    assert isinstance(m, Metric)
    rep = store.score([m])
    assert rep.failed_runs == {}
    rows = _rows(store, "key_length")
    assert set(rows) == {"walk#1", "walk#2", "walk#3", "walk#4"}
    r1 = rows["walk#1"]
    assert (r1["value"], r1["valid"], r1["source"], r1["scorer_version"]) == (
        0.6, True, "scorer:key_length", "2.1",
    )  # fmt: skip
    assert json.loads(r1["artifact_refs"]) == {"video": {"uri": "s3://walk#1"}}
    assert MetricResult.from_score_row(r1) == m.compute_sample(*m.seen[0])
    r4 = rows["walk#4"]
    assert (r4["value"], r4["valid"], r4["skip_reason"]) == (None, False, "too short")
    assert MetricResult.from_score_row(r4).raw_value == "n/a"
    # what the metric was passed: the sample's key, run and stored trace row
    req, res = m.seen[0]
    assert req.sample_id == res.sample_id == "walk#1" and req.task_id == "walk" and req.seed == 1
    assert req.run_id == rows["walk#1"]["run_id"] and res.events == ()
    assert res.trace["key"] == "walk#1" and res.artifacts == {}


class Broken:
    metric_id = "broken"

    def compute_sample(self, request: MetricRequest, result: MetricSubject) -> Any:
        k = request.sample_id
        if k == "walk#1":
            raise RuntimeError("boom")
        if k == "walk#2":
            return 0.5
        if k == "walk#3":
            return MetricResult("walk#9", "broken", normalized_value=1.0)
        return MetricResult(k, "other", normalized_value=1.0)


def test_a_raising_or_wrong_metric_is_an_error_row_naming_the_sample(store: ha.Store) -> None:
    rep = store.score([Broken()])
    rows = _rows(store, "broken")
    reasons = {k: r["skip_reason"] for k, r in rows.items()}
    assert reasons == {
        "walk#1": "error: RuntimeError: boom (sample walk#1)",
        "walk#2": "error: returned float, expected MetricResult (sample walk#2)",
        "walk#3": "error: returned a MetricResult for sample 'walk#9' (sample walk#3)",
        "walk#4": "error: returned a MetricResult of metric 'other', expected 'broken' "
        "(sample walk#4)",
    }
    assert all(r["value"] is None and r["valid"] is False for r in rows.values())
    assert [s.errors for s in rep.scorers] == [4] and len(rep.failed_runs) == 1


class Batched:
    name = "batched"  # the spec's attribute name stands for metric_id
    higher_is_better = False

    def __init__(self, out: Any) -> None:
        self.out = out

    def compute_batch(self, episodes: pl.DataFrame) -> Any:
        return self.out(episodes) if callable(self.out) else self.out

    def compute_sample(self, request: MetricRequest, result: MetricSubject) -> MetricResult:
        raise AssertionError("compute_batch is used when present")


def test_vectorized_metric_series_and_frame(store: ha.Store) -> None:
    store.score([Batched(lambda ep: ep["seed"].cast(pl.Float64) / 4)])
    rows = _rows(store, "batched")
    assert [rows[f"walk#{i}"]["value"] for i in range(1, 5)] == [0.25, 0.5, 0.75, 1.0]
    assert json.loads(rows["walk#1"]["metadata"])["direction"] == "minimize"
    frame = pl.DataFrame(
        {
            "normalized_value": [0.1, None, 0.3, 0.4],
            "raw_value": [1, 2, 3, 4],
            "valid": [True, True, False, True],
            "coverage": [1.0, 0.5, 1.0, 1.0],
            "skip_reason": [None, None, "blurred", None],
        }
    )
    store.score([Batched(lambda ep: frame)])
    rows = _rows(store, "batched")
    got = [(rows[f"walk#{i}"]["value"], rows[f"walk#{i}"]["skip_reason"]) for i in range(1, 5)]
    assert got == [(0.1, None), (2.0, None), (None, "blurred"), (0.4, None)]
    back = MetricResult.from_score_row(rows["walk#2"])
    assert (back.raw_value, back.normalized_value, back.coverage) == (2.0, None, 0.5)


@pytest.mark.parametrize(
    ("out", "why"),
    [
        (lambda ep: 1 / 0, "error: ZeroDivisionError: division by zero (sample walk#"),
        ([1.0, 2.0], "error: compute_batch returned list, expected a polars Series"),
        (pl.Series([1.0]), "error: compute_batch returned 1 rows for 4 samples"),
        (pl.DataFrame({"score": [1.0] * 4}), "error: compute_batch returned unknown columns"),
        (pl.Series(["a"] * 4), "error: compute_batch column 'normalized_value' has dtype"),
    ],
)
@pytest.mark.slow
def test_vectorized_metric_errors_are_rows(store: ha.Store, out: Any, why: str) -> None:
    rep = store.score([Batched(out)])
    rows = _rows(store, "batched")
    assert len(rows) == 4 and all(r["skip_reason"].startswith(why) for r in rows.values())
    assert all(r["skip_reason"].endswith(f"(sample {k})") for k, r in rows.items())
    assert [s.errors for s in rep.scorers] == [4]


def test_vectorized_nan_is_an_error_for_that_sample_only(store: ha.Store) -> None:
    store.score([Batched(pl.Series([0.5, float("nan"), None, 1.0]))])
    rows = _rows(store, "batched")
    got = [(rows[f"walk#{i}"]["value"], rows[f"walk#{i}"]["skip_reason"]) for i in range(1, 5)]
    assert got == [
        (0.5, None),
        (None, "error: compute_batch returned a non-finite number (sample walk#2)"),
        (None, "abstained"),
        (1.0, None),
    ]


@pytest.mark.slow
def test_rescoring_a_metric_replaces_its_rows(store: ha.Store) -> None:
    store.score([KeyLength()])
    store.score([KeyLength()])
    n = store.sql("select count(*) from stg_scores where metric = 'key_length'").item()
    assert n == 4


def test_the_old_module_path_still_imports() -> None:
    from hylo_analytics.scoring import metric, metric_protocol

    assert metric.MetricResult is MetricResult
    assert set(metric.__all__) == set(metric_protocol.__all__)
    assert all(getattr(metric, n) is getattr(metric_protocol, n) for n in metric.__all__)
