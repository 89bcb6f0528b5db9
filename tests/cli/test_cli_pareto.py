"""``hylo-analytics pareto``: every keyword of Store.pareto a flag with its default, the
output Store.pareto's frame in every format, the chart written."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import polars as pl
import pytest
from pareto_data import pareto_store

import hylo_analytics as ha
from hylo_analytics.api import Store
from hylo_analytics.cli import build_parser, main
from hylo_analytics.cli import pareto as pareto_cli
from hylo_analytics.errors import InputError
from hylo_analytics.stats.pareto import DEFAULT_PARETO_RESAMPLES

FLAGS = {
    "runs": (["--run", "agent=a", "--run", "b"], ["agent=a", "b"]),
    "cost": (["--cost", "latency"], "latency"),
    "quality": (["--quality", "done"], "done"),
    "policy": (["--policy", "run_id"], "run_id"),
    "strata": (["--strata", ""], ()),
    "source": (["--source", "imported"], "imported"),
    "directions": (["--direction", "steps=maximize"], {"steps": "maximize"}),
    "errors": (["--errors", "failure"], "failure"),
    "reducer": (["--reducer", "none"], None),
    "pairing": (["--pairing", "unpaired"], "unpaired"),
    "n_resamples": (["--resamples", "50"], 50),
    "level": (["--level", "0.9"], 0.9),
    "seed": (["--seed", "4"], 4),
}
NO_FLAG = {"policies"}  # a list of names: select their runs with --run instead


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> ha.Store:
    return pareto_store(tmp_path_factory.mktemp("cli-pareto") / "s", {"a": 0.4, "b": 0.7,
                                                                      "c": 0.55})  # fmt: skip


def test_every_keyword_is_a_flag_with_the_same_default() -> None:
    base = ["pareto", "--store", "s", "--cost", "steps"]
    defaults = pareto_cli.options(build_parser().parse_args(base))
    python = {k: p.default for k, p in inspect.signature(Store.pareto).parameters.items()
              if k not in ("self", *NO_FLAG)}  # fmt: skip
    assert set(python) == set(FLAGS) == set(defaults)
    for name, default in python.items():
        if name != "cost":  # required, as in Python
            assert defaults[name] == default, name
        flags, value = FLAGS[name]
        got = pareto_cli.options(build_parser().parse_args([*base, *flags]))
        assert got[name] == value, name
    assert pareto_cli.DEFAULT_RESAMPLES == DEFAULT_PARETO_RESAMPLES


def test_a_direction_of_another_metric_is_a_typo() -> None:
    args = build_parser().parse_args(["pareto", "--store", "s", "--cost", "steps",
                                      "--direction", "stpes=minimize"])  # fmt: skip
    with pytest.raises(InputError, match="neither --quality"):
        pareto_cli.options(args)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["pareto", "--store", "s"])  # --cost is required


def test_every_format_is_the_frame_and_the_chart_is_written(
    store: ha.Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    want = store.pareto(cost="steps", n_resamples=200).frame
    base = ["pareto", "--store", str(store.root), "--cost", "steps", "--resamples", "200"]
    assert main([*base, "--format", "json"]) == 0
    captured = capsys.readouterr()
    got = pl.DataFrame(json.loads(captured.out))
    assert got.columns == want.columns
    assert got["policy"].to_list() == want["policy"].to_list()
    assert got["p_front"].to_list() == want["p_front"].to_list()
    assert "3 policies" in captured.err and "paired resamples" in captured.err
    out = tmp_path / "front.csv"
    chart = tmp_path / "front.png"
    assert main([*base, "--format", "csv", "-o", str(out), "--chart", str(chart)]) == 0
    assert pl.read_csv(out)["quality"].to_list() == want["quality"].to_list()
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(base) == 0  # the table
    table = capsys.readouterr().out
    assert "p_front" in table and "on_front" in table
