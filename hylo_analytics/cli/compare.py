"""``hylo-analytics compare``: candidate runs against a parent run, paired on the key."""

from __future__ import annotations

import argparse

from hylo_analytics.cli._common import add_format_args, add_store_arg, emit, store_from
from hylo_analytics.compare import StatisticalRule
from hylo_analytics.stats.bootstrap import DEFAULT_RESAMPLES
from hylo_analytics.stats.intervals import DEFAULT_LEVEL

HELP = """Compare candidate runs with a parent run, key by key ("<task_id>#<seed>"), overall and
per --by group. Pairs where either side abstained are dropped and counted. Each row carries
n_pairs, candidate_wins, parent_wins, ties, the exact McNemar p (one-sided: is the candidate
better?), Holm and Benjamini-Hochberg adjusted p-values across every row of the call, the
mean difference with a paired bootstrap CI, a Wilcoxon p and a verdict (improved, regressed,
unchanged, inconclusive; the CI against +-threshold together with the Holm-adjusted
two-sided p). Runs whose benchmark digest, split or scorer version differ are refused unless
--force is given; forced rows say so in the 'forced' and 'gate_note' columns."""

_TABLE_COLUMNS = (
    "candidate",
    "metric",
    "level",
    "n_pairs",
    "candidate_wins",
    "parent_wins",
    "ties",
    "n_dropped",
    "p_value",
    "p_holm",
    "p_bh",
    "mean_diff",
    "ci_low",
    "ci_high",
    "verdict",
    "forced",
)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "compare",
        help="paired comparison of candidate runs against a parent run",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_store_arg(p)
    p.add_argument(
        "--candidate",
        action="append",
        required=True,
        metavar="RUN",
        help="a candidate run: its id, a unique id prefix, or a selector such as "
        "agent=xvla,benchmark=libero_spatial (fields: run, agent, version, benchmark, split, "
        "format); repeat for several",
    )
    p.add_argument(
        "--parent",
        required=True,
        metavar="RUN",
        help="the run to compare against (an id, prefix or selector, as --candidate)",
    )
    p.add_argument(
        "--metric",
        action="append",
        metavar="NAME",
        help="metric to compare (repeat; default: success)",
    )
    p.add_argument(
        "--by",
        action="append",
        default=[],
        metavar="COLUMN",
        help="also compare per group of this score column, e.g. task_id",
    )
    p.add_argument(
        "--source",
        default=None,
        help="use only scores of this source (default: the preferred score per key: re-scored > derived > graded > imported)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="compare even when benchmark digest, split or scorer version differ",
    )
    p.add_argument(
        "--reducer",
        choices=("mean", "max", "min"),
        help="reduce several epochs of one key (default: refuse duplicates)",
    )
    p.add_argument("--two-sided", action="store_true", help="two-sided McNemar p")
    p.add_argument("--mid-p", action="store_true", help="mid-p McNemar (less conservative)")
    p.add_argument(
        "--ci",
        choices=("bootstrap", "normal", "none"),
        default="bootstrap",
        help="CI of the mean difference (default: seeded paired bootstrap)",
    )
    p.add_argument(
        "--resamples",
        type=int,
        default=DEFAULT_RESAMPLES,
        help=f"bootstrap resamples (default {DEFAULT_RESAMPLES:,})",
    )
    p.add_argument("--level", type=float, default=DEFAULT_LEVEL, help="CI coverage (0.95)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument(
        "--threshold",
        type=float,
        default=0.0,
        help="verdict: smallest difference that matters (default 0)",
    )
    p.add_argument("--alpha", type=float, default=0.05, help="verdict significance level")
    add_format_args(p, parquet=False)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    store = store_from(args)
    result = store.compare(
        args.candidate,
        args.parent,
        metrics=args.metric or ["success"],
        by=args.by,
        source=args.source,
        force=args.force,
        reducer=args.reducer,
        alternative="two-sided" if args.two_sided else "greater",
        mid_p=args.mid_p,
        ci=args.ci,
        n_resamples=args.resamples,
        level=args.level,
        seed=args.seed,
        rule=StatisticalRule(threshold=args.threshold, alpha=args.alpha),
    )
    if args.format == "table":
        result = result.select(*_TABLE_COLUMNS[:3], *args.by, *_TABLE_COLUMNS[3:])
    emit(result, args.format, args.output, wide=args.wide)
    return 0
