"""``hylo-analytics pass-k``: pass@k and pass^k curves over the items of repeated samples."""

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
from hylo_analytics.errors import InputError

HELP = """pass@k and pass^k of each group (--by, default each run) over its items, for
k = 1 .. the most samples an item has (or --k), each point with its interval over items.

An item is a key (--item key, the default: its epochs are its samples) or a task (--item
task_id: its seeds and epochs); a group's samples of an item are its valid scores in every run
of the group. pass@k is the mean over items of the unbiased 1 - C(n - c, k) / C(n, k) (Chen et
al. 2021: at least one of k samples succeeds), pass^k of C(c, k) / C(n, k) (tau-bench: all k
succeed), n an item's valid samples and c its successes. An item with fewer than k samples is
left out of that k and counted (n_items_short; with --errors exclude an errored epoch is not a
sample). Intervals (--ci): wilson (default; Wilson at the effective sample size over items,
holds near 1 where pass@k ends), normal, or percentile (the bootstrap over items; slower,
for tens of groups). The metric must be 0/1 (default success).

Columns: the --by columns, metric, item, k, pass_at_k, pass_at_k_low, pass_at_k_high,
pass_hat_k, pass_hat_k_low, pass_hat_k_high, n_items, n_items_short, n_samples, n_errors,
errors, ci_level, ci_method.

example: hylo-analytics pass-k --store out/store --run agent=octo-ft --by agent_name
         hylo-analytics pass-k --store out/store --item task_id --k 1,5,10 --chart passk.png"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "pass-k",
        help="pass@k and pass^k curves over items with several epochs or seeds",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_store_arg(p)
    p.add_argument(
        "--run",
        action="append",
        metavar="RUN",
        help="a run: an id, a unique prefix, or a selector naming every run it matches "
        "(agent=octo-ft); repeat. Default every run",
    )
    p.add_argument("--by", default="run_id",
                   help="comma-separated group columns (default run_id; agent_name pools a "
                        "policy's runs)")  # fmt: skip
    p.add_argument("--metric", default="success", help="a 0/1 metric (default success)")
    p.add_argument("--item", default="key",
                   help="what an item is: key (default) or task_id")  # fmt: skip
    p.add_argument("--k", type=_ks, default=None, metavar="K,K,...|START:STOP",
                   help="the k to show (default 1 .. the most samples of an item)")  # fmt: skip
    p.add_argument("--ci", choices=("wilson", "normal", "percentile"), default="wilson",
                   help="the interval over items (default wilson)")  # fmt: skip
    p.add_argument("--source", action="append", help="keep only scores of this source")
    p.add_argument("--chart", type=Path, metavar="FILE",
                   help="also write the curves (.png, .svg or .html; at most 7 groups)")  # fmt: skip
    add_interval_args(p)
    add_errors_arg(p)
    add_format_args(p)
    p.set_defaults(func=run)


def _ks(text: str) -> list[int]:
    bad = argparse.ArgumentTypeError(f"expected K,K,... or START:STOP (each >= 1), got {text!r}")
    try:
        if ":" in text:
            start, stop = (int(v) for v in text.split(":"))
            ks = list(range(start, stop + 1))
        else:
            ks = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise bad from None
    if not ks or min(ks) < 1:
        raise bad
    return ks


def options(args: argparse.Namespace) -> dict[str, Any]:
    """The keywords of :meth:`~hylo_analytics.api.Store.pass_at_k` the flags say."""
    by = tuple(c.strip() for c in args.by.split(",") if c.strip())
    if not by:
        raise InputError("--by: name at least one column (run_id, agent_name, ...)")
    return {
        "runs": args.run, "k": args.k, "by": by, "metric": args.metric, "item": args.item,
        "errors": args.errors, "ci": args.ci, "level": args.level,
        "n_resamples": args.resamples, "seed": args.seed, "source": args.source,
    }  # fmt: skip


def run(args: argparse.Namespace) -> int:
    out = store_from(args).pass_at_k(**options(args))
    if args.chart is not None:
        from hylo_analytics import charts

        charts.save(charts.pass_k_curves(out), args.chart)
    emit(out, args.format, args.output, wide=args.wide)
    short = out.filter(out["n_items_short"] > 0)
    if short.height:
        say(
            f"note: {short.height:,} point(s) leave out items with fewer than k samples "
            f"(from k = {short.select('k').min().item()}; see n_items_short)",
            file=sys.stderr,
        )
    return 0
