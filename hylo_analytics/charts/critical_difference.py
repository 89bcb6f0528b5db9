"""The critical-difference diagram (Demšar 2006): average ranks, cliques and the CD.

The frames come from :func:`~hylo_analytics.compare.critical_difference_scores`: the rank
axis on top (1 = best, on the left), each policy's tick at its average rank with a line down
and out to its name (the better half to the left, the rest to the right), a thick bar under
the axis for each clique (policies no test separates), and, for the Nemenyi test, the
critical difference drawn as an interval from rank 1.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import altair as alt
import numpy as np
import polars as pl

from hylo_analytics._html import HIDDEN, shorten
from hylo_analytics.charts._style import _cut, _data, _labels, _require, _styled, _title
from hylo_analytics.errors import InputError

if TYPE_CHECKING:
    from hylo_analytics.compare.critical_difference import CriticalDifference

__all__ = ["MAX_DRAWN", "critical_difference_diagram"]

#: The most policies the diagram names (half from each end): past ~30 the labels of one side
#: no longer fit a page, and the middle of a ranking of 2,000 is what no one reads.
MAX_DRAWN = 30
_MAX_BARS = 16  # clique bars drawn at most (the ones holding a drawn policy)
_NAME_CHARS = 48  # a name on the diagram (the tooltip has it whole, up to LABEL_CHARS)
_WIDTH = 560
_ROW = 22  # pixels per label row
_BAR_ROW = 0.45  # clique bars per label row
_BAR_COLOR = "#0072B2"
_CD_COLOR = "#D55E00"
_TOP = -2.3  # rows above the axis: its numbers, then the critical difference


def critical_difference_diagram(
    result: CriticalDifference,
    *,
    top: int = MAX_DRAWN,
    title: str = "Critical difference diagram",
) -> alt.LayerChart:
    """The diagram of ``result`` (:class:`~hylo_analytics.compare.CriticalDifference`: its
    ``ranks`` and ``cliques`` frames, ``cd``, ``test``, ``alpha``), naming at most ``top``
    policies: the best ``top // 2`` and the worst rest when there are more, the subtitle
    saying how many are left out. Clique bars: those holding a drawn policy, at most 16."""
    if top < 2:
        raise InputError(f"critical_difference_diagram: top must be >= 2, got {top}")
    ranks = _labels(_require(result.ranks, ["rank", "policy", "avg_rank", "mean"],
                             "critical_difference_diagram"), "policy")  # fmt: skip
    cliques = _require(result.cliques, ["clique", "size", "first_rank", "last_rank"],
                       "critical_difference_diagram")  # fmt: skip
    k = ranks.height
    if k < 2:
        raise InputError("critical_difference_diagram: needs at least two policies to draw")
    drawn = _drawn(ranks, top)
    bars, bar_rows, hidden_bars = _bars(cliques, drawn)
    first_row = 1.0 + bar_rows * _BAR_ROW
    left = drawn.filter(pl.col("side") == "left")
    right = drawn.filter(pl.col("side") == "right")
    lo, hi = 1.0, float(max(k, 2))
    placed = pl.concat(
        [
            left.with_columns(y=first_row + pl.int_range(pl.len()), edge=pl.lit(lo)),
            # the worst policy on the top row of the right: lines never cross
            right.reverse().with_columns(y=first_row + pl.int_range(pl.len()), edge=pl.lit(hi)),
        ]
    )
    n_rows = max(left.height, right.height)
    x = alt.X("x:Q", scale=alt.Scale(domain=[lo, hi], nice=False, zero=False), axis=None)
    depth = first_row + n_rows
    top_row = _TOP if result.test == "nemenyi" else _TOP + 1.4  # no CD: no room for it
    y_scale = alt.Scale(domain=[top_row, depth], reverse=True, nice=False, zero=False)
    y = alt.Y("y:Q", scale=y_scale, axis=None)
    layers: list[Any] = [*_axis(lo, hi, x, y), _elbows(placed, x, y), _names(placed, x, y)]
    if bars.height:
        layers.append(_bar_layer(bars, x, y))
    if result.test == "nemenyi":
        layers += _cd_layers(result.cd, lo, hi, x, y)
    shown = (
        f"the {left.height} best and {right.height} worst of {k:,} policies named "
        f"({k - drawn.height:,} left out)"
        if drawn.height < k
        else f"{k:,} policies"
    )
    how = (
        f"bars: no pair in them differs (Nemenyi, alpha {result.alpha:g}; CD = {result.cd:.2f})"
        if result.test == "nemenyi"
        else f"bars: no pair in them differs (Wilcoxon signed-rank, Holm, alpha {result.alpha:g})"
    )
    more = f" ({hidden_bars:,} more not drawn)" if hidden_bars else ""
    blocks = result.friedman.n_blocks
    subtitle = [f"average rank (1 = best) of {shown} over {blocks:,} blocks",
                f"{how}{more}",
                f"Friedman p {_p(result.friedman.p)} · metric {_plain(result.metric)} "
                f"({result.direction})"]  # fmt: skip
    chart = alt.layer(*layers).properties(
        width=_WIDTH,
        height=int((depth - top_row) * _ROW),
        title=alt.TitleParams(text=_title(title, "").text, subtitle=subtitle),
    )
    return _styled(chart)  # type: ignore[no-any-return]


def _p(p: float) -> str:
    return f"= {p:.3g}" if p > 0 else "< 1e-300"


def _plain(name: str) -> str:
    """A name in a title: hidden characters shown, cut as the labels are."""
    return shorten(re.sub(f"[{HIDDEN}]", "\ufffd", name), _NAME_CHARS)


def _drawn(ranks: pl.DataFrame, top: int) -> pl.DataFrame:
    """The policies named: every one, or the best ``top // 2`` and the worst rest; the
    better half of them on the left."""
    k = ranks.height
    ordered = ranks.sort("rank")
    if k > top:
        best = top // 2
        ordered = pl.concat([ordered.head(best), ordered.tail(top - best)])
    half = (ordered.height + 1) // 2
    name = pl.col("policy")
    short = (
        pl.when(name.str.len_chars() > _NAME_CHARS)
        .then(name.str.slice(0, _NAME_CHARS - 1) + "\u2026")
        .otherwise(name)
    )
    return _cut(
        ordered.with_columns(
            side=pl.when(pl.int_range(pl.len()) < half)
            .then(pl.lit("left"))
            .otherwise(pl.lit("right")),
            label=pl.format("{} ({})", short, _two_decimals(pl.col("avg_rank"))),
        )
    )


def _two_decimals(value: pl.Expr) -> pl.Expr:
    """An average rank as text with two decimals (1.50, not 1.5)."""
    cents = (value * 100).round().cast(pl.Int64)
    return pl.format("{}.{}", cents // 100, (cents % 100).cast(pl.String).str.zfill(2))


def _bars(cliques: pl.DataFrame, drawn: pl.DataFrame) -> tuple[pl.DataFrame, int, int]:
    """The clique bars to draw (size > 1, holding a drawn policy), packed into rows (a bar
    shares a row with the bars it does not overlap), the rows used and the bars left out."""
    ranks = drawn["avg_rank"]
    lo, hi = float(ranks.min()), float(ranks.max())  # type: ignore[arg-type]
    many = cliques.filter(pl.col("size") > 1).sort("first_rank", "last_rank")
    seen = [c for c in many.iter_rows(named=True)
            if ((ranks >= c["first_rank"]) & (ranks <= c["last_rank"])).any()]  # fmt: skip
    kept = _spread(seen, hi - lo)
    hidden = len(seen) - len(kept)
    ends: list[float] = []
    rows = []
    gap = (hi - lo) * 0.01 + 0.05
    for c in kept:  # a few bars: greedy interval packing
        row = next((r for r, end in enumerate(ends) if end + gap < c["first_rank"]), len(ends))
        if row == len(ends):
            ends.append(c["last_rank"])
        else:
            ends[row] = c["last_rank"]
        rows.append(row)
    bars = pl.DataFrame(
        {
            "clique": [c["clique"] for c in kept],
            "size": [c["size"] for c in kept],
            "x": [c["first_rank"] for c in kept],
            "x2": [c["last_rank"] for c in kept],
            "y": [0.55 + r * _BAR_ROW for r in rows],
        },
        schema={"clique": pl.Int64, "size": pl.Int64, "x": pl.Float64, "x2": pl.Float64,
                "y": pl.Float64},
    )  # fmt: skip
    return bars, len(ends), hidden


def _spread(cliques: list[dict[str, Any]], span: float) -> list[dict[str, Any]]:
    """At most :data:`_MAX_BARS` of ``cliques`` (sorted by first rank): all when they fit,
    else the first, the last, and between them each one starting a sixteenth of the axis
    past the last one kept (2,000 policies have hundreds of cliques, each a rank or two
    from the next: sixteen of them would be one thick band)."""
    if len(cliques) <= _MAX_BARS:
        return cliques
    kept = [cliques[0]]
    for c in cliques[1:-1]:
        if c["first_rank"] >= kept[-1]["first_rank"] + span / _MAX_BARS:
            kept.append(c)
    return [*kept[: _MAX_BARS - 1], cliques[-1]]


def _elbows(placed: pl.DataFrame, x: alt.X, y: alt.Y) -> Any:
    """Each drawn policy's line: down from its rank on the axis to its row, then out."""
    points = pl.concat(
        [
            placed.select("rank", x="avg_rank", y=pl.lit(0.0), step=pl.lit(0)),
            placed.select("rank", x="avg_rank", y="y", step=pl.lit(1)),
            placed.select("rank", x="edge", y="y", step=pl.lit(2)),
        ]
    )
    return (
        alt.Chart(_data(points))
        .mark_line(color="#444", strokeWidth=1, interpolate="linear")
        .encode(x=x, y=y, detail="rank:N", order="step:Q")
    )


def _names(placed: pl.DataFrame, x: alt.X, y: alt.Y) -> Any:
    data = _data(placed.with_columns(x=pl.col("edge")))
    tooltip = [
        alt.Tooltip("policy:N"),
        alt.Tooltip("rank:Q", title="place"),
        alt.Tooltip("avg_rank:Q", format=".3f", title="average rank"),
        alt.Tooltip("mean:Q", format=".4g"),
    ]
    base = alt.Chart(data).encode(x=x, y=y, text="label:N", tooltip=tooltip)
    left = base.transform_filter(alt.datum.side == "left").mark_text(
        align="right", dx=-6, fontSize=12, color="#222"
    )
    right = base.transform_filter(alt.datum.side == "right").mark_text(
        align="left", dx=6, fontSize=12, color="#222"
    )
    return alt.layer(left, right)


def _axis(lo: float, hi: float, x: alt.X, y: alt.Y) -> list[Any]:
    """The rank axis drawn as data (a line at the diagram's top, its ticks and numbers), so
    the critical difference can sit above it."""
    step = _tick_step(hi - lo)
    marks = sorted({lo, *[v for v in range(int(step), int(hi) + 1, int(step)) if v > lo], hi})
    ticks = pl.DataFrame({"x": marks, "y": [0.0] * len(marks), "y2": [-0.25] * len(marks),
                          "text": [f"{v:,.0f}" for v in marks]})  # fmt: skip
    line = pl.DataFrame({"x": [lo], "x2": [hi], "y": [0.0]})
    return [
        alt.Chart(_data(line)).mark_rule(color="#222", strokeWidth=1.5).encode(x=x, x2="x2:Q", y=y),
        alt.Chart(_data(ticks)).mark_rule(color="#222").encode(x=x, y=y, y2="y2:Q"),
        alt.Chart(_data(ticks.with_columns(y=pl.lit(-0.35))))
        .mark_text(fontSize=12, baseline="bottom", color="#222")
        .encode(x=x, y=y, text="text:N"),
    ]


def _tick_step(span: float) -> float:
    """Every rank up to 20 policies, else a 1-2-5 step giving about ten ticks."""
    if span <= 20:
        return 1.0
    raw = span / 10
    power = 10 ** int(np.floor(np.log10(raw)))
    return float(next(m * power for m in (1, 2, 5, 10) if m * power >= raw))


def _bar_layer(bars: pl.DataFrame, x: alt.X, y: alt.Y) -> Any:
    return (
        alt.Chart(_data(bars))
        .mark_rule(color=_BAR_COLOR, strokeWidth=5, strokeCap="round")
        .encode(
            x=x,
            x2="x2:Q",
            y=y,
            tooltip=[
                alt.Tooltip("clique:Q"),
                alt.Tooltip("size:Q", title="policies"),
                alt.Tooltip("x:Q", format=".2f", title="from rank"),
                alt.Tooltip("x2:Q", format=".2f", title="to rank"),
            ],
        )
    )


def _cd_layers(cd: float, lo: float, hi: float, x: alt.X, y: alt.Y) -> list[Any]:
    """The critical difference as an interval from rank 1 above the axis (cut at the axis'
    end when it is longer than the axis: every pair is then in one clique)."""
    end = min(lo + cd, hi)
    line = pl.DataFrame({"x": [lo], "x2": [end], "y": [-1.6]})
    caps = pl.DataFrame({"x": [lo, end], "y": [-1.45, -1.45], "y2": [-1.75, -1.75]})
    label = pl.DataFrame({"x": [(lo + end) / 2], "y": [-1.75], "text": [f"CD = {cd:.2f}"]})
    return [
        alt.Chart(_data(line)).mark_rule(color=_CD_COLOR, strokeWidth=2).encode(
            x=x, x2="x2:Q", y=y
        ),
        alt.Chart(_data(caps)).mark_rule(color=_CD_COLOR, strokeWidth=2).encode(
            x=x, y=y, y2="y2:Q"
        ),
        alt.Chart(_data(label)).mark_text(color=_CD_COLOR, fontSize=12, dy=-2, baseline="bottom")
        .encode(x=x, y=y, text="text:N"),
    ]  # fmt: skip
