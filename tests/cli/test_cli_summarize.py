"""``hylo-analytics summarize``: the figures of Store.summarize, every option a flag."""

from __future__ import annotations

import inspect
import json

import polars as pl
import pytest

from hylo_analytics.aggregate.summaries import task_summaries
from hylo_analytics.api import Store
from hylo_analytics.cli import build_parser, main
from hylo_analytics.cli.summarize import options
from hylo_analytics.stats.summaries import ONE_RUN_NOTE

NOT_FLAGS = {
    "self": "the store: --store",
    "scores": "the store: --store",
    "registry": "a MetricRegistry object; the CLI uses the default registry",
    "options": "**options: task_summaries's keywords, listed from its own signature",
}
FLAGS = {
    "runs": (["--run", "agent=a", "--run", "b"], ["agent=a", "b"]),
    "by": (["--by", "agent_name,agent_version"], ("agent_name", "agent_version")),
    "metric": (["--metric", "done"], "done"),
    "errors": (["--errors", "failure"], "failure"),
    "task": (["--task", "task_id"], ("task_id",)),
    "taus": (["--taus", "0:1:3"], [0.0, 0.5, 1.0]),
    "level": (["--level", "0.9"], 0.9),
    "n_resamples": (["--resamples", "500"], 500),
    "seed": (["--seed", "3"], 3),
    "source": (["--source", "imported"], ["imported"]),
    "progress": (["--quiet"], False),
}


def _python_options() -> dict[str, inspect.Parameter]:
    params = dict(inspect.signature(Store.summarize).parameters)
    params.update(inspect.signature(task_summaries).parameters)
    return {k: v for k, v in params.items() if k not in NOT_FLAGS}


def test_every_option_is_a_flag_with_the_same_default():
    base = ["summarize", "--store", "s"]
    defaults = options(build_parser().parse_args(base))
    python = _python_options()
    assert set(python) == set(FLAGS) == set(defaults)
    for name, param in python.items():
        assert (
            defaults[name] == param.default
            or (name == "progress" and param.default is None and defaults[name] is None)
            or (name in ("by", "task") and tuple(param.default) == defaults[name])
        ), name
        flags, value = FLAGS[name]
        assert options(build_parser().parse_args([*base, *flags]))[name] == value, name
    assert options(build_parser().parse_args([*base, "--taus", "0.2,0.4"]))["taus"] == [0.2, 0.4]


@pytest.mark.slow
def test_table_json_and_chart_match_python(sample_store, tmp_path, capsys, monkeypatch):
    from hylo_analytics import charts

    saved = []  # the chart itself is drawn in tests/test_charts_summaries.py: no vl-convert here
    monkeypatch.setattr(charts, "save", lambda chart, path: saved.append((chart, path)))
    store = ["summarize", "--store", str(sample_store.root), "--resamples", "300"]
    assert main([*store, "--by", "agent_version"]) == 0
    printed = capsys.readouterr().out
    assert "iqm" in printed and f"probability of improvement not shown: {ONE_RUN_NOTE}"[:80] in (
        " ".join(printed.split())
    )
    out = tmp_path / "s.json"
    chart = tmp_path / "profile.png"
    args = [*store, "--by", "agent_version", "--format", "json", "-o", str(out)]
    assert main([*args, "--chart", str(chart)]) == 0
    rows = pl.DataFrame(json.loads(out.read_text()))
    python = sample_store.summarize(by=["agent_version"], n_resamples=300).summary
    assert rows["estimate"].to_list() == python["estimate"].to_list()
    assert rows["ci_low"].to_list() == python["ci_low"].to_list()
    assert len(saved) == 1 and saved[0][1] == chart
    assert saved[0][0].to_dict()["title"]["text"] == "Performance profiles"
    assert main([*store, "--show", "improvement", "--by", "agent_version", "--format", "csv"]) == 0
    improvement = capsys.readouterr().out
    assert improvement.count("needs several runs") == 6  # 3 versions: 6 ordered pairs


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--run", "agent=nobody"], "no run matches 'agent=nobody'"),
        (["--metric", "steps"], "not 0/1"),
    ],
)
def test_errors_are_one_line(sample_store, capsys, flags, message):
    assert main(["summarize", "--store", str(sample_store.root), *flags]) == 2
    assert message in capsys.readouterr().err
