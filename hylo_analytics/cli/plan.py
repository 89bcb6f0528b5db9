"""``hylo-analytics plan``: how many episodes per run a paired comparison needs."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hylo_analytics.cli._common import add_errors_arg, store_from
from hylo_analytics.errors import InputError

if TYPE_CHECKING:  # numpy and the power functions are imported when a plan is computed
    from hylo_analytics.stats.power import Plan, PlanKind
    from hylo_analytics.stats.significance import Alternative

HELP = """Plan a paired comparison: the pairs (episodes per run, paired by task and seed) that
detect a difference with the wanted power, using the test 'compare' runs (Tango's score test
for success, the test its verdicts use; the paired t-test for a continuous metric).

From assumptions, for a success rate (--delta is a difference of rates: 0.03 is 3 points):
  hylo-analytics plan --parent-rate 0.95 --delta 0.03 --rho 0.3
  hylo-analytics plan --discordance 0.06 --delta 0.03 --two-sided
  hylo-analytics plan --discordance 0.06 --pairs 500     (what 500 pairs can detect)
for a continuous metric (sd: of the paired differences):
  hylo-analytics plan --sd 12 --delta 2
From two runs of a store (their pairs give the discordance or the sd):
  hylo-analytics plan --store DIR --candidate agent=pi05,benchmark=libero_spatial \\
      --parent agent=xvla,benchmark=libero_spatial [--delta 0.03]

The discordance is the share of pairs where exactly one run succeeds; from --parent-rate it
follows from the two rates and --rho, the correlation of the two runs' outcomes on the same
episode (default 0: independent; policies that fail on the same hard episodes have rho > 0
and need fewer pairs). The answer is the smallest number of pairs from which the exact power
stays at or above --power."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "plan",
        help="pairs (episodes per run) a comparison needs for a given power",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--delta", type=float, help="the difference to detect (rates: 0.03 = 3 points)")
    p.add_argument("--power", type=float, default=0.8, help="target power (default 0.8)")
    p.add_argument("--alpha", type=float, default=0.05, help="the test's level (default 0.05)")
    p.add_argument("--two-sided", action="store_true", help="plan a two-sided test")
    rate = p.add_argument_group("from assumptions")
    rate.add_argument("--parent-rate", type=float, metavar="P", help="the parent's success rate")
    spread = rate.add_mutually_exclusive_group()
    spread.add_argument("--rho", type=float, help="correlation of the paired outcomes (0)")
    spread.add_argument(
        "--discordance", type=float, metavar="PSI", help="share of discordant pairs"
    )
    rate.add_argument("--sd", type=float, help="continuous metric: sd of the paired differences")
    rate.add_argument("--pairs", type=int, metavar="N", help="also: what N pairs can detect")
    runs = p.add_argument_group("from two runs")
    runs.add_argument("--store", type=Path, metavar="DIR", help="the store folder")
    runs.add_argument("--candidate", metavar="RUN", help="run id, id prefix or selector")
    runs.add_argument("--parent", metavar="RUN", help="the run compared against")
    runs.add_argument("--metric", default="success", help="metric to plan for (success)")
    runs.add_argument("--force", action="store_true", help="as compare --force")
    add_errors_arg(runs)
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format")
    p.set_defaults(func=run, store_create=False)


def run(args: argparse.Namespace) -> int:
    alternative: Alternative = "two-sided" if args.two_sided else "greater"
    if args.store is not None:
        out = _from_runs(args, alternative)
    else:
        out = _from_assumptions(args, alternative)
    text, data = out
    sys.stdout.write(json.dumps(data, indent=2) + "\n" if args.format == "json" else text + "\n")
    return 0


def _from_runs(args: argparse.Namespace, alternative: Alternative) -> tuple[str, dict[str, Any]]:
    from hylo_analytics.compare.planning import plan_from_runs  # polars and the store: on use

    if args.candidate is None or args.parent is None:
        raise InputError("--store needs --candidate RUN and --parent RUN")
    if args.parent_rate is not None or args.rho is not None or args.pairs is not None:
        raise InputError(
            "--parent-rate, --rho and --pairs plan from assumptions; with --store the runs "
            "give the pairs and the discordance (override it with --discordance or --sd)"
        )
    result = plan_from_runs(
        store_from(args).parquet,
        args.candidate,
        args.parent,
        metric=args.metric,
        errors=args.errors,
        delta=args.delta,
        power=args.power,
        alpha=args.alpha,
        alternative=alternative,
        discordance=args.discordance,
        sd=args.sd,
        force=args.force,
    )
    return str(result), {"mode": "runs", **dataclasses.asdict(result)}


def _from_assumptions(
    args: argparse.Namespace, alternative: Alternative
) -> tuple[str, dict[str, Any]]:
    if args.candidate is not None or args.parent is not None:
        raise InputError("--candidate and --parent need --store DIR")
    if args.delta is None and args.pairs is None:
        raise InputError("give --delta (the difference to detect) or --pairs N")
    if args.sd is not None:
        if args.parent_rate is not None or args.rho is not None or args.discordance is not None:
            raise InputError(
                "--sd plans a continuous metric: drop --parent-rate/--rho/--discordance"
            )
        return _planned(args, args.sd, None, "continuous", alternative)
    return _planned(args, *_discordance(args), "binary", alternative)


def _planned(
    args: argparse.Namespace,
    spread: float,
    origin: str | None,
    kind: PlanKind,
    alternative: Alternative,
) -> tuple[str, dict[str, Any]]:
    """The plan for --delta and what --pairs can detect, for either kind of metric."""
    from hylo_analytics.stats.power import plan_for, smallest_detectable

    name = "discordance" if kind == "binary" else "sd"
    lines: list[str] = []
    data: dict[str, Any] = {"mode": "assumptions", "kind": kind, name: spread}
    if origin:
        lines.append(origin)
    options: dict[str, Any] = {"power": args.power, "alpha": args.alpha, "alternative": alternative}
    if args.delta is not None:
        plan: Plan = plan_for(args.delta, spread, kind=kind, **options)
        lines.append(str(plan))
        data["plan"] = dataclasses.asdict(plan)
    if args.pairs is not None:
        mde = smallest_detectable(args.pairs, spread, kind=kind, **options)
        at = _at_pairs(args.pairs, mde, args, spread, alternative, kind=kind)
        lines.append(at[0])
        data["at_pairs"] = at[1]
    return "\n".join(lines), data


def _discordance(args: argparse.Namespace) -> tuple[float, str | None]:
    """ψ as given, or from the parent's rate, the candidate's (rate + delta) and rho."""
    from hylo_analytics.stats.power import discordance_from_marginals

    if args.discordance is not None:
        if args.parent_rate is not None:
            raise InputError("give --parent-rate (with --rho) or --discordance, not both")
        return float(args.discordance), None
    if args.parent_rate is None:
        raise InputError(
            "give --parent-rate P (with --delta, optionally --rho) or --discordance PSI for a "
            "success rate, --sd for a continuous metric, or --store with two runs"
        )
    if args.delta is None:
        raise InputError("--parent-rate needs --delta: the candidate's rate is parent + delta")
    candidate = args.parent_rate + args.delta
    if not 0.0 <= candidate <= 1.0:
        raise InputError(
            f"--parent-rate {args.parent_rate} with --delta {args.delta} gives a candidate "
            f"rate of {candidate:.4g}, outside [0, 1]: change --delta or --parent-rate"
        )
    rho = 0.0 if args.rho is None else float(args.rho)
    psi = discordance_from_marginals(args.parent_rate, candidate, rho)
    why = " (independent outcomes: the default)" if args.rho is None else ""
    return psi, (
        f"Discordance {psi:.4f} from success rates {args.parent_rate:g} (parent) and "
        f"{candidate:g} (candidate) with outcome correlation rho {rho:g}{why}"
    )


def _at_pairs(
    n: int, mde: float, args: argparse.Namespace, spread: float, alt: Alternative, *, kind: PlanKind
) -> tuple[str, dict[str, Any]]:
    from hylo_analytics.stats.power import points, power_at

    side = "one-sided" if alt == "greater" else "two-sided"
    shown = f"{points(mde)} points" if kind == "binary" else f"{mde:+.4g}"
    text = (
        f"With {n:,} pairs the smallest difference detectable with power {args.power:.2f} at "
        f"{side} alpha {args.alpha:g} is {shown}"
    )
    data: dict[str, Any] = {"n_pairs": n, "mde": mde}
    if args.delta is not None:
        at = power_at(n, args.delta, spread, kind=kind, alpha=args.alpha, alternative=alt)
        text += f"; their power for the planned difference is {at:.3f}"
        data["power"] = at
    return text, data
