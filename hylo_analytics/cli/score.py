"""``hylo-analytics score``."""

from __future__ import annotations

import argparse
from pathlib import Path

from hylo_analytics.cli._common import add_lock_arg, add_store_arg, say, store_from
from hylo_analytics.cli._defaults import BUILTIN_SCORERS

HELP = f"""Re-score stored runs from their stored events (source files are not read again).
Without --scorers, runs the built-in scorers ({", ".join(BUILTIN_SCORERS)}; 'grades' turns
grade events into scores). --scorers FILE.yaml adds declarative scorers (Autobench 'score:'
block: value / pass / exact / schema), --builtin NAME picks built-ins. Re-running replaces a
scorer's earlier rows. Exit code 1 when a required scorer errored on some run."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "score",
        help="score stored runs with built-in and declarative scorers",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_store_arg(p)
    add_lock_arg(p)
    p.add_argument(
        "--scorers",
        metavar="FILE.yaml",
        type=Path,
        help="declarative scorers; with it, built-ins run only when named by --builtin",
    )
    p.add_argument(
        "--builtin",
        action="append",
        choices=BUILTIN_SCORERS,
        metavar="NAME",
        help=f"a built-in scorer to run (repeatable): {', '.join(BUILTIN_SCORERS)}",
    )
    p.add_argument(
        "--run",
        action="append",
        metavar="RUN",
        dest="runs",
        help="score only RUN: id, prefix or selector (repeatable)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hylo_analytics.scoring import Scorer, load_scorers

    scorers: list[Scorer] = list(args.builtin or ([] if args.scorers else BUILTIN_SCORERS))
    if args.scorers is not None:
        scorers.extend(load_scorers(args.scorers))
    report = store_from(args).score(scorers, runs=args.runs)
    say(report)
    return 0 if report.ok else 1
