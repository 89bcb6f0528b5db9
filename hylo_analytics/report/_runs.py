"""The report's runs section at any number of runs: the compared pair and the runs around it.

A store of 2,000 runs would make a table of 2,000 rows and charts of 2,000 labelled points
(more than vl-convert draws, and more than anyone reads). Past :data:`MAX_RUNS` runs the
section shows a selection, :func:`shown_runs`: the candidate and the parent, the runs next
to each in natural version order, the best and the worst by success and the Pareto front of
cost and success; the table, both charts and their subtitles say how many of how many, and
how to see every run. Every figure is the ``runs`` frame's (:func:`report_frames`).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from hylo_analytics import charts
from hylo_analytics._html import text
from hylo_analytics.charts.runs import pareto_front
from hylo_analytics.report._parts import _pct, _svg, _table

__all__ = ["BEST", "FRONT", "MAX_RUNS", "NEAR", "runs_section", "shown_runs"]

MAX_RUNS = 25  # up to this many runs the section shows them all
NEAR = 2  # runs either side of the candidate and of the parent, in natural version order
BEST = 5  # the best and the worst by success
FRONT = 10  # runs of the Pareto front (highest success first)

# as charts.success_rate_by_task colours the pair (the parent first)
_ROLE_COLORS = {"parent": "#0072B2", "candidate": "#E69F00", "other run": "#9E9E9E"}
_REASONS = ("candidate", "parent", "next to the pair", f"{BEST} best", f"{BEST} worst",
            "Pareto front")  # fmt: skip


def shown_runs(runs: pl.DataFrame, *, limit: int = MAX_RUNS) -> pl.DataFrame:
    """The rows of ``runs`` (the report's runs frame, in natural run order) the section
    shows, in that order, with ``on_front`` (the Pareto front of cost and success over every
    run with a cost) and ``shown_for`` (why the row is shown; null when every run is)."""
    costed = runs.filter(pl.col("mean_inference_s").is_not_null())
    front = costed.select(
        "run", pareto_front(costed, cost="mean_inference_s", value="success").fill_null(False)
    )
    frame = (
        runs.with_row_index("_pos")
        .join(front, on="run", how="left", maintain_order="left")
        .with_columns(pl.col("on_front").fill_null(False))
    )
    if runs.height <= limit:
        return frame.drop("_pos").with_columns(shown_for=pl.lit(None, pl.String))
    pair = frame.filter(pl.col("role").is_not_null())["_pos"].to_list()
    scored = pl.col("success").is_not_null()
    best = pl.col("success").rank("ordinal", descending=True)
    worst = pl.col("success").rank("ordinal")
    reasons = [
        pl.col("role") == "candidate",
        pl.col("role") == "parent",
        pl.any_horizontal(
            *((pl.col("_pos").cast(pl.Int64) - p).abs() <= NEAR for p in pair), pl.lit(False)
        ),  # a role is one of two rows: two expressions, not a loop over runs
        scored & (best <= BEST),
        scored & (worst <= BEST),
        pl.col("on_front")
        & (pl.col("success").rank("ordinal", descending=True).over("on_front") <= FRONT),
    ]
    why = pl.concat_list(
        pl.when(r.fill_null(False)).then(pl.lit(name)).otherwise(pl.lit(None, pl.String))
        for r, name in zip(reasons, _REASONS, strict=True)
    ).list.drop_nulls()
    return (
        frame.with_columns(why.alias("_why"))
        .filter(pl.col("_why").list.len() > 0)
        .with_columns(  # the pair's own rows say their role already
            shown_for=pl.col("_why")
            .list.eval(pl.element().filter(~pl.element().is_in(["candidate", "parent"])))
            .list.join(", ")
            .replace("", None)
        )
        .drop("_pos", "_why")
    )


def _selection_note(shown: pl.DataFrame, total: int, suite: str) -> str:
    """What the section shows of ``total`` runs, and where every run is."""
    where = f" of {suite}" if suite else ""
    if shown.height == total:
        return ""
    n_front = int(shown["on_front"].sum())
    return (
        f'<p class="note" id="runs-shown">Showing {shown.height:,} of {total:,} runs{where}: '
        f"the candidate and the parent, the {NEAR} runs either side of each in natural "
        f"version order, the {BEST} best and the {BEST} worst by success, and the runs of "
        f"the Pareto front of cost and success ({n_front:,} shown, at most {FRONT}); under each "
        "run, why it is shown. Every run: <code>hylo-analytics runs --all"
        "</code> and <code>hylo-analytics aggregate --by run_id</code>, or "
        '<code>build_report(...).frames["runs"]</code>.</p>'
    )


def _run_rows(runs: pl.DataFrame) -> list[list[str]]:
    def why(r: dict[str, Any]) -> str:
        return f'<br><small class="note">{text(r["shown_for"])}</small>' if r["shown_for"] else ""

    return [
        [
            text(r["run"]) + (f"<br><b>{text(r['role'])}</b>" if r["role"] else "") + why(r),
            text(r["label"]),
            str(r["n_samples"]),
            f"{r['n_scored']} / {r['n_total']}",
            _pct(r["success"]),
            f"{_pct(r['ci_low'])} to {_pct(r['ci_high'])}",
            "\u2013" if r["mean_steps"] is None else f"{r['mean_steps']:.1f}",
            "\u2013" if r["mean_inference_s"] is None else f"{r['mean_inference_s']:.2f}",
            str(r["n_errors"]),
        ]
        for r in runs.iter_rows(named=True)
    ]


def _policy_word(runs: pl.DataFrame) -> str:
    policies = sorted(set(runs["errors"].drop_nulls().to_list())) if "errors" in runs else []
    return f"errors: {policies[0]}" if len(policies) == 1 else "errors: by harness"


def _runs_ci_header(runs: pl.DataFrame) -> str:
    methods = sorted(set(runs["ci_method"].drop_nulls().to_list()))
    label = ", ".join(m.replace("_", "-").title() for m in methods)
    return f"95% CI ({label})" if label else "95% CI"


def _cost_chart(runs: pl.DataFrame, subtitle: str | None) -> str:
    costed = runs.select(
        pl.col("label").alias("run"),
        pl.col("mean_inference_s").alias("cost"),
        "success",
        "ci_low",
        "ci_high",
        "on_front",
        # a selection labels the pair only: twenty labels in one plot overlap
        label=pl.col("label") if subtitle is None else pl.col("role").is_not_null(),
    ).drop_nulls("cost")
    if subtitle is not None:
        costed = costed.with_columns(
            label=pl.when(pl.col("label")).then(pl.col("run")).otherwise(pl.lit(""))
        )
    if costed.is_empty():  # a log without step latencies has no cost to draw
        return '<p class="note">Cost vs success: no run has step latencies to cost.</p>'
    return _svg(
        charts.cost_vs_success(
            costed,
            cost_label="mean inference time per episode (s)",
            title="Cost vs success",
            subtitle=subtitle,
        )
    )


def _success_chart(runs: pl.DataFrame, total: int, suite: str, subtitle: str | None) -> str:
    """Success of each shown run in natural order; a line only through every run of one
    agent (a line says "one policy over its versions", and a selection has gaps)."""
    frame = runs.select(
        pl.col("label").alias("run"),
        pl.col("success").alias("value"),
        "ci_low",
        "ci_high",
        pl.col("n_scored").alias("n"),
        pl.coalesce("role", pl.lit("other run")).alias("run_role"),
    )
    return _svg(
        charts.metric_trend(
            frame,
            x="run",
            series="run_role" if subtitle is not None else None,
            series_colors=_ROLE_COLORS,
            line=runs["agent_name"].n_unique() == 1 and runs.height == total,
            title=f"Success across runs{' of ' + suite if suite else ''}",
            subtitle=subtitle,
        )
    )


def runs_section(runs: pl.DataFrame, suite: str) -> str:
    """The heading, the runs table and the two charts across runs (a selection past
    :data:`MAX_RUNS` runs, said so in the table's note and in each chart's subtitle)."""
    shown = shown_runs(runs)
    cut = shown.height < runs.height
    subtitle = f"{shown.height:,} of {runs.height:,} runs: see the table" if cut else None
    header = ["run", "agent", "episodes", "scored / total", f"success ({_policy_word(runs)})",
              _runs_ci_header(runs), "mean steps", "inference s / ep", "errors"]  # fmt: skip
    return "\n".join(
        [
            "<h2>Runs, coverage and cost</h2>",
            _selection_note(shown, runs.height, suite),
            _table(header, _run_rows(shown)),
            '<div class="grid2">' if not cut else "<div>",
            _cost_chart(shown, subtitle),
            _success_chart(shown, runs.height, suite, subtitle),
            "</div>",
        ]
    )
