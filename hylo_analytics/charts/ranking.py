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

__all__ = ["MAX_POLICIES", "ranking_matrix", "strength_intervals"]

_MIRROR = {"improved": "regressed", "regressed": "improved"}
#: The most policies a ranking chart draws: a heatmap of 50 is 2,500 cells; of 2,000, four
#: million (unreadable, and more than a browser or vl-convert renders).
MAX_POLICIES = 50
_LABELLED = 12  # up to this many policies, each cell prints its difference and record
_WIDTH = 480


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
    held = _names(_require(frame, ["policy", "opponent"], "ranking_matrix"))
    if len(held) > MAX_POLICIES:
        raise InputError(
            f"ranking_matrix: the frame pairs {len(held):,} policies; a heatmap of "
            f"{len(held) ** 2:,} cells is unreadable, so it draws at most {MAX_POLICIES}: "
            f"draw ranking.submatrix(ranking.ranks['policy'].head({MAX_POLICIES})) (the "
            f"{MAX_POLICIES} strongest; CLI: rank --heatmap FILE --top {MAX_POLICIES})"
        )
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
    small = len(names) <= _LABELLED  # cells big enough to print their difference in
    base = alt.Chart(_data(cells)).encode(
        x=alt.X(
            "opponent:N",
            sort=names,
            title="against",
            axis=alt.Axis(orient="top", labelAngle=0 if small else -90, labelLimit=220),
        ),
        y=alt.Y("policy:N", sort=names, title=None),
    )
    color = alt.Color(
        "verdict:N",
        title="verdict, row vs column (improved: the row is better)",
        scale=alt.Scale(domain=list(VERDICT_COLORS), range=list(VERDICT_COLORS.values())),
        legend=alt.Legend(titleLimit=0),
    )
    # past a few policies no reader walks the cells one by one: without each cell's ARIA
    # description (its tooltip as text) a 50-policy SVG is a quarter of the size
    rect = base.mark_rect(stroke="white", strokeWidth=2, aria=small).encode(
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
    layers = rect + text + record if small else alt.layer(rect)
    what = (
        "· text: paired difference, row wins : losses"
        if small
        else "· hover a cell for the difference and the record"
    )
    chart = layers.properties(
        width=alt.Step(110 if small else 16),
        height=alt.Step(56 if small else 16),
        title=_title(
            title,
            f"{len(names):,} policies · cell: row policy against column policy · colour: "
            f"verdict (Holm over every pair) {what}",
        ),
    )
    return _styled(chart)  # type: ignore[no-any-return]


def strength_intervals(
    frame: pl.DataFrame,
    *,
    top: int | None = MAX_POLICIES,
    title: str = "Bradley-Terry strengths",
) -> alt.LayerChart:
    """Each policy's log-strength (point) with its interval (line), strongest first, the
    ``top`` strongest only (default 50; None: all), labelled with its rank set; with a
    ``tie_group`` column, each tie group (policies no test separates) is a band of its own.

    ``frame``: :attr:`Ranking.ranks <hylo_analytics.compare.Ranking>` or ``.strengths``
    (``policy, strength, strength_low, strength_high``; optional ``rank_set``, ``tie_group``
    and ``strength_method``, which names the interval).
    """
    optional = [c for c in ("rank_set", "tie_group", "strength_method") if c in frame.columns]
    cols = ["policy", "strength", "strength_low", "strength_high", *optional]
    data = _labels(_require(frame, cols, "strength_intervals"), "policy")
    data = data.sort("strength", descending=True, maintain_order=True)
    total = data.height
    if top is not None:
        if top < 1:
            raise InputError(f"strength_intervals: top must be >= 1 (or None), got {top}")
        data = data.head(top)
    if "rank_set" not in data.columns:
        data = data.with_columns(rank_set=pl.lit(""))
    banded = "tie_group" in data.columns
    if not banded:
        data = data.with_columns(tie_group=pl.lit(0, pl.Int64))
    method = str(data["strength_method"][0]) if "strength_method" in data.columns else None
    label = (
        pl.format("rank {} · group {}", "rank_set", "tie_group")
        if banded
        else pl.format("rank {}", "rank_set")
    )
    data = data.with_columns(rank_label=label, band=(pl.col("tie_group") % 2).cast(pl.String))
    y = alt.Y("policy:N", sort=data["policy"].to_list(), title=None)
    base = alt.Chart(_data(data))
    shade = alt.Scale(domain=["0", "1"], range=["#FFFFFF", "#E8EEF6"])
    bands = base.mark_rect().encode(
        y=y, x=alt.value(0), x2=alt.value(_WIDTH), color=alt.Color("band:N", scale=shade,
                                                                    legend=None)
    )  # fmt: skip
    zero = (
        alt.Chart(_data(pl.DataFrame({"x": [0.0]})))
        .mark_rule(color="#333", strokeDash=[4, 3])
        .encode(x="x:Q")
    )
    interval = f"{method} interval" if method else "interval"
    bars = base.mark_rule(strokeWidth=2.5, color="#0072B2").encode(
        x=alt.X("strength_low:Q", title=f"log-strength (sum 0), with its {interval}"),
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
            alt.Tooltip("tie_group:Q", title="tie group"),
        ],
    )
    ranks = base.mark_text(align="left", dx=8, fontSize=12, color="#333").encode(
        x="strength_high:Q", y=y, text="rank_label:N"
    )
    shown = (
        f"the {data.height:,} strongest of {total:,} policies · "
        if data.height < total
        else f"{total:,} policies · "
    )
    what = (
        "point: log-strength · line: "
        + (f"{method} interval over keys within suites" if method else "interval")
        + " · dashed: an average policy"
        + (" · bands: tie groups (no test separates their members)" if banded else "")
    )
    chart = (bands + zero + bars + points + ranks).properties(
        width=_WIDTH,
        height=alt.Step(34 if data.height <= 60 else 18),
        title=_title(title, shown + what),
    )
    return _styled(chart)  # type: ignore[no-any-return]


def _names(frame: pl.DataFrame) -> list[str]:
    """The policies in the order the pairs name them."""
    both = pl.concat([frame.select(p="policy"), frame.select(p="opponent")])
    return both["p"].unique(maintain_order=True).to_list()
