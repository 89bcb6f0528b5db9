"""``hylo-analytics runs`` and ``hylo-analytics sql``."""

from __future__ import annotations

import argparse

from hylo_analytics.cli._common import add_format_args, add_store_arg, emit, store_from


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "runs",
        help="list the stored runs",
        description=(
            "One row per stored run: agent, benchmark, sample counts, in natural run order "
            "(agent, then version as people mean it: 2.3.0 before 2.294.0, 1.2.0-rc1 before "
            "1.2.0; then benchmark, split, newest ingest first). A table of more than 200 runs "
            "shows the first and last 100 and says how many it hides: --all prints every row, "
            "-o FILE and --format csv / json write them all."
        ),
    )
    add_store_arg(p)
    add_format_args(p)
    p.set_defaults(func=run_runs)

    q = sub.add_parser(
        "sql",
        help="run a SQL query against the store's views",
        description=(
            "Run a DuckDB SQL query against the store. Tables (the current rows): runs, "
            "samples, events, scores, quarantine, ingested_files, policy_results (also as "
            "stg_*; raw_* keeps superseded rows), plus the int_* and mart_* views (see sql/; "
            "int_scores_preferred is the one score per episode). Example: hylo-analytics sql "
            '--store out/store "select agent_name, count(*) from runs group by 1"'
        ),
    )
    q.add_argument("query", metavar="QUERY", help="a SQL query")
    add_store_arg(q)
    add_format_args(q)
    q.set_defaults(func=run_sql)


def run_runs(args: argparse.Namespace) -> int:
    emit(store_from(args).runs(), args.format, args.output, wide=args.wide)
    return 0


def run_sql(args: argparse.Namespace) -> int:
    emit(store_from(args).sql(args.query), args.format, args.output, wide=args.wide)
    return 0
