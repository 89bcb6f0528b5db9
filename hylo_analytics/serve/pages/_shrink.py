"""The shrinkage page: one run's per-task rates, raw beside shrunk toward their suite."""

from __future__ import annotations

import polars as pl

from hylo_analytics.serve._data import DataVersion
from hylo_analytics.serve.pages._layout import Cell, _e, _layout, _num, _table, url

__all__ = ["shrink_page"]


def shrink_page(frame: pl.DataFrame, *, run: str, metric: str, version: DataVersion) -> str:
    """``Store.shrink`` of ``run``: per task the raw rate and the rate shrunk toward its
    suite (empirical-Bayes beta-binomial), each with its interval, and the chart."""
    level = f"{frame['ci_level'][0]:.0%}" if frame.height else ""
    columns: list[tuple[str, Cell]] = [
        ("suite", lambda r: f"{_e(r['benchmark_id'])} / {_e(r['split'])}"),
        ("task", lambda r: _e(r["task_id"])),
        ("k / n", lambda r: f"{_e(r['k'])} / {_e(r['n'])}"),
        (
            f"raw [{level}]",
            lambda r: f"{_num(r['raw_rate'])} [{_num(r['raw_lo'])}, {_num(r['raw_hi'])}]",
        ),
        (
            f"shrunk [{level}]",
            lambda r: f"{_num(r['shrunk_rate'])} [{_num(r['shrunk_lo'])}, {_num(r['shrunk_hi'])}]",
        ),
        ("weight", lambda r: _num(r["shrink_weight"])),
        ("suite prior", lambda r: _num(r["prior_mean"])),
        ("pooling", lambda r: _e(r["pooling"])),
    ]
    method = _e(frame["ci_method"][0]) if frame.height else ""
    body = [
        f"<h1>Per-task {_e(metric)} of {_e(run)}, raw and shrunk</h1>",
        "<p class=\"note\">Each task's rate shrunk toward its suite's (an empirical-Bayes "
        "beta-binomial prior per suite): tasks with few episodes move most. Intervals: "
        f"{method}. <code>Store.shrink</code> gives the same numbers.</p>",
        f'<p class="headline" id="shrink-summary">{frame.height:,} tasks.</p>',
        _table(columns, frame),
        f'<div class="chart"><img alt="raw and shrunk rates" id="shrink-chart" '
        f'src="{url("/shrink/chart.svg", {"run": run, "metric": metric})}"></div>',
    ]
    return _layout("shrinkage", "".join(body), version)
