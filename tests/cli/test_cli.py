"""The command line: help, ingest, runs, sql in every format, demo."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import hylo_analytics as ha
from hylo_analytics.cli import build_parser, main


@pytest.mark.parametrize("cmd", ["ingest", "runs", "sql", "demo"])
def test_help(cmd: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([cmd, "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert ("usage: hylo-analytics " + cmd in out and "--store" in out) or cmd == "demo"


def test_every_command_has_help_text() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, p in sub.choices.items():  # type: ignore[attr-defined]
        assert p.description, name


def test_ingest_runs_sql(
    tmp_path: Path, sample_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = str(tmp_path / "s")
    assert main(["ingest", str(sample_dir), "--store", store, "--quiet"]) == 0
    assert "+3 runs, +600 samples" in capsys.readouterr().out
    assert main(["runs", "--store", store, "--format", "csv"]) == 0
    runs = capsys.readouterr().out.splitlines()
    assert runs[0].startswith("run_id,agent_name") and len(runs) == 4
    q = "select task_id, count(*) as n from stg_samples group by 1 order by 1"
    assert main(["sql", q, "--store", store, "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 10 and all(r["n"] == 60 for r in rows)
    out = tmp_path / "q.parquet"
    assert main(["sql", q, "--store", store, "--format", "parquet", "-o", str(out)]) == 0
    assert pl.read_parquet(out).height == 10
    assert main(["sql", q, "--store", store]) == 0
    assert "tabletop/pick_cube" in capsys.readouterr().out


def test_bad_query_is_an_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["sql", "select * from nope", "--store", str(tmp_path / "s")])
    assert code == 2
    assert "error:" in capsys.readouterr().err


def test_parquet_needs_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ha.open_store(tmp_path / "s").parquet.ensure_on_disk()  # an empty store on disk
    assert main(["sql", "select 1", "--store", str(tmp_path / "s"), "--format", "parquet"]) == 2
    assert "needs -o" in capsys.readouterr().err


@pytest.mark.slow
def test_demo_end_to_end(tmp_path: Path) -> None:
    """The README's main job, as a user runs it."""
    exe = Path(sys.executable).with_name("hylo-analytics")
    res = subprocess.run(
        [str(exe), "demo", "--out", str(tmp_path)], capture_output=True, text=True, check=True
    )
    assert "Paired comparison on success" in res.stdout and "Tango score test p" in res.stdout
    png = tmp_path / "success_by_task.png"
    assert png.stat().st_size > 10_000 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "success_by_task.html").read_text().count("<script") >= 1
    assert (tmp_path / "paired_forest.png").stat().st_size > 10_000
    report = (tmp_path / "report.html").read_text()
    assert "<html" in report.lower() and 'src="http' not in report
    assert "improved" in res.stdout and "regressed" in res.stdout


@pytest.mark.slow
def test_demo_on_one_run_says_there_is_nothing_to_compare(
    tmp_path: Path, sample_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one = next(sample_dir.iterdir())
    assert main(["demo", "--data", str(one), "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "no two runs share a benchmark and split: nothing to compare" in out
    assert "Per run" in out and not (tmp_path / "report.html").exists()


def test_demo_on_nothing_fails_loudly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["demo", "--data", str(tmp_path / "empty"), "--out", str(tmp_path / "o")]) == 2
    assert "no run was ingested from" in capsys.readouterr().err


def test_an_ingest_that_quarantined_exits_3_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 40: a partial ingest is not a clean one: exit status 3, and how to list what
    was left out; a clean re-ingest of good files alone exits 0."""
    from hylo_analytics.cli.ingest import QUARANTINED
    from hylo_analytics.testing import SynthConfig, write_dataset

    write_dataset(tmp_path / "logs", SynthConfig(runs=1, tasks=1, seeds=2, traces_per_run=0))
    (tmp_path / "logs" / "broken.json").write_text("{not json")
    store = str(tmp_path / "s")
    assert main(["ingest", str(tmp_path / "logs"), "--store", store, "--quiet"]) == QUARANTINED
    out = capsys.readouterr().out
    assert "1 item(s) quarantined, the rest stored (exit status 3)" in out
    assert '"from stg_quarantine"' in out
    good = tmp_path / "logs" / next(p.name for p in (tmp_path / "logs").iterdir() if p.is_dir())
    assert main(["ingest", str(good), "--store", str(tmp_path / "t"), "--quiet"]) == 0
