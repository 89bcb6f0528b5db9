"""Altair charts over aggregates (never raw rows): each function returns an ``alt.Chart``.

Intervals are computed by hylo_analytics, not by Vega, so a chart shows the same numbers as
the tables beside it. :func:`save` writes HTML, PNG or SVG with no network (vl-convert).
"""

from __future__ import annotations

from pathlib import Path

import altair as alt
import polars as pl

__all__ = ["save", "success_rate_by_task"]


def success_rate_by_task(frame: pl.DataFrame, *, run_label: str = "run") -> alt.Chart:
    """Success rate per task (y) for several runs (colour), with CI error bars.

    ``frame`` has columns ``task_id, success_rate, ci_low, ci_high, n_valid`` and ``run_label``.
    """
    data = frame.select("task_id", run_label, "success_rate", "ci_low", "ci_high", "n_valid")
    base = alt.Chart(alt.Data(values=data.to_dicts()))  # type: ignore[no-untyped-call]
    y = alt.Y("task_id:N", title="task", sort="ascending")
    offset = alt.YOffset(f"{run_label}:N")
    color = alt.Color(f"{run_label}:N", title=run_label.replace("_", " "))
    points = base.mark_point(filled=True, size=50).encode(
        x=alt.X("success_rate:Q", title="success rate", scale=alt.Scale(domain=[0, 1])),
        y=y,
        yOffset=offset,
        color=color,
        tooltip=[
            alt.Tooltip(f"{run_label}:N"),
            alt.Tooltip("task_id:N"),
            alt.Tooltip("success_rate:Q", format=".3f"),
            alt.Tooltip("ci_low:Q", format=".3f", title="95% CI low"),
            alt.Tooltip("ci_high:Q", format=".3f", title="95% CI high"),
            alt.Tooltip("n_valid:Q", title="scored episodes"),
        ],
    )
    bars = base.mark_rule(strokeWidth=1.5).encode(
        x="ci_low:Q", x2="ci_high:Q", y=y, yOffset=offset, color=color
    )
    chart: alt.Chart = (bars + points).properties(
        width=420, height=alt.Step(10), title="Success rate per task (Wilson 95% CI)"
    )
    return chart


def save(chart: alt.TopLevelMixin, path: str | Path) -> Path:
    """Save as .html (self-contained), .png or .svg, chosen by the suffix."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".html":
        chart.save(str(path), inline=True)
    elif path.suffix == ".png":
        chart.save(str(path), scale_factor=2)
    elif path.suffix == ".svg":
        chart.save(str(path))
    else:
        raise ValueError(f"cannot save a chart as {path.suffix!r}; use .html, .png or .svg")
    return path
