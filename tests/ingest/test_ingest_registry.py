"""The reader registry and the orchestrator across formats: detection by content, unknown
formats quarantined, idempotence, replacement and strict mode for every format."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

import hylo_analytics as ha
from hylo_analytics.cli import main
from hylo_analytics.ingest import READERS, detect


@pytest.fixture()
def mixed(tmp_path: Path, sample_copy: Path, real_dir: Path) -> Path:
    """hylo sample runs + two vla-eval files + inspect-robots logs + a metric-results file +
    an unrelated JSON, with misleading names."""
    root = tmp_path / "mixed"
    shutil.copytree(sample_copy, root / "hylo")
    (root / "other").mkdir()
    for name in ("pi05_libero_goal.json", "xvla_libero_goal.json"):
        shutil.copy(real_dir / "vla-eval-harness" / name, root / "other" / name)
    shutil.copy(
        real_dir / "inspect-robots" / "adhoc_2cc4c3a8.success.json", root / "other" / "robot.jsonl"
    )
    (root / "other" / "wf.json").write_text(
        json.dumps({"sample_id": "a#1", "metric_id": "m", "normalized_value": 0.5}) + "\n"
    )
    (root / "other" / "notes.json").write_text(json.dumps({"hello": "world"}))
    return root


def test_registry_formats_are_unique() -> None:
    names = [r.format for r in READERS]
    assert len(names) == len(set(names))
    assert set(names) >= {"hylo.evallog/v0.1", "inspect.eval", "inspect.json", "inspect-robots/v1",
                          "vla-eval", "worldfoundry.metric_results", "lerobot.eval_info"}  # fmt: skip


def test_detect_by_content(mixed: Path) -> None:
    def fmt(p: Path) -> str | None:
        r = detect(p.read_bytes()[:4096], p)
        return r.format if r else None

    assert fmt(mixed / "other" / "robot.jsonl") == "inspect-robots/v1"
    assert fmt(mixed / "other" / "wf.json") == "worldfoundry.metric_results"
    assert fmt(mixed / "other" / "pi05_libero_goal.json") == "vla-eval"
    assert fmt(mixed / "other" / "notes.json") is None
    assert fmt(next((mixed / "hylo").glob("*/evallog.json"))) == "hylo.evallog/v0.1"


@pytest.mark.slow
def test_mixed_ingest_is_idempotent_and_reports_formats(mixed: Path, tmp_path: Path) -> None:
    store = ha.open_store(tmp_path / "s")
    rep = store.ingest(mixed, progress=False)
    assert dict(rep.formats) == {
        "hylo.evallog/v0.1": 3,
        "inspect-robots/v1": 1,
        "vla-eval": 2,
        "worldfoundry.metric_results": 1,
    }
    assert rep.quarantined == 1 and "unknown format" in rep.problems[0].error
    assert rep.problems[0].path.endswith("notes.json")
    assert rep.runs_added == 7 and rep.samples_added == 600 + 1000 + 1 + 1
    assert dict(rep.file_formats)[str(mixed / "other" / "notes.json")] is None
    files = store.sql("SELECT format, outcome, count(*) AS n FROM stg_ingested_files GROUP BY ALL")
    assert ("hylo.trace/v0.1", "ingested", 600) in files.rows()
    assert (None, "quarantined", 1) in files.rows()
    q = store.sql("SELECT path, error FROM stg_quarantine")
    assert q.height == 1 and q["path"][0].endswith("notes.json")
    before = store.sql("SELECT count(*) FROM stg_scores").item()
    again = store.ingest(mixed, progress=False)
    assert again.files_read == 0 and again.files_unchanged == 8 and again.runs_added == 0
    # touched, not changed: read and hashed, still unchanged, format remembered
    for p in (mixed / "other").iterdir():
        os.utime(p)
    touched = store.ingest(mixed, progress=False)
    assert touched.runs_added == 0 and touched.files_unchanged == 8
    assert store.sql("SELECT count(*) FROM stg_scores").item() == before
    assert store.sql("SELECT count(*) FROM stg_runs").item() == 7
    fmts = store.sql("SELECT DISTINCT format FROM stg_ingested_files WHERE role = 'log'")
    assert set(fmts["format"].to_list()) == {
        None,
        "hylo.evallog/v0.1",
        "inspect-robots/v1",
        "vla-eval",
        "worldfoundry.metric_results",
    }


@pytest.mark.slow
def test_changed_file_replaces_its_run(mixed: Path, tmp_path: Path) -> None:
    store = ha.open_store(tmp_path / "s")
    store.ingest(mixed, progress=False)
    robot = mixed / "other" / "robot.jsonl"
    doc = json.loads(robot.read_text())
    doc["samples"][0]["epochs"] = [{"success_at_end": 0.0}, {"success_at_end": 1.0}]
    robot.write_text(json.dumps(doc))
    rep = store.ingest(mixed, progress=False)
    assert rep.runs_added == 1 and rep.formats == (("inspect-robots/v1", 1),)
    runs = store.sql("SELECT run_id FROM stg_runs WHERE source_format = 'inspect-robots/v1'")
    assert runs.height == 1
    assert (
        store.sql("SELECT count(*) FROM stg_samples WHERE run_id = ?", [runs["run_id"][0]]).item()
        == 2
    )
    assert store.sql("SELECT count(*) FROM stg_runs").item() == 7


@pytest.mark.slow
def test_strict_stops_on_unknown_format(mixed: Path, tmp_path: Path) -> None:
    store = ha.open_store(tmp_path / "s")
    with pytest.raises(ha.IngestError, match="unknown format"):
        store.ingest(mixed, strict=True, progress=False)
    assert store.sql("SELECT count(*) FROM stg_runs").item() == 0
    (mixed / "other" / "notes.json").unlink()
    rep = store.ingest(mixed, strict=True, progress=False)
    assert rep.quarantined == 0 and rep.runs_added == 7


def test_cli_ingest_names_formats(
    mixed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["ingest", "--store", str(tmp_path / "s"), str(mixed / "other"), "--verbose"])
    out = capsys.readouterr().out
    assert code == 3  # notes.json quarantined: the exit status says so
    assert "formats inspect-robots/v1: 1, vla-eval: 2, worldfoundry.metric_results: 1" in out
    assert f"vla-eval: {mixed / 'other' / 'pi05_libero_goal.json'}" in out
    assert f"unknown (quarantined): {mixed / 'other' / 'notes.json'}" in out


# every real file's format, by folder; the files no reader may take: a PPO summary that shares
# LeRobot's file name, a hand-made table, a JSON schema, two leaderboard scrapes, notes
REAL_FORMATS = {
    "lerobot": "lerobot.eval_info",
    "lm-eval": None,  # results and samples: by name below
    "every_eval_ever": None,  # aggregates and instances: by suffix below
    "vla-eval-harness": "vla-eval",
    "inspect-robots": "inspect-robots/v1",
}
NOT_RESULTS = (
    "Hwihwa-Lab__cartpole-v1-ppo__eval_info.json",
    "KYH-99__GAF-SmolVLA__results__final_summary_5models.json",
    "every_eval_ever__schemas__instance_level_eval.schema.json",
    "leaderboard_results.json",
    "leaderboard_leaderboard.json",
)


def _expected(path: Path) -> str | None:
    if path.name in NOT_RESULTS or path.suffix not in (".json", ".jsonl"):
        return None
    folder = path.parent.name
    if folder == "lm-eval":
        return "lm-eval/samples" if path.suffix == ".jsonl" else "lm-eval/results"
    if folder == "every_eval_ever":
        return (
            "every_eval_ever/instances" if path.suffix == ".jsonl" else "every_eval_ever/aggregate"
        )
    return REAL_FORMATS[folder]


def test_every_real_file_is_claimed_by_its_reader_and_no_other(real_dir: Path) -> None:
    """Each reader's sniff, asked of every real file: the file's own reader claims it, every
    other reader refuses it (so the order of the registry decides nothing), and the files
    that are not results are claimed by none."""
    paths = sorted(p for p in real_dir.rglob("*") if p.is_file() and p.parent != real_dir)
    assert len(paths) >= 37
    for path in paths:
        head = path.read_bytes()[:4096]
        claims = sorted({r.format for r in READERS if r.sniff(head, path)})
        want = _expected(path)
        assert claims == ([want] if want else []), path.name
        found = detect(head, path)
        assert (found.format if found else None) == want, path.name
