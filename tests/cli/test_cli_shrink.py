"""``hylo-analytics shrink``: the figures of Store.shrink, every option a flag."""

from __future__ import annotations

import inspect
import json

import polars as pl
import pytest

from hylo_analytics.aggregate.shrinkage import shrunk_rates
from hylo_analytics.api import Store
from hylo_analytics.cli import build_parser, main
from hylo_analytics.cli import shrink as cli

NOT_FLAGS = {
    "self": "the store: --store",
    "scores": "the store: --store",
    "registry": "a MetricRegistry object; the CLI uses the default registry",
}
FLAGS = {
    "runs": (["--run", "agent=a", "--run", "b"], ["agent=a", "b"]),
    "by": (["--by", "agent_name,agent_version"], ("agent_name", "agent_version")),
    "task": (["--task", "task_id,split"], ("task_id", "split")),
    "suite": (["--suite", ""], ()),
    "metric": (["--metric", "done"], "done"),
    "errors": (["--errors", "failure"], "failure"),
    "level": (["--level", "0.9"], 0.9),
    "interval": (["--interval", "bootstrap"], "bootstrap"),
    "n_resamples": (["--resamples", "500"], 500),
    "seed": (["--seed", "3"], 3),
    "source": (["--source", "imported"], ["imported"]),
}


def test_the_parsers_constants_are_the_engines() -> None:
    from hylo_analytics.stats.closed_form import DEFAULT_LEVEL
    from hylo_analytics.stats.shrinkage import DEFAULT_BOOTSTRAP, INTERVALS

    assert cli.INTERVALS == INTERVALS and cli.DEFAULT_BOOTSTRAP == DEFAULT_BOOTSTRAP
    assert cli.DEFAULT_LEVEL == DEFAULT_LEVEL


def test_every_option_is_a_flag_with_the_same_default() -> None:
    base = ["shrink", "--store", "s"]
    defaults = cli.options(build_parser().parse_args(base))
    params = dict(inspect.signature(Store.shrink).parameters)
    params.update(inspect.signature(shrunk_rates).parameters)
    python = {k: v for k, v in params.items() if k not in NOT_FLAGS}
    assert set(python) == set(FLAGS) == set(defaults)
    for name, param in python.items():
        default = param.default
        assert defaults[name] == (tuple(default) if name in ("by", "task", "suite")
                                  else default), name  # fmt: skip
        flags, value = FLAGS[name]
        assert cli.options(build_parser().parse_args([*base, *flags]))[name] == value, name


@pytest.mark.slow
def test_table_json_csv_and_chart_match_python(sample_store, tmp_path, capsys, monkeypatch):
    from hylo_analytics import charts

    saved = []  # the chart itself is drawn in tests/test_charts_shrinkage.py
    monkeypatch.setattr(charts, "save", lambda chart, path: saved.append((chart, path)))
    store = ["shrink", "--store", str(sample_store.root)]
    assert main(store) == 0
    printed = capsys.readouterr().out
    assert "shrunk_rate" in printed and "partial" in printed
    python = sample_store.shrink()
    out = tmp_path / "s.json"
    chart = tmp_path / "shrink.png"
    assert main([*store, "--format", "json", "-o", str(out), "--chart", str(chart)]) == 0
    rows = pl.DataFrame(json.loads(out.read_text()))
    assert rows["shrunk_rate"].to_list() == python["shrunk_rate"].to_list()
    assert rows["shrunk_lo"].to_list() == python["shrunk_lo"].to_list()
    assert len(saved) == 1 and saved[0][1] == chart
    csv = tmp_path / "s.csv"
    assert main([*store, "--format", "csv", "-o", str(csv), "--interval", "plain"]) == 0
    plain = pl.read_csv(csv)
    assert plain["ci_method"].unique().to_list() == ["eb posterior"]
    assert plain["raw_hi"].to_list() == pytest.approx(python["raw_hi"].to_list())
    assert main([*store, "--metric", "steps"]) == 2
    assert "not 0/1" in capsys.readouterr().err
