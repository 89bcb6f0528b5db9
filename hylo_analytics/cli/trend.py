"""``hylo-analytics trend``: runs ordered by version, and where each task first got worse."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from hylo_analytics.cli._common import (
    add_errors_arg,
    add_format_args,
    add_interval_args,
    add_store_arg,
    emit,
    say,
    store_from,
)

HELP = """Order runs by a version or a step and find, for each task, the first version that
is significantly worse than the best earlier one (the regression point).

Versions: --order agent_version (default: natural version order, 2.3.0 before 2.294.0,
1.2.0-rc1 before 1.2.0) or another run field (created, run_id, benchmark_version), or a path
into a run's JSON fields: metadata.NAME (a log's top-level "metadata", e.g.
metadata.training_step), extra.NAME, agent_components.NAME, results.NAME, ordered as numbers
when every run's value is one. Runs sharing a version (seeds) are pooled: a key's value is
its mean over them. The order used is printed first.

Per task and version: the rate with its interval (as 'aggregate': Wilson for 0/1 metrics).
Each version after a task's first is compared with the best earlier version of that task
(highest rate before it; a tie goes to the earliest) as 'compare' compares two runs: keys
paired, Tango's score test for 0/1 metrics, one-sided; the regression point is the first
version whose verdict is 'regressed'. --family tasks (default) adjusts each version's tasks
together (Holm); --family scan adjusts over every test of the trend. The best earlier
version is chosen by its observed rate, which flatters it: on flat simulated trends (no true
change) 'tasks' flags some task in 70 % of 10-version trends and in every 200-version one,
'scan' in 12 % and 38 %. A 'tasks' regression point is a screening (a place to look); a
'scan' one is stronger evidence, not family-wise proof (docs/statistics.md).

Tables (--show): regressions (default: one row per task), rates, tests (every couple
tested), flips (the keys that changed at each regression point; 'errored' says a side was a
harness error, which under --errors failure counts as a failure).

example: hylo-analytics trend --store out/store --run agent=octo-ft --chart trend.png"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "trend",
        help="runs ordered by version: each task's rate per version and its regression point",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_store_arg(p)
    p.add_argument(
        "--run",
        action="append",
        metavar="SELECTOR",
        help="runs in the trend: an id, a prefix or a selector naming every run it matches "
        "(agent=octo-ft); repeatable; default every run",
    )
    p.add_argument(
        "--order",
        default="agent_version",
        metavar="FIELD",
        help="what orders the versions (default agent_version; e.g. metadata.training_step)",
    )
    p.add_argument("--metric", default="success", help="the metric (default success)")
    p.add_argument("--source", help="the scores of this source, not the resolved ones")
    p.add_argument(
        "--family",
        choices=("tasks", "scan"),
        default="tasks",
        help="what the p-values are adjusted over: each version's tasks (default) or every "
        "(task, version) test of the trend",
    )
    p.add_argument("--alpha", type=float, default=0.05, help="level of the tests (0.05)")
    p.add_argument("--adjust", choices=("holm", "bh", "none"), default="holm",
                   help="the adjustment within the family (default holm)")  # fmt: skip
    p.add_argument("--direction", choices=("maximize", "minimize"), default=None,
                   help="what is better for the metric (default: the registry's)")  # fmt: skip
    p.add_argument("--reducer", choices=("mean", "max", "min"), default="mean",
                   help="epochs (and the runs of one version) of a key reduced by (mean)")  # fmt: skip
    add_interval_args(p)
    add_errors_arg(p)
    p.add_argument(
        "--force",
        action="store_true",
        help="go on when runs of one benchmark and split have different benchmark digests",
    )
    p.add_argument(
        "--show",
        choices=("regressions", "rates", "tests", "flips"),
        default="regressions",
        help="which table to print (default regressions)",
    )
    p.add_argument("--chart", type=Path, metavar="FILE",
                   help="save the chart: a panel per task (.png, .svg or .html)")  # fmt: skip
    p.add_argument("--max-tasks", type=int, default=12, metavar="N",
                   help="tasks drawn in the chart at most, the regressed first (default 12)")  # fmt: skip
    add_format_args(p)
    p.set_defaults(func=run)


def options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of :meth:`Store.trend` the flags say."""
    from hylo_analytics.compare.verdicts import StatisticalRule

    return {
        "order": args.order,
        "metric": args.metric,
        "source": args.source,
        "force": args.force,
        "family": args.family,
        "rule": StatisticalRule(alpha=args.alpha, adjust=args.adjust),
        "directions": {args.metric: args.direction} if args.direction else None,
        "errors": args.errors,
        "reducer": args.reducer,
        "level": args.level,
        "n_resamples": args.resamples,
        "seed": args.seed,
        "progress": None,  # on a terminal only: none when piped
    }


_TABLE = {
    "regressions": ("task_id", "regressed", "version", "best_version", "rate", "best_rate",
                    "diff", "ci_adj_low", "ci_adj_high", "p_adjusted", "n_errors", "note"),
    "rates": ("task_id", "version", "position", "rate", "ci_low", "ci_high", "n", "n_errors",
              "n_runs"),
    "tests": ("task_id", "version", "best_version", "rate", "best_rate", "diff", "ci_adj_low",
              "ci_adj_high", "p_worse", "p_adjusted", "verdict"),
    "flips": ("task_id", "version", "best_version", "key", "change", "best_value", "value",
              "errored", "best_errored", "note"),
}  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from hylo_analytics import charts

    trend = store_from(args).trend(args.run, **options(args))
    frames = {"regressions": trend.regressions, "rates": trend.rates, "tests": trend.tests,
              "flips": trend.flips}  # fmt: skip
    shown = frames[args.show]
    if args.format == "table":
        # the suite columns only when the trend spans several suites
        several = [c for c in ("benchmark_id", "split") if shown[c].n_unique() > 1]
        shown = shown.select(*several, *_TABLE[args.show])
        say(trend.describe())
    else:  # the data alone on stdout; what it is on stderr
        say(trend.describe(), file=sys.stderr)
    emit(shown, args.format, args.output, wide=args.wide)
    if args.chart is not None:
        path = charts.save(charts.trend(trend, max_tasks=args.max_tasks), args.chart)
        say(f"chart: {path}", file=sys.stderr)
    return 0
