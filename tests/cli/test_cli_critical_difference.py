"""``hylo-analytics critical-difference`` (``cd``): every option of Store.critical_difference
is a flag with its default, and the tables, files and the diagram are Python's."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import polars as pl
import pytest

import hylo_analytics as ha
from hylo_analytics.api import Store
from hylo_analytics.cli import build_parser, main
from hylo_analytics.cli.critical_difference import options
from hylo_analytics.testing import SynthConfig, write_dataset

NOT_FLAGS = {
    "self": "the store: --store",
    "policies": "a list of policy names; select their runs with --run",
    "registry": "a MetricRegistry object; the CLI uses the default registry",
}
FLAGS = {
    "runs": (["--run", "agent=a", "--run", "b"], ["agent=a", "b"]),
    "policy": (["--policy", "run_id"], "run_id"),
    "blocks": (["--blocks", "benchmark_id,task_id"], ("benchmark_id", "task_id")),
    "metric": (["--metric", "steps"], "steps"),
    "test": (["--test", "wilcoxon"], "wilcoxon"),
    "alpha": (["--alpha", "0.1"], 0.1),
    "directions": (["--metric", "done", "--direction", "minimize"], {"done": "minimize"}),
    "errors": (["--errors", "failure"], "failure"),
    "reducer": (["--reducer", "max"], "max"),
    "source": (["--source", "imported"], "imported"),
}


def test_every_option_is_a_flag_with_the_same_default() -> None:
    base = ["critical-difference", "--store", "s"]
    defaults = options(build_parser().parse_args(base))
    python = {k: v for k, v in inspect.signature(Store.critical_difference).parameters.items()
              if k not in NOT_FLAGS}  # fmt: skip
    assert set(python) == set(FLAGS) == set(defaults)
    for name, param in python.items():
        assert defaults[name] == param.default, name
        flags, value = FLAGS[name]
        assert options(build_parser().parse_args([*base, *flags]))[name] == value, name
    alias = options(build_parser().parse_args(["cd", "--store", "s", "--blocks", "suite"]))
    assert alias["blocks"] == "suite"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> ha.Store:
    root = tmp_path_factory.mktemp("cd-cli")
    config = SynthConfig(runs=5, tasks=8, seeds=4, agents=5, traces_per_run=0, error_rate=0)
    write_dataset(root / "logs", config)
    s = ha.open_store(root / "store")
    s.ingest(root / "logs", progress=False)
    return s


def test_tables_files_and_the_diagram(
    store: ha.Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["critical-difference", "--store", str(store.root)]
    assert main(base) == 0
    shown = capsys.readouterr()
    assert "avg_rank" in shown.out and "policy-0000" in shown.out
    assert "5 policies over 8 blocks: Friedman chi-square" in shown.err
    python = store.critical_difference(test="wilcoxon")
    out = tmp_path / "pairs.json"
    chart = tmp_path / "cd.png"
    argv = [*base, "--test", "wilcoxon", "--show", "pairs", "--format", "json", "-o", str(out),
            "--chart", str(chart)]  # fmt: skip
    assert main(argv) == 0
    rows = pl.DataFrame(json.loads(out.read_text()))
    assert rows["p_holm"].to_list() == python.pairs["p_holm"].to_list()
    assert rows["policy"].to_list() == python.pairs["policy"].cast(pl.String).to_list()
    assert chart.read_bytes()[:4] == b"\x89PNG" and "diagram:" in capsys.readouterr().err
    assert main(["cd", "--store", str(store.root), "--show", "cliques", "--format", "csv"]) == 0
    csv = capsys.readouterr().out
    assert csv.startswith("clique,size,first,last,first_rank,last_rank,policies")
    assert main([*base, "--show", "ranks", "--top", "2"]) == 0
    two = capsys.readouterr()
    assert "showing the 2 best of 5 policies" in two.err and "policy" in two.out
    for show in ("blocks", "tests"):
        assert main([*base, "--show", show]) == 0
    assert "iman-davenport F" in capsys.readouterr().out


def test_errors_are_one_line(store: ha.Store, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["critical-difference", "--store", str(store.root)]
    assert main([*base, "--run", "agent=nobody"]) == 2
    assert "no run matches 'agent=nobody'" in capsys.readouterr().err
    assert main([*base, "--top", "-1"]) == 2
    assert "--top must be >= 0" in capsys.readouterr().err
