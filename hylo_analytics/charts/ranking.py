"""Charts of a ranking: the pairwise verdict heatmap and the strengths with their intervals.

The frames come from :func:`~hylo_analytics.compare.rank_policies` (Bradley-Terry strengths).
"""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import polars as pl

from hylo_analytics.charts._style import (
    VERDICT_COLORS,
    _data,
    _labels,
    _require,
    _styled,
    _title,
)
from hylo_analytics.errors import InputError

__all__ = ["ranking_matrix", "strength_intervals"]

_MIRROR = {"improved": "regressed", "regressed": "improved"}


def ranking_matrix(
    frame: pl.DataFrame,
    *,
    order: Sequence[str] | None = None,
    title: str = "Pairwise paired comparisons",
) -> alt.LayerChart:
    """Heatmap of every pair: the cell (row, column) is the row policy against the column
    policy, coloured by the verdict (improved: the row is better), labelled with the paired
    difference in points and the row's wins : losses.

    ``frame``: :attr:`Ranking.matrix <hylo_analytics.compare.Ranking>` (one row per pair:
    ``policy, opponent, verdict, mean_diff, wins, losses, p_holm, p_worse_holm``); each pair
    is drawn in both cells, mirrored. ``order``: the rows' and columns' order (e.g.
    ``ranking.ranks["policy"]``; default the frame's order).
    """
    cols = ["policy", "opponent", "verdict", "mean_diff", "wins", "losses", "p_holm",
            "p_worse_holm"]  # fmt: skip
    data = _labels(_labels(_require(frame, cols, "ranking_matrix"), "policy"), "opponent")
    unknown = set(data["verdict"].drop_nulls().to_list()) - set(VERDICT_COLORS)
    if unknown:
        raise InputError(
            f"ranking_matrix: unknown verdict(s) {sorted(unknown)}; expected "
            f"{list(VERDICT_COLORS)} (draw Ranking.matrix, as rank_runs returns it)"
        )
    mirrored = data.select(
        policy="opponent",
        opponent="policy",
        verdict=pl.col("verdict").replace(_MIRROR),
        mean_diff=-pl.col("mean_diff"),
        wins="losses",
        losses="wins",
        p_holm="p_worse_holm",
        p_worse_holm="p_holm",
    )
    sign = pl.when(pl.col("mean_diff") > 0).then(pl.lit("+")).otherwise(pl.lit(""))
    cells = pl.concat([data, mirrored]).with_columns(
        label=pl.format("{}{} pts", sign, (pl.col("mean_diff") * 100).round(1)),
        record=pl.format("{} : {}", "wins", "losses"),
    )
    names = list(order) if order is not None else _names(data)
    base = alt.Chart(_data(cells)).encode(
        x=alt.X(
            "opponent:N", sort=names, title="against", axis=alt.Axis(orient="top", labelAngle=0)
        ),
        y=alt.Y("policy:N", sort=names, title=None),
    )
    color = alt.Color(
        "verdict:N",
        title="verdict, row vs column (improved: the row is better)",
        scale=alt.Scale(domain=list(VERDICT_COLORS), range=list(VERDICT_COLORS.values())),
        legend=alt.Legend(titleLimit=0),
    )
    rect = base.mark_rect(stroke="white", strokeWidth=2).encode(
        color=color,
        tooltip=[
            alt.Tooltip("policy:N", title="policy"),
            alt.Tooltip("opponent:N", title="against"),
            alt.Tooltip("verdict:N"),
            alt.Tooltip("mean_diff:Q", format="+.2%", title="difference"),
            alt.Tooltip("record:N", title="wins : losses"),
            alt.Tooltip("p_holm:Q", format=".3g", title="Holm p (row better)"),
            alt.Tooltip("p_worse_holm:Q", format=".3g", title="Holm p (row worse)"),
        ],
    )
    text = base.mark_text(fontSize=12, color="white", dy=-7).encode(text="label:N")
    record = base.mark_text(fontSize=11, color="white", dy=9).encode(text="record:N")
    chart = (rect + text + record).properties(
        width=alt.Step(110),
        height=alt.Step(56),
        title=_title(
            title,
            "cell: row policy against column policy · colour: verdict (Holm over every pair) "
            "· text: paired difference, row wins : losses",
        ),
    )
    return _styled(chart)  # type: ignore[no-any-return]


def strength_intervals(
    frame: pl.DataFrame, *, title: str = "Bradley-Terry strengths"
) -> alt.LayerChart:
    """Each policy's log-strength (point) with its bootstrap interval (line), strongest first;
    labelled with its rank set when the frame has one.

    ``frame``: :attr:`Ranking.ranks <hylo_analytics.compare.Ranking>` or ``.strengths``
    (``policy, strength, strength_low, strength_high``; optional ``rank_set``).
    """
    cols = ["policy", "strength", "strength_low", "strength_high"]
    cols += ["rank_set"] if "rank_set" in frame.columns else []
    data = _labels(_require(frame, cols, "strength_intervals"), "policy")
    data = data.sort("strength", descending=True)
    if "rank_set" not in data.columns:
        data = data.with_columns(rank_set=pl.lit(""))
    data = data.with_columns(rank_label=pl.format("rank {}", "rank_set"))
    y = alt.Y("policy:N", sort=data["policy"].to_list(), title=None)
    base = alt.Chart(_data(data))
    zero = (
        alt.Chart(_data(pl.DataFrame({"x": [0.0]})))
        .mark_rule(color="#333", strokeDash=[4, 3])
        .encode(x="x:Q")
    )
    bars = base.mark_rule(strokeWidth=2.5, color="#0072B2").encode(
        x=alt.X("strength_low:Q", title="log-strength (sum 0), with its bootstrap interval"),
        x2="strength_high:Q",
        y=y,
    )
    points = base.mark_point(filled=True, size=110, opacity=1, color="#0072B2").encode(
        x="strength:Q",
        y=y,
        tooltip=[
            alt.Tooltip("policy:N"),
            alt.Tooltip("strength:Q", format=".3f"),
            alt.Tooltip("strength_low:Q", format=".3f", title="interval low"),
            alt.Tooltip("strength_high:Q", format=".3f", title="interval high"),
            alt.Tooltip("rank_set:N", title="rank set"),
        ],
    )
    ranks = base.mark_text(align="left", dx=8, fontSize=12, color="#333").encode(
        x="strength_high:Q", y=y, text="rank_label:N"
    )
    chart = (zero + bars + points + ranks).properties(
        width=480,
        height=alt.Step(34),
        title=_title(
            title,
            "point: log-strength · line: bootstrap interval (keys resampled within suites) "
            "· dashed: an average policy",
        ),
    )
    return _styled(chart)  # type: ignore[no-any-return]


def _names(frame: pl.DataFrame) -> list[str]:
    """The policies in the order the pairs name them."""
    both = pl.concat([frame.select(p="policy"), frame.select(p="opponent")])
    return both["p"].unique(maintain_order=True).to_list()
