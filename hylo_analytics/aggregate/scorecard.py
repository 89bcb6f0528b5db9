"""The scorecard: every run's metrics as their specs declare them, and one weighted score.

A :class:`~hylo_analytics.metrics.MetricSpec` says how a metric is reported; the scorecard is
where that is honoured:

- ``aggregator`` is the reported ``value`` (``mean``, ``median``, ``sum``, ``min``, ``max``,
  ``p95``, ``iqm``): read off :func:`~hylo_analytics.aggregate.aggregate_scores`'s column of that
  name, never recomputed. The interval (``ci_low``/``ci_high``) is the engine's, which is an
  interval of the mean: it is shown only when the aggregator is ``mean`` (null otherwise, rather
  than a mean's interval next to a median);
- ``statistics`` are the figures shown beside it (``statistics``, a list of name/value pairs;
  ``ci`` names the interval, always in its own columns);
- ``weight`` is the metric's share of the run's ``score``: ``sum(w * normalized) / sum(w)``
  over the metrics with ``weight > 0``;
- ``primary``: exactly one metric of a scorecard is primary (none or several is a
  ``ValueError``); its value is each run's ``primary_value``.

``normalized_value`` is higher-is-better on [0, 1]: the spec's ``normalizer`` applied to the
reported value, or, for a 0/1 metric without one, the value (``1 - value`` when lower is
better). A metric with neither has no normalized value.

An incomplete scorecard is shown, never averaged away: a run whose weighted metric is
``missing`` (no scores in that run), ``abstained`` (scores, none valid) or ``no_normalizer``
has ``score`` null and ``complete`` false, names those metrics in ``incomplete_metrics``, and
gives ``score_available`` (the weighted score of the metrics that have a value, over their
weights only) and ``weight_coverage`` (their share of the weight) beside it. Per metric,
``coverage = n_valid / n_total`` shows abstentions inside a metric that has a value.

The metrics (``metrics=``) are: ``None`` (the registry's metrics present in the data), a
:class:`~hylo_analytics.metrics.MetricRegistry` (the same, with that registry), a
:class:`~hylo_analytics.metrics.BenchmarkSpec` (its metrics), an
:class:`~hylo_analytics.metrics.EvaluationProtocolSpec` (its ``metric_ids``), a YAML/JSON file
(:func:`~hylo_analytics.metrics.load_metric_specs`), or a list of specs, mappings and ids.
Explicit specs replace the registry's spec of the same id for this scorecard.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Union, cast

import polars as pl

from hylo_analytics._html import text
from hylo_analytics.aggregate._engine import aggregate_scores
from hylo_analytics.errors import InputError, InputTypeError, RunSelectionError
from hylo_analytics.metrics import (
    BenchmarkSpec,
    EvaluationProtocolSpec,
    MetricRegistry,
    MetricSpec,
    default_registry,
    load_metric_specs,
    normalize_expr,
)
from hylo_analytics.resolution import preferred_scores
from hylo_analytics.stats.closed_form import DEFAULT_LEVEL
from hylo_analytics.stats.methods import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    UNSET,
    CIMethod,
    Seed,
    renamed,
)
from hylo_analytics.store import ParquetStore

__all__ = ["SCORECARD_SCHEMA_VERSION", "MetricsArg", "Scorecard", "scorecard"]

SCORECARD_SCHEMA_VERSION = "hylo.scorecard/v1"

# A runtime alias (Union, not |: one member is a string forward reference)
MetricsArg = Union[
    None,
    MetricRegistry,
    BenchmarkSpec,
    EvaluationProtocolSpec,
    str,
    "os.PathLike[str]",
    Sequence[MetricSpec | Mapping[str, Any] | str],
]
_STAT = pl.Struct({"name": pl.String, "value": pl.Float64})
_COLUMNS = (
    "run_id", "metric", "aggregator", "value", "statistics", "ci_low", "ci_high", "ci_method",
    "n_valid", "n_total", "coverage", "weight", "primary", "higher_is_better",
    "normalized_value", "status",
)  # fmt: skip


@dataclass(frozen=True)
class Scorecard:
    """One scorecard: ``metrics`` (a row per run and metric) and ``overall`` (a row per run).

    Both are polars frames; :meth:`to_frame` stacks them for CSV, :meth:`to_dict` nests them
    for JSON, and a notebook shows both tables (``_repr_html_``).
    """

    metrics: pl.DataFrame
    overall: pl.DataFrame
    primary: str
    specs: tuple[MetricSpec, ...]

    def to_frame(self) -> pl.DataFrame:
        """Metric rows then one ``row = "overall"`` row per run (``value`` = its score), flat."""
        m = self.metrics.with_columns(
            row=pl.lit("metric"),
            statistics=pl.col("statistics")
            .list.eval(
                pl.format(
                    "{}={}",
                    pl.element().struct.field("name"),
                    pl.element().struct.field("value").round(6),
                )
            )
            .list.join("; "),
        )
        o = self.overall.select(
            "run_id",
            row=pl.lit("overall"),
            metric=pl.lit("overall"),
            value=pl.col("score"),
            normalized_value=pl.col("score"),
            weight=pl.col("total_weight"),
            status=pl.when(pl.col("complete")).then(pl.lit("ok")).otherwise(pl.lit("incomplete")),
            statistics=pl.format(
                "score_available={}; weight_coverage={}; incomplete={}",
                pl.col("score_available").round(6),
                pl.col("weight_coverage").round(6),
                pl.col("incomplete_metrics").list.join(","),
            ),
        )
        cols = ["run_id", "row", *[c for c in m.columns if c not in ("run_id", "row")]]
        return pl.concat([m.select(cols), o], how="diagonal_relaxed").select(cols)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the primary metric, the specs' ids, and per run its score and metrics."""
        by_run = self.metrics.partition_by("run_id", as_dict=True, maintain_order=True)
        runs = []
        for row in self.overall.iter_rows(named=True):
            rows = by_run.get((row["run_id"],))
            metrics = rows.drop("run_id").to_dicts() if rows is not None else []
            runs.append({**row, "metrics": metrics})
        return {
            "schema_version": SCORECARD_SCHEMA_VERSION,
            "primary": self.primary,
            "metrics": [s.id for s in self.specs],
            "runs": runs,
        }

    def __repr__(self) -> str:
        with pl.Config(tbl_rows=50, tbl_cols=12, float_precision=4):
            return (
                f"Scorecard(primary={self.primary!r}, runs={self.overall.height}, "
                f"metrics={[s.id for s in self.specs]})\n{self.overall}\n{self.metrics}"
            )

    def _repr_html_(self) -> str:
        shown = self.metrics.drop("statistics")
        return (
            f"<div><strong>Scorecard</strong> &mdash; primary metric "
            f"<code>{text(self.primary)}</code>; a run with a missing, abstained or "
            "unnormalized weighted metric has no <code>score</code> "
            "(see <code>score_available</code>, <code>incomplete_metrics</code>)"
            f"{self.overall._repr_html_()}{shown._repr_html_()}</div>"
        )


def scorecard(
    scores: pl.DataFrame | pl.LazyFrame | ParquetStore,
    runs: Sequence[str] | str | None = None,
    metrics: MetricsArg = None,
    *,
    registry: MetricRegistry | None = None,
    ci: CIMethod = "auto",
    level: float = DEFAULT_LEVEL,
    seed: Seed = DEFAULT_SEED,
    n_resamples: int = DEFAULT_RESAMPLES,
    reducer: str | None = "mean",
    source: str | Sequence[str] | None = None,
    reduce: Any = UNSET,
) -> Scorecard:
    """The scorecard of ``runs`` (default: all) over ``metrics`` (see the module docstring).

    ``scores`` is a store (its resolved scores; ``runs`` may be ids, prefixes or selectors) or a
    frame with ``run_id``, ``metric`` and ``value``. The other options are
    :func:`~hylo_analytics.aggregate.aggregate_scores`'s (``reduce=`` is the deprecated alias of
    ``reducer=``).
    """
    reducer = cast("str | None", renamed("reduce", "reducer", reduce, reducer, "scorecard", "mean"))
    from hylo_analytics.store import unwrap_store

    scores = unwrap_store(scores)  # a Store (the facade) holds its ParquetStore
    reg, specs = _selected(metrics, registry)
    frame, run_ids = _scores(scores, runs, source)
    frame = frame.with_columns(metric=pl.col("metric").replace(reg.alias_map()))
    held = set(frame["metric"].unique().to_list())
    if metrics is None or isinstance(metrics, MetricRegistry):  # a catalogue: what the data has
        specs = tuple(s for s in specs if s.id in held)
    primaries = [s.id for s in specs if s.primary]
    if len(primaries) != 1:
        found = f"{len(primaries)} ({', '.join(primaries)})" if primaries else "none"
        raise InputError(
            f"scorecard: exactly one metric must be primary, found {found} among "
            f"{[s.id for s in specs]}; set primary: true on exactly one"
        )
    ids = [s.id for s in specs]
    present = held & set(ids)
    wanted = sorted({*(s.aggregator for s in specs), *_shown(specs)} - {"mean"})
    grid = pl.DataFrame({"run_id": run_ids}, schema={"run_id": pl.String}).join(
        pl.DataFrame({"metric": ids}), how="cross"
    )
    if present:
        agg = aggregate_scores(
            frame.filter(pl.col("metric").is_in(sorted(present))),
            by=("run_id",),
            statistics=wanted,
            ci=ci,
            level=level,
            seed=seed,
            n_resamples=n_resamples,
            reducer=reducer,
            registry=reg,
        )
        rows = grid.join(agg, on=["run_id", "metric"], how="left")
    else:
        rows = grid.with_columns(
            *(pl.lit(None, pl.Float64).alias(c) for c in ["mean", *wanted, "ci_low", "ci_high"]),
            pl.lit(None, pl.Int64).alias("n_total"),
            pl.lit(None, pl.Int64).alias("n_valid"),
            pl.lit(None, pl.Float64).alias("coverage"),
            pl.lit(None, pl.String).alias("ci_method"),
            pl.lit(None, pl.Float64).alias("ci_level"),
        )
    table = _metric_rows(rows, specs)
    return Scorecard(table, _overall(table, primaries[0]), primaries[0], specs)


def _selected(
    metrics: MetricsArg, registry: MetricRegistry | None
) -> tuple[MetricRegistry, tuple[MetricSpec, ...]]:
    """The registry the aggregate resolves names with, and the scorecard's specs in order."""
    reg = registry or default_registry()
    if isinstance(metrics, str | os.PathLike):
        loaded = load_metric_specs(os.fspath(metrics))
        metrics = loaded if isinstance(loaded, BenchmarkSpec) else list(loaded)
    if metrics is None or isinstance(metrics, MetricRegistry):
        reg = metrics if metrics is not None else reg  # an empty registry is falsy
        return reg, tuple(reg)  # narrowed to the metrics the data holds by the caller
    if isinstance(metrics, BenchmarkSpec):
        items: Sequence[MetricSpec | Mapping[str, Any] | str] = metrics.metrics
    elif isinstance(metrics, EvaluationProtocolSpec):
        if not metrics.metric_ids:
            raise InputError(
                f"scorecard: protocol {metrics.name!r} names no metric_ids; list the metrics it "
                "reports in its metric_ids"
            )
        items = metrics.metric_ids
    else:
        items = metrics
    specs: list[MetricSpec] = []
    for item in items:
        if isinstance(item, MetricSpec):
            spec = item
        elif isinstance(item, Mapping):
            spec = MetricSpec.from_dict(item)
        elif isinstance(item, str):
            spec = reg.spec_or_default(item)
        else:
            raise InputTypeError(
                f"scorecard: a metric must be a MetricSpec, mapping or id, got {item!r}"
            )
        reg = reg.with_spec(spec)
        specs.append(spec)
    dup = sorted({s.id for s in specs if [t.id for t in specs].count(s.id) > 1})
    if dup:
        raise InputError(f"scorecard: metric {dup[0]!r} is listed twice; list each metric once")
    return reg, tuple(specs)


def _scores(
    scores: pl.DataFrame | pl.LazyFrame | ParquetStore,
    runs: Sequence[str] | str | None,
    source: str | Sequence[str] | None,
) -> tuple[pl.DataFrame, list[str]]:
    """The scores of the chosen runs, and those runs in order (a run with no score included)."""
    wanted = [runs] if isinstance(runs, str) else runs
    if isinstance(scores, ParquetStore):
        ids = (
            scores.resolve_runs(wanted)
            if wanted is not None
            else scores.sql("SELECT run_id FROM stg_runs ORDER BY run_id")["run_id"].to_list()
        )
        return preferred_scores(scores, runs=ids, source=source), ids
    if isinstance(scores, pl.LazyFrame):
        scores = scores.collect()
    if not isinstance(scores, pl.DataFrame):
        raise InputTypeError(
            f"scorecard: expected a polars frame or a Store, got {type(scores).__name__}"
        )
    missing = [c for c in ("run_id", "metric", "value") if c not in scores.columns]
    if missing:
        raise InputError(
            f"scorecard: scores have no column(s) {missing}; pass scores with run_id, metric "
            "and value"
        )
    if source is not None:
        kept = [source] if isinstance(source, str) else list(source)
        scores = scores.filter(pl.col("source").is_in(kept))
    held = scores["run_id"].unique(maintain_order=True).to_list()
    if wanted is None:
        return scores, sorted(held)
    unknown = [r for r in wanted if r not in held]
    if unknown:
        raise RunSelectionError(f"scorecard: no scores of run(s) {unknown}; the scores hold {held}")
    return scores.filter(pl.col("run_id").is_in(list(wanted))), list(dict.fromkeys(wanted))


def _shown(specs: Sequence[MetricSpec]) -> set[str]:
    return {s for spec in specs for s in spec.statistics if s != "ci"}


def _per_metric(specs: Sequence[MetricSpec], pick: Any, dtype: Any) -> pl.Expr:
    """One expression choosing, on each row, what its metric's spec asks for (``pick(spec)``)."""
    expr = pl.lit(None, dtype=dtype)
    for spec in specs:
        expr = pl.when(pl.col("metric") == spec.id).then(pick(spec)).otherwise(expr)
    return expr


def _normalized(spec: MetricSpec) -> pl.Expr:
    norm = normalize_expr(spec, "value")
    if norm is not None:
        return norm
    if spec.kind == "binary" and spec.higher_is_better is not None:
        return pl.col("value") if spec.higher_is_better else 1.0 - pl.col("value")
    return pl.lit(None, pl.Float64)


def _metric_rows(rows: pl.DataFrame, specs: Sequence[MetricSpec]) -> pl.DataFrame:
    stats = _per_metric(
        specs,
        lambda s: pl.concat_list(
            [pl.struct(name=pl.lit(n), value=pl.col(n)) for n in s.statistics if n != "ci"]
            or [pl.lit(None, _STAT)]
        ).list.drop_nulls(),
        pl.List(_STAT),
    )
    is_mean = _per_metric(specs, lambda s: pl.lit(s.aggregator == "mean"), pl.Boolean)
    out = rows.with_columns(
        aggregator=_per_metric(specs, lambda s: pl.lit(s.aggregator), pl.String),
        value=_per_metric(specs, lambda s: pl.col(s.aggregator), pl.Float64),
        statistics=stats,
        weight=_per_metric(specs, lambda s: pl.lit(s.weight), pl.Float64),
        primary=_per_metric(specs, lambda s: pl.lit(s.primary), pl.Boolean),
        higher_is_better=_per_metric(specs, lambda s: pl.lit(s.higher_is_better), pl.Boolean),
        n_total=pl.col("n_total").fill_null(0),
        n_valid=pl.col("n_valid").fill_null(0),
        ci_low=pl.when(is_mean).then(pl.col("ci_low")),
        ci_high=pl.when(is_mean).then(pl.col("ci_high")),
        ci_method=pl.when(is_mean).then(pl.col("ci_method")),
    )
    out = out.with_columns(normalized_value=_per_metric(specs, _normalized, pl.Float64))
    status = (
        pl.when(pl.col("n_total") == 0)
        .then(pl.lit("missing"))
        .when(pl.col("n_valid") == 0)
        .then(pl.lit("abstained"))
        .when(pl.col("normalized_value").is_null())
        .then(pl.lit("no_normalizer"))
        .otherwise(pl.lit("ok"))
    )
    order = pl.col("metric").replace_strict({s.id: i for i, s in enumerate(specs)})
    return out.with_columns(status=status, _o=order).sort("run_id", "_o").select(_COLUMNS)


def _overall(table: pl.DataFrame, primary: str) -> pl.DataFrame:
    weighted = pl.col("weight") > 0
    has = weighted & pl.col("normalized_value").is_not_null()
    w_has = pl.col("weight").filter(has)
    out = table.group_by("run_id", maintain_order=True).agg(
        primary_metric=pl.lit(primary),
        primary_value=pl.col("value").filter(pl.col("metric") == primary).first(),
        total_weight=pl.col("weight").filter(weighted).sum(),
        _avail=(pl.col("normalized_value") * pl.col("weight")).filter(has).sum(),
        _w=w_has.sum(),
        incomplete_metrics=pl.col("metric").filter(weighted & ~has),
    )
    available = pl.when(pl.col("_w") > 0).then(pl.col("_avail") / pl.col("_w"))
    complete = (pl.col("incomplete_metrics").list.len() == 0) & (pl.col("total_weight") > 0)
    return out.with_columns(
        score=pl.when(complete).then(available),
        complete=complete,
        score_available=available,
        weight_coverage=pl.when(pl.col("total_weight") > 0).then(
            pl.col("_w") / pl.col("total_weight")
        ),
    ).select(
        "run_id", "score", "complete", "incomplete_metrics", "score_available",
        "weight_coverage", "total_weight", "primary_metric", "primary_value",
    )  # fmt: skip
