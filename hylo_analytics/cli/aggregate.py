"""``hylo-analytics aggregate``: per-group statistics and intervals of the stored scores."""

from __future__ import annotations

import argparse

from hylo_analytics.cli._common import (
    add_errors_arg,
    add_format_args,
    add_interval_args,
    add_store_arg,
    emit,
    store_from,
)
from hylo_analytics.cli._defaults import CI_METHODS


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "aggregate",
        help="counts, statistics and confidence intervals per group and metric",
        description=(
            "One row per group and metric: n_total / n_valid / n_skipped with the skip "
            "breakdown, the errors policy and errored keys (errors, n_errors), mean, std, "
            "stderr, median, p95, IQM, and an interval on the mean's own denominator. "
            "Example: hylo-analytics aggregate --store out/store --by run_id,task_id "
            "--metric success --ci wilson"
        ),
    )
    add_store_arg(p)
    p.add_argument("--by", default="run_id", help="comma-separated group columns (run_id)")
    p.add_argument("--metric", action="append", help="metric id or alias (repeatable)")
    p.add_argument("--ci", choices=CI_METHODS, default="auto", help="interval method (auto)")
    add_interval_args(p)
    p.add_argument("--reduce", default="mean", help="epoch reducer: mean, median, max, min, "
                   "at_least(k), pass@k, or none")  # fmt: skip
    p.add_argument("--source", action="append", help="keep only scores of this source")
    p.add_argument("--stratify", help="bootstrap within the levels of this column (task_id)")
    p.add_argument("--cluster", help="add the clustered stderr by this column (task_id)")
    add_errors_arg(p)
    add_format_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import polars as pl

    from hylo_analytics.aggregate import aggregate_scores

    out = aggregate_scores(
        store_from(args),
        by=[c.strip() for c in args.by.split(",") if c.strip()],
        metrics=args.metric,
        ci=args.ci,
        level=args.level,
        seed=args.seed,
        n_resamples=args.resamples,
        reduce=None if args.reduce == "none" else args.reduce,
        source=args.source,
        stratify=args.stratify,
        cluster=args.cluster,
        errors=args.errors,
    )
    if args.format in ("table", "csv"):
        # Nested columns do not fit a table cell or CSV: show "reason: count; ...".
        reasons = pl.col("skip_breakdown").list.eval(
            pl.format(
                "{}: {}", pl.element().struct.field("reason"), pl.element().struct.field("count")
            )
        )
        out = out.with_columns(skip_breakdown=reasons.list.join("; "))
    if args.format == "table":  # the columns a reader scans; csv / json / parquet keep them all
        by = [c.strip() for c in args.by.split(",") if c.strip()]
        out = out.select(
            *by, "metric", "n_total", "n_valid", "errors", "n_errors", "mean", "stderr",
            "ci_low", "ci_high", "ci_method", "skip_breakdown",
        )  # fmt: skip
    emit(out, args.format, args.output, wide=args.wide)
    return 0
