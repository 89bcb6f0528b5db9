"""Charts of one comparison: success per task, the paired forest plot, win / loss / tie bars."""

from __future__ import annotations

import altair as alt
import polars as pl

from hylo_analytics.charts._style import (
    _OUTCOME_COLORS,
    _RUN_COLORS,
    _VERDICT_SHAPES,
    VERDICT_COLORS,
    _comparison_rows,
    _data,
    _labels,
    _order,
    _require,
    _styled,
    _title,
)
from hylo_analytics.errors import InputError


def success_rate_by_task(
    frame: pl.DataFrame,
    *,
    run_label: str = "run",
    title: str = "Success rate per task",
    full_scale: bool = True,
    metric: str = "success",
) -> alt.LayerChart:
    """Success rate per task (rows) for several runs (colour), with CI bars.

    ``full_scale=False`` zooms the axis onto the data (for rates all near 0 or 1).

    ``frame``: one row per (task, run) with ``task_id, success_rate, ci_low, ci_high,
    n_valid`` and the ``run_label`` column (e.g. ``mart_task_success`` plus a label), or
    ``aggregate_scores(..., by=["run_id", "task_id"])`` as it is (its ``metric`` rows, its
    ``mean``; ``run_label`` falls back to ``run_id``). Tasks are sorted by name; runs keep
    the frame's row order; a missing label is drawn as "(none)".
    """
    if "success_rate" not in frame.columns and "mean" in frame.columns:
        rows = frame.filter(pl.col("metric") == metric) if "metric" in frame.columns else frame
        frame = rows.rename({"mean": "success_rate"})
    if run_label not in frame.columns and "run_id" in frame.columns:
        run_label = "run_id"
    cols = ["task_id", run_label, "success_rate", "ci_low", "ci_high", "n_valid"]
    data = _require(frame, cols, "success_rate_by_task").sort("task_id", maintain_order=True)
    data = _labels(data, run_label)
    frame = data
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
    title: str | None = None,
    metric_label: str | None = None,
) -> alt.LayerChart:
    """Forest plot of the paired difference candidate - parent per task, coloured by verdict.

    ``frame``: one row per task with ``task_id, diff, ci_low, ci_high, verdict, p_value,
    p_adjusted, n_pairs, candidate_wins, parent_wins, ties``; ``verdict`` is one of
    improved / regressed / unchanged / inconclusive and ``p_value`` / ``p_adjusted`` are the
    p of the test the interval inverts (Tango's score test for 0/1 metrics) and its
    multiplicity-adjusted value. ``compare_runs(..., by=["task_id"])``
    works as it is (one candidate and metric), or its overall rows (one per comparison).
    The interval drawn is the one the verdict was decided on (``ci_adj_*``, named with its
    level) when the frame has it, so a bar clear of zero never sits beside "inconclusive".
    Tasks are sorted by ``diff``. The default title names the runs when the frame has
    ``candidate`` and ``parent``; ``metric_label`` defaults to the frame's metric.
    """
    title = title or _pair_title(frame, "per task")
    if metric_label is None:  # the metric the frame compares, by name (match, steps, ...)
        shown = frame["metric"].cast(pl.String).unique().to_list() if "metric" in frame else []
        metric_label = "success rate" if shown in ([], ["success"]) else ", ".join(sorted(shown))
    frame = _comparison_rows(frame, "paired_forest")
    interval = str(frame["_ci_label"][0])
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
        raise InputError(
            f"paired_forest: unknown verdict(s) {sorted(unknown)}; expected "
            f"{list(VERDICT_COLORS)} (draw the frame compare_runs returns)"
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
            title=f"difference in {metric_label} (candidate \u2212 parent), {interval}",
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
            alt.Tooltip("ci_low:Q", format="+.1%", title="interval low"),
            alt.Tooltip("ci_high:Q", format="+.1%", title="interval high"),
            alt.Tooltip("p_value:Q", format=".3g", title="p (the interval's test)"),
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
        title=_title(title, f"point: paired difference · line: {interval} · dashed: no change"),
    )
    return _styled(chart)  # type: ignore[no-any-return]


def win_loss_bars(frame: pl.DataFrame, *, title: str = "Paired outcomes per task") -> alt.Chart:
    """Diverging bars per task: candidate wins right, parent wins left, ties centred.

    ``frame``: one row per task with ``task_id, candidate_wins, parent_wins, ties`` (counts of
    paired keys), or ``compare_runs(..., by=["task_id"])`` as it is. Tasks are sorted by net
    wins (candidate - parent), best first.
    """
    frame = _comparison_rows(frame, "win_loss_bars")
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


def _pair_title(frame: pl.DataFrame, what: str) -> str:
    if {"candidate", "parent"} <= set(frame.columns) and frame.height:
        cand, par = frame["candidate"].unique().to_list(), frame["parent"].unique().to_list()
        if len(cand) == 1 and len(par) == 1:
            return f"{cand[0]} \u2212 {par[0]}, {what}"
    return f"Candidate \u2212 parent, {what}"
