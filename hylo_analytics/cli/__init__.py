"""The ``hylo-analytics`` command line.

Each subcommand lives in its own module exposing ``register(subparsers)``; the module sets
``func`` on its parser. Adding a command is adding a module to ``_COMMANDS``. Building the
parser imports no engine (polars, pyarrow, DuckDB, numpy): a command's ``func`` imports what
it needs, so ``--help`` answers in a few tens of milliseconds (tests/cli/test_help_imports.py).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

__all__ = ["build_parser", "main"]

_COMMANDS = (  # in pipeline order, as --help lists them
    "hylo_analytics.cli.ingest",
    "hylo_analytics.cli.query",
    "hylo_analytics.cli.spark_sql",
    "hylo_analytics.cli.compact",
    "hylo_analytics.cli.score",
    "hylo_analytics.cli.pricing",
    "hylo_analytics.cli.aggregate",
    "hylo_analytics.cli.scorecard",
    "hylo_analytics.cli.compare",
    "hylo_analytics.cli.plan",
    "hylo_analytics.cli.sequential",
    "hylo_analytics.cli.evaluate",
    "hylo_analytics.cli.report",
    "hylo_analytics.cli.export",
    "hylo_analytics.cli.serve",
    "hylo_analytics.cli.demo",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hylo-analytics",
        description=(
            "Analyse evaluation results of agents and robot policies: ingest EvalLogs and "
            "traces into a Parquet store, query it with DuckDB, score, aggregate and compare runs."
        ),
        epilog="Run 'hylo-analytics COMMAND --help' for a command's options.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in _COMMANDS:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    import duckdb  # after parsing: --help and usage errors load no engine

    from hylo_analytics._manifest import StoreError

    try:
        code: int = args.func(args)
    except (ValueError, KeyError, FileNotFoundError, duckdb.Error, StoreError) as exc:
        from hylo_analytics.cli._common import say

        say(f"hylo-analytics {args.command}: error: {exc}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
