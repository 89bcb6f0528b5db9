"""Run identity: a stored run is replaced by its own file, never silently by another one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import hylo_analytics as ha
from hylo_analytics.cli import main


def _log(run_id: str, n: int, agent: str = "agent") -> str:
    samples = [
        {"key": f"t#{i}", "task_id": "t", "seed": i, "status": "success", "scores": {"s": 1.0}}
        for i in range(n)
    ]
    return json.dumps(
        {
            "version": "hylo.evallog/v0.1",
            "run_id": run_id,
            "benchmark": {"id": "b"},
            "agent": {"name": agent},
            "samples": samples,
        }
    )


def _state(store: ha.Store) -> tuple[int, str]:
    row = store.sql(
        "SELECT (SELECT count(*) FROM stg_samples WHERE run_id = 'R') AS n, "
        "(SELECT source_path FROM stg_runs WHERE run_id = 'R') AS path"
    ).row(0)
    return int(row[0]), str(row[1])


def _quarantine(store: ha.Store) -> list[dict]:
    return store.sql("SELECT path, field, error FROM stg_quarantine ORDER BY ALL").to_dicts()


@pytest.fixture()
def two_files(tmp_path: Path) -> tuple[ha.Store, Path, Path]:
    a, b = tmp_path / "a" / "evallog.json", tmp_path / "b" / "evallog.json"
    a.parent.mkdir()
    b.parent.mkdir()
    a.write_text(_log("R", 15))
    b.write_text(_log("R", 2, agent="other"))
    store = ha.open_store(tmp_path / "store")
    store.ingest(a, progress=False)
    return store, a, b


@pytest.mark.slow
def test_another_file_reusing_a_stored_run_id_is_quarantined(
    two_files: tuple[ha.Store, Path, Path],
) -> None:
    store, a, b = two_files
    report = store.ingest(b, progress=False)
    assert report.runs_added == 0 and report.quarantined == 1
    assert _state(store) == (15, str(a))
    assert _quarantine(store) == [
        {
            "path": str(b),
            "field": "run_id",
            "error": f"run_id 'R' is already stored from {str(a)!r}; "
            "pass replace=True / --replace to replace it",
        }
    ]
    # unchanged, it is not looked at again: still one row
    assert store.ingest(b, progress=False).files_unchanged == 1
    assert len(_quarantine(store)) == 1
    assert store.sql("SELECT outcome FROM stg_ingested_files WHERE path = ?", [str(b)]).item() == (
        "quarantined"
    )


@pytest.mark.slow
def test_replace_lets_another_file_replace_the_run(
    two_files: tuple[ha.Store, Path, Path],
) -> None:
    store, _a, b = two_files
    report = store.ingest(b, progress=False, replace=True)
    assert report.runs_added == 1 and report.quarantined == 0
    assert _state(store) == (2, str(b))
    assert store.sql("SELECT agent_name FROM stg_runs").item() == "other"


@pytest.mark.slow
def test_the_same_path_with_new_content_still_replaces_its_run(
    two_files: tuple[ha.Store, Path, Path],
) -> None:
    store, a, _b = two_files
    a.write_text(_log("R", 4))
    store.ingest(a, progress=False)
    assert _state(store) == (4, str(a)) and _quarantine(store) == []


@pytest.mark.slow
def test_a_moved_file_is_the_same_run(two_files: tuple[ha.Store, Path, Path]) -> None:
    store, a, _b = two_files
    moved = a.parent.parent / "moved.json"
    shutil.move(a, moved)
    store.ingest(moved, progress=False)
    assert _state(store) == (15, str(moved)) and _quarantine(store) == []


@pytest.mark.slow
def test_after_a_replace_the_first_file_changed_is_quarantined(
    two_files: tuple[ha.Store, Path, Path],
) -> None:
    """The claim follows the stored run: once B holds it, A must ask to take it back."""
    store, a, b = two_files
    store.ingest(b, progress=False, replace=True)
    a.write_text(_log("R", 7))
    store.ingest(a, progress=False)
    assert _state(store) == (2, str(b))
    (q,) = _quarantine(store)
    assert q["path"] == str(a) and f"already stored from {str(b)!r}" in q["error"]


@pytest.mark.slow
def test_a_file_whose_run_id_changed_does_not_remove_a_run_another_file_holds(
    two_files: tuple[ha.Store, Path, Path],
) -> None:
    store, a, b = two_files
    store.ingest(b, progress=False, replace=True)  # B holds R now
    a.write_text(_log("R2", 3))  # A, which held R, now holds R2
    store.ingest(a, progress=False)
    assert _state(store) == (2, str(b))
    assert store.sql("SELECT count(*) FROM stg_samples WHERE run_id = 'R2'").item() == 3


@pytest.mark.slow
def test_cli_replace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(_log("R", 15))
    b.write_text(_log("R", 2))
    store = str(tmp_path / "store")
    assert main(["ingest", str(a), "--store", store, "--quiet"]) == 0
    assert main(["ingest", str(b), "--store", store]) == 3  # quarantined: said, and its status
    out = capsys.readouterr().out
    assert "already stored from" in out and "1 item(s) quarantined" in out
    assert _state(ha.open_store(store)) == (15, str(a))
    assert main(["ingest", str(b), "--store", store, "--quiet", "--replace"]) == 0
    assert _state(ha.open_store(store)) == (2, str(b))


@pytest.mark.slow
def test_reingesting_a_run_with_a_missing_trace_records_its_problem_once(
    tmp_path: Path, sample_copy: Path
) -> None:
    run_dir = sorted(p for p in sample_copy.iterdir() if p.is_dir())[0]
    log = json.loads((run_dir / "evallog.json").read_text())
    (run_dir / log["samples"][5]["trace"]).unlink()
    store = ha.open_store(tmp_path / "store")
    for _ in range(3):  # the run is re-read each time (its trace may have appeared)
        store.ingest(run_dir, progress=False)
    (q,) = _quarantine(store)
    assert q["field"] == "samples[5].trace" and "No such file" in q["error"]
    assert store.sql("SELECT count(*) FROM stg_samples").item() == len(log["samples"])
    # the changed log's problem is recorded for its new content
    log["agent"]["version"] = "changed"
    (run_dir / "evallog.json").write_text(json.dumps(log))
    store.ingest(run_dir, progress=False)
    store.ingest(run_dir, progress=False)
    assert store.sql("SELECT count(DISTINCT sha256), count(*) FROM stg_quarantine").row(0) == (2, 2)
