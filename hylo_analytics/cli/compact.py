"""``hylo-analytics compact``: merge a store's batches into one."""

from __future__ import annotations

import argparse

from hylo_analytics.cli._common import add_lock_arg, add_store_arg, say, store_from


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "compact",
        help="merge the store's batches into one (faster queries; no row is dropped)",
        description=(
            "Rewrite every batch of the store into one, each table's rows in run order, history "
            "and superseded rows kept, every table's row count checked before the new layout is "
            "published with one rename. Readers see the old layout or the new, never a mix. "
            "Commits also merge by themselves, by levels: more than HYLO_ANALYTICS_COMPACT_AT "
            "(default 4) batches of one level merge into one of the next (0 turns it off)."
        ),
    )
    add_store_arg(p)
    add_lock_arg(p)
    p.set_defaults(func=run_compact)


def run_compact(args: argparse.Namespace) -> int:
    store = store_from(args)
    say(store.compact())  # under the writer lock
    return 0
