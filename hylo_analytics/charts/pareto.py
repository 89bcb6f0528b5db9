"""The cost-quality chart of a Pareto front with its uncertainty.

The frame comes from :func:`~hylo_analytics.compare.pareto_runs` (``Store.pareto``): one row
per policy with its mean quality and cost, their intervals, ``on_front`` and ``p_front``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

import altair as alt
import polars as pl

from hylo_analytics._html import HIDDEN, shorten
from hylo_analytics.charts._style import _data, _labels, _require, _styled, _title
from hylo_analytics.errors import InputError

if TYPE_CHECKING:
    from hylo_analytics.compare.pareto import ParetoFront

__all__ = ["MAX_INTERVALS", "MAX_LABELS", "pareto_intervals"]

#: Past this many policies only the likeliest (highest P(on the front)) draw their intervals:
#: 2,000 crosses are a grey fog that hides the points they belong to.
MAX_INTERVALS = 200
#: The front's policies named beside their point (the cheapest first); the rest in tooltips.
MAX_LABELS = 25
_FRONT = "#D55E00"
_LABEL_CHARS = 40  # a name beside its point; the tooltip has it whole (up to LABEL_CHARS)
_COLUMNS = ["policy", "quality", "quality_low", "quality_high", "cost", "cost_low", "cost_high",
            "on_front", "p_front"]  # fmt: skip


def pareto_intervals(
    frame: pl.DataFrame | ParetoFront,
    *,
    quality: str = "quality",
    cost: str = "cost",
    log_cost: bool = False,
    quality_direction: str = "maximize",
    cost_direction: str = "minimize",
    level: float = 0.95,
    title: str | None = None,
) -> alt.LayerChart:
    """Cost (x, ``log_cost``: a log scale) against quality (y): each policy a point shaded
    and sized by its P(on the front), with its two intervals as error bars (the
    :data:`MAX_INTERVALS` likeliest when there are more), the front of the means as a step
    line, and its policies (up to :data:`MAX_LABELS`) named.

    ``frame``: a :class:`~hylo_analytics.compare.pareto.ParetoFront` (its metrics, directions
    and level then name the axes and the subtitle) or its ``frame`` (``policy, quality,
    quality_low, quality_high, cost, cost_low, cost_high, on_front, p_front``; optional
    ``n_keys``), with ``quality`` / ``cost`` the metrics' names for the axes and the
    directions what is better.
    """
    if not isinstance(frame, pl.DataFrame):
        quality, cost, level = frame.quality, frame.cost, frame.level
        quality_direction, cost_direction = frame.quality_direction, frame.cost_direction
        frame = frame.frame
    quality, cost = (shorten(re.sub(f"[{HIDDEN}]", "\ufffd", m), 80) for m in (quality, cost))
    optional = [c for c in ("n_keys",) if c in frame.columns]
    data = _labels(_require(frame, [*_COLUMNS, *optional], "pareto_intervals"), "policy")
    data = data.filter(pl.col("quality").is_not_null() & pl.col("cost").is_not_null())
    if data.is_empty():
        raise InputError(
            "pareto_intervals: no policy has both a quality and a cost to draw; an empty "
            "chart would look like an answer"
        )
    if log_cost and (data["cost_low"].fill_null(data["cost"]).min() or 0) <= 0:  # type: ignore[operator]
        raise InputError(
            "pareto_intervals: a log cost axis needs every cost (and interval) above 0; "
            "draw it with log_cost=False"
        )
    if "n_keys" not in data.columns:
        data = data.with_columns(n_keys=pl.lit(None, pl.Int64))
    front = data.filter(pl.col("on_front")).sort("cost")
    labelled = front.head(MAX_LABELS).with_columns(
        label=pl.when(pl.col("policy").str.len_chars() > _LABEL_CHARS)
        .then(pl.col("policy").str.slice(0, _LABEL_CHARS - 1) + "\u2026")
        .otherwise(pl.col("policy"))
    )
    shown = data.sort("p_front", descending=True, maintain_order=True).head(MAX_INTERVALS)
    scale = (
        alt.Scale(type="log", nice=False, padding=24)
        if log_cost
        else alt.Scale(zero=False, nice=False, padding=24)
    )
    x_title = cost + (" (log scale)" if log_cost else "")
    x = alt.X("cost:Q", title=x_title, scale=scale)
    y = alt.Y("quality:Q", title=quality, scale=alt.Scale(zero=False, nice=False, padding=24))
    bars = alt.Chart(_data(shown))
    v_bars = bars.mark_rule(strokeWidth=1, color="#9E9E9E", opacity=0.7).encode(
        x=x, y=alt.Y("quality_low:Q", title=quality), y2="quality_high:Q"
    )
    h_bars = bars.mark_rule(strokeWidth=1, color="#9E9E9E", opacity=0.7).encode(
        x=alt.X("cost_low:Q", title=x_title, scale=scale), x2="cost_high:Q", y=y
    )
    # the boundary of what the front dominates: along the cost, then up (or down) to the next
    shape: Literal["step-after", "step-before"] = (
        "step-after" if cost_direction == "minimize" else "step-before"
    )
    step = (
        alt.Chart(_data(front))
        .mark_line(interpolate=shape, color=_FRONT, strokeWidth=2)
        .encode(x=x, y=y, order="cost:Q")
    )
    points = (
        alt.Chart(_data(data))
        .mark_point(filled=True, opacity=0.9, stroke="#333", strokeWidth=0.5)
        .encode(
            x=x,
            y=y,
            color=alt.Color(
                "p_front:Q",
                title="P(on the front)",
                scale=alt.Scale(domain=[0, 1], scheme="blues"),
            ),
            # the same field and title as the colour: one legend, shaded and sized
            size=alt.Size(
                "p_front:Q",
                title="P(on the front)",
                scale=alt.Scale(domain=[0, 1], range=[25, 260]),
            ),
            order=alt.Order("p_front:Q"),  # the likeliest drawn last, on top
            tooltip=[
                alt.Tooltip("policy:N"),
                alt.Tooltip("quality:Q", format=".4g", title=quality),
                alt.Tooltip("quality_low:Q", format=".4g", title="interval low"),
                alt.Tooltip("quality_high:Q", format=".4g", title="interval high"),
                alt.Tooltip("cost:Q", format=".4g", title=cost),
                alt.Tooltip("cost_low:Q", format=".4g", title="cost interval low"),
                alt.Tooltip("cost_high:Q", format=".4g", title="cost interval high"),
                alt.Tooltip("p_front:Q", format=".3f", title="P(on the front)"),
                alt.Tooltip("on_front:N", title="on the front of the means"),
                alt.Tooltip("n_keys:Q", title="keys"),
            ],
        )
    )
    rings = (
        alt.Chart(_data(front))
        .mark_point(shape="circle", size=330, color=_FRONT, strokeWidth=1.5, filled=False)
        .encode(x=x, y=y)
    )
    labels = (
        alt.Chart(_data(labelled))
        .mark_text(align="left", dx=11, dy=-9, fontSize=12, color="#222")
        .encode(x=x, y=y, text="label:N")
    )
    better = {"maximize": "higher", "minimize": "lower"}
    named = (
        f"the {MAX_LABELS} cheapest of its {front.height:,} named"
        if front.height > MAX_LABELS
        else "its policies named"
    )
    crosses = (
        f"the {MAX_INTERVALS} likeliest policies' {level:.0%} intervals"
        if data.height > MAX_INTERVALS
        else f"{level:.0%} intervals"
    )
    subtitle = [
        f"{data.height:,} policies · {better.get(quality_direction, '?')} {quality} and "
        f"{better.get(cost_direction, '?')} {cost} are better",
        f"line: the front of the means ({named}) · shade and size: P(on the front) over "
        f"resamples of keys · bars: {crosses}",
    ]
    chart = alt.layer(v_bars, h_bars, step, rings, points, labels).properties(
        width=560,
        height=380,
        # two subtitle lines: one would set the chart's width
        title=alt.TitleParams(
            text=_title(title or f"{quality} against {cost}: the Pareto front", "").text,
            subtitle=subtitle,
        ),
    )
    return _styled(chart)  # type: ignore[no-any-return]
