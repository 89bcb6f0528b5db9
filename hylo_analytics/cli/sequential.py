"""``hylo-analytics sequential``: an anytime-valid look at two runs, with its history on disk."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from hylo_analytics.cli._common import add_errors_arg, add_store_arg, emit, store_from
from hylo_analytics.errors import InputError

HELP = """Look at the paired counts of a candidate and its parent now, and say whether the
evidence is in: the e-process of the one-sided sequential test of the discordant pairs
(anytime-valid: look after every ingest and stop at the first look past 1/alpha, without the
inflation of re-running a fixed-sample test). With --log FILE the looks are kept in FILE (JSON,
written whole or not at all): each call appends the store's current counts as the next look,
and the verdict is over every look so far; the settings must stay those of the first look.

example: hylo-analytics sequential --store out/store --candidate agent=xvla \\
             --parent agent=pi05 --log xvla-vs-pi05.json"""

_SETTINGS = ("candidate", "parent", "metric", "alpha", "alternative", "errors")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "sequential",
        help="anytime-valid sequential test of a candidate against its parent",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_store_arg(p)
    p.add_argument("--candidate", required=True, metavar="RUN", help="run id, prefix or selector")
    p.add_argument("--parent", required=True, metavar="RUN", help="the run compared against")
    p.add_argument("--metric", default="success", help="metric (success)")
    p.add_argument("--alpha", type=float, default=0.05, help="the test's level (0.05)")
    p.add_argument(
        "--alternative",
        choices=("greater", "less", "two-sided"),
        default="greater",
        help="what is tested: the candidate is better (greater, default), worse, or either",
    )
    add_errors_arg(p)
    p.add_argument("--log", type=Path, metavar="FILE", help="keep the looks in FILE (JSON)")
    p.add_argument("--force", action="store_true", help="as compare --force")
    p.add_argument(
        "--format", choices=("table", "json", "csv"), default="table", help="output format"
    )
    p.set_defaults(func=run, store_create=False)


def run(args: argparse.Namespace) -> int:
    from hylo_analytics._atomic import write_text
    from hylo_analytics.compare.sequential import SequentialMonitor

    store = store_from(args)
    candidate, parent = store.resolve_run(args.candidate), store.resolve_run(args.parent)
    settings: dict[str, Any] = {
        "candidate": candidate,
        "parent": parent,
        "metric": args.metric,
        "alpha": args.alpha,
        "alternative": args.alternative,
        "errors": args.errors,
    }
    history: dict[str, Any] = {"n_pairs": [], "wins": [], "losses": []}
    if args.log is not None and args.log.exists():
        history = _read_log(args.log, settings)
    monitor = SequentialMonitor(
        **settings,
        n_pairs=tuple(history["n_pairs"]),
        wins=tuple(history["wins"]),
        losses=tuple(history["losses"]),
    ).look(store.parquet, force=args.force)
    if args.log is not None:
        doc = {
            **settings,
            "n_pairs": list(monitor.n_pairs),
            "wins": list(monitor.wins),
            "losses": list(monitor.losses),
        }
        write_text(args.log, json.dumps(doc, indent=2) + "\n")
    emit(
        monitor.to_frame(), args.format, None, hint="--format csv and --format json print every row"
    )
    if args.format == "table":
        at = monitor.stopped_at
        sys.stdout.write(
            f"stop: the evidence reached 1/alpha = {1 / args.alpha:g} at look {at}\n"
            if at is not None
            else f"continue: the e-value has not reached 1/alpha = {1 / args.alpha:g}\n"
        )
    return 0


def _read_log(path: Path, settings: dict[str, Any]) -> dict[str, Any]:
    """The looks kept in ``path``; its settings must be this call's (a test chosen after
    peeking is not valid)."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(
            f"--log {path}: not a log of looks ({exc}); give the file an earlier look "
            "wrote, or a new path to start a log"
        ) from exc
    if not isinstance(doc, dict) or any(k not in doc for k in ("n_pairs", "wins", "losses")):
        raise InputError(
            f"--log {path}: not a log of looks (n_pairs, wins, losses missing); give the "
            "file an earlier look wrote, or a new path to start a log"
        )
    changed = [k for k in _SETTINGS if doc.get(k) != settings[k]]
    if changed:
        detail = ", ".join(f"{k}: {doc.get(k)!r} then, {settings[k]!r} now" for k in changed)
        raise InputError(
            f"--log {path}: the settings changed since the first look ({detail}); a "
            "sequential test keeps its settings: start a new log"
        )
    return doc
