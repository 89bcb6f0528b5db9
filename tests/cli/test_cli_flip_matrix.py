"""``hylo-analytics flip-matrix``: Store.flip_matrix's figures, every keyword a flag."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import polars as pl
import pytest
from flip_data import literal_store
from hostile_data import CORPUS

import hylo_analytics as ha
from hylo_analytics.api import Store
from hylo_analytics.cli import build_parser, main
from hylo_analytics.cli.flip_matrix import options

FLAGS = {
    "runs": (["--run", "agent=a", "--run", "b"], ["agent=a", "b"]),
    "metric": (["--metric", "done"], "done"),
    "order": (["--order", "given"], "given"),
    "errors": (["--errors", "failure"], "failure"),
    "source": (["--source", "imported"], "imported"),
}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> ha.Store:
    return literal_store(tmp_path_factory.mktemp("cli-flip") / "store")


def test_every_keyword_is_a_flag_with_the_same_default() -> None:
    base = ["flip-matrix", "--store", "s"]
    defaults = options(build_parser().parse_args(base))
    python = {k: v for k, v in inspect.signature(Store.flip_matrix).parameters.items()
              if k != "self"}  # fmt: skip
    assert set(python) == set(FLAGS) == set(defaults)
    for name, param in python.items():
        assert defaults[name] == param.default, name
        flags, value = FLAGS[name]
        assert options(build_parser().parse_args([*base, *flags]))[name] == value, name


def test_json_is_the_frame_and_stderr_names_the_order(
    store: ha.Store, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["flip-matrix", "--store", str(store.root), "--format", "json"]
    assert main(base) == 0
    captured = capsys.readouterr()
    keys = pl.DataFrame(json.loads(captured.out))
    want = store.flip_matrix().keys
    assert keys.columns == want.columns  # json: every column
    assert keys["key"].to_list() == want["key"].to_list()
    assert keys["solve_rate"].to_list() == want["solve_rate"].to_list()
    assert "4 runs x 6 keys of success (1 suite(s)), ordered by natural version order" in (
        captured.err
    )
    assert "latest run r-a (previous r-b): 1 keys newly broken, 1 newly errored" in captured.err
    assert main([*base, "--only", "newly-broken"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["key"] for r in rows] == ["t0#0"]
    assert main([*base, "--show", "runs", "--errors", "failure"]) == 0
    runs = json.loads(capsys.readouterr().out)
    assert [r["run_id"] for r in runs] == ["r-c", "r-d", "r-b", "r-a"]
    assert {r["errors"] for r in runs} == {"failure"}


@pytest.mark.slow
def test_table_csv_and_chart(
    store: ha.Store, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    base = ["flip-matrix", "--store", str(store.root)]
    assert main([*base, "--only", "always-fails"]) == 0
    table = capsys.readouterr().out
    assert "t0#1" in table and "t1#0" not in table
    assert "n_errored_as_failure" not in table  # the table's narrow set; --wide shows all
    assert main([*base, "--wide"]) == 0
    assert "n_errored_as_failure" in capsys.readouterr().out
    assert main([*base, "--show", "outcomes", "--format", "csv", "--order", "given",
                 "--run", "r-a", "--run", "r-c"]) == 0  # fmt: skip
    csv = pl.read_csv(capsys.readouterr().out.encode())
    assert csv.height == 12
    assert dict(csv.select("run_id", "position").unique().rows()) == {"r-a": 0, "r-c": 1}
    assert set(csv["outcome"]) == {"success", "failure", "partial", "error", "abstained"}
    chart = tmp_path / "m.html"
    assert main([*base, "--chart", str(chart), "--max-runs", "2"]) == 0
    assert "chart: " in capsys.readouterr().err
    assert "showing 2 of 4 runs" in chart.read_text()


def test_refusals_are_one_line(store: ha.Store, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["flip-matrix", "--store", str(store.root)]
    assert main([*base, "--show", "runs", "--only", "newly-broken"]) == 2
    assert "--only newly-broken filters keys" in capsys.readouterr().err
    assert main([*base, "--order", "given"]) == 2
    assert "order='given' needs the runs" in capsys.readouterr().err


def test_hostile_names_are_escaped_on_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from flip_data import commit, episode_rows, run_row

    run = "r" + CORPUS[6]  # ESC and BEL
    got = episode_rows(run, CORPUS[5] + "#0", 1)
    store = commit(tmp_path / "s", [run_row(run, "1", "hylo.evallog/v0.1")], *got)
    assert main(["flip-matrix", "--store", str(store.root), "--show", "runs"]) == 0
    out = capsys.readouterr()
    assert "\x1b" not in out.out + out.err and "\x07" not in out.out + out.err
    assert "\\x1b" in out.out and "\\x1b" in out.err
