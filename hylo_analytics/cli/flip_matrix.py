"""``hylo-analytics flip-matrix``: each key's outcome in each of a set of runs, ordered."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hylo_analytics.cli._common import (
    add_errors_arg,
    add_format_args,
    add_store_arg,
    emit,
    say,
    store_from,
)
from hylo_analytics.errors import InputError

if TYPE_CHECKING:
    from hylo_analytics.compare import FlipMatrix

HELP = """Each key's outcome in each of a set of runs (an item x run flip matrix), in an explicit
order of the runs: which keys fail in every run, how hard each key is, and which broke in the
latest run. A cell is success, failure, partial (several epochs, some solved), error (a harness
error: never counted as the policy's failure in the flags below, and counted as a 0 in the
rates only under --errors failure), abstained (no trace, a grader that abstained) or missing.

--order version (default): the natural version order of agent_version (1.9 < 1.10,
1.2.0-rc1 < 1.2.0), then ingested_at, then run_id; ingested: ingested_at, run_id; given: the
order of the --run flags. Each suite's (benchmark, split) last run is its latest.

--show keys (default): one row per key, hardest first: n_runs, n_valid (runs with a value under
their errors policy), n_success, n_failure, n_partial, n_errored, n_errored_as_failure,
n_abstained, n_missing, solve_rate (the mean over n_valid), difficulty_rank (1 = hardest),
always_fails (no run solved it and one failed it), always_solved, the latest and previous
runs' outcomes, newly_broken (success then failure), newly_fixed, newly_errored,
broken_since_solved (fails in the latest, solved in any earlier run) and last_solved_run.
runs: one row per run in the order, with its counts, solve rate and the keys it broke and fixed
against the run before it. outcomes: one row per (run, key). suites: the latest run of each
suite and its key counts. A table shows the main columns; --wide, csv, json and parquet all
of them. --only keeps the keys of one flag. --chart draws the heatmap (at most
--max-runs runs, the latest, and --max-keys keys; the title says how many of each it shows).

example: hylo-analytics flip-matrix --store out/store --only newly-broken
         hylo-analytics flip-matrix --store out/store --run agent=octo-ft --chart flips.png"""

# the columns a terminal table shows (--wide, csv, json and parquet: every column)
_TABLE_COLUMNS = {
    "keys": ("key", "n_runs", "n_valid", "n_success", "n_failure", "n_errored", "solve_rate",
             "difficulty_rank", "always_fails", "previous_outcome", "latest_outcome",
             "newly_broken", "newly_errored", "newly_fixed", "last_solved_run", "errors"),
    "runs": ("position", "run_id", "agent_version", "is_latest", "errors", "n_keys", "n_valid",
             "n_success", "n_failure", "n_errored", "n_missing", "solve_rate", "n_broken",
             "n_fixed"),
}  # fmt: skip
_LISTED = 10  # suites and left-out runs named on stderr; the rest counted
_ONLY = ("always-fails", "always-solved", "newly-broken", "newly-fixed", "newly-errored",
         "broken-since-solved")  # fmt: skip


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "flip-matrix",
        help="each key's outcome in each run: difficulty, keys that always fail, newly broken",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_store_arg(p)
    p.add_argument(
        "--run",
        action="append",
        metavar="RUN",
        help="a run: an id, a unique prefix, or a selector naming every run it matches "
        "(agent=octo-ft; fields run, agent, version, benchmark, split, format); repeat. "
        "Default every run",
    )
    p.add_argument("--metric", default="success",
                   help="a metric with values in [0, 1] (default success)")  # fmt: skip
    p.add_argument(
        "--order",
        choices=("version", "ingested", "given"),
        default="version",
        help="the order of the runs (default version: natural version order)",
    )
    p.add_argument("--source", help="read the scores of this source, not the resolved ones")
    add_errors_arg(p)
    p.add_argument(
        "--show",
        choices=("keys", "runs", "outcomes", "suites"),
        default="keys",
        help="which table to print (default keys)",
    )
    p.add_argument("--only", choices=_ONLY, help="--show keys: only the keys of this flag")
    p.add_argument("--chart", type=Path, metavar="FILE",
                   help="save the heatmap (.png, .svg or .html)")  # fmt: skip
    p.add_argument("--max-runs", type=int, default=50,
                   help="--chart: at most this many runs, the latest (default 50)")  # fmt: skip
    p.add_argument("--max-keys", type=int, default=100,
                   help="--chart: at most this many keys (default 100)")  # fmt: skip
    add_format_args(p)
    p.set_defaults(func=run)


def options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of :meth:`Store.flip_matrix <hylo_analytics.api.Store.flip_matrix>`
    the flags say."""
    return {
        "runs": args.run,
        "metric": args.metric,
        "order": args.order,
        "errors": args.errors,
        "source": args.source,
    }


def run(args: argparse.Namespace) -> int:
    import polars as pl

    from hylo_analytics import charts

    opts = options(args)
    matrix = store_from(args).flip_matrix(opts.pop("runs"), **opts)
    tables = {
        "keys": matrix.keys,
        "runs": matrix.runs,
        "outcomes": matrix.outcomes.with_columns(pl.col("outcome").cast(pl.String)),
        "suites": matrix.suites,
    }
    shown = tables[args.show]
    if args.only is not None:
        if args.show != "keys":
            raise InputError(f"--only {args.only} filters keys; use it with --show keys")
        shown = shown.filter(pl.col(args.only.replace("-", "_")))
    if args.format == "table" and not args.wide and args.show in _TABLE_COLUMNS:
        suite = ["benchmark_id", "split"] if matrix.suites.height > 1 else []
        shown = shown.select(*suite, *_TABLE_COLUMNS[args.show])
    emit(shown, args.format, args.output, wide=args.wide)
    _summary(matrix)
    if args.chart is not None:
        chart = charts.flip_matrix(matrix, max_runs=args.max_runs, max_keys=args.max_keys)
        say(f"chart: {charts.save(chart, args.chart)}", file=sys.stderr)
    return 0


def _summary(matrix: FlipMatrix) -> None:
    """What the matrix holds, the order used and each suite's latest run, on stderr."""
    policy = matrix.errors or "each run's harness convention"
    say(
        f"{matrix.runs.height:,} runs x {matrix.keys.height:,} keys of {matrix.metric} "
        f"({matrix.suites.height} suite(s)), ordered by {matrix.order}; errors: {policy}",
        file=sys.stderr,
    )
    for row in matrix.suites.head(_LISTED).iter_rows(named=True):
        say(
            f"  {row['benchmark_id']} / {row['split']}: latest run {row['latest_run']} "
            f"(previous {row['previous_run']}): {row['n_newly_broken']} keys newly broken, "
            f"{row['n_newly_errored']} newly errored, {row['n_newly_fixed']} newly fixed; "
            f"{row['n_always_fails']} fail in every run",
            file=sys.stderr,
        )
    _more(matrix.suites.height, "suites: see --show suites")
    for row in matrix.left_out.head(_LISTED).iter_rows(named=True):
        say(f"  left out: {row['run_id']}: {row['reason']}", file=sys.stderr)
    _more(matrix.left_out.height, "runs left out")


def _more(n: int, what: str) -> None:
    if n > _LISTED:
        say(f"  ... and {n - _LISTED:,} more {what}", file=sys.stderr)
