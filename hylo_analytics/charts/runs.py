"""Charts across runs: distributions, trends over versions, cost vs success, coverage."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import altair as alt
import polars as pl

from hylo_analytics.charts._style import (
    _QUANTILES,
    _REASON_COLORS,
    _SCORED_COLOR,
    _data,
    _order,
    _require,
    _styled,
    _title,
)


def summarize_distribution(
    frame: pl.DataFrame | pl.LazyFrame, *, value: str, by: str = "run"
) -> pl.DataFrame:
    """Quantiles of ``value`` per ``by`` group: the input contract of :func:`metric_distribution`.

    Returns ``<by>, n, mean, q05, q25, q50, q75, q95`` (linear interpolation); nulls are
    dropped and counted out of ``n``. Use it (or the same in DuckDB with ``quantile_cont``) so
    that only a handful of numbers per run reach the chart.
    """
    lazy = frame.lazy()
    quantiles = [
        pl.col(value).quantile(q, interpolation="linear").alias(name)
        for name, q in _QUANTILES.items()
    ]
    out: pl.DataFrame = (
        lazy.group_by(by)
        .agg(pl.col(value).count().alias("n"), pl.col(value).mean().alias("mean"), *quantiles)
        .sort(by)
        .collect()
    )
    return out


def metric_distribution(
    frame: pl.DataFrame,
    *,
    by: str = "run",
    value_label: str = "value",
    title: str | None = None,
) -> alt.LayerChart:
    """Box-style summary of a continuous metric per run, drawn from quantiles, not raw values.

    ``frame``: one row per ``by`` group with ``n, q05, q25, q50, q75, q95`` (and optionally
    ``mean``), e.g. from :func:`summarize_distribution`. Whiskers span 5-95 %, the box the
    inter-quartile range, the dark tick is the median. Groups keep the frame's row order.
    """
    cols = [by, "n", "q05", "q25", "q50", "q75", "q95"]
    cols += ["mean"] if "mean" in frame.columns else []
    data = _require(frame, cols, "metric_distribution")
    base = alt.Chart(_data(data))
    y = alt.Y(f"{by}:N", title=None, sort=_order(data, by))
    tooltip = [alt.Tooltip(f"{by}:N"), alt.Tooltip("n:Q", title="values")]
    tooltip += [alt.Tooltip(f"{c}:Q", format=".4g") for c in cols[2:]]
    whisker = base.mark_rule(strokeWidth=1.5, color="#555").encode(
        x=alt.X("q05:Q", title=value_label, scale=alt.Scale(zero=False)), x2="q95:Q", y=y
    )
    box = base.mark_bar(height={"band": 0.55}, color="#56B4E9", stroke="#0072B2").encode(
        x="q25:Q", x2="q75:Q", y=y, tooltip=tooltip
    )
    median = base.mark_tick(color="#08306B", thickness=2.5, size=20).encode(x="q50:Q", y=y)
    chart = (whisker + box + median).properties(
        width=460,
        height=alt.Step(34),
        title=_title(
            title or f"Distribution of {value_label}",
            "box: 25-75 % · whiskers: 5-95 % · dark tick: median",
        ),
    )
    return _styled(chart)  # type: ignore[no-any-return]


_FLAT_LABELS = 6  # up to this many versions the x labels stay horizontal, 90 px apart


def metric_trend(
    frame: pl.DataFrame,
    *,
    x: str = "agent_version",
    series: str | None = None,
    value_label: str = "success rate",
    percent: bool = True,
    title: str | None = None,
    x_label: str | None = None,
    line: bool = True,
    subtitle: str | None = None,
    series_colors: Mapping[str, str] | None = None,
) -> alt.LayerChart:
    """A metric across agent versions (x, in the frame's row order) with interval bars.

    ``frame``: one row per version (and per ``series`` group, if given) with ``value,
    ci_low, ci_high`` and the ``x`` column; ``n`` is shown in the tooltip when present.
    ``x_label``: the x axis title (default: the column's name). ``line=False`` draws points
    and bars only: a line says the points are versions of one thing, so runs of unrelated
    policies get none. ``subtitle``: a line added under the title (what the points are);
    ``series_colors``: each ``series`` value's colour (default the palette's).
    Past :data:`_FLAT_LABELS` versions the labels are slanted and the versions packed.
    """
    cols = [x, "value", "ci_low", "ci_high"] + ([series] if series else [])
    cols += ["n"] if "n" in frame.columns else []
    data = _require(frame, cols, "metric_trend")
    fmt = ".0%" if percent else ".3g"
    base = alt.Chart(_data(data))
    n_x = data[x].n_unique()
    flat = n_x <= _FLAT_LABELS
    xenc = alt.X(
        f"{x}:O",
        title=x_label or x.replace("_", " "),
        sort=_order(data, x),
        axis=alt.Axis(labelAngle=0 if flat else -40, labelAlign="center" if flat else "right"),
    )
    enc: dict[str, Any] = {"x": xenc}
    mark: dict[str, Any] = {}
    if series:
        scale = (
            alt.Scale(domain=list(series_colors), range=list(series_colors.values()))
            if series_colors
            else alt.Undefined
        )
        enc["color"] = alt.Color(f"{series}:N", title=series.replace("_", " "), scale=scale)
    else:
        mark["color"] = "#0072B2"
    tooltip = [
        alt.Tooltip(f"{c}:{'Q' if c in ('value', 'ci_low', 'ci_high', 'n') else 'N'}") for c in cols
    ]
    trend = base.mark_line(strokeWidth=2, **mark).encode(
        y=alt.Y("value:Q", title=value_label, axis=alt.Axis(format=fmt)), **enc
    )
    if not line:  # the value axis still needs its format: an invisible layer carries it
        trend = trend.mark_line(opacity=0)
    bars = base.mark_rule(strokeWidth=2, opacity=0.6, **mark).encode(
        y=alt.Y("ci_low:Q", title=value_label), y2="ci_high:Q", **enc
    )
    points = base.mark_point(filled=True, size=70, opacity=1, **mark).encode(
        y="value:Q", tooltip=tooltip, **enc
    )
    what = "bars: 95% CI" + (f" · {subtitle}" if subtitle else "")
    chart = (bars + trend + points).properties(
        width=max(240, (90 if flat else 30) * n_x),
        height=280,
        title=_title(title or f"{value_label.capitalize()} across versions", what),
    )
    return _styled(chart)  # type: ignore[no-any-return]


def pareto_front(frame: pl.DataFrame, *, cost: str = "cost", value: str = "success") -> pl.Series:
    """Whether each row is on the Pareto front (lower ``cost``, higher ``value`` both better).

    A row is on the front when no other row is at least as cheap and as good and better on
    one; two rows at one point are both on it, a null never is. The one implementation is
    :func:`hylo_analytics.stats.pareto.pareto_front` (sort by cost, running maximum of value).
    """
    from hylo_analytics.stats.pareto import pareto_front as front

    q, c = (frame[col].cast(pl.Float64).fill_null(float("nan")).to_numpy() for col in (value, cost))
    return pl.Series("on_front", front(q, c))


def cost_vs_success(
    frame: pl.DataFrame,
    *,
    cost_label: str = "cost",
    title: str = "Cost vs success",
    label_runs: bool = True,
    subtitle: str | None = None,
) -> alt.LayerChart:
    """Success (with CI) against cost per run; the Pareto front is joined and filled.

    ``frame``: one row per run with ``run, cost, success, ci_low, ci_high``. The front is
    computed here with :func:`pareto_front` (cheaper and better is better), unless the frame
    has an ``on_front`` column: a few runs drawn from many carry the front of them all.
    A ``label`` column is the text beside each point (empty: none; default the run).
    ``subtitle``: a line added under the title (what the points are).
    """
    cols = ["run", "cost", "success", "ci_low", "ci_high"]
    data = _require(frame, cols + [c for c in ("on_front", "label") if c in frame.columns],
                    "cost_vs_success")  # fmt: skip
    if "label" not in data.columns:
        data = data.with_columns(label=pl.col("run"))
    if "on_front" not in data.columns:
        data = data.with_columns(pareto_front(data))
    data = data.with_columns(
        pl.when(pl.col("on_front"))
        .then(pl.lit("Pareto front"))
        .otherwise(pl.lit("dominated"))
        .alias("front")
    )
    base = alt.Chart(_data(data))
    x = alt.X("cost:Q", title=cost_label, scale=alt.Scale(zero=False, nice=False, padding=30))
    color = alt.Color(
        "front:N",
        title=None,
        scale=alt.Scale(domain=["Pareto front", "dominated"], range=["#0072B2", "#9E9E9E"]),
    )
    front_line = (
        alt.Chart(_data(data.filter(pl.col("on_front")).sort("cost")))
        .mark_line(interpolate="step-after", color="#0072B2", strokeDash=[5, 3], opacity=0.7)
        .encode(x="cost:Q", y="success:Q", order="cost:Q")
    )
    bars = base.mark_rule(strokeWidth=1.5).encode(x=x, y="ci_low:Q", y2="ci_high:Q", color=color)
    points = base.mark_point(size=110, filled=True, opacity=1).encode(
        x=x,
        y=alt.Y(
            "success:Q",
            title="success rate",
            axis=alt.Axis(format="%"),
            scale=alt.Scale(zero=False, nice=False, padding=30),
        ),
        color=color,
        tooltip=[
            alt.Tooltip("run:N"),
            alt.Tooltip("cost:Q", format=".4g", title=cost_label),
            alt.Tooltip("success:Q", format=".1%", title="success rate"),
            alt.Tooltip("ci_low:Q", format=".1%", title="95% CI low"),
            alt.Tooltip("ci_high:Q", format=".1%", title="95% CI high"),
            alt.Tooltip("front:N"),
        ],
    )
    layers: list[Any] = [front_line, bars, points]
    if label_runs:
        # Above the interval's top end, where no other mark of the same run can sit.
        labels = base.mark_text(baseline="bottom", dy=-4, fontSize=12, color="#222").encode(
            x=x, y="ci_high:Q", text="label:N"
        )
        layers.append(labels)
    chart = alt.layer(*layers).properties(
        width=460,
        height=320,
        title=_title(
            title,
            "bars: 95% CI · dashed line: Pareto front (cheaper and better)"
            + (f" · {subtitle}" if subtitle else ""),
        ),
    )
    return _styled(chart)  # type: ignore[no-any-return]


def coverage_breakdown(
    frame: pl.DataFrame, *, title: str = "Coverage: scored vs skipped, by reason"
) -> alt.Chart:
    """Stacked counts per run and metric: how many rows were scored and why the rest were not.

    ``frame``: one row per (run, metric, reason) with ``run, metric, reason, n``; the reason
    ``"scored"`` is the valid rows, any other value is a skip reason. Abstentions stay
    visible here instead of silently shrinking a denominator.
    """
    data = _require(frame, ["run", "metric", "reason", "n"], "coverage_breakdown")
    reasons = (
        data.filter(pl.col("reason") != "scored")
        .group_by("reason")
        .agg(pl.col("n").sum())
        .sort(["n", "reason"], descending=[True, False])
        .get_column("reason")
        .to_list()
    )
    domain = ["scored", *reasons]
    palette = [
        _SCORED_COLOR,
        *(_REASON_COLORS[i % len(_REASON_COLORS)] for i in range(len(reasons))),
    ]
    rank = {r: i for i, r in enumerate(domain)}
    data = data.with_columns(
        pl.col("reason").replace_strict(rank, default=len(domain)).alias("_rank")
    )
    chart = (
        alt.Chart(_data(data))
        .mark_bar(height={"band": 0.7})
        .encode(
            x=alt.X("sum(n):Q", title="rows (episodes \u00d7 metric)", stack="zero"),
            y=alt.Y("run:N", title=None, sort=_order(data, "run")),
            color=alt.Color(
                "reason:N", title="outcome", scale=alt.Scale(domain=domain, range=palette)
            ),
            order=alt.Order("_rank:Q"),
            row=alt.Row("metric:N", title=None, header=alt.Header(labelAngle=0, labelAlign="left")),
            tooltip=[
                alt.Tooltip("run:N"),
                alt.Tooltip("metric:N"),
                alt.Tooltip("reason:N"),
                alt.Tooltip("n:Q", title="rows"),
            ],
        )
        .properties(width=420, height=alt.Step(22), title=_title(title, "per metric and run"))
    )
    return _styled(chart)  # type: ignore[no-any-return]
