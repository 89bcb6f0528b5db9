"""``hylo-analytics pass-k`` and ``epochs-plan``: the Store verbs' figures, every keyword a
flag with the same default, csv / json / table, the notes on stderr."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from repeated_data import literal_store

import hylo_analytics as ha
from hylo_analytics.api import Store
from hylo_analytics.cli import build_parser, main
from hylo_analytics.cli import epochs_plan as plan_cli
from hylo_analytics.cli import pass_k as pass_cli

PASS_FLAGS: dict[str, tuple[list[str], Any]] = {
    "runs": (["--run", "agent=a", "--run", "b"], ["agent=a", "b"]),
    "k": (["--k", "2:4"], [2, 3, 4]),
    "by": (["--by", "agent_name, split"], ("agent_name", "split")),
    "metric": (["--metric", "done"], "done"),
    "item": (["--item", "task_id"], "task_id"),
    "errors": (["--errors", "failure"], "failure"),
    "ci": (["--ci", "percentile"], "percentile"),
    "level": (["--level", "0.9"], 0.9),
    "n_resamples": (["--resamples", "99"], 99),
    "seed": (["--seed", "3"], 3),
    "source": (["--source", "imported"], ["imported"]),
}
PLAN_FLAGS: dict[str, tuple[list[str], Any]] = {
    "parent": (["--parent", "b", "--parent", "agent=c"], ["b", "agent=c"]),
    "metric": (["--metric", "done"], "done"),
    "item": (["--item", "task_id"], "task_id"),
    "errors": (["--errors", "exclude"], "exclude"),
    "level": (["--level", "0.8"], 0.8),
    "source": (["--source", "imported"], ["imported"]),
}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> ha.Store:
    return literal_store(tmp_path_factory.mktemp("cli-repeated") / "store")


@pytest.mark.parametrize(
    ("verb", "module", "base", "flags", "skip"),
    [
        ("pass_at_k", pass_cli, ["pass-k", "--store", "s"], PASS_FLAGS, {"registry"}),
        ("epochs_plan", plan_cli, ["epochs-plan", "--store", "s", "--candidate", "a"],
         PLAN_FLAGS, {"registry", "candidate"}),
    ],
)  # fmt: skip
def test_every_keyword_is_a_flag_with_the_same_default(
    verb: str, module: Any, base: list[str], flags: dict[str, Any], skip: set[str]
) -> None:
    defaults = module.options(build_parser().parse_args(base))
    python = {k: v for k, v in inspect.signature(getattr(Store, verb)).parameters.items()
              if k not in ("self", *skip)}  # fmt: skip
    assert set(python) == set(flags) and set(flags) <= set(defaults)
    for name, param in python.items():
        assert defaults[name] == param.default, name
        given, value = flags[name]
        assert module.options(build_parser().parse_args([*base, *given]))[name] == value, name


def test_pass_k_json_csv_and_the_note(
    store: ha.Store, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    base = ["pass-k", "--store", str(store.root), "--run", "r-a"]
    assert main([*base, "--format", "json"]) == 0
    captured = capsys.readouterr()
    got = pl.DataFrame(json.loads(captured.out))
    want = store.pass_at_k("r-a")
    assert got.columns == want.columns and got["pass_at_k"].to_list() == pytest.approx(
        want["pass_at_k"].to_list()
    )
    assert "leave out items with fewer than k samples (from k = 3" in captured.err
    out = tmp_path / "p.csv"
    assert main([*base, "--format", "csv", "-o", str(out), "--chart", str(tmp_path / "c.png")]) == 0
    assert pl.read_csv(out)["k"].to_list() == [1, 2, 3]
    assert (tmp_path / "c.png").stat().st_size > 0
    assert main([*base, "--metric", "nope"]) == 2
    assert "pass_at_k: no scores of metric" in capsys.readouterr().err


def test_epochs_plan_table_and_json(store: ha.Store, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["epochs-plan", "--store", str(store.root), "--candidate", "r-a", "--parent", "r-b"]
    assert main([*base, "--format", "json", "--errors", "exclude"]) == 0
    row = json.loads(capsys.readouterr().out)[0]
    want = store.epochs_plan("r-a", "r-b", errors="exclude").row(0, named=True)
    assert row["var_within"] == pytest.approx(want["var_within"])
    assert row["n_items"] == 4 and row["candidate"] == "r-a"
    assert main(["epochs-plan", "--store", str(store.root), "--candidate", "r-c"]) == 0
    captured = capsys.readouterr()
    assert "var_between" in captured.out and "pooled within variance" in captured.err
