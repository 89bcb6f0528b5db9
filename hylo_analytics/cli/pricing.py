"""``hylo-analytics pricing import``: an external price list into a pricing file, on record.

The import is the only place an external catalogue is read: it writes an ordinary pricing
YAML (with a ``provenance:`` block) that derive steps then name; costing never reads the
source (see :mod:`hylo_analytics.derive.price_import`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hylo_analytics.cli._common import say

_SOURCES = ("static", "llm-prices", "genai-prices")  # price_import.SOURCES, without its import


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "pricing",
        help="import an external price list (llm-prices, genai-prices) into a pricing file",
        description="Work with pricing files (the pricing DSL of derive: token_cost steps).",
    )
    psub = p.add_subparsers(dest="pricing_command", metavar="ACTION", required=True)
    imp = psub.add_parser(
        "import",
        help="write a pricing YAML from a price list, with its provenance",
        description=(
            "Read FILE in the shape of --source and write a pricing YAML whose provenance block "
            "records the source kind, the file's name and sha256, imported_at, the selected "
            "models and every entry not imported (with why). Entries not imported are printed "
            "to stderr; the file is written temp-then-rename."
        ),
    )
    imp.add_argument("file", type=Path, metavar="FILE", help="the price list to import")
    imp.add_argument("--source", required=True, choices=_SOURCES, help="the file's shape")
    imp.add_argument("-o", "--output", type=Path, required=True, help="the pricing YAML to write")
    imp.add_argument(
        "--model",
        action="append",
        dest="models",
        metavar="ID",
        help="import only this model (its id, or the name after 'provider/'); repeatable",
    )
    imp.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 (writing nothing) when any entry is not imported",
    )
    imp.set_defaults(func=run_import)


def run_import(args: argparse.Namespace) -> int:
    from hylo_analytics.derive.price_import import import_prices

    result = import_prices(args.source, args.file, models=args.models)
    for problem in result.problems:
        say(f"{args.file}: not imported: {problem}", file=sys.stderr)
    if args.strict and result.problems:
        say(f"{len(result.problems)} problem(s); nothing written (--strict)", file=sys.stderr)
        return 1
    result.write(args.output)
    n = len(result.pricing["models"])
    say(
        f"wrote {args.output}: {n} model(s) from {args.source} ({result.provenance['sha256'][:12]})"
    )
    return 0
