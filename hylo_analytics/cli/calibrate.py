"""``hylo-analytics calibrate``: rates (and differences) from a few trusted grades and a judge's."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from hylo_analytics.cli._common import (
    add_errors_arg,
    add_format_args,
    add_store_arg,
    emit,
    say,
    store_from,
)
from hylo_analytics.cli._defaults import DEFAULT_LEVEL

_RUN_FIELDS = ("run_id", "agent_name", "agent_version", "benchmark_id", "split")
SHOW = ("rates", "differences")

HELP = """Judge calibration by prediction-powered inference (PPI++, Angelopoulos et al. 2023):
where some keys carry a trusted grade (--trusted, a person's or a simulation oracle's, from
--trusted-source) and every key a judge's grade (--judge / --judge-source: a vlm_judge named
judge writes metric success from source grade:judge), each policy's rate is the judge's mean
corrected by its error on the trusted keys, with a power-tuned weight (lam) and a CLT
interval. Beside it: the classical mean of the trusted grades alone and the judge-only mean
(the judge taken as the truth: biased), effective_n (the trusted grades the classical mean
would need for PPI++'s width) and width_ratio. --baseline P: every other policy's paired
difference from P the same way (a key is labelled when both have a trusted grade); with two
policies the first by name is the baseline. --show differences prints those. The trusted
keys must be a random sample of the keys (PPI is unbiased only then). A judge's abstention
is filled with its mean grade of the policy (a constant prediction the correction absorbs).

example: hylo-analytics calibrate --store out/store --trusted-source oracle \\
             --judge-source grade:judge --baseline pi0 --chart calibration.png"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "calibrate",
        help="rates and paired differences from few trusted grades and a judge's (PPI++)",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_store_arg(p)
    p.add_argument(
        "--run",
        action="append",
        metavar="RUN",
        help="only these runs: an id, a unique prefix or a selector (agent=pi05); repeat; "
        "default every run",
    )
    p.add_argument("--trusted", default="success", metavar="METRIC",
                   help="the trusted grade's metric (default success)")  # fmt: skip
    p.add_argument("--judge", default=None, metavar="METRIC",
                   help="the judge's metric (default: --trusted's)")  # fmt: skip
    p.add_argument("--trusted-source", default=None, metavar="SOURCE",
                   help="the trusted grade's source (needed when both are one metric)")  # fmt: skip
    p.add_argument("--judge-source", default=None, metavar="SOURCE",
                   help="the judge's source, e.g. grade:judge")  # fmt: skip
    p.add_argument("--policy", default="agent_name", choices=_RUN_FIELDS,
                   help="the run field naming a policy (default agent_name)")  # fmt: skip
    p.add_argument(
        "--strata",
        default="benchmark_id,split",
        help="comma-separated run fields naming a suite: one row per policy and suite "
        "(default benchmark_id,split; '' for none)",
    )
    p.add_argument("--baseline", default=None, metavar="POLICY",
                   help="compare every other policy with this one (paired PPI++)")  # fmt: skip
    p.add_argument("--reducer", choices=("mean", "max", "min", "none"), default="mean",
                   help="epochs of a key reduced by (default mean; none refuses them)")  # fmt: skip
    add_errors_arg(p)
    p.add_argument("--lam", type=float, default=None,
                   help="a fixed weight in [0, 1] (1: plain PPI, 0: classical); default tuned")  # fmt: skip
    p.add_argument("--level", type=float, default=DEFAULT_LEVEL,
                   help="interval coverage (0.95)")  # fmt: skip
    p.add_argument("--show", choices=SHOW, default="rates",
                   help="the table printed: rates (default) or differences")  # fmt: skip
    p.add_argument("--chart", type=Path, metavar="FILE",
                   help="save the chart of what --show prints (.png, .svg or .html)")  # fmt: skip
    add_format_args(p)
    p.set_defaults(func=run)


def options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of :func:`~hylo_analytics.compare.calibrate_runs` the flags say."""
    return {
        "runs": args.run,
        "trusted": args.trusted,
        "judge": args.judge,
        "trusted_source": args.trusted_source,
        "judge_source": args.judge_source,
        "policy": args.policy,
        "strata": tuple(s.strip() for s in args.strata.split(",") if s.strip()),
        "baseline": args.baseline,
        "errors": args.errors,
        "reducer": None if args.reducer == "none" else args.reducer,
        "lam": args.lam,
        "level": args.level,
    }


def run(args: argparse.Namespace) -> int:
    from hylo_analytics import charts

    opts = options(args)
    result = store_from(args).calibrate(opts.pop("runs"), **opts)
    frame = result.rates if args.show == "rates" else result.differences
    emit(frame, args.format, args.output, wide=args.wide)
    for note in result.notes:
        say(note, file=sys.stderr)
    if args.chart is not None:
        chart = charts.calibration_intervals(result, difference=args.show == "differences")
        say(f"chart: {charts.save(chart, args.chart)}", file=sys.stderr)
    return 0
