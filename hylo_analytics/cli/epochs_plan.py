"""``hylo-analytics epochs-plan``: a difference's variance split, and the epochs that halve it."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from hylo_analytics.cli._common import (
    add_errors_arg,
    add_format_args,
    add_store_arg,
    emit,
    say,
    store_from,
)

HELP = """The variance of the candidate's paired difference to the parent over their shared
items, split into the within-item part (the sampling noise of the epochs: s^2 / n per item and
side) and the between-item part (how the true difference varies over items), by the one-way
random-effects decomposition; and what would halve the interval's width (2 z sd / sqrt(items)):
the epochs per item (more epochs shrink only the within part, so when the between part is over a
quarter of the total no number of epochs can: epochs_to_halve is empty and the note says so)
and, for contrast, the items (four times as many, always). Without --parent, the split of the
candidate's mean.

--candidate and --parent: an id, a unique prefix or a selector; a selector's runs are one side,
their samples of an item pooled. --item key (default: a key's epochs are its samples) or task_id.

Columns: candidate, parent, metric, item, n_items, n_unpaired (items of one side only, left
out), epochs (mean valid samples per item and side), estimate (the mean difference), var_total,
var_within, var_between, within_share, ci_width, ci_level, floor_width (endless epochs),
epochs_factor, epochs_to_halve, width_at_halving_epochs, items_to_halve, n_single (items with
one sample on a side: its pooled within variance stands in), errors, note.

example: hylo-analytics epochs-plan --store out/store --candidate agent=new --parent agent=old"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "epochs-plan",
        help="a difference's variance split into epochs' noise and items; epochs that halve it",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_store_arg(p)
    p.add_argument("--candidate", action="append", required=True, metavar="RUN",
                   help="the candidate's runs: an id, a prefix or a selector; repeat")  # fmt: skip
    p.add_argument("--parent", action="append", metavar="RUN",
                   help="the parent's runs (repeat); omit for the split of the candidate's "
                        "mean")  # fmt: skip
    p.add_argument("--metric", default="success", help="the metric (default success)")
    p.add_argument("--item", default="key",
                   help="what an item is: key (default) or task_id")  # fmt: skip
    p.add_argument("--level", type=float, default=0.95, help="interval coverage (0.95)")
    p.add_argument("--source", action="append", help="keep only scores of this source")
    add_errors_arg(p)
    add_format_args(p)
    p.set_defaults(func=run)


def options(args: argparse.Namespace) -> dict[str, Any]:
    """The keywords of :meth:`~hylo_analytics.api.Store.epochs_plan` the flags say."""
    return {
        "candidate": args.candidate, "parent": args.parent, "metric": args.metric,
        "item": args.item, "errors": args.errors, "level": args.level, "source": args.source,
    }  # fmt: skip


def run(args: argparse.Namespace) -> int:
    out = store_from(args).epochs_plan(**options(args))
    emit(out, args.format, args.output, wide=args.wide)
    note = out["note"][0]
    if note and args.format == "table":
        say(f"note: {note}", file=sys.stderr)
    return 0
