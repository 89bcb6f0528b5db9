"""``hylo-analytics aggregate``: per-group statistics and intervals of the stored scores."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from hylo_analytics.cli._common import (
    add_errors_arg,
    add_format_args,
    add_interval_args,
    add_store_arg,
    emit,
    say,
    store_from,
)
from hylo_analytics.cli._defaults import CI_METHODS, STATISTICS
from hylo_analytics.errors import SelectionError

if TYPE_CHECKING:
    from hylo_analytics.api import Store


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
    p.add_argument(
        "--run",
        action="append",
        metavar="RUN",
        help="only this run: an id, a unique prefix or a selector such as "
        "agent=xvla,benchmark=libero_spatial (repeat; default: every run)",
    )
    p.add_argument(
        "--statistics",
        metavar="NAMES",
        help="comma-separated statistic columns to keep (default: all of "
        f"{', '.join(STATISTICS)}; 'sum' on request); counts, mean and the interval always",
    )
    p.add_argument(
        "--ci",
        type=_ci_arg,
        default="auto",
        metavar="METHOD",
        help=f"interval method, one of {', '.join(CI_METHODS)} (default auto), or one per "
        "metric as METRIC=METHOD,... (the metrics not named get auto)",
    )
    add_interval_args(p)
    p.add_argument("--reducer", default="mean", help="epoch reducer: mean, median, max, min, "
                   "at_least(k), pass@k, or none")  # fmt: skip
    # the deprecated spelling (one release): the same option, as compare and rank name it
    p.add_argument("--reduce", dest="reduce_old", default=None, help=argparse.SUPPRESS)
    p.add_argument("--source", action="append", help="keep only scores of this source")
    p.add_argument("--stratify", help="bootstrap within the levels of this column (task_id)")
    p.add_argument("--cluster", metavar="COLUMN",
                   help="the rows are clustered by this column (task_id: the seeds of a "
                   "task): the default interval is then CR2 cluster-robust (ci_method cr2), "
                   "and n_clusters and the clustered stderr columns are added")  # fmt: skip
    add_errors_arg(p)
    p.add_argument(
        "--optimality-threshold",
        type=float,
        default=1.0,
        metavar="T",
        help="rliable's optimality gap mean(max(T - x, 0)) on normalized values (default 1.0)",
    )
    add_format_args(p)
    p.set_defaults(func=run)


def _reducer(args: argparse.Namespace) -> str:
    """``--reducer``, or the deprecated ``--reduce`` (warns) when only it was given."""
    if args.reduce_old is None:
        return str(args.reducer)
    import warnings

    warnings.warn(
        "--reduce is deprecated: pass --reducer (the same option)", DeprecationWarning, stacklevel=2
    )
    return str(args.reduce_old)


def _ci_arg(text: str) -> str | dict[str, str]:
    """``METHOD`` or ``METRIC=METHOD,...``, each method one of :data:`CI_METHODS`."""
    if "=" not in text:
        _check_ci(text)
        return text
    out: dict[str, str] = {}
    for item in text.split(","):
        metric, sep, method = (part.strip() for part in item.partition("="))
        if not sep or not metric:
            raise argparse.ArgumentTypeError(f"expected METHOD or METRIC=METHOD,..., got {item!r}")
        _check_ci(method)
        out[metric] = method
    return out


def _check_ci(method: str) -> None:
    if method not in CI_METHODS:
        import difflib

        near = difflib.get_close_matches(method, CI_METHODS, n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise argparse.ArgumentTypeError(
            f"unknown interval method {method!r}{hint}; choose from {', '.join(CI_METHODS)}"
        )


def _check_names(what: str, asked: list[str], held: list[str]) -> None:
    from hylo_analytics._text import did_you_mean

    absent = [a for a in asked if a not in held]
    if absent:
        raise SelectionError(
            f"no scores of {what}(s) {absent}{did_you_mean(absent, held)}; the store holds "
            f"{', '.join(held) or 'none'}"
        )


def _names(text: str | None) -> list[str]:
    return [c.strip() for c in (text or "").split(",") if c.strip()]


def options(args: argparse.Namespace, store: Store | None = None) -> dict[str, Any]:
    """The keyword arguments of :func:`~hylo_analytics.aggregate.aggregate_scores` the flags
    say (every option of Python has a flag with its default: tests/cli/test_cli_parity.py).
    ``--run`` names are resolved on ``store`` (ids, prefixes, selectors)."""
    runs = args.run
    if runs is not None and store is not None:
        runs = store.resolve_runs(runs)
    return {
        "by": tuple(_names(args.by)),
        "metrics": args.metric,
        "statistics": _names(args.statistics) if args.statistics is not None else None,
        "ci": args.ci,
        "level": args.level,
        "seed": args.seed,
        "n_resamples": args.resamples,
        "reducer": None if _reducer(args) == "none" else _reducer(args),
        "stratify": args.stratify,
        "cluster": args.cluster,
        "optimality_threshold": args.optimality_threshold,
        "source": args.source,
        "runs": runs,
        "errors": args.errors,
    }


def run(args: argparse.Namespace) -> int:
    import polars as pl

    from hylo_analytics.aggregate import aggregate_scores

    store = store_from(args)
    opts = options(args, store)
    if opts["source"]:  # a typo would be an empty table (Python returns one: a source may come)
        held = store.sql("select distinct source from stg_scores where source is not null")
        _check_names("source", opts["source"], sorted(held["source"].to_list()))
    out = aggregate_scores(store.parquet, **opts)
    if opts["metrics"]:  # a run with none of the metrics asked is left out: say which
        from hylo_analytics.resolution import runs_without

        gone = runs_without(store.parquet, opts["metrics"], opts["runs"])
        if gone.height:
            listed = "; ".join(f"{r} (its metrics: {m or 'none'})" for r, m in gone.head(3).rows())
            more = f"; and {gone.height - 3:,} more" if gone.height > 3 else ""
            say(f"{gone.height:,} run(s) have no score of {', '.join(opts['metrics'])} and are "
                f"left out: {listed}{more}", file=sys.stderr)  # fmt: skip
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
        shown = (
            *by, "metric", "n_total", "n_valid", "errors", "n_errors", "mean", "stderr",
            "ci_low", "ci_high", "ci_method", "skip_breakdown",
        )  # fmt: skip
        out = out.select(c for c in shown if c in out.columns)  # --statistics may drop some
    emit(out, args.format, args.output, wide=args.wide)
    return 0
