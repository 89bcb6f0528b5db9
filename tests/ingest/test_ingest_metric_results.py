"""WorldFoundry MetricResult JSONL: valid / coverage / skip_reason carried into scores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import hylo_analytics as ha
from hylo_analytics.scoring.metric import MetricResult

RECORDS = [
    {
        "sample_id": "walk#1",
        "metric_id": "fvd",
        "raw_value": 210.5,
        "normalized_value": 0.42,
        "valid": True,
        "coverage": 1.0,
        "skip_reason": None,
        "components": {"a": 1},
        "schema_version": "metric_result/v1",
    },
    {
        "sample_id": "walk#2",
        "metric_id": "fvd",
        "raw_value": None,
        "normalized_value": None,
        "valid": False,
        "coverage": 0.0,
        "skip_reason": "missing reference video",
    },
    {
        "sample_id": "walk#2",
        "metric_id": "physics_ok",
        "raw_value": True,
        "valid": True,
        "coverage": 0.5,
    },
    {"sample_id": "scene-9", "metric_id": "fvd", "raw_value": 3, "valid": True},
]


def _write(path: Path, records: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_records_to_scores(tmp_path: Path) -> None:
    p = _write(tmp_path / "cosmos-7b.jsonl", RECORDS)
    store = ha.open_store(tmp_path / "s")
    rep = store.ingest(p, progress=False)
    assert rep.formats == (("worldfoundry.metric_results", 1),) and rep.quarantined == 0
    run = store.sql("SELECT * FROM stg_runs")
    assert run["agent_name"][0] == "cosmos-7b"
    assert run["run_id"][0].startswith("worldfoundry:cosmos-7b:") and run["n_samples"][0] == 3
    sc = store.sql(
        "SELECT key, task_id, seed, metric, value, valid, skip_reason, components, coverage "
        "FROM stg_scores ORDER BY key, metric"
    )
    rows = {(r["key"], r["metric"]): r for r in sc.iter_rows(named=True)}
    assert rows[("walk#1", "fvd")]["value"] == 0.42  # normalized_value wins
    assert rows[("walk#1", "fvd")]["task_id"] == "walk" and rows[("walk#1", "fvd")]["seed"] == 1
    assert json.loads(rows[("walk#1", "fvd")]["components"]) == {"a": 1}
    bad = rows[("walk#2", "fvd")]
    assert bad["value"] is None and bad["valid"] is False
    assert bad["skip_reason"] == "missing reference video"
    assert bad["coverage"] == 0.0
    assert rows[("walk#2", "physics_ok")]["value"] == 1.0
    assert rows[("walk#2", "physics_ok")]["coverage"] == 0.5
    assert rows[("scene-9", "fvd")]["value"] == 3.0
    assert rows[("scene-9", "fvd")]["task_id"] == "scene-9"
    assert rows[("scene-9", "fvd")]["seed"] is None
    # abstention is visible, never averaged as 0
    mean = store.sql("SELECT avg(value) FROM stg_scores WHERE metric = 'fvd'").item()
    assert mean == pytest.approx((0.42 + 3.0) / 2)


def test_own_run_id_is_used(tmp_path: Path) -> None:
    p = _write(tmp_path / "x.jsonl", [{**r, "run_id": "wf-run-7"} for r in RECORDS])
    store = ha.open_store(tmp_path / "s")
    store.ingest(p, progress=False)
    assert store.sql("SELECT run_id FROM stg_runs").item() == "wf-run-7"


def test_bad_line_rejects_file_with_line_number(tmp_path: Path) -> None:
    p = tmp_path / "x.jsonl"
    p.write_text(json.dumps(RECORDS[0]) + "\n{not json\n" + json.dumps({"sample_id": "a"}) + "\n")
    rep = ha.open_store(tmp_path / "s").ingest(p, progress=False)
    assert rep.runs_added == 0
    assert [(q.line, q.field) for q in rep.problems] == [(2, None), (3, "metric_id")]


ROUND_TRIP = [
    *RECORDS,
    {  # valid, but its raw value is not a number: kept as written, the score abstains
        "sample_id": "walk#3",
        "metric_id": "caption",
        "raw_value": {"text": "a dog walks", "tokens": [3, 9]},
        "valid": True,
        "coverage": 0.75,
        "diagnostics": {"model": "judge-1", "latency_s": 2.5},
        "artifact_refs": {
            "generated_video": {"uri": "s3://b/walk3.mp4", "kind": "video", "sha256": "ab"}
        },
        "judge_trace": {"prompt": "Is it a dog?", "reply": "yes", "scores": [1, 0.5]},
        "schema_version": "worldfoundry.metric_result/v1",
    },
    {  # skipped with a reason, a string raw value and an empty mapping
        "sample_id": "walk#4",
        "metric_id": "fvd",
        "raw_value": "n/a",
        "normalized_value": None,
        "valid": False,
        "skip_reason": "video too short",
        "components": {},
        "judge_trace": {"steps": [{"q": "len?", "a": 3}]},
    },
    {"sample_id": "walk#5", "metric_id": "fvd", "raw_value": None, "valid": True},
]


def test_every_field_round_trips_through_the_store(tmp_path: Path) -> None:
    """JSONL -> store -> MetricResult.from_score_row equals the record, field for field."""
    p = _write(tmp_path / "m.jsonl", ROUND_TRIP)
    store = ha.open_store(tmp_path / "s")
    assert store.ingest(p, progress=False).quarantined == 0
    rows = store.sql("SELECT * FROM stg_scores").iter_rows(named=True)
    got = {(r["key"], r["metric"]): MetricResult.from_score_row(r) for r in rows}
    assert len(got) == len(ROUND_TRIP)
    for rec in ROUND_TRIP:
        want = MetricResult.from_dict(rec)
        have = got[(str(rec["sample_id"]), str(rec["metric_id"]))]
        assert have.to_dict() == want.to_dict(), rec
        assert have == want
    sc = store.sql("SELECT * FROM stg_scores WHERE key = 'walk#3'").row(0, named=True)
    assert sc["value"] is None and sc["valid"] is False  # no number: it abstains...
    assert sc["skip_reason"] == "no numeric value"  # ...and says why
    assert json.loads(sc["artifact_refs"])["generated_video"]["uri"] == "s3://b/walk3.mp4"
    assert json.loads(sc["judge_trace"])["reply"] == "yes"


@pytest.mark.parametrize("field", ["artifact_refs", "judge_trace", "components", "diagnostics"])
def test_a_mapping_field_of_another_type_is_a_field_error(tmp_path: Path, field: str) -> None:
    p = _write(tmp_path / "m.jsonl", [RECORDS[0], {**RECORDS[3], field: ["a"]}])
    rep = ha.open_store(tmp_path / "s").ingest(p, progress=False)
    assert rep.runs_added == 0
    assert [(q.line, q.field, q.error) for q in rep.problems] == [
        (2, field, "expected object or null, got array")
    ]
