"""``hylo-analytics shrink``: per-task success rates shrunk toward their suite (small-n pooling)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from hylo_analytics.cli._common import (
    add_errors_arg,
    add_format_args,
    add_store_arg,
    emit,
    say,
    store_from,
)

# the engine's, as plain values (building the parser imports no engine); pinned by
# tests/cli/test_cli_shrink.py
INTERVALS = ("hierarchical", "bootstrap", "plain")  # stats.shrinkage.INTERVALS
DEFAULT_BOOTSTRAP = 200  # stats.shrinkage.DEFAULT_BOOTSTRAP
DEFAULT_LEVEL = 0.95


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "shrink",
        help="per-task success rates shrunk toward their suite (small-n pooling)",
        description=(
            "For each run on each suite (--by run_id, --suite benchmark_id,split): the suite's "
            "Beta prior of task success rates, estimated from its tasks' successes by marginal "
            "likelihood (empirical-Bayes beta-binomial), and each task's rate shrunk toward it "
            "(the posterior mean), beside the raw rate and its Wilson interval. For 10-50 "
            "episodes per task, where a raw rate is noisy. pooling says how the suite pooled: "
            "partial; complete (no spread beyond binomial: every task at the pooled rate); "
            "none (all-or-nothing tasks: nothing moved). 0/1 metrics only. Example: "
            "hylo-analytics shrink --store out/store --run agent=pi05 --chart shrink.png"
        ),
    )
    add_store_arg(p)
    p.add_argument(
        "--run",
        action="append",
        metavar="RUN",
        help="runs to pool: an id, a prefix or a selector, which names every run it matches "
        "(agent=pi05: pi05 on every suite); repeatable; default: every run",
    )
    p.add_argument("--by", default="run_id",
                   help="comma-separated columns of one group (run_id); one prior per group "
                   "and suite")  # fmt: skip
    p.add_argument("--task", default="task_id",
                   help="comma-separated columns naming a task in a suite (task_id)")  # fmt: skip
    p.add_argument("--suite", default="benchmark_id,split",
                   help="comma-separated columns naming a suite (benchmark_id,split); pass "
                   "'' to pool every task of a group together")  # fmt: skip
    p.add_argument("--metric", default="success", help="a 0/1 metric (success)")
    p.add_argument("--source", action="append", help="keep only scores of this source")
    p.add_argument(
        "--interval",
        choices=INTERVALS,
        default="hierarchical",
        help="the shrunk rate's interval: hierarchical (default; the prior integrated out "
        "under flat priors on its mean and on the intra-task correlation: holds 0.93+ in "
        "docs/benchmarks.md), bootstrap (Laird-Louis), plain (the empirical-Bayes posterior's, "
        "which under-covers at 10 tasks)",
    )
    p.add_argument("--level", type=float, default=DEFAULT_LEVEL, help="interval coverage (0.95)")
    p.add_argument("--resamples", type=int, default=DEFAULT_BOOTSTRAP,
                   help="--interval bootstrap: refits of the prior (default "
                   f"{DEFAULT_BOOTSTRAP})")  # fmt: skip
    p.add_argument("--seed", type=int, default=0, help="--interval bootstrap: seed (default 0)")
    p.add_argument("--chart", type=Path, metavar="FILE",
                   help="also write the raw-vs-shrunk chart (.png, .svg or .html) of the first "
                   "groups")  # fmt: skip
    add_errors_arg(p)
    add_format_args(p)
    p.set_defaults(func=run)


def _columns(text: str) -> tuple[str, ...]:
    return tuple(c.strip() for c in text.split(",") if c.strip())


def options(args: argparse.Namespace) -> dict[str, Any]:
    """The keywords of :meth:`~hylo_analytics.api.Store.shrink` the flags say."""
    return {
        "runs": args.run,
        "by": _columns(args.by),
        "task": _columns(args.task),
        "suite": _columns(args.suite),
        "metric": args.metric,
        "errors": args.errors,
        "source": args.source,
        "level": args.level,
        "interval": args.interval,
        "n_resamples": args.resamples,
        "seed": args.seed,
    }


def run(args: argparse.Namespace) -> int:
    opts = options(args)
    out = store_from(args).shrink(**opts)
    if args.chart is not None:
        import polars as pl

        from hylo_analytics import charts
        from hylo_analytics.charts.shrinkage import MAX_GROUPS

        groups = [*opts["by"], *opts["suite"]]
        shown = out
        if groups:  # the first groups only: a chart of thousands of runs is read by nobody
            rank = pl.struct(groups).is_first_distinct().cum_sum()
            shown = out.filter(rank <= MAX_GROUPS)
            total = out.select(groups).n_unique()
            if total > MAX_GROUPS:
                say(f"the chart shows the first {MAX_GROUPS} of {total:,} groups; pick runs "
                    "with --run", file=sys.stderr)  # fmt: skip
        charts.save(charts.shrinkage(shown, group=groups, task=opts["task"]), args.chart)
    emit(out, args.format, args.output, wide=args.wide)
    return 0
