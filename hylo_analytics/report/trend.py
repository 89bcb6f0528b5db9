"""The report's trend section: each task's regression point, its flips and the chart.

The section is drawn from a :class:`~hylo_analytics.compare.trends.Trend`.

:func:`trend_frames` keeps the few small frames the section shows (so they are redacted as
the report's other frames are); :func:`trend_section` turns them into HTML. No statistic is
computed here: every figure is the trend's. :func:`agent_trend` is the trend ``hylo-analytics
report --trend`` adds: every run of the candidate's agent on the candidate's suite.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from hylo_analytics import charts
from hylo_analytics._html import text
from hylo_analytics.charts.trends import MAX_TASKS, trend_tasks
from hylo_analytics.compare.trend_runs import trend_runs
from hylo_analytics.compare.trends import Trend
from hylo_analytics.report._parts import _svg, _table
from hylo_analytics.store import ParquetStore

__all__ = ["MAX_FLIPS", "agent_trend", "trend_frames", "trend_section"]

MAX_FLIPS = 100  # flips listed in the page at most (the CLI and Python have them all)
_META = ("metric", "direction", "order", "order_rule", "family", "adjust", "alpha", "level",
         "errors")  # fmt: skip


def agent_trend(
    store: ParquetStore, candidate: str, *, order: str = "agent_version", **options: Any
) -> Trend:
    """The trend of every run of ``candidate``'s agent on its benchmark and split."""
    run = store.resolve_run(candidate)
    ids = store.sql(
        "SELECT r.run_id FROM stg_runs AS r JOIN stg_runs AS c ON c.run_id = $run "
        "AND r.agent_name IS NOT DISTINCT FROM c.agent_name "
        "AND r.benchmark_id IS NOT DISTINCT FROM c.benchmark_id "
        "AND r.split IS NOT DISTINCT FROM c.split ORDER BY r.run_id",
        {"run": run},
    )["run_id"].to_list()
    return trend_runs(store, ids, order=order, progress=False, **options)


def trend_frames(trend: Trend, *, max_flips: int = MAX_FLIPS) -> dict[str, pl.DataFrame]:
    """The section's frames: ``trend_meta`` (one row), ``trend_versions``, the rates of the
    tasks the chart draws, every task's regression row and the first ``max_flips`` flips."""
    tasks = list(trend.tasks)
    drawn = trend_tasks(trend, MAX_TASKS).drop("task")
    meta: dict[str, list[Any]] = {k: [getattr(trend, k)] for k in _META}
    meta |= {"describe": [trend.describe()], "tasks": [tasks], "n_flips": [trend.flips.height],
             "n_tests": [trend.tests.height]}  # fmt: skip
    return {
        "trend_meta": pl.DataFrame(meta),
        "trend_versions": pl.DataFrame(
            {"version": list(trend.versions)}, schema={"version": pl.String}
        ),
        "trend_rates": trend.rates.join(drawn, on=tasks, nulls_equal=True),
        "trend_regressions": trend.regressions,
        "trend_flips": trend.flips.head(max_flips),
    }


def _trend(frames: Mapping[str, pl.DataFrame]) -> Trend:
    """The trend the chart draws, from the section's frames (its tests are not kept)."""
    meta = frames["trend_meta"].row(0, named=True)
    return Trend(
        rates=frames["trend_rates"],
        tests=pl.DataFrame(),
        regressions=frames["trend_regressions"],
        flips=frames["trend_flips"],
        versions=tuple(frames["trend_versions"]["version"].to_list()),
        tasks=tuple(meta["tasks"]),
        **{k: meta[k] for k in _META},
    )


def trend_section(frames: Mapping[str, pl.DataFrame]) -> str:
    """The section's HTML (empty when the frames hold no trend); every name escaped."""
    if "trend_meta" not in frames:
        return ""
    meta = frames["trend_meta"].row(0, named=True)
    reg, flips = frames["trend_regressions"], frames["trend_flips"]
    over = (
        "each version's tasks adjusted together (Holm): a screening over many versions, "
        "where some task of a flat trend gets a regression point by chance (in every "
        "200-version simulated trend)"
        if meta["family"] == "tasks"
        else f"every one of the {meta['n_tests']:,} tests of the trend adjusted together "
        "(Holm over the whole scan)"
    )
    parts = [
        "<h2>Trend over versions</h2>",
        f'<p class="note">{text(meta["describe"])}.</p>',
        '<p class="note">Each version is compared with the best earlier version of each task '
        "(its highest rate before it; ties go to the earliest), keys paired as in the "
        f"comparison above; {text(over)}. The best earlier version is chosen by its observed "
        "rate, which flatters it: even over the whole scan, 12 % of 10-version and 38 % of "
        "200-version flat simulated trends get a false regression point (docs/statistics.md)."
        "</p>",
        _svg(charts.trend(_trend(frames))),
        _table(
            [
                "task",
                "regressed at",
                "best earlier",
                "rate (best earlier \u2192 then)",
                "difference [verdict's CI]",
                "p(worse), adjusted",
                "note",
            ],
            _regression_rows(reg),
        ),
    ]
    if meta["n_flips"]:
        shown = (
            f"the first {flips.height} of {meta['n_flips']}"
            if meta["n_flips"] > flips.height
            else "all"
        )
        parts += [
            f'<h3>Keys that flipped at the regression points <small class="note">({shown})'
            "</small></h3>",
            _table(["task", "version", "best earlier", "key", "change", "value", "note"],
                   _flip_rows(flips)),
        ]  # fmt: skip
    return "\n".join(parts)


def _num(x: float | None, fmt: str = ".3g") -> str:
    return "\u2013" if x is None else format(x, fmt)


def _regression_rows(reg: pl.DataFrame) -> list[list[str]]:
    rows = []
    for r in reg.iter_rows(named=True):
        if not r["regressed"]:
            rows.append([text(r["task_id"]), "\u2013", "\u2013", "\u2013", "\u2013", "\u2013",
                         text(r["note"])])  # fmt: skip
            continue
        level = f"{r['ci_adj_level']:.1%}"
        rows.append([
            text(r["task_id"]), text(r["version"]), text(r["best_version"]),
            f"{_num(r['best_rate'])} \u2192 {_num(r['rate'])}",
            f"{_num(r['diff'], '+.3g')} [{_num(r['ci_adj_low'], '+.3g')}, "
            f"{_num(r['ci_adj_high'], '+.3g')}] ({text(level)})",
            f"{_num(r['p_worse'], '.2g')}, {_num(r['p_adjusted'], '.2g')}",
            text(r["note"]),
        ])  # fmt: skip
    return rows


def _flip_rows(flips: pl.DataFrame) -> list[list[str]]:
    return [
        [text(r["task_id"]), text(r["version"]), text(r["best_version"]), text(r["key"]),
         text(r["change"]), f"{_num(r['best_value'], 'g')} \u2192 {_num(r['value'], 'g')}",
         text(r["note"])]
        for r in flips.iter_rows(named=True)
    ]  # fmt: skip
