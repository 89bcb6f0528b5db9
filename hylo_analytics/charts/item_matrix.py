"""The flip matrix as a heatmap: runs x keys coloured by outcome, sorted and capped.

:func:`flip_matrix` draws a :class:`~hylo_analytics.compare.FlipMatrix` so that it stays
readable at 2,000 runs x 500 keys: at most ``max_runs`` runs (the latest, in the matrix's
order, left to right) and ``max_keys`` keys are drawn, never a million cells. The keys kept
are those that changed in the latest run (newly broken, errored or fixed), then those that
flipped among the runs shown (solved in one, failed in another), then the hardest; they are
drawn hardest first (by solve rate over every run of the suite). The subtitle says how many
of each are shown and what was left out; a bar per key beside the grid shows its solve rate
over all the suite's runs, coloured by what happened in the latest run.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import altair as alt
import polars as pl

from hylo_analytics._html import HIDDEN, shorten
from hylo_analytics.charts._style import LABEL_CHARS, _cut, _data, _styled, _title
from hylo_analytics.errors import InputError

if TYPE_CHECKING:
    from hylo_analytics.compare.item_matrix import FlipMatrix

__all__ = ["OUTCOME_COLORS", "flip_matrix"]

#: Okabe-Ito based: solved blue, failed vermillion, a harness error black (never a shade of
#: failure), abstained grey, missing near-white.
OUTCOME_COLORS: dict[str, str] = {
    "success": "#0072B2",
    "partial": "#56B4E9",
    "failure": "#D55E00",
    "error": "#222222",
    "abstained": "#A6A6A6",
    "missing": "#EFEFEF",
}
_CHANGE_COLORS = {
    "newly broken": "#D55E00",
    "newly errored": "#222222",
    "newly fixed": "#0072B2",
    "no change": "#BDBDBD",
}
_SUITE = ["benchmark_id", "split"]


def flip_matrix(
    matrix: FlipMatrix,
    *,
    max_runs: int = 50,
    max_keys: int = 100,
    suite: str | tuple[str, str | None] | None = None,
    title: str | None = None,
) -> alt.HConcatChart:
    """Heatmap of a flip matrix: one column per run (in the matrix's order, the latest at
    the right), one row per key (hardest at the top), coloured by outcome (``error`` apart
    from ``failure``); beside it each key's solve rate over every run of the suite.

    ``max_runs`` / ``max_keys``: at most this many drawn (see the module docstring for
    which); ``suite``: the benchmark id (or ``(benchmark_id, split)``) to draw when the
    matrix holds several suites.
    """
    if max_runs < 1 or max_keys < 1:
        raise InputError(f"flip_matrix chart: max_runs={max_runs}, max_keys={max_keys}; need >= 1")
    keys, runs, outcomes = _one_suite(matrix, suite)
    shown_runs = runs.sort("position").tail(max_runs)
    cells = outcomes.join(shown_runs.select("run_id"), on="run_id", how="semi")
    shown_keys = _pick_keys(keys, cells, max_keys)
    cells = cells.join(shown_keys.select("key"), on="key", how="semi")
    labels = _run_labels(shown_runs)
    cells = cells.join(labels, on="run_id").select(
        "run", "key", pl.col("outcome").cast(pl.String), "value", "run_id",
        pl.col("skip_reason").alias("reason"),
    )  # fmt: skip
    run_order = _cut(labels.select("run"))["run"].to_list()
    key_order = _cut(shown_keys.select("key"))["key"].to_list()
    grid = _grid(cells, run_order, key_order, labels["axis"][0])
    bars = _bars(shown_keys, key_order)
    subtitle = _subtitle(matrix, keys, runs, shown_keys, shown_runs)
    heading = title if title is not None else f"{matrix.metric}: each key in each run"
    head = _title(heading, "")
    chart = (
        alt.hconcat(grid, bars, spacing=8)
        .resolve_scale(color="independent")
        .properties(title=alt.TitleParams(text=head.text, subtitle=subtitle))
    )
    return _styled(chart)  # type: ignore[no-any-return]


def _one_suite(
    matrix: FlipMatrix, suite: str | tuple[str, str | None] | None
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """The keys, runs and outcomes of the one suite drawn."""
    suites = matrix.suites.select(_SUITE)
    if suite is not None:
        bench, split = (suite, None) if isinstance(suite, str) else suite
        cond = pl.col("benchmark_id") == bench
        if not isinstance(suite, str):
            cond &= pl.col("split").eq_missing(split)
        suites = suites.filter(cond)
    if suites.height != 1:
        listed = ", ".join(
            f"{b!r} (split {s!r})" for b, s in matrix.suites.select(_SUITE).head(5).rows()
        )
        found = "none matches" if suites.is_empty() else f"{suites.height} match"
        raise InputError(
            f"flip_matrix chart: draws one suite, and {found} (suite={suite!r}); the matrix "
            f"holds {matrix.suites.height}: {listed}; pass suite='BENCHMARK' or "
            "suite=('BENCHMARK', 'SPLIT')"
        )
    return tuple(  # type: ignore[return-value]
        f.join(suites, on=_SUITE, how="semi", nulls_equal=True)
        for f in (matrix.keys, matrix.runs, matrix.outcomes)
    )


def _pick_keys(keys: pl.DataFrame, cells: pl.DataFrame, limit: int) -> pl.DataFrame:
    """At most ``limit`` keys: changed in the latest run, then flipped among the runs shown,
    then the hardest; returned hardest first, with the key's latest ``change``."""
    o = pl.col("outcome")
    flipped = cells.group_by("key").agg(
        _flipped=o.is_in(["success", "partial"]).any() & (o == "failure").any()
    )
    change = (
        pl.when("newly_broken")
        .then(pl.lit("newly broken"))
        .when("newly_errored")
        .then(pl.lit("newly errored"))
        .when("newly_fixed")
        .then(pl.lit("newly fixed"))
        .otherwise(pl.lit("no change"))
    )
    tier = (
        pl.when(pl.col("change") != "no change")
        .then(0)
        .when(pl.col("_flipped"))
        .then(1)
        .otherwise(2)
    )
    ranked = (
        keys.join(flipped, on="key", how="left")
        .with_columns(pl.col("_flipped").fill_null(False), change=change)
        .with_columns(_tier=tier)
    )
    kept = ranked.sort(["_tier", "solve_rate", "key"], nulls_last=True).head(limit)
    return kept.sort(["solve_rate", "key"], nulls_last=True).drop("_tier", "_flipped")


def _run_labels(runs: pl.DataFrame) -> pl.DataFrame:
    """Each run's axis label: its agent version when those name the runs shown one to one
    (a sweep of checkpoints), else its run id."""
    versions = runs["agent_version"]
    by_version = versions.null_count() == 0 and versions.n_unique() == runs.height
    label = pl.col("agent_version") if by_version else pl.col("run_id")
    axis = "agent_version" if by_version else "run"
    return runs.select("run_id", run=label, axis=pl.lit(axis))


def _grid(cells: pl.DataFrame, runs: list[str], keys: list[str], axis: str) -> alt.Chart:
    n_runs, n_keys = len(runs), len(keys)
    width = max(10, min(100, 720 // max(n_runs, 1)))  # 3 runs: 300 px, the legend's width
    height = max(9, min(22, 900 // max(n_keys, 1)))
    color = alt.Color(
        "outcome:N",
        title="outcome",
        scale=alt.Scale(domain=list(OUTCOME_COLORS), range=list(OUTCOME_COLORS.values())),
        legend=alt.Legend(orient="top", titleLimit=0, columns=3),
    )
    chart: alt.Chart = (
        alt.Chart(_data(_cut(cells)))
        .mark_rect(stroke="white", strokeWidth=0.5)
        .encode(
            x=alt.X(
                "run:N",
                sort=runs,
                title=f"{axis}, in order (latest at the right)",
                axis=alt.Axis(
                    labelAngle=0 if n_runs <= 8 else -90,
                    labelFontSize=9 if n_runs > 20 else 11,
                    labelLimit=160,
                ),
            ),
            y=alt.Y(
                "key:N",
                sort=keys,
                title=None,
                axis=alt.Axis(labelFontSize=8 if n_keys > 40 else 11, labelLimit=220),
            ),
            color=color,
            tooltip=[
                alt.Tooltip("key:N"),
                alt.Tooltip("run_id:N", title="run"),
                alt.Tooltip("outcome:N"),
                alt.Tooltip("value:Q", format=".3g"),
                alt.Tooltip("reason:N", title="skip reason"),
            ],
        )
        .properties(width=alt.Step(width), height=alt.Step(height))
    )
    return chart


def _bars(keys: pl.DataFrame, order: list[str]) -> alt.Chart:
    data = _cut(
        keys.select(
            "key",
            "solve_rate",
            "change",
            "n_valid",
            "n_success",
            "n_errored",
            "n_runs",
            record=pl.format("{}/{} solved", "n_success", "n_valid"),
        )
    )
    height = max(9, min(22, 900 // max(len(order), 1)))
    chart: alt.Chart = (
        alt.Chart(_data(data))
        .mark_bar()
        .encode(
            x=alt.X(
                "solve_rate:Q",
                title="solve rate, every run",
                scale=alt.Scale(domain=[0, 1]),
                axis=alt.Axis(format="%", tickCount=3),
            ),
            y=alt.Y("key:N", sort=order, axis=None),
            color=alt.Color(
                "change:N",
                title="latest run",
                scale=alt.Scale(domain=list(_CHANGE_COLORS), range=list(_CHANGE_COLORS.values())),
                legend=alt.Legend(orient="top", titleLimit=0, columns=2),
            ),
            tooltip=[
                alt.Tooltip("key:N"),
                alt.Tooltip("solve_rate:Q", format=".1%"),
                alt.Tooltip("record:N", title="solved / valid"),
                alt.Tooltip("n_errored:Q", title="errored runs"),
                alt.Tooltip("n_runs:Q", title="runs"),
                alt.Tooltip("change:N", title="latest"),
            ],
        )
        .properties(width=110, height=alt.Step(height))
    )
    return chart


def _subtitle(
    matrix: FlipMatrix,
    keys: pl.DataFrame,
    runs: pl.DataFrame,
    shown_keys: pl.DataFrame,
    shown_runs: pl.DataFrame,
) -> list[str]:
    """What is drawn, out of what, and the counts a reader needs beside it."""
    latest = runs.sort("position")["run_id"][-1]
    policy = matrix.errors or "each run's harness convention"
    counts: dict[str, Any] = {
        c: int(keys[c].sum())
        for c in ("always_fails", "newly_broken", "newly_errored", "newly_fixed")
    }
    return [
        f"showing {shown_runs.height:,} of {runs.height:,} runs: the latest, ordered by "
        f"{matrix.order}",
        f"showing {shown_keys.height:,} of {keys.height:,} keys: changed in the latest run, "
        "then flipped among these runs, then the hardest; hardest at the top",
        f"latest run {_plain(latest)}: {counts['newly_broken']:,} keys newly broken, "
        f"{counts['newly_errored']:,} newly errored, {counts['newly_fixed']:,} newly fixed",
        f"{counts['always_fails']:,} keys fail in every run · errors: {policy}",
    ]


def _plain(text: str) -> str:
    """A name from a log as a subtitle shows it: hidden characters visible, cut short."""
    return shorten(re.sub(f"[{HIDDEN}]", "\ufffd", text), LABEL_CHARS // 2)
