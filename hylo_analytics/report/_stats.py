"""The report's sections of the issue-42 statistics, each only where the data supports it.

:func:`stat_frames` asks the store (``Store.pareto``'s stage) for small frames, kept with the
report's other frames so they are redacted as every string of the page is;
:func:`stat_sections` turns them into HTML. No statistic is computed here. Bounded at any
number of runs: the table shows at most :data:`MAX_ROWS` policies and the chart at most
:data:`MAX_CHART` (the front first, then by P(on the front)).
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from hylo_analytics import charts
from hylo_analytics._html import text
from hylo_analytics.errors import HyloError
from hylo_analytics.report._parts import _pct, _svg, _table
from hylo_analytics.store import ParquetStore

__all__ = ["MAX_CHART", "MAX_ROWS", "stat_frames", "stat_sections"]

MAX_ROWS = 20  # policies in the front's table at most
MAX_CHART = 120  # policies the front's chart draws at most
COST = "steps"  # the cost metric of the front (the store's per-episode steps)


def stat_frames(store: ParquetStore, frames: Mapping[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    """``pareto`` (the runs of the page's suite as policies, front rows first, labelled) and
    ``pareto_meta`` (one row: metrics, directions, level, pairing, notes); nothing where the
    runs have no cost or fewer than two runs have one."""
    from hylo_analytics.compare import pareto_runs

    runs = frames["runs"]
    costed = runs.filter(pl.col("mean_steps").is_not_null()) if "mean_steps" in runs else runs[:0]
    if costed.height < 2:
        return {}
    metric = str(frames["headline"]["metric"][0])
    try:
        front = pareto_runs(
            store, costed["run"].to_list(), cost=COST, quality=metric, policy="run_id",
            errors=frames["headline"]["errors"][0],
        )  # fmt: skip
    except HyloError:  # too few policies with both metrics: no front to show
        return {}
    labels = dict(zip(runs["run"], runs["label"], strict=True))
    frame = front.frame.with_columns(
        run=pl.col("policy"),
        policy=pl.col("policy").replace_strict(labels, default=pl.col("policy")),
    )
    meta = pl.DataFrame(
        {
            "quality": [front.quality],
            "cost": [front.cost],
            "quality_direction": [front.quality_direction],
            "cost_direction": [front.cost_direction],
            "pairing": [front.pairing],
            "level": [front.level],
            "n_resamples": [front.n_resamples],
            "notes": [" ".join(front.notes)],
        }
    )
    return {"pareto": frame, "pareto_meta": meta}


def _pareto_section(frame: pl.DataFrame, meta: dict[str, object]) -> str:
    shown = frame.head(MAX_ROWS)
    rows = [
        [
            text(r["policy"]) + ("<br><b>on the front</b>" if r["on_front"] else ""),
            _pct(r["quality"]),
            f"{_pct(r['quality_low'])} to {_pct(r['quality_high'])}",
            "\u2013" if r["cost"] is None else f"{r['cost']:.3g}",
            "\u2013" if r["cost_low"] is None else f"{r['cost_low']:.3g} to {r['cost_high']:.3g}",
            f"{r['p_front']:.2f}",
            str(r["n_keys"]),
        ]
        for r in shown.iter_rows(named=True)
    ]
    level = float(meta["level"])  # type: ignore[arg-type]
    header = ["run", text(str(meta["quality"])), f"{level * 100:.3g}% interval",
              f"mean {text(str(meta['cost']))}", f"{level * 100:.3g}% interval",
              "P(on the front)", "keys"]  # fmt: skip
    cut = (
        f"Showing {shown.height:,} of {frame.height:,} runs: the front first, then by "
        "P(on the front). "
        if shown.height < frame.height
        else ""
    )
    drawn = frame.head(MAX_CHART)
    positive = bool((drawn["cost_low"].fill_null(drawn["cost"]).min() or 0) > 0)  # type: ignore[operator]
    try:
        chart = _svg(
            charts.pareto_intervals(
                drawn, quality=str(meta["quality"]), cost=str(meta["cost"]), log_cost=positive,
                level=level, title="Cost-quality front",
            )
        )  # fmt: skip
    except HyloError as exc:
        chart = f'<p class="note">{text(str(exc))}</p>'
    return (
        "<h2>Cost-quality front</h2>"
        + _table(header, rows)
        + f'<p class="note">{cut}Each run\'s mean {text(str(meta["quality"]))} and mean '
        f"{text(str(meta['cost']))} per key (lower cost is better) with percentile intervals "
        f"from {int(meta['n_resamples']):,} bootstrap resamples of keys "  # type: ignore[call-overload]
        f"({text(str(meta['pairing']))}); P(on the front) is the share of resamples on which "
        "the run is on the front: a bootstrap frequency, not a posterior probability "
        f"(Store.pareto). {text(str(meta['notes'] or ''))}</p>" + chart
    )


def stat_sections(frames: Mapping[str, pl.DataFrame]) -> str:
    """The HTML of the sections the frames hold (nothing for a section without data)."""
    parts = []
    pareto, meta = frames.get("pareto"), frames.get("pareto_meta")
    if pareto is not None and meta is not None and pareto.height >= 2:
        parts.append(_pareto_section(pareto, meta.row(0, named=True)))
    return "\n".join(parts)
