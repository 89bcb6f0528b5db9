"""``hylo-analytics summarize``: across-task summaries beyond the mean (IQM, profiles, P(X > Y))."""

from __future__ import annotations

import argparse
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

SHOW = ("summary", "profiles", "improvement")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "summarize",
        help="IQM and mean across tasks, performance profiles, probability of improvement",
        description=(
            "Per policy (--by, default agent_name): the interquartile mean and the mean of its "
            "per-task success rates with stratified bootstrap intervals (episodes resampled "
            "within each task), the performance profile (share of tasks whose rate exceeds "
            "tau, with bands), and rliable's probability of improvement P(X > Y) where several "
            "runs (seeds) per task exist (with one run per task it is refused, with the "
            "reason). A task is (benchmark, split, task_id). Example: hylo-analytics "
            "summarize --store out/store --run agent=pi05 --run agent=xvla --show profiles"
        ),
    )
    add_store_arg(p)
    p.add_argument(
        "--run",
        action="append",
        metavar="RUN",
        help="runs to summarize: an id, a prefix or a selector, which names every run it "
        "matches (agent=pi05: pi05 on every suite); repeatable; default: every run",
    )
    p.add_argument("--by", default="agent_name", help="comma-separated group columns "
                   "(agent_name)")  # fmt: skip
    p.add_argument("--metric", default="success", help="a 0/1 metric (success)")
    p.add_argument(
        "--task",
        default="benchmark_id,split,task_id",
        help="comma-separated columns naming a task (benchmark_id,split,task_id)",
    )
    p.add_argument("--source", action="append", help="keep only scores of this source")
    p.add_argument(
        "--taus",
        type=_taus,
        default=None,
        metavar="T,T,...|START:STOP:N",
        help="the profile's thresholds: a list, or N points from START to STOP (default 0:1:51)",
    )
    p.add_argument("--show", choices=SHOW, default="summary",
                   help="which frame to print (default summary)")  # fmt: skip
    p.add_argument("--chart", type=Path, metavar="FILE",
                   help="also write the performance-profile chart (.png, .svg or .html)")  # fmt: skip
    add_interval_args(p)
    add_errors_arg(p)
    p.add_argument("--quiet", action="store_true",
                   help="no progress bar (none is shown when stderr is not a terminal)")  # fmt: skip
    add_format_args(p)
    p.set_defaults(func=run)


def _taus(text: str) -> list[float]:
    bad = argparse.ArgumentTypeError(
        f"expected thresholds as T,T,... or START:STOP:N (N >= 1), got {text!r}"
    )
    try:
        if ":" in text:
            start, stop, n = text.split(":")
            count = int(n)
            if count < 1:
                raise bad
            step = (float(stop) - float(start)) / max(count - 1, 1)
            return [float(start) + i * step for i in range(count)]
        return [float(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise bad from None


def options(args: argparse.Namespace) -> dict[str, Any]:
    """The keywords of :meth:`~hylo_analytics.api.Store.summarize` the flags say."""
    return {
        "runs": args.run,
        "by": tuple(c.strip() for c in args.by.split(",") if c.strip()),
        "metric": args.metric,
        "errors": args.errors,
        "task": tuple(c.strip() for c in args.task.split(",") if c.strip()),
        "source": args.source,
        "taus": args.taus,
        "level": args.level,
        "n_resamples": args.resamples,
        "seed": args.seed,
        "progress": False if args.quiet else None,
    }


def run(args: argparse.Namespace) -> int:
    out = store_from(args).summarize(**options(args))
    if args.chart is not None:
        from hylo_analytics import charts

        charts.save(charts.performance_profiles(out.profiles), args.chart)
    emit(getattr(out, args.show), args.format, args.output, wide=args.wide)
    if args.show == "summary" and args.format == "table" and args.output is None:
        notes = [*out.notes, *out.improvement["note"].drop_nulls().unique().sort().to_list()]
        for note in notes:
            say(f"probability of improvement not shown: {note}")
    return 0
