"""``hylo-analytics pareto``: the cost-quality Pareto front of N policies, with its uncertainty."""

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

# hylo_analytics.stats.pareto.DEFAULT_PARETO_RESAMPLES (tests/cli/test_cli_pareto.py checks
# it), repeated so --help imports no numpy
DEFAULT_RESAMPLES = 1_000
_RUN_FIELDS = ("run_id", "agent_name", "agent_version", "benchmark_id", "split")

HELP = """The cost-quality Pareto front of the policies (by default the store's agents, each over
its runs): per policy its mean quality (--quality, default success) and mean cost (--cost: any
metric of the store, e.g. steps, a latency, or request_cost after 'evaluate' derived the token
cost) with percentile intervals, whether it is on the front of the means (no other policy at
least as good on both and better on one; two policies at one point are both on it), and
P(on the front): the share of bootstrap resamples of keys (within suites, --strata) on which
it is on the front. --pairing auto (default) draws one set of keys for every policy when the
policies of a suite hold the same keys (paired), else each policy's own keys (unpaired).
Quality is higher-is-better and cost lower-is-better unless the scores, the registry or
--direction METRIC=DIR say otherwise. The table lists the front first, along its cost, then
the others by P(on the front).

example: hylo-analytics pareto --store out/store --cost steps --chart front.png
         hylo-analytics pareto --store out/store --cost request_cost --log-cost --chart f.png"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "pareto",
        help="cost-quality Pareto front of policies, with P(on the front) by bootstrap",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_store_arg(p)
    p.add_argument("--cost", required=True, metavar="METRIC",
                   help="the cost metric (steps, a latency, request_cost, ...)")  # fmt: skip
    p.add_argument("--quality", default="success", metavar="METRIC",
                   help="the quality metric (default success)")  # fmt: skip
    p.add_argument(
        "--run",
        action="append",
        metavar="RUN",
        help="only these runs: an id, a unique prefix or a selector, which names every run "
        "it matches (agent=pi05: pi05 on every suite); repeat; default every run",
    )
    p.add_argument("--policy", default="agent_name", choices=_RUN_FIELDS,
                   help="the run field naming a policy (default agent_name)")  # fmt: skip
    p.add_argument(
        "--strata",
        default="benchmark_id,split",
        help="comma-separated run fields naming a suite: keys pair and resample within it, "
        "a mean is the average of the suites' (default benchmark_id,split; '' for none)",
    )
    p.add_argument("--source", help="read the scores of this source, not the resolved ones")
    p.add_argument(
        "--direction",
        action="append",
        default=[],
        metavar="METRIC=DIR",
        help="what is better for METRIC: maximize or minimize (repeat; default: the scores', "
        "then the registry's, else higher quality and lower cost)",
    )
    p.add_argument("--reducer", choices=("mean", "max", "min", "none"), default="mean",
                   help="epochs of a key reduced by (default mean; none refuses them)")  # fmt: skip
    p.add_argument("--pairing", choices=("auto", "paired", "unpaired"), default="auto",
                   help="keys drawn for all policies at once (paired) or per policy "
                   "(unpaired); default auto")  # fmt: skip
    add_errors_arg(p)
    p.add_argument("--level", type=float, default=DEFAULT_LEVEL,
                   help="interval coverage (0.95)")  # fmt: skip
    p.add_argument("--resamples", type=int, default=DEFAULT_RESAMPLES,
                   help=f"bootstrap resamples (default {DEFAULT_RESAMPLES:,})")  # fmt: skip
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument("--chart", type=Path, metavar="FILE",
                   help="save the cost-quality chart (.png, .svg or .html)")  # fmt: skip
    p.add_argument("--log-cost", action="store_true", help="the chart's cost axis on a log scale")
    add_format_args(p)
    p.set_defaults(func=run)


def options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of :func:`~hylo_analytics.compare.pareto_runs` the flags say."""
    from hylo_analytics.errors import InputError

    directions: dict[str, str] = {}
    for item in args.direction:
        metric, sep, direction = item.rpartition("=")
        if not sep or not metric or direction not in ("maximize", "minimize"):
            raise InputError(f"--direction {item!r}: expected METRIC=maximize or METRIC=minimize")
        directions[metric] = direction
    unused = [m for m in directions if m not in (args.quality, args.cost)]
    if unused:  # a typo, never silently unused
        raise InputError(
            f"--direction for {', '.join(map(repr, unused))}, which is neither --quality "
            f"({args.quality!r}) nor --cost ({args.cost!r})"
        )
    return {
        "runs": args.run,
        "cost": args.cost,
        "quality": args.quality,
        "policy": args.policy,
        "strata": tuple(s.strip() for s in args.strata.split(",") if s.strip()),
        "source": args.source,
        "directions": directions or None,
        "errors": args.errors,
        "reducer": None if args.reducer == "none" else args.reducer,
        "pairing": args.pairing,
        "n_resamples": args.resamples,
        "level": args.level,
        "seed": args.seed,
    }


def run(args: argparse.Namespace) -> int:
    from hylo_analytics import charts

    opts = options(args)
    front = store_from(args).pareto(opts.pop("runs"), **opts)
    emit(front.frame, args.format, args.output, wide=args.wide)
    for note in front.notes:
        say(note, file=sys.stderr)
    say(
        f"{front.frame.height:,} policies, {front.front.height:,} on the front of the means "
        f"({front.n_resamples:,} {front.pairing} resamples of keys)",
        file=sys.stderr,
    )
    if args.chart is not None:
        path = charts.save(front.chart(log_cost=args.log_cost), args.chart)
        say(f"chart: {path}", file=sys.stderr)
    return 0
