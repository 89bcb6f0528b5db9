"""A trend over versions: a line per task with its interval band, regression points marked."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import altair as alt
import numpy as np
import polars as pl

from hylo_analytics._html import HIDDEN, shorten
from hylo_analytics.charts._style import LABEL_CHARS, _cut, _require, _styled
from hylo_analytics.errors import InputError

if TYPE_CHECKING:
    from hylo_analytics.compare.trends import Trend

__all__ = ["MAX_TASKS", "trend", "trend_tasks"]

MAX_TASKS = 12  # lines a reader can tell apart by colour (tableau20 has 20, the eye fewer)
_TICKS = 6  # version labels on a panel's x axis at most: one per ~75 px
_POINTS = 60  # up to this many versions each one is a point (hover shows its numbers)
_WIDTH, _HEIGHT = 440, 110
_BINS = _WIDTH  # past this many versions a panel draws one point per pixel column
_REGRESSED = "#D55E00"
_LINE, _BAND = "#0072B2", "#9CC3E6"


def _data(frame: pl.DataFrame) -> alt.Data:
    """The rows as one JSON text Vega parses: altair copies and validates a list of rows
    value by value on every layer, panel and configure (14 s for 20,000 rows); a string it
    copies and checks once. The values keep their types (a version "1.10" stays text)."""
    plain = frame.with_columns(pl.col(pl.Float64).round(6))
    return alt.Data(values=plain.write_json(), format=alt.DataFormat(type="json"))  # type: ignore[no-untyped-call]


def trend_tasks(data: Trend, max_tasks: int = MAX_TASKS) -> pl.DataFrame:
    """The tasks a chart of ``data`` shows (their task columns and ``task``, the name drawn):
    the regressed ones first (by their regression point), then the others in task order, at
    most ``max_tasks``."""
    tasks = list(data.tasks)
    reg = data.regressions.with_row_index("_rank")
    order = reg.sort(pl.col("regressed").not_(), "position", "_rank", nulls_last=True)
    return order.head(max_tasks).select(*tasks, _task_labels(data).alias("task"))


def _task_labels(data: Trend) -> pl.Expr:
    """A task's name: its ``task_id``, with its suite when the trend spans several."""
    cols = [c for c in data.tasks if c != "task_id"]
    several = [c for c in cols if data.regressions[c].n_unique() > 1]
    if not several:
        return pl.col("task_id").cast(pl.String).fill_null("(none)")
    parts = [pl.col(c).cast(pl.String).fill_null("(none)") for c in [*several, "task_id"]]
    return pl.concat_str(parts, separator=" / ")


def trend(
    data: Trend,
    *,
    max_tasks: int = MAX_TASKS,
    percent: bool | None = None,
    title: str | None = None,
) -> alt.ConcatChart:
    """Each task's rate over the versions, one small panel per task (x: the position in the
    order, shared by the panels), with its interval band and the regression point marked (a
    downward triangle at the first version worse than the best earlier one, labelled with
    that version; the best earlier version is a hollow circle).

    ``data``: a :class:`~hylo_analytics.compare.trends.Trend`. At most ``max_tasks`` panels,
    the regressed tasks first (the subtitle says how many are shown): panels, not one line
    per task, because ten noisy lines and their bands over thousands of versions hide each
    other. The x axis carries at most 6 version labels (readable at 2,000 versions); up to
    60 versions each version is a point with its numbers on hover. ``percent``: a 0-1 axis
    in percent (default: when every interval lies in [0, 1]).
    """
    if max_tasks < 1:
        raise InputError(f"trend chart: max_tasks must be at least 1, got {max_tasks}")
    if data.rates.is_empty():
        raise InputError("trend chart: the trend has no rates to draw")
    tasks = list(data.tasks)
    shown = trend_tasks(data, max_tasks)
    rates = data.rates.join(shown, on=tasks, nulls_equal=True)
    rates = _require(rates, ["task", "version", "position", "rate", "ci_low", "ci_high", "n"],
                     "trend")  # fmt: skip
    n_versions = len(data.versions)
    if n_versions > _BINS:  # 2,000 versions in 440 px: bins, not 20,000 overdrawn points
        rates = _binned(rates, n_versions)
    if percent is None:
        lo, hi = rates["ci_low"].min(), rates["ci_high"].max()
        percent = lo is not None and hi is not None and float(lo) >= 0 and float(hi) <= 1  # type: ignore[arg-type]
    marks = _require(
        data.regressions.filter("regressed").join(shown, on=tasks, nulls_equal=True),
        ["task", "version", "best_version", "position", "best_position", "rate", "best_rate",
         "diff", "p_adjusted"], "trend",
    )  # fmt: skip
    style = _Style(len(data.versions), percent, data.metric)
    names = _cut(shown)["task"].to_list()
    panels = [
        _panel(
            rates.filter(pl.col("task") == name),
            marks.filter(pl.col("task") == name),
            data.versions,
            style,
            str(name),
        )
        for name in names
    ]  # fmt: skip (at most max_tasks panels, each a filter of the small frames)
    chart = alt.concat(*panels, columns=1 if len(panels) < 4 else 2, spacing=18).properties(
        title=alt.TitleParams(
            _shown(title or f"{data.metric} per task over {len(data.versions):,} versions"),
            subtitle=[_shown(line) for line in _subtitle(data, shown.height, _BINS)],
        )
    )
    return _styled(chart)  # type: ignore[no-any-return]


class _Style:
    """What every panel of one chart shares: the x scale and the value axis."""

    def __init__(self, n_versions: int, percent: bool, metric: str) -> None:
        self.n_versions = n_versions
        self.fmt = ".0%" if percent else ".3g"
        self.y_title = f"{metric} rate" if percent else metric
        self.x = self.x_of("position")
        self.y_scale = alt.Scale(domain=[0, 1]) if percent else alt.Scale(zero=False)

    def x_of(self, field: str) -> alt.X:
        """The shared x encoding (a version's position) of ``field``."""
        domain = [0, max(self.n_versions - 1, 1)]
        axis = alt.Axis(labels=False, values=_ticks(self.n_versions), grid=False)
        return alt.X(f"{field}:Q", title=None, scale=alt.Scale(domain=domain), axis=axis)


def _panel(
    rates: pl.DataFrame, marks: pl.DataFrame, versions: tuple[str, ...], st: _Style, name: str
) -> alt.LayerChart:
    """One task's band, line, regression point and the version labels under its axis."""
    fmt = st.fmt
    base = alt.Chart(_data(rates)).encode(x=st.x)
    y = alt.Y("ci_low:Q", title=st.y_title, scale=st.y_scale, axis=alt.Axis(format=fmt,
              tickCount=4))  # fmt: skip
    band = base.mark_area(opacity=0.25, color=_BAND).encode(y=y, y2="ci_high:Q")
    tips = [alt.Tooltip("version:N"), alt.Tooltip("rate:Q", format=fmt),
            alt.Tooltip("ci_low:Q", format=fmt), alt.Tooltip("ci_high:Q", format=fmt),
            alt.Tooltip("n:Q")]  # fmt: skip
    many = st.n_versions > _POINTS
    line = base.mark_line(strokeWidth=1 if many else 2, color=_LINE).encode(
        y="rate:Q", tooltip=tips
    )
    layers: list[Any] = [band, line]
    if not many:
        layers.append(base.mark_point(filled=True, size=36, color=_LINE).encode(y="rate:Q",
                      tooltip=tips))  # fmt: skip
    if marks.height:
        layers += _marks(marks, st)
    layers.append(_version_labels(versions, st))
    title = alt.TitleParams(name, fontSize=13, anchor="start", fontWeight="normal")
    chart = alt.LayerChart(layer=layers).properties(width=_WIDTH, height=_HEIGHT, title=title)
    return chart


def _ticks(n_versions: int) -> list[int]:
    """At most ``_TICKS`` evenly spread positions, the first and the last among them."""
    return sorted(
        {round(float(p)) for p in np.linspace(0, n_versions - 1, min(n_versions, _TICKS))}
    )


def _version_labels(versions: tuple[str, ...], st: _Style) -> alt.Chart:
    """The labels of the ticked versions under the axis, drawn as text marks: a label is
    data, never part of an expression (a version named like code stays a string)."""
    ticks = _ticks(len(versions))
    labels = _cut(
        pl.DataFrame({"position": ticks, "label": [versions[p] for p in ticks]})
    ).with_columns(pl.col("label").str.slice(0, 24))
    chart: alt.Chart = (
        alt.Chart(_data(labels))
        .mark_text(angle=330, align="right", baseline="top", fontSize=10, color="#444")
        .encode(x=st.x, y=alt.value(_HEIGHT + 6), text="label:N")
    )
    return chart


def _marks(marks: pl.DataFrame, st: _Style) -> list[Any]:
    """The regression point (a downward triangle, labelled with its version) and the best
    earlier version it fell from (a hollow circle at its rate)."""
    fmt = st.fmt
    tips = [alt.Tooltip("version:N", title="regressed at"),
            alt.Tooltip("best_version:N", title="best earlier"),
            alt.Tooltip("rate:Q", format=fmt), alt.Tooltip("best_rate:Q", format=fmt),
            alt.Tooltip("diff:Q", format="+.3g"), alt.Tooltip("p_adjusted:Q", format=".2g")]  # fmt: skip
    cut = pl.col("version").str.len_chars() > 20
    short = pl.when(cut).then(pl.col("version").str.slice(0, 19) + "\u2026").otherwise("version")
    base = alt.Chart(_data(marks.with_columns(label=short)))
    best = base.mark_point(shape="circle", size=90, filled=False, color=_REGRESSED,
                           strokeWidth=1.5).encode(x=st.x_of("best_position"),
                                                   y="best_rate:Q", tooltip=tips)  # fmt: skip
    point = base.mark_point(shape="triangle-down", size=140, filled=True, color=_REGRESSED,
                            stroke="black", strokeWidth=0.8, opacity=1).encode(
        x=st.x, y="rate:Q", tooltip=tips)  # fmt: skip
    label = base.mark_text(dy=14, fontSize=11, color=_REGRESSED, baseline="top").encode(
        x=st.x, y="rate:Q", text=alt.Text("label:N")
    )
    return [best, point, label]


def _shown(line: str) -> str:
    """A title line as the charts draw names: hidden characters shown, cut to length."""
    return shorten(re.sub(f"[{HIDDEN}]", "\ufffd", line), LABEL_CHARS)


def _binned(rates: pl.DataFrame, n_versions: int, bins: int = _BINS) -> pl.DataFrame:
    """``rates`` (one row per task and version) in ``bins`` runs of consecutive versions per
    task: the mean rate at the bin's mean position, the band from the lowest interval bound
    to the highest, ``n`` summed and ``version`` the first and the last version of the bin."""
    binned: pl.DataFrame = (
        rates.with_columns(_bin=(pl.col("position") * bins // n_versions))
        .sort("task", "position")
        .group_by("task", "_bin", maintain_order=True)
        .agg(
            pl.col("position").mean(),
            pl.col("rate").mean(),
            pl.col("ci_low").min(),
            pl.col("ci_high").max(),
            pl.col("n").sum(),
            pl.concat_str(
                pl.col("version").first(), pl.col("version").last(), separator=" \u2013 "
            ).alias("version"),
        )
        .drop("_bin")
    )
    return binned


def _subtitle(data: Trend, n_shown: int, bins: int = _BINS) -> list[str]:
    over = "each version's tasks" if data.family == "tasks" else "every test of the scan"
    adjust = {"holm": "Holm", "bh": "Benjamini-Hochberg", "none": "unadjusted"}[data.adjust]
    lines = [
        f"x: {len(data.versions):,} versions ordered by {data.order} ({data.order_rule}); "
        + (
            f"bands: {data.level:.0%} intervals"
            if len(data.versions) <= bins
            else f"line: the mean rate of each {len(data.versions) / bins:.1f} consecutive "
            f"versions (one per pixel column); band: their lowest to highest {data.level:.0%} "
            "bound"
        ),
        f"\u25bc regression point: first version worse than the best earlier one "
        f"(one-sided, {adjust} over {over}, alpha {data.alpha:g}; errors {data.errors})",
    ]
    total = data.regressions.height
    if n_shown < total:
        lines.append(f"showing {n_shown} of {total} tasks (the regressed ones first)")
    return lines
