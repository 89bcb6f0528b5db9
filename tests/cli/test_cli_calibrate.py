"""``hylo-analytics calibrate``: every keyword of Store.calibrate a flag with its default, the
output Store.calibrate's frames in every format, the chart written."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import polars as pl
import pytest
from calibration_data import calibration_store

import hylo_analytics as ha
from hylo_analytics.api import Store
from hylo_analytics.cli import build_parser, main
from hylo_analytics.cli import calibrate as calibrate_cli

FLAGS = {
    "runs": (["--run", "agent=a", "--run", "b"], ["agent=a", "b"]),
    "trusted": (["--trusted", "done"], "done"),
    "judge": (["--judge", "judged"], "judged"),
    "trusted_source": (["--trusted-source", "oracle"], "oracle"),
    "judge_source": (["--judge-source", "grade:judge"], "grade:judge"),
    "policy": (["--policy", "run_id"], "run_id"),
    "strata": (["--strata", ""], ()),
    "baseline": (["--baseline", "a"], "a"),
    "errors": (["--errors", "failure"], "failure"),
    "reducer": (["--reducer", "none"], None),
    "lam": (["--lam", "1"], 1.0),
    "level": (["--level", "0.9"], 0.9),
}
NO_FLAG = {"policies"}  # a list of names: select their runs with --run instead
SOURCE_FLAGS = ["--trusted-source", "oracle", "--judge-source", "grade:judge"]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> ha.Store:
    return calibration_store(tmp_path_factory.mktemp("cli-calib") / "s", {"a": 0.4, "b": 0.7})


def test_every_keyword_is_a_flag_with_the_same_default() -> None:
    base = ["calibrate", "--store", "s"]
    defaults = calibrate_cli.options(build_parser().parse_args(base))
    python = {k: p.default for k, p in inspect.signature(Store.calibrate).parameters.items()
              if k not in ("self", *NO_FLAG)}  # fmt: skip
    assert set(python) == set(FLAGS) == set(defaults)
    for name, default in python.items():
        assert defaults[name] == default, name
        flags, value = FLAGS[name]
        got = calibrate_cli.options(build_parser().parse_args([*base, *flags]))
        assert got[name] == value, name


@pytest.mark.parametrize("show", ["rates", "differences"])
@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_the_output_is_the_verbs_frame(store: ha.Store, tmp_path: Path, show: str,
                                       fmt: str) -> None:  # fmt: skip
    out = tmp_path / f"out.{fmt}"
    chart = tmp_path / "c.png"
    args = ["calibrate", "--store", str(store.root), *SOURCE_FLAGS, "--show", show,
            "--format", fmt, "-o", str(out), "--chart", str(chart)]  # fmt: skip
    assert main(args) == 0
    want = store.calibrate(trusted_source="oracle", judge_source="grade:judge")
    frame = want.rates if show == "rates" else want.differences
    got = pl.read_csv(out) if fmt == "csv" else pl.DataFrame(json.loads(out.read_text()))
    assert got.columns == frame.columns and got.height == frame.height
    assert got["estimate"].to_list() == pytest.approx(frame["estimate"].to_list(), rel=1e-12)
    assert chart.stat().st_size > 5_000


def test_the_table_and_a_refusal(store: ha.Store, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", "--store", str(store.root), *SOURCE_FLAGS]) == 0
    assert "ppi++" in capsys.readouterr().out
    assert main(["calibrate", "--store", str(store.root)]) != 0
    assert "name both sources" in capsys.readouterr().err
