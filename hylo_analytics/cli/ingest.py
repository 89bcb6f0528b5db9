"""``hylo-analytics ingest``."""

from __future__ import annotations

import argparse
from pathlib import Path

from hylo_analytics.cli._common import add_lock_arg, add_store_arg, say, store_from
from hylo_analytics.errors import InputNotFoundError

HELP = """Read evaluation logs (and the traces they name) from files and folders into the store.
Folders are searched recursively. Each file's format is detected from its content (hylo
EvalLog, Inspect .eval/.json, inspect-robots, vla-eval merged results and export, WorldFoundry
metric results, LeRobot eval_info.json, lm-eval results and samples, Every Eval Ever
aggregates and instances, and the readers installed under the hylo_analytics.readers entry
point group) and reported per file (--verbose); a file no reader recognises is quarantined. Unchanged files are skipped; a changed EvalLog replaces
its run. A file whose run_id is already stored from another file is quarantined, naming both,
unless --replace is given. Bad input is quarantined (see 'hylo-analytics sql "from stg_quarantine"') while
every good file is still stored; --strict stops at the first bad item instead.

Exit status: 0 when every item was stored (or skipped unchanged); 3 when some were
quarantined and the rest stored (the summary's last line says how many, and how to list
them); 1 when --strict stopped at a bad item; 2 on an error (a missing path, a locked store)."""

#: The exit status of an ingest that stored what it could and quarantined the rest.
QUARANTINED = 3


_LIST_LIMIT = 20


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "ingest",
        help="read EvalLogs and traces into the store",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("paths", nargs="+", metavar="PATH", type=Path, help="files or folders")
    add_store_arg(p, create=True)
    add_lock_arg(p)
    p.add_argument(
        "--strict",
        action="store_true",
        help="raise on the first bad input item; store nothing from its chunk",
    )
    p.add_argument(
        "--replace",
        action="store_true",
        help="let a file replace a run stored from another file (same run_id); "
        "without it, such a file is quarantined",
    )
    p.add_argument(
        "--workers",
        type=_workers,
        default=1,
        metavar="N",
        help="ingest with N worker processes sharing a claim table (<store>/_claims.sqlite); "
        "a killed run resumes when the same command is run again",
    )
    p.add_argument(
        "--shard",
        type=_shard,
        default=None,
        metavar="i/N",
        help="ingest only shard i of N (a stable hash of each file's path), for N machines "
        "sharing the filesystem; combine with --workers",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar, summary only")
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help=f"list the detected format of every file (default: the first {_LIST_LIMIT})",
    )
    p.set_defaults(func=run)


def _workers(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return int(text)


def _shard(text: str) -> tuple[int, int]:
    i, sep, n = text.partition("/")
    if not (sep and i.isdigit() and n.isdigit() and int(i) < int(n)):
        raise argparse.ArgumentTypeError(f"expected i/N with 0 <= i < N (e.g. 0/2), got {text!r}")
    return int(i), int(n)


def run(args: argparse.Namespace) -> int:
    missing = [str(p) for p in args.paths if not Path(p).exists()]
    if missing:  # before opening: a typo in a path must not leave a new, empty store behind
        raise InputNotFoundError(
            f"no such file or folder: {', '.join(missing)} "
            "(nothing was ingested, no store was created)"
        )
    store = store_from(args)
    report = store.ingest(
        args.paths,
        strict=args.strict,
        progress=not args.quiet,
        replace=args.replace,
        workers=args.workers,
        shard=args.shard,
    )
    say(report.summary() if args.quiet else report)
    if not args.quiet and report.file_formats:
        shown = report.file_formats if args.verbose else report.file_formats[:_LIST_LIMIT]
        for path, fmt in shown:
            say(f"  {fmt or 'unknown (quarantined)'}: {path}")
        if len(shown) < len(report.file_formats):
            say(f"  ... and {len(report.file_formats) - len(shown)} more (--verbose lists all)")
    if report.quarantined and args.strict:
        return 1
    if report.quarantined:
        say(
            f"{report.quarantined:,} item(s) quarantined, the rest stored (exit status "
            f"{QUARANTINED}); list them: hylo-analytics sql --store {args.store} "
            '"from stg_quarantine"'
        )
        return QUARANTINED
    return 0
