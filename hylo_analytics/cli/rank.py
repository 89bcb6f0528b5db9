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
--run takes ids, prefixes or selectors, a selector naming every run it matches (agent=pi05:
pi05 on every suite). Three tables (--show): 'ranks' (default): each policy's rank by
Bradley-Terry strength, its rank set (rank_best = 1 + the policies significantly better than
it, rank_worst = N - the policies significantly worse) and its tie group (going down the
ranking, a group grows while its next policy is separated from none of its members: no test
separates two policies of one group); 'matrix': every pair, counted at once and tested as
'compare' tests a pair, Holm-adjusted over all N(N-1)/2 pairs as one family, with its verdict
(improved: the first policy is better); 'strengths': the Bradley-Terry log-strengths fitted on
the keys' games (sum 0, L2 penalty --penalty) with sandwich intervals over keys within suites
(--strength-ci bootstrap refits resamples instead, up to 100 policies). Errored episodes follow
--errors (default: each run's harness convention). Policies that share no key with any other (a
harness's published "k of n" without its samples) rank from their counts: their pairs are
compared by rates as independent samples (Miettinen-Nurminen score test), they are ordered by
mean and have no strength. --cluster task_id: the keys of one task are one cluster (the
population is the tasks): every pair's interval and test are CR2 cluster-robust (Bell-McCaffrey
df; the matrix's ci_method cr2, n_clusters, ci_df) and the strengths' sandwich resamples
clusters within suites.

A table shows the --top K strongest (default 50; the matrix: the pairs among them) and says
how many it leaves out; --format csv/json/parquet write every row unless --top is given. Charts
draw the top K too (the heatmap at most 50).

example: hylo-analytics rank --store out/store --heatmap ranks.png
         hylo-analytics rank --store out/store --policy run_id --top 20 --strength-chart s.png"""


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
        help="only these runs: an id, a unique prefix or a selector, which names every run "
        "it matches (agent=pi05: pi05 on every suite); repeat; default every run",
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
    p.add_argument("--strength-ci", choices=("sandwich", "bootstrap"), default="sandwich",
                   help="the strengths' interval: sandwich over keys within suites (default) "
                   "or a bootstrap refitting each resample (up to 100 policies)")  # fmt: skip
    p.add_argument("--cluster", metavar="COLUMN", default=None,
                   help="a score column clustering the keys within a suite (task_id): "
                   "cluster-robust (CR2) pairs and strengths")  # fmt: skip
    add_errors_arg(p)
    add_interval_args(p, what="strength interval")
    p.add_argument("--top", type=int, default=None, metavar="K",
                   help="show the K strongest policies (tables and charts; default 50 for a "
                   "table and a chart, every row for csv/json/parquet; 0: all)")  # fmt: skip
    p.add_argument("--quiet", action="store_true",
                   help="no progress bar (none is shown when stderr is not a terminal)")  # fmt: skip
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
        "strength_ci": args.strength_ci,
        "n_resamples": args.resamples,
        "level": args.level,
        "seed": args.seed,
        "progress": False if args.quiet else None,
        "cluster": args.cluster,
    }


def run(args: argparse.Namespace) -> int:
    import polars as pl

    from hylo_analytics import charts
    from hylo_analytics.charts.ranking import MAX_POLICIES
    from hylo_analytics.errors import InputError

    if args.top is not None and args.top < 0:
        raise InputError(f"--top must be >= 0 (0: every policy), got {args.top}")
    if args.heatmap is not None and args.top is not None and args.top > MAX_POLICIES:
        raise InputError(
            f"--heatmap draws at most {MAX_POLICIES} policies ({args.top**2:,} cells would "
            f"be unreadable); use --top {MAX_POLICIES} or less with --heatmap"
        )
    opts = options(args)
    ranking = store_from(args).rank(opts.pop("runs"), **opts)
    n = len(ranking.policies)
    table_top = MAX_POLICIES if args.top is None and args.format == "table" else args.top
    top = None if not table_top else min(table_top, n)
    best = ranking.ranks["policy"].head(top or n).to_list()
    shown = {
        "ranks": ranking.ranks.head(top or n),
        "matrix": ranking.matrix if top is None or top >= n else ranking.submatrix(best),
        "strengths": ranking.strengths.filter(pl.col("policy").is_in(best)),
    }[args.show]
    if args.show == "matrix" and args.format == "table":
        shown = shown.select(
            "policy", "opponent", "n_pairs", "wins", "losses", "ties", "errors", "mean_diff",
            "ci_adj_low", "ci_adj_high", "ci_adj_level", "p_verdict", "verdict",
            "verdict_note", *(("n_clusters", "ci_df") if args.cluster else ()),
        )  # fmt: skip
    emit(shown, args.format, args.output, wide=args.wide)
    if top is not None and top < n:
        left = f"the {top:,} strongest of {n:,} policies"
        what = "pairs among " if args.show == "matrix" else ""
        say(f"showing {what}{left}; --top 0 for all, or --format csv/json -o FILE",
            file=sys.stderr)  # fmt: skip
    for note in ranking.notes:
        say(note, file=sys.stderr)
    groups = ranking.ranks["tie_group"]
    first = int((groups == 1).sum())
    say(
        f"{n:,} policies in {groups.n_unique():,} tie group(s); the first holds {first:,} "
        "that no test separates (Holm over every pair)",
        file=sys.stderr,
    )
    chart_top = min(args.top or MAX_POLICIES, n) if args.top != 0 else n
    if args.heatmap is not None:
        heat_n = min(chart_top, MAX_POLICIES)
        order = ranking.ranks["policy"].head(heat_n).to_list()
        heat = charts.ranking_matrix(ranking.submatrix(order), order=order)
        path = charts.save(heat, args.heatmap)
        note = f" (the {heat_n} strongest of {n:,})" if heat_n < n else ""
        say(f"heatmap: {path}{note}", file=sys.stderr)
    if args.strength_chart is not None:
        chart = charts.strength_intervals(ranking.ranks, top=chart_top)
        path = charts.save(chart, args.strength_chart)
        say(f"strengths: {path}", file=sys.stderr)
    return 0
