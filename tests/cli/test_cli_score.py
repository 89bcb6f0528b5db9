"""``hylo-analytics score``."""

from __future__ import annotations

from pathlib import Path

import pytest
from scoring_data import RUN, write_run

import hylo_analytics as ha
from hylo_analytics.cli import main


@pytest.fixture()
def store_dir(tmp_path: Path) -> Path:
    write_run(tmp_path / "data")
    ha.open_store(tmp_path / "store").ingest(tmp_path / "data", progress=False)
    return tmp_path / "store"


def test_score_builtins(store_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["score", "--store", str(store_dir), "--run", RUN]) == 0
    out = capsys.readouterr().out
    assert "scorer:success_at_end" in out and "grade:vlm_judge" in out
    n = ha.open_store(store_dir).sql("select count(*) from stg_scores where source_kind = 'score'")
    assert n.item() == 7 * 9


@pytest.mark.slow
def test_score_yaml_failing_required_scorer(
    store_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    yml = tmp_path / "s.yaml"
    yml.write_text("score:\n  cov:\n    value: output.coverage\n")
    assert (
        main(["score", "--store", str(store_dir), "--scorers", str(yml), "--builtin", "steps"]) == 1
    )
    out = capsys.readouterr().out
    assert f"run {RUN} failed: required scorer errors in scorer:cov" in out
    assert "missing path: output.coverage" in out


def test_score_unknown_run(store_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["score", "--store", str(store_dir), "--run", "nope"]) == 2
    assert "no run matches 'nope'" in capsys.readouterr().err
