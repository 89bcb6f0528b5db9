"""``hylo-analytics report``: one self-contained HTML page comparing two runs."""

from __future__ import annotations

import argparse
from pathlib import Path

from hylo_analytics.cli._common import (
    add_store_arg,
    add_verdict_args,
    check_directions,
    say,
    store_from,
    verdict_options,
)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "report",
        help="write an HTML report comparing a candidate run with its parent",
        description=(
            "Write one self-contained HTML file (charts and styles inlined, no network needed "
            "to view it): a headline comparison, per-task paired differences (Store.compare: "
            "Tango score CI and the score test it inverts, Holm within the per-task family) and verdicts by the "
            "statistical rule (stated on the page), dropped pairs with their reasons, "
            "success per task, coverage (scored vs skipped) and cost. Example: "
            "hylo-analytics report --store out/store --candidate version=1.2.0-rc1 "
            "--parent version=1.0.0 -o r.html"
        ),
    )
    add_store_arg(p)
    p.add_argument(
        "--candidate",
        required=True,
        metavar="RUN",
        help="the new run: id, unique prefix or a selector matching one run "
        "(agent=X,benchmark=Y); a report is of one pair",
    )
    p.add_argument(
        "--parent", required=True, metavar="RUN", help="the run it is compared with: as --candidate"
    )
    p.add_argument(
        "--metric", default="success", help="a binary (0/1) metric to compare (default: success)"
    )
    add_verdict_args(p)
    p.add_argument(
        "--force",
        action="store_true",
        help="compare even if benchmark digest, split or scorer version differ (noted on the page)",
    )
    p.add_argument(
        "--redact",
        action="store_true",
        help="for a page to share: show paths relative to the run folder (or as file names) and "
        "leave out the home folder and host name. Values under secret-looking keys (api_key, "
        "token, secret, password, authorization, credentials) are always left out",
    )
    p.add_argument(
        "--trend",
        nargs="?",
        const="agent_version",
        default=None,
        metavar="ORDER",
        help="add a 'Trend over versions' section: every run of the candidate's agent on its "
        "suite, ordered by ORDER (default agent_version; e.g. metadata.training_step), each "
        "task's regression point as 'hylo-analytics trend' finds it (Holm over each "
        "version's tasks, --alpha and --errors as above)",
    )
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        default=Path("report.html"),
        metavar="FILE",
        help="where to write the page (default: report.html)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hylo_analytics.report import write_report  # altair, vl-convert: on use

    verdict = verdict_options(args)
    check_directions(verdict["directions"], [args.metric])
    store = store_from(args).parquet
    trend = None
    if args.trend is not None:
        from hylo_analytics.report.trend import agent_trend

        trend = agent_trend(
            store, args.candidate, order=args.trend, metric=args.metric, force=args.force,
            rule=verdict["rule"], directions=verdict["directions"], errors=verdict["errors"],
        )  # fmt: skip
    path = write_report(
        store,
        args.candidate,
        args.parent,
        args.output,
        metric=args.metric,
        force=args.force,
        redact=args.redact,
        trend=trend,
        **verdict,
    )
    say(f"wrote {path}")
    return 0
