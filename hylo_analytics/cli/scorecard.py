"""``hylo-analytics scorecard``: each run's metrics as their specs declare, and one score."""

from __future__ import annotations

import argparse
import json

from hylo_analytics.cli._common import (
    add_format_args,
    add_interval_args,
    add_store_arg,
    emit,
    say,
    store_from,
)
from hylo_analytics.errors import InputError, SelectionError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "scorecard",
        help="per run: each metric by its spec's aggregator, and one weighted score",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "One row per run and metric: the value of the metric's aggregator (mean, median,\n"
            "sum, min, max, p95, iqm), the statistics its spec lists, the interval (of the mean,\n"
            "so only when the aggregator is mean), n_valid / n_total / coverage, weight, the\n"
            "primary flag and the normalized value; then one row per run: the weighted score of\n"
            "the normalized values. A run missing a weighted metric (no scores, all abstained,\n"
            "or no normalizer) has no score: 'incomplete', with the metrics named and the\n"
            "score of the others shown apart (score_available, weight_coverage).\n\n"
            "--metrics FILE is YAML or JSON: a list of MetricSpec mappings, {metrics: [...]},\n"
            "or a benchmark ({name: ..., metrics: [...], tasks: [...]}). Exactly one metric\n"
            "must be primary. Without it: the built-in metrics the store holds.\n\n"
            "Example: hylo-analytics scorecard --store out/store --metrics metrics.yaml\n"
            "  metrics.yaml:\n"
            "    - {id: success, primary: true, weight: 2, kind: binary,\n"
            "       higher_is_better: true, statistics: [mean, stderr, ci]}\n"
            "    - {id: steps, aggregator: median, normalizer: 'inverse_minmax:0:50'}"
        ),
    )
    add_store_arg(p)
    p.add_argument(
        "--run", action="append", help="run id, prefix or selector (repeatable; default: all)"
    )
    p.add_argument("--metrics", metavar="FILE", help="metric specs or a benchmark (YAML/JSON)")
    p.add_argument(
        "--protocol",
        metavar="NAME",
        help="score only the metric_ids of this evaluation protocol of the --metrics file",
    )
    add_interval_args(p)
    add_format_args(p, parquet=False)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hylo_analytics.aggregate.scorecard import MetricsArg, scorecard
    from hylo_analytics.metrics import (
        BenchmarkSpec,
        EvaluationProtocolSpec,
        default_registry,
        load_metric_specs,
    )

    metrics: MetricsArg = None
    registry = None
    if args.metrics:
        loaded = load_metric_specs(args.metrics)
        metrics = loaded if isinstance(loaded, BenchmarkSpec) else list(loaded)
        if args.protocol:
            specs = loaded.metrics if isinstance(loaded, BenchmarkSpec) else loaded
            registry = default_registry()
            for spec in specs:
                registry = registry.with_spec(spec)
            raw = loaded.metadata.get("protocols") if isinstance(loaded, BenchmarkSpec) else None
            protocols = {p.name: p for p in EvaluationProtocolSpec.coerce_many(raw)}
            if args.protocol not in protocols:
                from hylo_analytics._text import did_you_mean

                raise SelectionError(
                    f"{args.metrics}: no protocol {args.protocol!r} in metadata.protocols"
                    f"{did_you_mean([args.protocol], protocols)} "
                    f"(protocols: {', '.join(protocols) or 'none'})"
                )
            metrics = protocols[args.protocol]
    elif args.protocol:
        raise InputError("--protocol needs --metrics FILE (a benchmark with metadata.protocols)")
    card = scorecard(
        store_from(args).parquet,
        runs=args.run,
        metrics=metrics,
        registry=registry,
        level=args.level,
        seed=args.seed,
        n_resamples=args.resamples,
    )
    if args.format == "json":
        text = json.dumps(card.to_dict(), indent=2, default=str) + "\n"
        if args.output is None:
            say(text, end="")
        else:
            args.output.write_text(text)
        return 0
    if args.format == "csv":
        emit(card.to_frame(), "csv", args.output)
        return 0
    shown = card.to_frame().select(
        "run_id", "metric", "aggregator", "value", "statistics", "ci_low", "ci_high",
        "n_valid", "n_total", "coverage", "weight", "primary", "normalized_value", "status",
    )  # fmt: skip
    emit(shown, "table", args.output, wide=args.wide)
    if args.output is None:
        say(f"primary metric: {card.primary}")
    return 0
