"""``hylo-analytics evaluate``: run an analysis spec (score, derive, post_derive, policies)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hylo_analytics.cli._common import (
    add_format_args,
    add_lock_arg,
    add_store_arg,
    emit,
    say,
    store_from,
)

HELP = """Run an analysis spec (YAML with score, derive, post_derive and policies sections)
against the stored runs, in that order. Scorer rows are written with source 'scorer:<name>',
derived metrics as score rows (source 'derive:<kind>' for token cost, 'post_derive:<output>'
for a paired baseline), policy checks as policy_results rows; the output is one row per run
with its final status (passed | failed_policy | unverified). A failed policy is a result, not an
error: the exit code is 0 unless --fail-on-policy is given. The spec is validated before anything
runs; errors name the key path, e.g. 'policies[2].must_between.min: expected a number'.
The verdicts of the spec's verdict: blocks (improved / regressed / unchanged / inconclusive per
candidate, overall and per group) are printed to stderr; they are not stored.
Example: hylo-analytics evaluate --store out/store --spec analysis.yaml"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "evaluate",
        help="derive metrics and check policies from an analysis spec",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_store_arg(p)
    add_lock_arg(p)
    p.add_argument("--spec", required=True, metavar="FILE", type=Path, help="the analysis spec")
    p.add_argument(
        "--run",
        action="append",
        dest="runs",
        metavar="RUN",
        help="only this run: id, prefix or selector (repeatable)",
    )
    p.add_argument("--dry-run", action="store_true", help="compute and print; write nothing")
    p.add_argument(
        "--fail-on-policy", action="store_true", help="exit 1 when any run failed a policy"
    )
    add_format_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import polars as pl

    from hylo_analytics.analysis import load_analysis_spec, run_analysis

    spec = load_analysis_spec(args.spec)
    store = store_from(args)
    report = run_analysis(store.parquet, spec, runs=args.runs, write=not args.dry_run)
    if report.scoring is not None:
        say(report.scoring, file=sys.stderr)
    for d in (*report.derived, *report.post_derived):
        say(repr(d), file=sys.stderr)
    shown = ("candidate", "parent", "metric", "level", "task_id", "n_pairs", "mean_diff",
             "verdict", "p_verdict", "verdict_note")  # fmt: skip
    for v in report.verdicts:  # the verdict: blocks (not stored: printed, like the derivations)
        with pl.Config(tbl_rows=50, tbl_cols=-1, tbl_hide_dataframe_shape=True):
            say(v.select(c for c in shown if c in v.columns), file=sys.stderr)
    status = report.run_status()
    if "failed_policies" in status.columns:
        status = status.with_columns(pl.col("failed_policies").list.join(", "))
    emit(status, args.format, args.output, wide=args.wide)
    failed = status.filter(pl.col("final_status") == "failed_policy").height
    return 1 if args.fail_on_policy and failed else 0
