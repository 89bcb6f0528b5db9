"""WorldFoundry MetricResult JSONL: valid / coverage / skip_reason carried into scores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import hylo_analytics as ha

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
        "SELECT key, task_id, seed, metric, value, valid, skip_reason, metadata "
        "FROM stg_scores ORDER BY key, metric"
    )
    rows = {(r["key"], r["metric"]): r for r in sc.iter_rows(named=True)}
    assert rows[("walk#1", "fvd")]["value"] == 0.42  # normalized_value wins
    assert rows[("walk#1", "fvd")]["task_id"] == "walk" and rows[("walk#1", "fvd")]["seed"] == 1
    assert json.loads(rows[("walk#1", "fvd")]["metadata"])["components"] == {"a": 1}
    bad = rows[("walk#2", "fvd")]
    assert bad["value"] is None and bad["valid"] is False
    assert bad["skip_reason"] == "missing reference video"
    assert json.loads(bad["metadata"])["coverage"] == 0.0
    assert rows[("walk#2", "physics_ok")]["value"] == 1.0
    assert json.loads(rows[("walk#2", "physics_ok")]["metadata"])["coverage"] == 0.5
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
