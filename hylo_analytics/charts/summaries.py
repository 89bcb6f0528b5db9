"""Charts of across-task summaries: performance profiles with their bands, IQM intervals."""

from __future__ import annotations

import altair as alt
import polars as pl

from hylo_analytics.charts._style import (
    _RUN_COLORS,
    _data,
    _labels,
    _order,
    _require,
    _styled,
    _title,
)


def _group_column(frame: pl.DataFrame, group: str | None) -> str:
    """The policy column: ``group``, else the first column (``task_summaries`` puts ``by``
    first; several ``by`` columns are drawn as the first, so pass a label column then)."""
    return group if group is not None else frame.columns[0]


def performance_profiles(
    frame: pl.DataFrame,
    *,
    group: str | None = None,
    title: str = "Performance profiles",
) -> alt.LayerChart:
    """The share of tasks whose rate exceeds tau (lines) and its bootstrap band (areas).

    ``frame``: ``TaskSummaries.profiles`` as it is (one row per group and ``tau``, with
    ``fraction, ci_low, ci_high``); ``group`` names the policy column (default: the first).
    A profile above another is better everywhere; the areas show how sure that is.
    """
    group = _group_column(frame, group)
    data = _labels(_require(frame, [group, "tau", "fraction", "ci_low", "ci_high"],
                            "performance_profiles"), group)  # fmt: skip
    groups = _order(data, group)
    base = alt.Chart(_data(data))
    color = alt.Color(
        f"{group}:N",
        title=group.replace("_", " "),
        scale=alt.Scale(domain=groups, range=list(_RUN_COLORS)),
    )
    x = alt.X("tau:Q", title="threshold tau (task success rate)", axis=alt.Axis(format="%"))
    band = base.mark_area(opacity=0.2, interpolate="step-after").encode(
        x=x, y="ci_low:Q", y2="ci_high:Q", color=color
    )
    line = base.mark_line(interpolate="step-after", strokeWidth=2).encode(
        x=x,
        y=alt.Y(
            "fraction:Q",
            title="fraction of tasks with rate > tau",
            scale=alt.Scale(domain=[0, 1]),
            axis=alt.Axis(format="%"),
        ),
        color=color,
        tooltip=[
            alt.Tooltip(f"{group}:N"),
            alt.Tooltip("tau:Q", format=".0%"),
            alt.Tooltip("fraction:Q", format=".1%", title="fraction of tasks"),
            alt.Tooltip("ci_low:Q", format=".1%", title="band low"),
            alt.Tooltip("ci_high:Q", format=".1%", title="band high"),
        ],
    )
    chart = (band + line).properties(
        width=460,
        height=300,
        title=_title(title, "lines: fraction of tasks above tau · bands: stratified bootstrap"),
    )
    return _styled(chart)  # type: ignore[no-any-return]


def iqm_intervals(
    frame: pl.DataFrame,
    *,
    group: str | None = None,
    title: str = "Across tasks: IQM and mean",
) -> alt.LayerChart:
    """Each group's IQM and mean across tasks (points) with their intervals (lines).

    ``frame``: ``TaskSummaries.summary`` as it is (``statistic, estimate, ci_low,
    ci_high``); ``group`` names the policy column (default: the first).
    """
    group = _group_column(frame, group)
    data = _labels(_require(frame, [group, "statistic", "estimate", "ci_low", "ci_high"],
                            "iqm_intervals"), group)  # fmt: skip
    groups = _order(data, group)
    base = alt.Chart(_data(data))
    y = alt.Y(f"{group}:N", title=None, sort=groups)
    x = alt.X("estimate:Q", title="success rate across tasks", scale=alt.Scale(zero=False),
              axis=alt.Axis(format="%"))  # fmt: skip
    color = alt.Color("statistic:N", title="statistic",
                      scale=alt.Scale(domain=["iqm", "mean"], range=list(_RUN_COLORS[:2])))  # fmt: skip
    offset = alt.YOffset("statistic:N", sort=["iqm", "mean"])
    points = base.mark_point(filled=True, size=60, opacity=1).encode(
        x=x, y=y, yOffset=offset, color=color,
        tooltip=[alt.Tooltip(f"{group}:N"), alt.Tooltip("statistic:N"),
                 alt.Tooltip("estimate:Q", format=".1%"), alt.Tooltip("ci_low:Q", format=".1%"),
                 alt.Tooltip("ci_high:Q", format=".1%")],
    )  # fmt: skip
    bars = base.mark_rule(strokeWidth=2).encode(
        x="ci_low:Q", x2="ci_high:Q", y=y, yOffset=offset, color=color
    )
    chart = (bars + points).properties(
        width=420,
        height=alt.Step(18),
        title=_title(title, "points: estimate · lines: stratified bootstrap interval"),
    )
    return _styled(chart)  # type: ignore[no-any-return]
