"""``hylo-analytics export``."""

from __future__ import annotations

import argparse
from pathlib import Path

from hylo_analytics.cli._common import add_store_arg, say, store_from

HELP = """Write a stored run back out as a hylo EvalLog. v0.1 is the layout 'ingest' reads
(a v0.1 run round-trips losslessly); v0.2 follows Inspect's top level (eval / results /
stats / samples, one sample per key with its epochs). Ingesting the export gives back every
column (skip reasons, statuses, metadata); a run whose keys are not <task_id>#<seed>
(inspect-robots, Inspect) needs v0.2. Traces are written next to the log at their relative
paths, from the stored event lines."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "export",
        help="write a stored run as a hylo EvalLog (v0.1 or v0.2)",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_store_arg(p)
    p.add_argument(
        "--run",
        required=True,
        metavar="RUN",
        help="the run to export: an id, a unique prefix or a selector (agent=X,split=Y)",
    )
    p.add_argument("-o", "--output", required=True, metavar="PATH", type=Path, help="log file")
    p.add_argument("--version", choices=("v0.1", "v0.2"), default="v0.1", help="layout")
    p.add_argument("--no-traces", action="store_true", help="write the log only")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hylo_analytics.export import export_evallog

    store = store_from(args)
    out = export_evallog(
        store.parquet, args.run, args.output, version=args.version, traces=not args.no_traces
    )
    say(f"wrote {out} ({args.version})")
    return 0
