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
SMALL_N = 50  # a task with fewer episodes than this gets its shrunk rate shown
MAX_SHRUNK = 60  # rows of the shrunk rates' table at most
COST = "steps"  # the cost metric of the front (the store's per-episode steps)


def stat_frames(store: ParquetStore, frames: Mapping[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    """``pareto`` (the runs of the page's suite as policies, front rows first, labelled) and
    ``pareto_meta`` (one row: metrics, directions, level, pairing, notes); nothing where the
    runs have no cost or fewer than two runs have one."""
    from hylo_analytics.compare import pareto_runs

    out = {**_shrink_frames(store, frames), **_repeated_frames(store, frames)}
    runs = frames["runs"]
    costed = runs.filter(pl.col("mean_steps").is_not_null()) if "mean_steps" in runs else runs[:0]
    if costed.height < 2:
        return out
    metric = str(frames["headline"]["metric"][0])
    try:
        front = pareto_runs(
            store, costed["run"].to_list(), cost=COST, quality=metric, policy="run_id",
            errors=frames["headline"]["errors"][0],
        )  # fmt: skip
    except HyloError:  # too few policies with both metrics: no front to show
        return out
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
    return {**out, "pareto": frame, "pareto_meta": meta}


def _shrink_frames(
    store: ParquetStore, frames: Mapping[str, pl.DataFrame]
) -> dict[str, pl.DataFrame]:
    """``shrunk``: the candidate's and the parent's per-task rates shrunk toward their
    suite (``Store.shrink``'s stage), where some task has fewer than :data:`SMALL_N`
    episodes; nothing otherwise."""
    from hylo_analytics.aggregate.shrinkage import shrunk_rates

    h = frames["headline"].row(0, named=True)
    try:
        shrunk = shrunk_rates(
            store, metric=str(h["metric"]), runs=[h["candidate"], h["parent"]],
            errors=h["errors"],
        )  # fmt: skip
    except HyloError:
        return {}
    if shrunk.is_empty() or int(shrunk["n"].min() or 0) >= SMALL_N:  # type: ignore[arg-type]
        return {}
    labels = {h["candidate"]: _label(h, "candidate"), h["parent"]: _label(h, "parent")}
    return {
        "shrunk": shrunk.with_columns(
            label=pl.col("run_id").replace_strict(labels, default=pl.col("run_id"))
        )
    }


def _repeated_frames(
    store: ParquetStore, frames: Mapping[str, pl.DataFrame]
) -> dict[str, pl.DataFrame]:
    """``pass_k`` (the pair's pass@k and pass^k curves) and ``epochs_plan``, where some key
    has two or more epochs; nothing otherwise."""
    from hylo_analytics.aggregate.repeated import pass_k_curves
    from hylo_analytics.compare.epochs import epochs_plan

    h = frames["headline"].row(0, named=True)
    metric, pair = str(h["metric"]), [h["candidate"], h["parent"]]
    try:
        curves = pass_k_curves(store, metric=metric, runs=pair, errors=h["errors"])
        if curves.is_empty() or int(curves["k"].max() or 0) < 2:  # type: ignore[arg-type]
            return {}
        plan = epochs_plan(store, h["candidate"], h["parent"], metric=metric, errors=h["errors"])
    except HyloError:
        return {}
    labels = {h["candidate"]: _label(h, "candidate"), h["parent"]: _label(h, "parent")}
    curves = curves.with_columns(
        run=pl.col("run_id").replace_strict(labels, default=pl.col("run_id"))
    )
    return {"pass_k": curves, "epochs_plan": plan}


def _repeated_section(curves: pl.DataFrame, plan: pl.DataFrame | None) -> str:
    top = curves.group_by("run_id").agg(pl.col("k").max().alias("_max"))
    rows_frame = (
        curves.join(top, on="run_id")
        .filter((pl.col("k") == 1) | (pl.col("k") == pl.col("_max")))
        .sort("run", "k")
    )
    rows = [
        [
            text(r["run"]),
            str(r["k"]),
            f"{_pct(r['pass_at_k'])} ({_pct(r['pass_at_k_low'])} to {_pct(r['pass_at_k_high'])})",
            f"{_pct(r['pass_hat_k'])} ({_pct(r['pass_hat_k_low'])} to "
            f"{_pct(r['pass_hat_k_high'])})",
            f"{r['n_items']} ({r['n_items_short']} short)",
        ]
        for r in rows_frame.iter_rows(named=True)
    ]
    try:
        chart = _svg(charts.pass_k_curves(curves.drop("run_id"), group="run"))
    except HyloError as exc:
        chart = f'<p class="note">{text(str(exc))}</p>'
    note = ""
    if plan is not None and plan.height:
        p = plan.row(0, named=True)
        note = (
            f'<p class="note">Epochs: the paired difference\'s variance is '
            f"{(p['within_share'] or 0) * 100:.0f}% within keys (the epochs' noise); "
            + (
                f"{p['epochs_to_halve']} epochs per key would halve its interval"
                if p["epochs_to_halve"] is not None
                else "more epochs cannot halve its interval"
            )
            + (f" ({text(p['note'])})" if p.get("note") else "")
            + " (Store.epochs_plan).</p>"
        )
    return (
        "<h2>Repeated samples</h2>"
        + _table(["run", "k", "pass@k", "pass^k", "keys"], rows)
        + chart
        + note
    )


def _label(h: dict[str, object], role: str) -> str:
    return str(h.get(f"{role}_label") or h[role])


def _shrink_section(shrunk: pl.DataFrame) -> str:
    shown = shrunk.sort("task_id", "label").head(MAX_SHRUNK)
    rows = [
        [
            text(r["task_id"]),
            text(r["label"]),
            f"{r['k']} / {r['n']}",
            f"{_pct(r['raw_rate'])} ({_pct(r['raw_lo'])} to {_pct(r['raw_hi'])})",
            f"{_pct(r['shrunk_rate'])} ({_pct(r['shrunk_lo'])} to {_pct(r['shrunk_hi'])})",
            "\u2013" if r["shrink_weight"] is None else f"{r['shrink_weight']:.2f}",
            text(r["pooling"] or ""),
        ]
        for r in shown.iter_rows(named=True)
    ]
    header = ["task", "run", "successes / n", "raw (95% Wilson)", "shrunk (95%)",
              "weight toward the suite", "pooling"]  # fmt: skip
    cut = (
        f"Showing {shown.height:,} of {shrunk.height:,} rows. "
        if shown.height < shrunk.height
        else ""
    )
    chart_frame = shrunk.drop("label").filter(
        pl.col("task_id").is_in(shown["task_id"].unique().to_list())
    )
    try:
        chart = _svg(charts.shrinkage(chart_frame))
    except HyloError as exc:
        chart = f'<p class="note">{text(str(exc))}</p>'
    return (
        "<h2>Per-task rates, pooled</h2>"
        + f'<p class="note">{cut}Some tasks have fewer than {SMALL_N} episodes, so their raw '
        "rates are noisy: beside each raw rate, the rate shrunk toward the run's suite "
        "(empirical-Bayes beta-binomial, Store.shrink; "
        f"{text(str(shrunk['ci_method'][0] or ''))} interval). The raw rates are the ones "
        "compared above.</p>" + _table(header, rows) + chart
    )


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
    curves = frames.get("pass_k")
    if curves is not None and not curves.is_empty():
        parts.append(_repeated_section(curves, frames.get("epochs_plan")))
    shrunk = frames.get("shrunk")
    if shrunk is not None and not shrunk.is_empty():
        parts.append(_shrink_section(shrunk))
    return "\n".join(parts)
