"""pass@k and pass^k curves over k, each with its band (:func:`Store.pass_at_k`'s frame)."""

from __future__ import annotations

import re

import altair as alt
import polars as pl

from hylo_analytics._html import HIDDEN, shorten
from hylo_analytics.charts._style import (
    _RUN_COLORS,
    _data,
    _labels,
    _order,
    _require,
    _styled,
    _title,
)
from hylo_analytics.errors import InputError

__all__ = ["MAX_GROUPS", "pass_k_curves"]

#: The most groups one chart draws: each is two curves with two bands.
MAX_GROUPS = len(_RUN_COLORS)
_CURVES = {"pass_at_k": "pass@k (any of k succeeds)", "pass_hat_k": "pass^k (all k succeed)"}
_COLUMNS = ["k", "n_items", "n_items_short", *(f"{c}{s}" for c in _CURVES
                                               for s in ("", "_low", "_high"))]  # fmt: skip


def pass_k_curves(
    frame: pl.DataFrame,
    *,
    group: str | None = None,
    title: str = "pass@k and pass^k",
) -> alt.LayerChart:
    """pass@k (solid) and pass^k (dashed) of each group over k, with their bands (areas).

    ``frame``: ``Store.pass_at_k(...)`` as it is (one row per group and ``k``: ``k``,
    ``pass_at_k``, ``pass_hat_k`` and their ``_low`` / ``_high``, ``n_items``,
    ``n_items_short``; ``ci_method`` and ``ci_level`` name the band); ``group`` names the
    group column (default: the first). At most :data:`MAX_GROUPS` groups. The gap between a
    group's two curves is how much a user who needs every try to work loses against one who
    needs any.
    """
    group = group if group is not None else frame.columns[0]
    data = _labels(_require(frame, [group, *_COLUMNS], "pass_k_curves"), group)
    groups = _order(data, group)
    if len(groups) > MAX_GROUPS:
        raise InputError(
            f"pass_k_curves: the frame holds {len(groups):,} groups; one chart draws at most "
            f"{MAX_GROUPS} (two curves and two bands each): filter it first, e.g. "
            f"frame.filter(pl.col({group!r}).is_in([...]))"
        )
    if data.is_empty() or data["pass_at_k"].is_null().all():
        raise InputError("pass_k_curves: no point to draw (no item has k samples)")
    long = pl.concat(
        data.select(
            group, "k", "n_items", "n_items_short",
            curve=pl.lit(label),
            estimate=pl.col(name), low=pl.col(f"{name}_low"), high=pl.col(f"{name}_high"),
        )
        for name, label in _CURVES.items()
    ).filter(pl.col("estimate").is_not_null())  # fmt: skip
    base = alt.Chart(_data(long))
    scale = alt.Scale(domain=groups, range=list(_RUN_COLORS))
    color = alt.Color(f"{group}:N", title=group.replace("_", " "), scale=scale,
                      legend=alt.Legend(symbolType="stroke", symbolStrokeWidth=3, symbolOpacity=1))  # fmt: skip
    dash = alt.StrokeDash(
        "curve:N", title=None,
        scale=alt.Scale(domain=list(_CURVES.values()), range=[[1, 0], [6, 4]]),
        legend=alt.Legend(symbolType="stroke", symbolStrokeWidth=2, symbolSize=500,
                          labelLimit=320, symbolStrokeColor="#333", symbolFillColor="#333"),
    )  # fmt: skip
    x = alt.X("k:Q", title="k (samples drawn per item)", scale=alt.Scale(zero=False), axis=alt.Axis(tickMinStep=1,
                                                                       format="d"))  # fmt: skip
    y = alt.Y("estimate:Q", title="probability", scale=alt.Scale(domain=[0, 1]),
              axis=alt.Axis(format="%"))  # fmt: skip
    detail = alt.Detail("curve:N")
    quiet = alt.Color(f"{group}:N", scale=scale)
    band = base.mark_area(fillOpacity=0.14).encode(x=x, y="low:Q", y2="high:Q", color=quiet,
                                                detail=detail)  # fmt: skip
    tooltip = [
        alt.Tooltip(f"{group}:N"), alt.Tooltip("curve:N"), alt.Tooltip("k:Q"),
        alt.Tooltip("estimate:Q", format=".1%"), alt.Tooltip("low:Q", format=".1%"),
        alt.Tooltip("high:Q", format=".1%"), alt.Tooltip("n_items:Q", title="items used"),
        alt.Tooltip("n_items_short:Q", title="items with fewer than k samples"),
    ]  # fmt: skip
    line = base.mark_line(strokeWidth=2, point=alt.OverlayMarkDef(size=25)).encode(
        x=x, y=y, color=color, strokeDash=dash, tooltip=tooltip
    )
    heading = _title(title, "")
    heading.subtitle = _subtitle(frame, long)  # one line each: the band, the items left out
    chart = (band + line).properties(width=460, height=300, title=heading)
    return _styled(chart)  # type: ignore[no-any-return]


def _subtitle(frame: pl.DataFrame, long: pl.DataFrame) -> list[str]:
    method = frame["ci_method"][0] if "ci_method" in frame.columns else "interval"
    level = frame["ci_level"][0] if "ci_level" in frame.columns else None
    method = shorten(re.sub(f"[{HIDDEN}]", "\ufffd", str(method)), 80)  # text from a frame
    band = f"{level:.0%} {method}" if level is not None else method
    lines = [f"solid: pass@k · dashed: pass^k · bands: {band}"]
    short = long.filter(pl.col("n_items_short") > 0)
    if short.height:
        first = short.select(pl.col("k").min()).item()
        lines.append(f"from k = {first} some items have fewer than k samples and are left "
                     "out (hover a point)")  # fmt: skip
    return lines
