"""A hylo EvalLog's ``parent_run_id`` (v0.2: ``eval.parent_run_id``) is the column
``runs.parent_run_id``, which declares the pair the SQL pairing views hold (int_comparisons)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

import hylo_analytics as ha
from hylo_analytics.ingest._files import SourceFile
from hylo_analytics.ingest.hylo import _parse_checked, parse_evallogs


def _log(run: str, **top: Any) -> dict[str, Any]:
    return {
        "version": "hylo.evallog/v0.1",
        "run_id": run,
        **top,
        "benchmark": {"id": "b", "split": "test"},
        "agent": {"name": "a"},
        "samples": [
            {"key": f"t#{s}", "task_id": "t", "seed": s, "status": "ok", "scores": {"success": 1.0}}
            for s in (1, 2, 3)
        ],
    }


def _write(folder: Path, doc: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{doc['run_id']}.json"
    path.write_text(json.dumps(doc))
    return path


def test_fast_and_checked_paths_read_the_parent(tmp_path: Path) -> None:
    data = json.dumps(_log("c", parent_run_id="p")).encode()
    sf = SourceFile(tmp_path / "l.json", len(data), 0, data, "0" * 64)
    con = duckdb.connect()
    cols = ["parent_run_id", "extra"]
    fast = parse_evallogs(con, [sf]).runs.select(cols).to_pylist()
    checked = _parse_checked(con, [sf]).runs.select(cols).to_pylist()
    assert fast == checked == [{"parent_run_id": "p", "extra": None}]


def test_the_parent_is_a_run_column_and_pairs_the_run(tmp_path: Path) -> None:
    _write(tmp_path / "in", _log("p"))
    _write(tmp_path / "in", _log("c", parent_run_id="p"))
    _write(tmp_path / "in", _log("n", parent_run_id=None))  # null: no parent
    store = ha.open_store(tmp_path / "s")
    assert store.ingest(tmp_path / "in", progress=False).quarantined == 0
    runs = dict(store.sql("SELECT run_id, parent_run_id FROM runs").rows())
    assert runs == {"p": None, "c": "p", "n": None}
    assert store.sql("SELECT * FROM int_comparisons").rows() == [("c", "p", "log")]
    assert store.sql("SELECT DISTINCT candidate, parent FROM mart_compare").rows() == [("c", "p")]


@pytest.mark.parametrize(("value", "kind"), [(7, "integer"), (["p"], "array"), ({}, "object")])
def test_a_parent_that_is_no_string_is_quarantined(tmp_path: Path, value: Any, kind: str) -> None:
    _write(tmp_path / "in", _log("good"))
    bad = _write(tmp_path / "in", _log("bad", parent_run_id=value))
    store = ha.open_store(tmp_path / "s")
    rep = store.ingest(tmp_path / "in", progress=False)
    assert rep.quarantined == 1
    q = store.sql("SELECT path, field, error FROM stg_quarantine").to_dicts()
    assert [(r["path"], r["field"]) for r in q] == [(str(bad), "parent_run_id")]
    assert f"got {kind}" in q[0]["error"]
    assert store.sql("SELECT run_id FROM runs")["run_id"].to_list() == ["good"]


@pytest.mark.slow
@pytest.mark.parametrize("version", ["v0.1", "v0.2"])
def test_export_writes_the_parent_back(tmp_path: Path, version: str) -> None:
    _write(tmp_path / "in", _log("c", parent_run_id="p"))
    store = ha.open_store(tmp_path / "s")
    store.ingest(tmp_path / "in", progress=False)
    out = ha.export_evallog(store, "c", tmp_path / "out" / "c.json", version=version)  # type: ignore[arg-type]
    doc = json.loads(out.read_text())
    assert (doc if version == "v0.1" else doc["eval"])["parent_run_id"] == "p"
    again = ha.open_store(tmp_path / "s2")
    assert again.ingest(out, progress=False).quarantined == 0
    assert again.sql("SELECT parent_run_id, extra FROM runs").rows() == [("p", None)]
