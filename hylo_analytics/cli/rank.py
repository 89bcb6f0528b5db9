"""``hylo-analytics rank``: N policies ranked, with the uncertainty of the ranking."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from hylo_analytics.cli._common import (
    add_errors_arg,
    add_format_args,
    add_interval_args,
    add_store_arg,
    emit,
    say,
    store_from,
)

# hylo_analytics.stats.bradley_terry.DEFAULT_PENALTY (tests/cli/test_cli_rank.py checks it),
# repeated so --help imports no numpy
DEFAULT_PENALTY = 0.01
_RUN_FIELDS = ("run_id", "agent_name", "agent_version", "benchmark_id", "split")

HELP = """Rank policies (by default the store's agents, each over its runs) on one metric, with
the uncertainty of the ranking. Keys pair within a suite (--strata, default benchmark_id,split).
Three tables (--show): 'ranks' (default): each policy's rank by Bradley-Terry strength and
its rank set (rank_best = 1 + the policies significantly better than it, rank_worst = N - the
policies significantly worse; policies not separated share ranks); 'matrix': every pair
through the paired engine of 'compare', Holm-adjusted over all N(N-1)/2 pairs as one family,
with its verdict (improved: the first policy is better); 'strengths': the Bradley-Terry
log-strengths fitted on the discordant pairs (sum 0, L2 penalty --penalty) with bootstrap
intervals (keys resampled within suites). Errored episodes follow --errors (default: each
run's harness convention).

example: hylo-analytics rank --store out/store --heatmap ranks.png"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "rank",
        help="rank policies: pairwise matrix, rank sets, Bradley-Terry strengths",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_store_arg(p)
    p.add_argument(
        "--run",
        action="append",
        metavar="RUN",
        help="only this run: an id, a unique prefix or a selector (repeat; default every run)",
    )
    p.add_argument(
        "--policy",
        default="agent_name",
        choices=_RUN_FIELDS,
        help="the run field naming a policy (default agent_name: an agent's runs together)",
    )
    p.add_argument(
        "--strata",
        default="benchmark_id,split",
        help="comma-separated run fields naming a suite: keys pair and resample within it "
        "(default benchmark_id,split; '' for none)",
    )
    p.add_argument("--metric", default="success", help="the metric ranked (default success)")
    p.add_argument("--source", help="rank the scores of this source, not the resolved ones")
    p.add_argument(
        "--penalty",
        type=float,
        default=DEFAULT_PENALTY,
        help=f"Bradley-Terry L2 penalty on the log-strengths (default {DEFAULT_PENALTY}: a "
        "Normal(0, 7^2) prior, so a policy that never loses stays finite)",
    )
    p.add_argument("--alpha", type=float, default=0.05, help="level of the pairs' tests (0.05)")
    p.add_argument(
        "--margin",
        type=float,
        default=None,
        metavar="M",
        help="equivalence margin of 'unchanged' (points of success for 0/1 metrics)",
    )
    p.add_argument("--adjust", choices=("holm", "bh", "none"), default="holm",
                   help="adjustment over all pairs (default holm)")  # fmt: skip
    p.add_argument("--direction", choices=("maximize", "minimize"), default=None,
                   help="what is better for the metric (default: the registry's)")  # fmt: skip
    p.add_argument("--reducer", choices=("mean", "max", "min", "none"), default="mean",
                   help="epochs of a key reduced by (default mean; none refuses them)")  # fmt: skip
    add_errors_arg(p)
    add_interval_args(p, what="strength interval")
    p.add_argument(
        "--show",
        choices=("ranks", "matrix", "strengths"),
        default="ranks",
        help="which table to print (default ranks)",
    )
    p.add_argument("--heatmap", type=Path, metavar="FILE",
                   help="save the pairwise verdict heatmap (.png, .svg or .html)")  # fmt: skip
    p.add_argument("--strength-chart", type=Path, metavar="FILE",
                   help="save the strengths with their intervals (.png, .svg or .html)")  # fmt: skip
    add_format_args(p)
    p.set_defaults(func=run)


def options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of :func:`~hylo_analytics.compare.rank_runs` the flags say."""
    from hylo_analytics.compare.verdicts import StatisticalRule

    return {
        "runs": args.run,
        "policy": args.policy,
        "strata": tuple(s.strip() for s in args.strata.split(",") if s.strip()),
        "metric": args.metric,
        "source": args.source,
        "rule": StatisticalRule(alpha=args.alpha, adjust=args.adjust, margin=args.margin),
        "directions": {args.metric: args.direction} if args.direction else None,
        "errors": args.errors,
        "reducer": None if args.reducer == "none" else args.reducer,
        "penalty": args.penalty,
        "n_resamples": args.resamples,
        "level": args.level,
        "seed": args.seed,
    }


def run(args: argparse.Namespace) -> int:
    from hylo_analytics import charts

    opts = options(args)
    ranking = store_from(args).rank(opts.pop("runs"), **opts)
    table = {"ranks": ranking.ranks, "matrix": ranking.matrix, "strengths": ranking.strengths}
    shown = table[args.show]
    if args.show == "matrix" and args.format == "table":
        shown = shown.select(
            "policy", "opponent", "n_pairs", "wins", "losses", "ties", "errors", "mean_diff",
            "ci_low", "ci_high", "p_holm", "p_worse_holm", "verdict", "verdict_note",
        )  # fmt: skip
    emit(shown, args.format, args.output, wide=args.wide)
    if args.heatmap is not None:
        order = ranking.ranks["policy"].to_list()
        path = charts.save(charts.ranking_matrix(ranking.matrix, order=order), args.heatmap)
        say(f"heatmap: {path}", file=sys.stderr)
    if args.strength_chart is not None:
        path = charts.save(charts.strength_intervals(ranking.ranks), args.strength_chart)
        say(f"strengths: {path}", file=sys.stderr)
    return 0
