"""``hylo-analytics critical-difference`` (``cd``): average ranks and their cliques.

Across tasks or suites: Friedman's test, Nemenyi or Wilcoxon-Holm, the diagram's cliques.
"""

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

SHOW = ("ranks", "pairs", "cliques", "blocks", "tests")
_TOP = 50  # rows of a table (ranks, cliques) and policies whose pairs a table shows

HELP = """Compare many policies across many tasks (or suites) by their average ranks, as
Demšar (2006) does for classifiers over data sets. Each policy's value on a block is its mean of
--metric there (the errors policy and epoch reducer of 'aggregate'); within each block the
policies are ranked (1 = best, in the metric's direction: lower is better for a latency; ties
share their mid rank) and each policy's average rank is its mean over the blocks. Friedman's
test (chi-square and the Iman-Davenport F) asks whether the average ranks differ more than
chance; the post-hoc test says which pairs do: --test nemenyi (default; a pair differs when its
average ranks are more than the critical difference CD apart) or --test wilcoxon (each pair's
signed-rank test on its block means, Holm over all pairs, as Benavoli et al. 2016 recommend).
A clique is a maximal run of consecutive policies (by average rank) no pair of which differs:
the bars of the diagram. Friedman needs every policy on every block: a block where a policy has
no value is left out, and said (--show blocks lists them).

Tables (--show): 'ranks' (default; per policy: average rank, mean, cliques, blocks missing),
'pairs' (every pair: rank difference, p, Holm p, significant), 'cliques', 'blocks', 'tests'
(Friedman, Iman-Davenport, the CD). A table shows the first --top rows (default 50; pairs: those
among the --top best policies) and says how many it leaves out; csv/json write every row unless
--top is given.

example: hylo-analytics critical-difference --store out/store --chart cd.png
         hylo-analytics cd --store out/store --blocks suite --test wilcoxon --show pairs"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "critical-difference",
        aliases=["cd"],
        help="average ranks across tasks or suites: Friedman, Nemenyi / Wilcoxon-Holm cliques",
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
        help="the field naming a policy (default agent_name: an agent's runs together; "
        "run_id: each run)",
    )
    p.add_argument(
        "--blocks",
        default="task_id",
        help="what is ranked within: task_id (default: a task of its suite, benchmark_id, "
        "split, task_id), suite (benchmark_id, split), or comma-separated fields",
    )
    p.add_argument("--metric", default="success", help="the metric ranked (default success)")
    p.add_argument("--test", choices=("nemenyi", "wilcoxon"), default="nemenyi",
                   help="the post-hoc test of the pairs (default nemenyi)")  # fmt: skip
    p.add_argument("--alpha", type=float, default=0.05, help="level of the tests (0.05)")
    p.add_argument("--direction", choices=("maximize", "minimize"), default=None,
                   help="what is better for the metric (default: the registry's)")  # fmt: skip
    p.add_argument("--reducer", default="mean",
                   help="epochs of a key reduced by (default mean; as aggregate)")  # fmt: skip
    p.add_argument("--source", action="append", help="keep only scores of this source")
    add_errors_arg(p)
    p.add_argument("--show", choices=SHOW, default="ranks",
                   help="which table to print (default ranks)")  # fmt: skip
    p.add_argument("--top", type=int, default=None, metavar="K",
                   help="show the K best policies (pairs: among them; default 50 for a table, "
                   "every row for csv/json/parquet; 0: all)")  # fmt: skip
    p.add_argument("--chart", type=Path, metavar="FILE",
                   help="save the diagram (.png, .svg or .html)")  # fmt: skip
    p.add_argument("--chart-top", type=int, default=None, metavar="K",
                   help="policies the diagram names, half from each end (default 30)")  # fmt: skip
    add_format_args(p)
    p.set_defaults(func=run)


def options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of ``Store.critical_difference`` the flags say."""
    blocks = [b.strip() for b in args.blocks.split(",") if b.strip()]
    source = args.source[0] if args.source and len(args.source) == 1 else args.source
    return {
        "runs": args.run,
        "policy": args.policy,
        "blocks": blocks[0] if len(blocks) == 1 else tuple(blocks),
        "metric": args.metric,
        "test": args.test,
        "alpha": args.alpha,
        "directions": {args.metric: args.direction} if args.direction else None,
        "errors": args.errors,
        "reducer": None if args.reducer == "none" else args.reducer,
        "source": source,
    }


def run(args: argparse.Namespace) -> int:
    import polars as pl

    from hylo_analytics import charts
    from hylo_analytics.errors import InputError

    if args.top is not None and args.top < 0:
        raise InputError(f"--top must be >= 0 (0: every policy), got {args.top}")
    opts = options(args)
    result = store_from(args).critical_difference(opts.pop("runs"), **opts)
    k = result.ranks.height
    table_top = _TOP if args.top is None and args.format == "table" else args.top
    top = None if not table_top or table_top >= k else table_top
    best = result.ranks["policy"].head(top or k)
    shown = {
        "ranks": result.ranks.head(top or k),
        "pairs": result.pairs
        if top is None
        else result.pairs.filter(
            pl.col("policy").cast(pl.String).is_in(best.implode()),
            pl.col("opponent").cast(pl.String).is_in(best.implode()),
        ),
        "cliques": result.cliques.head(top or result.cliques.height),
        "blocks": result.blocks,
        "tests": result.tests,
    }[args.show]
    if args.format == "table":
        shown = _readable(shown)
    emit(shown, args.format, args.output, wide=args.wide)
    if top is not None and args.show in ("ranks", "pairs", "cliques"):
        what = {"ranks": "", "pairs": "pairs among ", "cliques": "cliques of "}[args.show]
        say(f"showing {what}the {top:,} best of {k:,} policies; --top 0 for all, or "
            "--format csv/json -o FILE", file=sys.stderr)  # fmt: skip
    for note in result.notes:
        say(note, file=sys.stderr)
    f = result.friedman
    say(
        f"{k:,} policies over {f.n_blocks:,} blocks: Friedman chi-square {f.statistic:.4g} "
        f"(p = {f.p:.3g}), Iman-Davenport F {f.f_statistic:.4g} (p = {f.f_p:.3g}); "
        f"Nemenyi CD {result.cd:.4g}; {result.cliques.height:,} clique(s) ({result.test})",
        file=sys.stderr,
    )
    if args.chart is not None:
        chart_opts = {} if args.chart_top is None else {"top": args.chart_top}
        path = charts.save(result.chart(**chart_opts), args.chart)
        say(f"diagram: {path}", file=sys.stderr)
    return 0


def _readable(frame: Any) -> Any:
    """Lists as text in a terminal table (a clique's policies, a block's missing ones)."""
    import polars as pl

    lists = [c for c, t in frame.schema.items() if isinstance(t, pl.List)]
    return frame.with_columns(pl.col(c).cast(pl.List(pl.String)).list.join(", ") for c in lists)
