"""The ``hylo-analytics`` command line.

Each subcommand lives in its own module exposing ``register(subparsers)``; the module sets
``func`` on its parser. Adding a command is adding a module to ``_COMMANDS``. Building the
parser imports no engine (polars, pyarrow, DuckDB, numpy): a command's ``func`` imports what
it needs, so ``--help`` answers in a few tens of milliseconds (tests/cli/test_help_imports.py).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

__all__ = ["ERROR_LIMIT", "build_parser", "error_line", "main", "verbose"]

ERROR_LIMIT = 400  # characters of an error's message on its one line; --verbose shows all
_VERBOSE_ENV = "HYLO_ANALYTICS_VERBOSE"

_COMMANDS = (  # in pipeline order, as --help lists them
    "hylo_analytics.cli.ingest",
    "hylo_analytics.cli.query",
    "hylo_analytics.cli.spark_sql",
    "hylo_analytics.cli.compact",
    "hylo_analytics.cli.score",
    "hylo_analytics.cli.pricing",
    "hylo_analytics.cli.aggregate",
    "hylo_analytics.cli.scorecard",
    "hylo_analytics.cli.summarize",
    "hylo_analytics.cli.shrink",
    "hylo_analytics.cli.compare",
    "hylo_analytics.cli.rank",
    "hylo_analytics.cli.pareto",
    "hylo_analytics.cli.critical_difference",
    "hylo_analytics.cli.calibrate",
    "hylo_analytics.cli.trend",
    "hylo_analytics.cli.flip_matrix",
    "hylo_analytics.cli.pass_k",
    "hylo_analytics.cli.epochs_plan",
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
    verbose_help = (
        f"on an error, print its whole message and traceback, not one line (also {_VERBOSE_ENV}=1)"
    )
    parser.add_argument("-v", "--verbose", action="store_true", dest="verbose_errors",
                        help=verbose_help)  # fmt: skip
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in _COMMANDS:
        importlib.import_module(name).register(sub)
    for command in sub.choices.values():  # after the command too: hylo-analytics sql --verbose
        if "--verbose" not in command._option_string_actions:  # ingest's lists every file
            command.add_argument("--verbose", action="store_true", dest="verbose_errors",
                                 default=argparse.SUPPRESS, help=verbose_help)  # fmt: skip
    return parser


def verbose(args: argparse.Namespace) -> bool:
    """``--verbose`` or ``HYLO_ANALYTICS_VERBOSE=1``: errors in full, with their traceback."""
    env = os.environ.get(_VERBOSE_ENV, "")
    return bool(getattr(args, "verbose_errors", False)) or env not in ("", "0")


def error_line(exc: BaseException, limit: int = ERROR_LIMIT) -> str:
    """``exc``'s message as one line: the lines before DuckDB's quote of the query (``LINE
    1: ...``) joined, a ``KeyError``'s text unquoted, cut at ``limit`` characters with how
    to see the rest. The project's own messages are one line that names the fix already."""
    text = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
    lines: list[str] = []
    for line in str(text).splitlines():
        if line.startswith("LINE ") and lines:  # DuckDB quotes the query under its message
            break
        if line.strip():
            lines.append(line.strip())
    message = " ".join(lines) or type(exc).__name__
    if len(message) > limit:
        message = (
            f"{message[:limit]}... ({len(message) - limit} more characters: --verbose or "
            f"{_VERBOSE_ENV}=1 shows them)"
        )
    return message


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code.

    An error a user can fix (any :class:`~hylo_analytics.errors.HyloError`: a bad input, a
    typo, a missing store; or what DuckDB, polars or the OS refused: a failed query, a full
    disk) is one line on stderr, ``hylo-analytics COMMAND: error: ...``, and exit code 2;
    ``--verbose`` (or ``HYLO_ANALYTICS_VERBOSE=1``) prints it whole, with its traceback.
    Anything else is a bug and keeps its traceback.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    import duckdb  # after parsing: --help and usage errors load no engine
    import polars as pl

    from hylo_analytics.cli._common import every_row
    from hylo_analytics.errors import HyloError

    try:
        with every_row(getattr(args, "all_rows", False)):  # --all: tables print every row
            code: int = args.func(args)
    except (
        HyloError,  # the toolkit's own: each message names the fix
        ValueError,  # below: what the engines and the OS refuse, raised through us
        KeyError,
        OSError,
        duckdb.Error,
        pl.exceptions.PolarsError,
    ) as exc:
        from hylo_analytics.cli._common import say

        if verbose(args):
            import traceback

            traceback.print_exception(exc, file=sys.stderr)
            say(f"hylo-analytics {args.command}: error: {exc}", file=sys.stderr)
        else:
            say(f"hylo-analytics {args.command}: error: {error_line(exc)}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
