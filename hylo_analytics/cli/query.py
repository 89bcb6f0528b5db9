"""``hylo-analytics runs`` and ``hylo-analytics sql``."""

from __future__ import annotations

import argparse

from hylo_analytics.cli._common import add_format_args, add_store_arg, emit, store_from


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "runs",
        help="list the stored runs",
        description="One row per stored run: agent, benchmark, sample counts.",
    )
    add_store_arg(p)
    add_format_args(p)
    p.set_defaults(func=run_runs)

    q = sub.add_parser(
        "sql",
        help="run a SQL query against the store's views",
        description=(
            "Run a DuckDB SQL query against the store. Tables: stg_runs, stg_samples, "
            "stg_events, stg_scores, stg_quarantine, stg_ingested_files, plus the int_* and "
            "mart_* views (see sql/). Example: hylo-analytics sql --store out/store "
            '"select agent_name, count(*) from stg_runs group by 1"'
        ),
    )
    q.add_argument("query", metavar="QUERY", help="a SQL query")
    add_store_arg(q)
    add_format_args(q)
    q.set_defaults(func=run_sql)


def run_runs(args: argparse.Namespace) -> int:
    emit(store_from(args).runs(), args.format, args.output)
    return 0


def run_sql(args: argparse.Namespace) -> int:
    emit(store_from(args).sql(args.query), args.format, args.output)
    return 0
