"""The chart of small-n pooling: each task's raw rate and its shrunk rate, with intervals.

The frame comes from :func:`~hylo_analytics.aggregate.shrunk_rates` (``Store.shrink``).
"""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import polars as pl

from hylo_analytics.charts._style import _data, _labels, _require, _styled, _title
from hylo_analytics.errors import InputError

__all__ = ["MAX_GROUPS", "MAX_TASKS", "shrinkage"]

#: The most groups (runs on suites) one chart draws, one panel each, and tasks in all.
MAX_GROUPS = 12
MAX_TASKS = 400
_LANES = {"raw (Wilson)": "#6E6E6E", "shrunk": "#0072B2"}
_LANE_KEYS = ("_group", "_task", "prior_mean", "k", "n", "pooling")
_COLUMNS = ["raw_rate", "raw_lo", "raw_hi", "shrunk_rate", "shrunk_lo", "shrunk_hi",
            "prior_mean", "k", "n", "pooling"]  # fmt: skip


def shrinkage(
    frame: pl.DataFrame,
    *,
    group: Sequence[str] | None = None,
    task: Sequence[str] = ("task_id",),
    title: str = "Per-task success rates, raw and shrunk toward the suite",
) -> alt.LayerChart | alt.FacetChart:
    """Per task (rows): the raw rate with its Wilson interval (grey, hollow) above the shrunk
    rate with its interval (blue, filled), a line from the one to the other, and the suite's
    prior mean (dashed); one panel per group (a run on a suite).

    ``frame``: :func:`~hylo_analytics.aggregate.shrunk_rates` as it is; ``task``: its task
    columns; ``group``: its group columns (default: every column before the first task
    column, as ``shrunk_rates`` orders them). At most :data:`MAX_GROUPS` groups and
    :data:`MAX_TASKS` tasks: filter the frame to the runs to look at first.
    """
    task = list(task)
    missing = [c for c in task if c not in frame.columns]
    if missing:
        raise InputError(f"shrinkage: the frame lacks task column(s) {missing}; pass task=")
    if group is None:
        group = frame.columns[: frame.columns.index(task[0])]
    group = [c for c in group if c not in task]
    data = _require(frame, [*group, *task, *_COLUMNS], "shrinkage")
    for c in [*group, *task]:
        data = _labels(data, c)
    data = data.with_columns(
        _task=pl.concat_str([pl.col(c) for c in task], separator=" · "),
        _group=pl.concat_str([pl.col(c) for c in group], separator=" · ")
        if group
        else pl.lit("all tasks"),
    )
    n_groups = data["_group"].n_unique()
    if data.is_empty():
        raise InputError("shrinkage: the frame has no rows to draw")
    if n_groups > MAX_GROUPS or data.height > MAX_TASKS:
        raise InputError(
            f"shrinkage: the frame holds {n_groups:,} groups and {data.height:,} tasks; a chart "
            f"draws at most {MAX_GROUPS} groups and {MAX_TASKS} tasks: filter it to a few runs "
            "first (Store.shrink(runs=...), CLI --run)"
        )
    raw = data.select(*_LANE_KEYS, rate="raw_rate", lo="raw_lo", hi="raw_hi")
    shrunk = data.select(*_LANE_KEYS, rate="shrunk_rate", lo="shrunk_lo", hi="shrunk_hi")
    names = list(_LANES)
    lanes = pl.concat(
        [raw.with_columns(lane=pl.lit(names[0])), shrunk.with_columns(lane=pl.lit(names[1]))]
    )
    order = data["_task"].unique(maintain_order=True).to_list()
    y = alt.Y("_task:N", title=None, sort=order)
    offset = alt.YOffset("lane:N", sort=list(_LANES))
    scale = alt.Scale(domain=list(_LANES), range=list(_LANES.values()))
    color = alt.Color("lane:N", title=None, scale=scale)
    x_low = alt.X("lo:Q", title="task success rate", scale=alt.Scale(domain=[0, 1]),
                  axis=alt.Axis(format="%"))  # fmt: skip
    base = alt.Chart(_data(lanes) if n_groups == 1 else alt.Undefined)
    tips = [alt.Tooltip("_group:N", title="group"), alt.Tooltip("_task:N", title="task"),
            alt.Tooltip("lane:N", title="estimate"), alt.Tooltip("rate:Q", format=".1%"),
            alt.Tooltip("lo:Q", format=".1%", title="interval low"),
            alt.Tooltip("hi:Q", format=".1%", title="interval high"),
            alt.Tooltip("k:Q", title="successes"), alt.Tooltip("n:Q", title="episodes"),
            alt.Tooltip("pooling:N")]  # fmt: skip
    bars = base.mark_rule(strokeWidth=2).encode(x=x_low, x2="hi:Q", y=y, yOffset=offset,
                                                color=color)  # fmt: skip
    move = base.mark_line(color="#E69F00", strokeWidth=1.5).encode(
        x="rate:Q", y=y, yOffset=offset, detail="_task:N", order=alt.Order("lane:N")
    )
    points = base.mark_point(size=50, opacity=1, strokeWidth=1.5).encode(
        x="rate:Q", y=y, yOffset=offset, color=color, tooltip=tips,
        fill=alt.Fill("lane:N", scale=alt.Scale(domain=list(_LANES),
                                                range=["white", _LANES["shrunk"]]), legend=None),
    )  # fmt: skip
    prior = base.mark_rule(strokeDash=[4, 3], color="#333333").encode(
        x=alt.X("mean(prior_mean):Q"), tooltip=[alt.Tooltip("mean(prior_mean):Q",
                                                            format=".1%", title="prior mean")]
    )  # fmt: skip
    layers = alt.layer(prior, bars, move, points).properties(width=460, height=alt.Step(9))
    subtitle = (
        "grey: raw rate and Wilson interval · blue: shrunk rate and its interval · orange: "
        "raw to shrunk · dashed: the suite's prior mean"
    )
    if n_groups == 1:
        head = str(data["_group"][0])
        chart = layers.properties(title=_title(f"{title}: {head}", subtitle))
    else:
        panels = data["_group"].unique(maintain_order=True).to_list()
        header = alt.Header(labelOrient="top", labelAnchor="start", labelFontWeight="bold",
                            labelLimit=700)  # fmt: skip
        row = alt.Row("_group:N", title=None, sort=panels, header=header)
        chart = (
            layers.facet(data=_data(lanes), row=row)
            .resolve_scale(y="independent")
            .resolve_axis(x="independent")
            .properties(title=_title(title, subtitle))
        )
    return _styled(chart)  # type: ignore[no-any-return]
