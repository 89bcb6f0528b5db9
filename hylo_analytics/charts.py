"""Altair charts over aggregates (never raw rows): each function returns an Altair chart.

Every function takes an *already aggregated* polars frame (one row per task, run or version)
whose columns are listed in its docstring: the frame contracts below are what the aggregation
and comparison modules produce, so a chart never ships thousands of rows to Vega. Intervals
are computed by hylo_analytics, never by Vega's bootstrap ``ci``, so a chart shows the same
numbers as the tables beside it. :func:`save` writes HTML (self-contained), PNG or SVG with no
network (vl-convert).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import altair as alt
import polars as pl

__all__ = [
    "VERDICT_COLORS",
    "cost_vs_success",
    "coverage_breakdown",
    "metric_distribution",
    "metric_trend",
    "paired_forest",
    "pareto_front",
    "save",
    "success_rate_by_task",
    "summarize_distribution",
    "win_loss_bars",
]

# Okabe-Ito colours, safe for the common colour-vision deficiencies; shapes repeat the verdict
# so it survives greyscale printing too.
VERDICT_COLORS: dict[str, str] = {
    "improved": "#0072B2",
    "regressed": "#D55E00",
    "unchanged": "#6E6E6E",
    "inconclusive": "#E69F00",
}
_VERDICT_SHAPES = {
    "improved": "triangle-up",
    "regressed": "triangle-down",
    "unchanged": "circle",
    "inconclusive": "diamond",
}
_OUTCOME_COLORS = {"candidate wins": "#0072B2", "ties": "#BDBDBD", "parent wins": "#D55E00"}
_REASON_COLORS = ("#E69F00", "#D55E00", "#CC79A7", "#009E73", "#56B4E9", "#F0E442", "#999999")
_SCORED_COLOR = "#0072B2"
_RUN_COLORS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000")
_QUANTILES = {"q05": 0.05, "q25": 0.25, "q50": 0.5, "q75": 0.75, "q95": 0.95}


def _require(frame: pl.DataFrame, columns: Sequence[str], chart: str) -> pl.DataFrame:
    """Select ``columns``; a missing one is an error naming the chart and what it needs."""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(
            f"{chart}: the frame lacks column(s) {missing}; expected {list(columns)}, "
            f"got {frame.columns}"
        )
    return frame.select(columns)


def _data(frame: pl.DataFrame) -> alt.Data:
    """Inline the (small, aggregated) rows; decimals become floats, which JSON can carry."""
    plain = frame.with_columns(pl.col(pl.Decimal).cast(pl.Float64))
    return alt.Data(values=plain.to_dicts())  # type: ignore[no-untyped-call]


def _order(frame: pl.DataFrame, column: str) -> list[Any]:
    """Categories in the frame's row order (the caller sorted them on purpose)."""
    return frame.get_column(column).unique(maintain_order=True).to_list()


def _styled(chart: Any) -> Any:
    """House look: legible fonts, no chart border, titles left-aligned with a subtitle."""
    return (
        chart.configure(font="DejaVu Sans, Helvetica, Arial, sans-serif")
        .configure_view(strokeWidth=0)
        .configure_axis(
            labelFontSize=12, titleFontSize=13, titleFontWeight="normal", labelLimit=260
        )
        .configure_legend(labelFontSize=12, titleFontSize=12, orient="top")
        .configure_title(fontSize=16, subtitleFontSize=12, anchor="start", subtitleColor="#555")
        .configure_header(labelFontSize=12, titleFontSize=13)
    )


def _title(text: str, subtitle: str) -> alt.TitleParams:
    return alt.TitleParams(text=text, subtitle=subtitle)


# -- per task -----------------------------------------------------------------------------


def success_rate_by_task(
    frame: pl.DataFrame,
    *,
    run_label: str = "run",
    title: str = "Success rate per task",
    full_scale: bool = True,
) -> alt.LayerChart:
    """Success rate per task (rows) for several runs (colour), with CI bars.

    ``full_scale=False`` zooms the axis onto the data (for rates all near 0 or 1).

    ``frame``: one row per (task, run) with ``task_id, success_rate, ci_low, ci_high,
    n_valid`` and the ``run_label`` column (e.g. ``mart_task_success`` plus a label).
    Tasks are sorted by name; runs keep the frame's row order.
    """
    cols = ["task_id", run_label, "success_rate", "ci_low", "ci_high", "n_valid"]
    data = _require(frame, cols, "success_rate_by_task").sort("task_id", maintain_order=True)
    runs = _order(frame, run_label)
    base = alt.Chart(_data(data))
    y = alt.Y("task_id:N", title=None, sort=sorted(set(data["task_id"].to_list())))
    offset = alt.YOffset(f"{run_label}:N", sort=runs)
    color = alt.Color(
        f"{run_label}:N",
        title=run_label.replace("_", " "),
        scale=alt.Scale(domain=runs, range=list(_RUN_COLORS)),
    )
    points = base.mark_point(filled=True, size=60, opacity=1).encode(
        x=alt.X(
            "success_rate:Q",
            title="success rate (scored episodes)",
            scale=alt.Scale(domain=[0, 1]) if full_scale else alt.Scale(zero=False),
            axis=alt.Axis(format="%"),
        ),
        y=y,
        yOffset=offset,
        color=color,
        tooltip=[
            alt.Tooltip(f"{run_label}:N"),
            alt.Tooltip("task_id:N", title="task"),
            alt.Tooltip("success_rate:Q", format=".1%", title="success rate"),
            alt.Tooltip("ci_low:Q", format=".1%", title="95% CI low"),
            alt.Tooltip("ci_high:Q", format=".1%", title="95% CI high"),
            alt.Tooltip("n_valid:Q", title="scored episodes"),
        ],
    )
    bars = base.mark_rule(strokeWidth=2).encode(
        x="ci_low:Q", x2="ci_high:Q", y=y, yOffset=offset, color=color
    )
    chart = (bars + points).properties(
        width=460,
        height=alt.Step(14),  # per run within a task: yOffset takes the step
        title=_title(title, "points: success rate · lines: 95% confidence interval"),
    )
    return _styled(chart)  # type: ignore[no-any-return]


def paired_forest(
    frame: pl.DataFrame,
    *,
    title: str = "Candidate \u2212 parent, per task",
    metric_label: str = "success rate",
) -> alt.LayerChart:
    """Forest plot of the paired difference candidate - parent per task, coloured by verdict.

    ``frame``: one row per task with ``task_id, diff, ci_low, ci_high, verdict, p_value,
    p_adjusted, n_pairs, candidate_wins, parent_wins, ties``; ``verdict`` is one of
    improved / regressed / unchanged / inconclusive and ``p_value`` / ``p_adjusted`` are the
    (exact McNemar) p and its multiplicity-adjusted value. Tasks are sorted by ``diff``.
    """
    cols = [
        "task_id",
        "diff",
        "ci_low",
        "ci_high",
        "verdict",
        "p_value",
        "p_adjusted",
        "n_pairs",
        "candidate_wins",
        "parent_wins",
        "ties",
    ]
    data = _require(frame, cols, "paired_forest").sort(
        ["diff", "task_id"], descending=[True, False]
    )
    unknown = set(data["verdict"].drop_nulls().to_list()) - set(VERDICT_COLORS)
    if unknown:
        raise ValueError(
            f"paired_forest: unknown verdict(s) {sorted(unknown)}; expected {list(VERDICT_COLORS)}"
        )
    base = alt.Chart(_data(data))
    y = alt.Y("task_id:N", title=None, sort=_order(data, "task_id"))
    domain = list(VERDICT_COLORS)
    color = alt.Color(
        "verdict:N",
        title="verdict",
        scale=alt.Scale(domain=domain, range=list(VERDICT_COLORS.values())),
    )
    shape = alt.Shape(
        "verdict:N", scale=alt.Scale(domain=domain, range=list(_VERDICT_SHAPES.values()))
    )
    zero = (
        alt.Chart(_data(pl.DataFrame({"x": [0.0]})))
        .mark_rule(color="#333", strokeDash=[4, 3])
        .encode(x="x:Q")
    )
    bars = base.mark_rule(strokeWidth=2.5).encode(
        x=alt.X(
            "ci_low:Q",
            title=f"difference in {metric_label} (candidate \u2212 parent), 95% CI",
            axis=alt.Axis(
                tickCount=8,
                labelExpr="(datum.value > 0 ? '+' : '') + format(datum.value, '.0%')",
            ),
        ),
        x2="ci_high:Q",
        y=y,
        color=color,
    )
    points = base.mark_point(filled=True, size=110, opacity=1).encode(
        x="diff:Q",
        y=y,
        color=color,
        shape=shape,
        tooltip=[
            alt.Tooltip("task_id:N", title="task"),
            alt.Tooltip("verdict:N"),
            alt.Tooltip("diff:Q", format="+.1%", title="difference"),
            alt.Tooltip("ci_low:Q", format="+.1%", title="95% CI low"),
            alt.Tooltip("ci_high:Q", format="+.1%", title="95% CI high"),
            alt.Tooltip("p_value:Q", format=".3g", title="McNemar p"),
            alt.Tooltip("p_adjusted:Q", format=".3g", title="adjusted p"),
            alt.Tooltip("n_pairs:Q", title="pairs"),
            alt.Tooltip("candidate_wins:Q", title="candidate wins"),
            alt.Tooltip("parent_wins:Q", title="parent wins"),
            alt.Tooltip("ties:Q"),
        ],
    )
    chart = (zero + bars + points).properties(
        width=520,
        height=alt.Step(26),
        title=_title(title, "point: paired difference · line: 95% CI · dashed: no change"),
    )
    return _styled(chart)  # type: ignore[no-any-return]


def win_loss_bars(frame: pl.DataFrame, *, title: str = "Paired outcomes per task") -> alt.Chart:
    """Diverging bars per task: candidate wins right, parent wins left, ties centred.

    ``frame``: one row per task with ``task_id, candidate_wins, parent_wins, ties`` (counts of
    paired keys). Tasks are sorted by net wins (candidate - parent), best first.
    """
    cols = ["task_id", "candidate_wins", "parent_wins", "ties"]
    # counts may arrive unsigned (a polars boolean sum): subtracting those would wrap around
    data = (
        _require(frame, cols, "win_loss_bars")
        .with_columns(pl.col(cols[1:]).cast(pl.Int64))
        .with_columns((pl.col("candidate_wins") - pl.col("parent_wins")).alias("net"))
    )
    data = data.sort(["net", "task_id"], descending=[True, False])
    half = pl.col("ties") / 2
    segments = pl.concat(
        [
            data.select(
                "task_id",
                pl.lit("candidate wins").alias("outcome"),
                pl.col("candidate_wins").alias("n"),
                half.alias("start"),
                (half + pl.col("candidate_wins")).alias("end"),
            ),
            data.select(
                "task_id",
                pl.lit("ties").alias("outcome"),
                pl.col("ties").alias("n"),
                (-half).alias("start"),
                half.alias("end"),
            ),
            data.select(
                "task_id",
                pl.lit("parent wins").alias("outcome"),
                pl.col("parent_wins").alias("n"),
                (-half - pl.col("parent_wins")).alias("start"),
                (-half).alias("end"),
            ),
        ],
        how="vertical_relaxed",
    ).filter(pl.col("n") > 0)
    chart = (
        alt.Chart(_data(segments))
        .mark_bar(height={"band": 0.7})
        .encode(
            x=alt.X(
                "start:Q",
                title="paired episodes  (← parent wins · candidate wins →)",
                axis=alt.Axis(labelExpr="abs(datum.value)"),
            ),
            x2="end:Q",
            y=alt.Y("task_id:N", title=None, sort=_order(data, "task_id")),
            color=alt.Color(
                "outcome:N",
                title=None,
                scale=alt.Scale(domain=list(_OUTCOME_COLORS), range=list(_OUTCOME_COLORS.values())),
            ),
            tooltip=[
                alt.Tooltip("task_id:N", title="task"),
                alt.Tooltip("outcome:N"),
                alt.Tooltip("n:Q", title="episodes"),
            ],
        )
        .properties(
            width=460,
            height=alt.Step(24),
            title=_title(title, "ties (both succeeded or both failed) are centred on zero"),
        )
    )
    return _styled(chart)  # type: ignore[no-any-return]


# -- per run ------------------------------------------------------------------------------


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


def metric_trend(
    frame: pl.DataFrame,
    *,
    x: str = "agent_version",
    series: str | None = None,
    value_label: str = "success rate",
    percent: bool = True,
    title: str | None = None,
) -> alt.LayerChart:
    """A metric across agent versions (x, in the frame's row order) with interval bars.

    ``frame``: one row per version (and per ``series`` group, if given) with ``value,
    ci_low, ci_high`` and the ``x`` column; ``n`` is shown in the tooltip when present.
    """
    cols = [x, "value", "ci_low", "ci_high"] + ([series] if series else [])
    cols += ["n"] if "n" in frame.columns else []
    data = _require(frame, cols, "metric_trend")
    fmt = ".0%" if percent else ".3g"
    base = alt.Chart(_data(data))
    xenc = alt.X(
        f"{x}:O", title=x.replace("_", " "), sort=_order(data, x), axis=alt.Axis(labelAngle=0)
    )
    enc: dict[str, Any] = {"x": xenc}
    mark: dict[str, Any] = {}
    if series:
        enc["color"] = alt.Color(f"{series}:N", title=series.replace("_", " "))
    else:
        mark["color"] = "#0072B2"
    tooltip = [
        alt.Tooltip(f"{c}:{'Q' if c in ('value', 'ci_low', 'ci_high', 'n') else 'N'}") for c in cols
    ]
    line = base.mark_line(strokeWidth=2, **mark).encode(
        y=alt.Y("value:Q", title=value_label, axis=alt.Axis(format=fmt)), **enc
    )
    bars = base.mark_rule(strokeWidth=2, opacity=0.6, **mark).encode(
        y=alt.Y("ci_low:Q", title=value_label), y2="ci_high:Q", **enc
    )
    points = base.mark_point(filled=True, size=70, opacity=1, **mark).encode(
        y="value:Q", tooltip=tooltip, **enc
    )
    chart = (bars + line + points).properties(
        width=max(240, 90 * data[x].n_unique()),
        height=280,
        title=_title(title or f"{value_label.capitalize()} across versions", "bars: 95% CI"),
    )
    return _styled(chart)  # type: ignore[no-any-return]


def pareto_front(frame: pl.DataFrame, *, cost: str = "cost", value: str = "success") -> pl.Series:
    """Whether each row is on the Pareto front (lower ``cost``, higher ``value`` both better).

    A row is on the front when no other row is at least as cheap and strictly better, or
    strictly cheaper and at least as good. Vectorized: sort by cost (value descending within
    a cost), and a row is on the front iff its value beats every cheaper-or-equal row before it.
    """
    ordered = (
        frame.select(cost, value).with_row_index("_i").sort([cost, value], descending=[False, True])
    )
    best_before = pl.col(value).cum_max().shift(1)
    flags = ordered.with_columns(
        (best_before.is_null() | (pl.col(value) > best_before)).alias("on_front")
    ).sort("_i")
    return flags.get_column("on_front").alias("on_front")


def cost_vs_success(
    frame: pl.DataFrame,
    *,
    cost_label: str = "cost",
    title: str = "Cost vs success",
    label_runs: bool = True,
) -> alt.LayerChart:
    """Success (with CI) against cost per run; the Pareto front is joined and filled.

    ``frame``: one row per run with ``run, cost, success, ci_low, ci_high``. The front is
    computed here with :func:`pareto_front` (cheaper and better is better).
    """
    cols = ["run", "cost", "success", "ci_low", "ci_high"]
    data = _require(frame, cols, "cost_vs_success")
    data = data.with_columns(pareto_front(data)).with_columns(
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
            x=x, y="ci_high:Q", text="run:N"
        )
        layers.append(labels)
    chart = alt.layer(*layers).properties(
        width=460,
        height=320,
        title=_title(title, "bars: 95% CI · dashed line: Pareto front (cheaper and better)"),
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
