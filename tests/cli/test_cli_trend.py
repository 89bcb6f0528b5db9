"""``hylo-analytics trend``: every option of ``Store.trend`` has a flag with its default, the
flags reach Python, the order used is printed, and the output is the Python frames'."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import polars as pl
import pytest

import hylo_analytics as ha
from hylo_analytics import api
from hylo_analytics.cli import build_parser, main
from hylo_analytics.cli import trend as trend_cli
from hylo_analytics.compare import StatisticalRule

NOT_FLAGS = {"self", "runs", "rule", "directions"}


def test_every_option_has_a_flag_with_its_default() -> None:
    args = build_parser().parse_args(["trend", "--store", "s"])
    opts = trend_cli.options(args)
    for name, param in inspect.signature(api.Store.trend).parameters.items():
        if name in NOT_FLAGS:
            continue
        assert name in opts, f"Store.trend option {name!r} has no flag"
        assert opts[name] == param.default, name
    assert opts["rule"] == StatisticalRule() and opts["directions"] is None
    assert args.run is None


def test_flags_reach_python() -> None:
    argv = ["trend", "--store", "s", "--run", "agent=a", "--order", "metadata.step",
            "--metric", "steps", "--direction", "minimize", "--family", "scan", "--alpha",
            "0.1", "--adjust", "bh", "--errors", "failure", "--reducer", "max", "--force",
            "--level", "0.9", "--resamples", "50", "--seed", "3", "--source", "x"]  # fmt: skip
    args = build_parser().parse_args(argv)
    assert args.run == ["agent=a"]
    assert trend_cli.options(args) == {
        "order": "metadata.step", "metric": "steps", "source": "x", "force": True,
        "family": "scan", "rule": StatisticalRule(alpha=0.1, adjust="bh"),
        "directions": {"steps": "minimize"}, "errors": "failure", "reducer": "max",
        "level": 0.9, "n_resamples": 50, "seed": 3, "progress": None,
    }  # fmt: skip


def test_the_table_says_which_order_and_the_json_is_the_frame(
    sample_store: ha.Store, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    store = str(sample_store.root)
    assert main(["trend", "--store", store]) == 0
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert "ordered by agent_version (natural version order)" in first
    assert "tabletop/pour_cup" in out and "1.2.0-rc1" in out
    assert main(["trend", "--store", store, "--show", "flips", "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert "ordered by agent_version" in captured.err  # stdout holds the data alone
    rows = json.loads(captured.out)
    want = sample_store.trend(progress=False).flips
    assert [r["key"] for r in rows] == want["key"].to_list()
    assert {"errored", "best_errored", "note"} <= set(rows[0])
    chart = tmp_path / "t.svg"
    assert main(["trend", "--store", store, "--show", "rates", "--format", "csv",
                 "--chart", str(chart)]) == 0  # fmt: skip
    rates = pl.read_csv(capsys.readouterr().out.encode())
    assert rates.height == 30 and chart.read_text().startswith("<svg")


def test_a_bad_order_is_one_line(
    sample_store: ha.Store, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["trend", "--store", str(sample_store.root), "--order", "nonsense"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hylo-analytics trend: error: trend: cannot order by 'nonsense'")


def test_help_names_the_order_and_the_families(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["trend", "--help"])
    text = capsys.readouterr().out
    for words in ("natural version order", "metadata.training_step", "--family",
                  "screening", "harness error", "--chart"):  # fmt: skip
        assert words in text, words


@pytest.mark.slow
def test_hostile_names_are_printed_inert(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from hostile_data import write_hostile_runs

    write_hostile_runs(tmp_path / "logs")
    store = ha.open_store(tmp_path / "s")
    store.ingest(tmp_path / "logs", progress=False)
    for show in ("regressions", "flips", "rates"):
        assert main(["trend", "--store", str(store.root), "--show", show, "--wide"]) == 0
        out = capsys.readouterr().out
        assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out, show
    assert "esc \\x1b[2J" in out  # the rates name every task: shown, escaped
