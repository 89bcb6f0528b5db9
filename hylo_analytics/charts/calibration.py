"""The chart of judge calibration: per policy, the classical, PPI++ and judge-only estimates.

The frame comes from :func:`~hylo_analytics.compare.calibrate_runs` (``Store.calibrate``):
its ``rates`` (one row per policy and suite) or its ``differences``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import altair as alt
import polars as pl

from hylo_analytics.charts._style import _data, _labels, _require, _styled, _title
from hylo_analytics.errors import InputError

if TYPE_CHECKING:
    from hylo_analytics.compare.calibration import Calibration

__all__ = ["MAX_ROWS", "calibration_intervals"]

#: The most rows (policy and suite) one chart draws: three intervals each.
MAX_ROWS = 120
_LANES = {"classical (trusted only)": "#6E6E6E", "PPI++": "#0072B2",
          "judge only (biased)": "#D55E00"}  # fmt: skip
_PREFIX = {"classical (trusted only)": "classical", "PPI++": "", "judge only (biased)":
           "judge_only"}  # fmt: skip
_COLUMNS = ["policy", "estimate", "low", "high", "classical", "classical_low", "classical_high",
            "judge_only", "judge_only_low", "judge_only_high", "n_labelled", "n_unlabelled",
            "effective_n"]  # fmt: skip


def calibration_intervals(
    frame: pl.DataFrame | Calibration,
    *,
    suite: Sequence[str] | None = None,
    metric: str = "success",
    difference: bool = False,
    title: str | None = None,
) -> alt.LayerChart:
    """One row per policy (and suite): three estimates with their intervals, the classical
    mean of the trusted grades (grey), PPI++ (blue, filled) and the judge's own mean (orange,
    biased by the judge's error), in that order from the top.

    ``frame``: a :class:`~hylo_analytics.compare.calibration.Calibration` (its ``rates``,
    or with ``difference`` its ``differences``) or one of those frames, with ``suite`` its
    suite columns (default: those between ``policy`` and ``estimate``) and ``metric`` the
    trusted metric's name for the axis. At most :data:`MAX_ROWS` rows.
    """
    baseline = None
    if not isinstance(frame, pl.DataFrame):
        metric, baseline = frame.trusted, frame.baseline
        frame = frame.differences if difference else frame.rates
    difference = difference or "baseline" in frame.columns
    if suite is None:
        start = 2 if difference else 1
        suite = (
            frame.columns[start : frame.columns.index("estimate")]
            if "estimate" in frame.columns
            else []
        )
    data = _require(frame, [*_COLUMNS, *suite], "calibration_intervals")
    if data.is_empty():
        raise InputError("calibration_intervals: the frame has no rows to draw")
    if data.height > MAX_ROWS:
        raise InputError(
            f"calibration_intervals: {data.height:,} rows; a chart draws at most {MAX_ROWS}: "
            "filter the frame to the policies to look at (Store.calibrate(policies=...))"
        )
    for c in ["policy", *suite]:
        data = _labels(data, c)
    several = any(data[c].n_unique() > 1 for c in suite)
    label = pl.concat_str(["policy", *suite], separator=" · ") if several else pl.col("policy")
    data = data.with_columns(_row=label)
    lanes = pl.concat(
        [
            data.select(
                "_row",
                "n_labelled",
                "n_unlabelled",
                "effective_n",
                value=pl.col(p or "estimate"),
                lo=pl.col(f"{p}_low" if p else "low"),
                hi=pl.col(f"{p}_high" if p else "high"),
                lane=pl.lit(name),
            )
            for name, p in _PREFIX.items()
        ]
    )
    order = data["_row"].unique(maintain_order=True).to_list()
    y = alt.Y("_row:N", title=None, sort=order)
    offset = alt.YOffset("lane:N", sort=list(_LANES))
    color = alt.Color("lane:N", title=None,
                      scale=alt.Scale(domain=list(_LANES), range=list(_LANES.values())))  # fmt: skip
    what = (
        f"difference in {metric}" + (f" from {baseline}" if baseline else "")
        if difference
        else metric
    )
    axis = alt.Axis(format="%") if not difference else alt.Axis(format="+%")
    x = alt.X("lo:Q", title=what, axis=axis, scale=alt.Scale(zero=difference, nice=True))
    base = alt.Chart(_data(lanes))
    tips = [alt.Tooltip("_row:N", title="policy"), alt.Tooltip("lane:N", title="estimate"),
            alt.Tooltip("value:Q", format=".2%"),
            alt.Tooltip("lo:Q", format=".2%", title="interval low"),
            alt.Tooltip("hi:Q", format=".2%", title="interval high"),
            alt.Tooltip("n_labelled:Q", title="trusted grades"),
            alt.Tooltip("n_unlabelled:Q", title="judge-only keys"),
            alt.Tooltip("effective_n:Q", format=".1f", title="PPI++ worth, in trusted grades")]  # fmt: skip
    bars = base.mark_rule(strokeWidth=2).encode(x=x, x2="hi:Q", y=y, yOffset=offset,
                                                color=color)  # fmt: skip
    points = base.mark_point(size=45, filled=True, opacity=1).encode(
        x="value:Q", y=y, yOffset=offset, color=color, tooltip=tips
    )
    layers = [bars, points]
    if difference:
        layers.insert(0, alt.Chart(_data(pl.DataFrame({"z": [0.0]}))).mark_rule(
            strokeDash=[4, 3], color="#333333").encode(x="z:Q"))  # fmt: skip
    subtitle = (
        "grey: trusted grades alone · blue: PPI++ (the judge corrected by the trusted grades) · "
        "orange: the judge taken as the truth (biased by its errors)"
    )
    head = title or (f"{what}: PPI++ against the classical and the judge-only estimate")
    chart = alt.layer(*layers).properties(
        width=460, height=alt.Step(8), title=_title(head, subtitle)
    )
    return _styled(chart)  # type: ignore[no-any-return]
