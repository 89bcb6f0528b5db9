"""The CLI forgives nothing silently: typos fail loudly, read commands create nothing, ids are
shown whole, runs can be named by what they are, tables have their natural names."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import hylo_analytics as ha
from hylo_analytics.cli import main
from hylo_analytics.cli._common import TEXT_WIDTH, table_text
from hylo_analytics.store import RunSelectionError


@pytest.mark.parametrize(
    "argv",
    [
        ["runs"],
        ["sql", "select 1"],
        ["compare", "--candidate", "a", "--parent", "b"],
        ["report", "--candidate", "a", "--parent", "b"],
        ["aggregate"],
        ["score"],
        ["export", "--run", "a", "-o", "x.json"],
        ["scorecard"],
        ["serve", "--port", "0"],
    ],
)
def test_read_commands_refuse_a_missing_store_and_create_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    store = tmp_path / "typo"
    assert main([*argv, "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert f"no store at {store}" in err and "hylo-analytics ingest" in err
    assert len(err.strip().splitlines()) == 1  # one line: the path and how to make a store
    assert not store.exists()


def test_ingest_of_a_missing_path_fails_and_stores_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sample_dir: Path
) -> None:
    store = tmp_path / "s"
    argv = ["ingest", str(sample_dir), str(tmp_path / "nope"), "--store", str(store), "--quiet"]
    assert main(argv) == 2
    assert "no such file or folder" in capsys.readouterr().err
    assert not store.exists()  # reading the arguments creates nothing


def test_natural_table_names_are_the_current_rows(sample_store: ha.Store) -> None:
    for name in ("runs", "samples", "events", "scores", "quarantine", "ingested_files"):
        a = sample_store.sql(f"select count(*) from {name}").item()
        assert a == sample_store.sql(f"select count(*) from stg_{name}").item(), name
    views = (sample_store.root / "views.sql").read_text()
    assert "CREATE OR REPLACE VIEW runs AS SELECT * FROM stg_runs" in views


def test_runs_are_selected_by_what_they_are(sample_store: ha.Store) -> None:
    run = "run-octo-ft-1.1.0-0001"
    assert sample_store.resolve_run(run) == run
    assert sample_store.resolve_run("agent=octo-ft,version=1.1.0") == run
    assert sample_store.resolve_run("run-octo-ft-1.1") == run  # a unique prefix
    with pytest.raises(RunSelectionError, match="matches 3 runs, add a field"):
        sample_store.resolve_run("agent=octo-ft")
    with pytest.raises(RunSelectionError, match=r"did you mean run-octo-ft-1\.1\.0-0001"):
        sample_store.resolve_run("run-octo-ft-1.1.0-0010")
    with pytest.raises(ValueError, match="fields run, agent, version"):
        sample_store.resolve_run("colour=red")
    out = sample_store.compare("version=1.2.0-rc1", "version=1.0.0", ci="none")
    assert out["candidate"].to_list() == ["run-octo-ft-1.2.0-rc1-0002"]
    assert out["parent"].to_list() == ["run-octo-ft-1.0.0-0000"]


def test_compare_by_selector_on_the_command_line(
    sample_store: ha.Store, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["compare", "--store", str(sample_store.root), "--candidate", "version=1.2.0-rc1",
            "--parent", "version=1.0.0", "--ci", "none", "--format", "csv"]  # fmt: skip
    assert main(argv) == 0
    assert "run-octo-ft-1.2.0-rc1-0002,run-octo-ft-1.0.0-0000" in capsys.readouterr().out


def test_tables_never_cut_ids_and_cut_long_text_unless_wide() -> None:
    run_id = "vla-eval:pi05:LIBEROBenchmark_libero_spatial:97fa2f1aa5109e38" * 2
    note = "x" * (TEXT_WIDTH + 40)
    df = pl.DataFrame({"run_id": [run_id], "task_id": [note], "note": [note]})
    text = table_text(df)
    assert run_id in text and note in text  # ids (task_id too) are whole
    assert "x" * (TEXT_WIDTH - 1) + "\u2026" in text
    assert note in table_text(df.drop("task_id"), wide=True)
    assert note not in table_text(df.drop("task_id"))


def test_aggregate_by_run_columns_and_unknown_metric(
    sample_store: ha.Store, capsys: pytest.CaptureFixture[str]
) -> None:
    out = ha.aggregate_scores(sample_store, by=["agent_name", "split"], metrics=["success"])
    assert out.select("agent_name", "split", "n_total").rows() == [("octo-ft", "heldout", 600)]
    argv = ["aggregate", "--store", str(sample_store.root), "--by", "agent_version",
            "--metric", "succes"]  # fmt: skip
    assert main(argv) == 2
    assert "no scores of metric(s) ['succes']" in capsys.readouterr().err


def test_demo_help_is_clean(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "95% intervals" in out and "%%" not in out


_PAIR = ["--candidate", "version=1.2.0-rc1", "--parent", "version=1.0.0"]


@pytest.mark.parametrize(
    ("argv", "hint"),
    [
        (["compare", *_PAIR, "--metric", "sucess"], "'success' for 'sucess'"),
        (["compare", *_PAIR, "--by", "taskid"], "'task_id' for 'taskid'"),
        (["compare", *_PAIR, "--direction", "sucess=maximize"], "'success' for 'sucess'"),
        (
            ["compare", "--candidate", "run-octo-ft-1.2.0-rc1-0003", "--parent", "version=1.0.0"],
            "did you mean run-octo-ft-1.2.0-rc1-0002",
        ),
        (["compare", *_PAIR, "--source", "evalog"], "'evallog' for 'evalog'"),
        (["aggregate", "--metric", "sucess"], "'success' for 'sucess'"),
        (["aggregate", "--by", "taskid"], "'task_id' for 'taskid'"),
        (["aggregate", "--stratify", "taskid"], "'task_id' for 'taskid'"),
        (["aggregate", "--source", "evalog"], "'evallog' for 'evalog'"),
        (["aggregate", "--statistics", "meen"], "'mean' for 'meen'"),
        (["aggregate", "--reducer", "meen"], "'mean' for 'meen'"),
        (["aggregate", "--run", "run-octo-ft-1.1.0-0011"], "did you mean run-octo-ft-1.1.0-0001"),
        (["report", *_PAIR, "--metric", "sucess"], "'success' for 'sucess'"),
        (["report", *_PAIR, "--direction", "sucess=maximize"], "'success' for 'sucess'"),
        (
            ["export", "--run", "run-octo-ft-1.1.0-0011", "-o", "x.json"],
            "did you mean run-octo-ft-1.1.0-0001",
        ),
        (["scorecard", "--run", "run-octo-ft-1.1.0-0011"], "did you mean run-octo-ft-1.1.0-0001"),
        (["sql", "select * from rns"], 'Did you mean "runs"?'),  # DuckDB's own, on one line
    ],
)
def test_every_name_the_cli_takes_gets_a_did_you_mean(
    sample_store: ha.Store,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    argv: list[str],
    hint: str,
) -> None:
    """A typo in a metric, run, column, source, statistic or reducer exits 2 with one line
    naming the nearest name."""
    out = ["-o", str(tmp_path / "r.html")] if argv[0] == "report" else []
    assert main([*argv, *out, "--store", str(sample_store.root)]) == 2
    err = capsys.readouterr().err
    assert hint in err, err
    assert len(err.strip().splitlines()) == 1, err
