"""Aggregate scores: one row per group and metric, with counts, statistics and an interval.

``aggregate_scores`` is a group-by. It returns a plain polars frame (composable: filter, join, chart
it) with one row per group and metric; :class:`AggregateResult` (``results.py``) is the
per-row object view of the same data (``result.py``). Abstentions (null ``value``, ``valid = false`` or NaN)
are never averaged as 0: they are counted in ``n_skipped`` and broken down by reason in
``skip_breakdown``, a ``List[Struct{reason: str, count: i64}]`` sorted by reason (a list, not a
struct, because each group has its own set of reasons). ``n_total == n_valid + sum(count)``
holds in every row. Errored keys (``errored``: the episode's sample status is ``error``, e.g. a
timeout) follow the errors policy (:mod:`hylo_analytics._harness`), named in the ``errors``
column: under ``failure`` an errored key of a 0/1 metric is a valid 0, under ``exclude`` an
abstention; ``n_errors`` counts them either way, and the mean and its interval are on the
same denominator. The default is each run's harness's convention (vla-eval: failure; Inspect
and hylo: exclude); a frame without ``source_format`` is taken as hylo's (exclude). A frame
without an ``errored`` column has no known errors: ``n_errors`` is null there.

From a store the scores are the one score resolution (:mod:`hylo_analytics.resolution`: one
score per run, key, epoch and metric); ``source=`` reads one source through the same view. The
mart views (``mart_aggregate_run``, ``mart_success_rates``, ...) give the same figures (tested).
On a plain frame, the epoch reducer keeps sources apart, so a key scored by two sources counts
twice (visibly, in ``n_total``) rather than averaging two scorers.

The statistics are one SQL query (``_query.py``) for a store and a frame alike: a store's rows
stay in DuckDB (its run filter at the scan) unless their epochs need reducing; only the values
of the groups a bootstrap resamples leave it. An interval is a property of its group: the
metric's kind is its declared kind, or (for a metric only the data knows) binary when the
group's own valid values are all 0 or 1, so a run's bounds are the same alone or among others.
The rows are read by ``_rows.py``; each group's interval is ``_intervals.py``'s, every method
computed by :func:`hylo_analytics.stats.mean_interval`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from typing import Any, cast

import polars as pl

from hylo_analytics._harness import Errors, check_errors
from hylo_analytics._text import did_you_mean
from hylo_analytics.aggregate._intervals import (
    CI_METHODS,
    _cluster_fit,
    _with_clustered,
    _with_intervals,
)
from hylo_analytics.aggregate._query import GroupRows, frame_rows
from hylo_analytics.aggregate._rows import (  # noqa: F401  (_validity: read by its old path)
    _check_present,
    _load,
    _not_binary,
    _prepare,
    _store_rows,
    _validity,
)
from hylo_analytics.errors import InputError
from hylo_analytics.metrics import MetricRegistry, _parse_normalizer, default_registry
from hylo_analytics.stats.closed_form import DEFAULT_LEVEL
from hylo_analytics.stats.interval import IntervalSpec
from hylo_analytics.stats.methods import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    UNSET,
    CIMethod,
    Seed,
    renamed,
)
from hylo_analytics.stats.reducers import Reducer
from hylo_analytics.store import ParquetStore, pinned

__all__ = ["CI_METHODS", "STATISTICS", "CIMethod", "aggregate_scores"]

STATISTICS: tuple[str, ...] = (
    "mean", "std", "stderr", "median", "p95", "min", "max", "iqm", "optimality_gap",
    "normalized_mean",
)  # fmt: skip
# Computed for every group but a column only when asked for (``statistics=[..., "sum"]``): the
# scorecard reads it for a metric whose aggregator is ``sum``; the default frame stays as it was.
ON_REQUEST: tuple[str, ...] = ("sum",)
_REASON = pl.List(pl.Struct({"reason": pl.String, "count": pl.Int64}))


@pinned
def aggregate_scores(
    scores: pl.DataFrame | pl.LazyFrame | ParquetStore,
    by: Sequence[str] = ("run_id",),
    metrics: Sequence[str] | None = None,
    statistics: Sequence[str] | None = None,
    ci: CIMethod | Mapping[str, CIMethod] = "auto",
    level: float = DEFAULT_LEVEL,
    *,
    seed: Seed = DEFAULT_SEED,
    n_resamples: int = DEFAULT_RESAMPLES,
    reducer: str | Reducer | None = "mean",
    stratify: str | None = None,
    cluster: str | None = None,
    optimality_threshold: float = 1.0,
    source: str | Sequence[str] | None = None,
    registry: MetricRegistry | None = None,
    runs: Sequence[str] | None = None,
    errors: Errors | None = None,
    reduce: Any = UNSET,
) -> pl.DataFrame:
    """Aggregate ``scores`` per ``by`` group and metric.

    Parameters
    ----------
    scores
        A frame with ``metric``, ``value`` and the ``by`` columns (optionally ``valid``,
        ``skip_reason``, ``errored``, ``key``, ``run_id``), or a store (its resolved scores;
        ``by`` may then also name a run's ``agent_name``, ``agent_version``,
        ``benchmark_id``, ``split`` or ``source_format``).
    metrics
        Metric ids or aliases to keep (default: every metric in the data).
    runs
        Run ids to keep (default: every run). From a store the filter reaches the Parquet
        scan, so a question about a few runs reads their rows, not the store's.
    statistics
        Statistic columns to keep (default all of :data:`STATISTICS`); counts, ``mean`` and the
        interval are always there. ``sum`` (of the valid values) is a column only when named.
    ci
        Interval of the mean, one method or a mapping metric -> method. ``auto``: Wilson for
        binary metrics, Hall's skewness-corrected t interval otherwise (``hall``,
        :func:`~hylo_analytics.stats.hall_ci`: closed form, it holds its coverage on skewed
        metrics such as latencies and counts as the studentized bootstrap does, 0.92 at n = 20
        on lognormal data where t gives 0.87; ``benchmarks/bench_coverage.py``), the
        percentile bootstrap when ``stratify`` is set. ``studentized`` is the bootstrap-t
        (10,000 resamples by default). ``normal`` is ``mean -/+ z * stderr`` (warns for 0/1
        metrics with fewer than 10 successes or failures, where it is known to fail).
    reducer
        How several epochs of one key are reduced first (``mean``, ``median``, ``max``, ``min``,
        ``at_least(k)``, ``pass_at_k(k)``), recorded in the ``reducer`` column; ``None`` keeps
        every row. Needs a ``key`` column; without one no reduction happens (``reducer`` none).
        ``reduce=`` is its deprecated alias (one release), as ``compare_scores`` names it.
    stratify
        Column (usually ``task_id``) whose levels the bootstrap resamples within, as rliable.
    cluster
        Column (usually ``task_id``) whose values cluster the rows (the seeds of a task; null
        values together one cluster), when the population is the clusters: ``auto`` is then
        the CR2 cluster-robust interval on Bell-McCaffrey df for every group (``ci_method``
        ``cr2``, :mod:`hylo_analytics.stats.clustered`; a group of one cluster has none),
        and the rows gain ``n_clusters``, ``stderr_clustered`` and
        ``stderr_clustered_corrected`` (x G/(G-1); Miller 2024). An explicit ``ci`` is kept.
    errors
        ``failure``: an errored key of a 0/1 metric counts as 0; ``exclude``: it abstains;
        None (default): each run's harness convention (vla-eval counts failures, Inspect and
        hylo exclude). Named per row in ``errors``; ``n_errors`` counts them either way.
    optimality_threshold
        rliable's optimality gap ``mean(max(threshold - x, 0))`` on normalized values (raw
        when the metric has no normalizer); only for higher-is-better metrics, else null.
    """
    reduce = cast(
        "str | Reducer | None", renamed("reduce", "reducer", reduce, reducer, "aggregate", "mean")
    )
    reg = registry or default_registry()
    errors = check_errors(errors, "aggregate: errors")
    not_binary = _not_binary(reg)
    by = [c for c in dict.fromkeys(by) if c != "metric"]  # every row is per metric anyway
    wanted = _check_statistics(statistics)
    keep = None if metrics is None else [reg.resolve(m) if m in reg else m for m in metrics]
    extra = [c for c in (stratify, cluster) if c]
    with ExitStack() as stack:
        if isinstance(scores, ParquetStore):
            rows, how = _store_rows(
                scores, by, source, extra, keep, reg, reduce, runs, metrics, stack, errors
            )
            errors_known = True
        else:
            frame = _load(scores, by, source, extra)
            if runs is not None:
                if "run_id" not in frame.columns:
                    raise InputError(
                        "aggregate: runs= given but the scores have no 'run_id' column; drop runs= "
                        "or pass scores with a run_id column"
                    )
                frame = frame.filter(pl.col("run_id").is_in(list(runs)))
            errors_known = "errored" in frame.columns
            frame = frame.with_columns(metric=pl.col("metric").replace(reg.alias_map()))
            if metrics is not None and keep is not None:
                present = set(frame["metric"].unique().to_list())
                _check_present(metrics, keep, present)
                frame = frame.filter(pl.col("metric").is_in(keep))
            frame, how = _prepare(frame, by, extra, reduce, lone=False, errors=errors)
            rows = stack.enter_context(frame_rows(frame, by, not_binary))
        return _aggregate(
            rows, by, reg, how, wanted, ci, IntervalSpec("auto", level, n_resamples, seed),
            stratify, cluster, optimality_threshold, errors_known,
        )  # fmt: skip


def _aggregate(
    rows: GroupRows,
    by: list[str],
    reg: MetricRegistry,
    how: Reducer | None,
    wanted: list[str],
    ci: CIMethod | Mapping[str, CIMethod],
    spec: IntervalSpec,
    stratify: str | None,
    cluster: str | None,
    threshold: float,
    errors_known: bool,
) -> pl.DataFrame:
    """Statistics, then intervals, of the rows (validity columns, epochs reduced)."""
    stats = rows.statistics(_norms(reg), threshold)
    out = _statistics(stats, rows.reasons(), by, reg, errors_known)
    out = out.with_columns(reducer=pl.lit(str(how) if how else "none"))
    if cluster:
        fetched, used, fit = _cluster_fit(out, rows, by, cluster)
        out = _with_intervals(out, rows, ci, spec, stratify, (used, fit))
        out = _with_clustered(out, fetched)
    else:
        out = _with_intervals(out, rows, ci, spec, stratify)
    out = out.sort([*by, "metric"], nulls_last=True)
    return _order(out, by, wanted, cluster is not None)


def _norms(reg: MetricRegistry) -> dict[str, tuple[str, float, float]]:
    """metric id -> its normalizer (kind, lo, hi), for the registered metrics that have one."""
    out = {}
    for m in reg.ids():
        parsed = _parse_normalizer(reg.get(m).normalizer, m)
        if parsed is not None:
            out[m] = parsed
    return out


def _kinds(stats: pl.DataFrame, reg: MetricRegistry) -> pl.Series:
    """Each group's kind: the metric's declared kind, or (for a metric only the data knows)
    binary when every valid value of the group is 0 or 1.

    A property of the group's own values, never of the other groups of the call: a run
    aggregated alone gets the interval it gets among others. A "binary" metric holding
    other values (a grader's 0.5) cannot take binomial intervals: continuous there.
    """
    declared = {m: reg.get(m).kind for m in stats["metric"].unique().to_list() if m in reg}
    kind = pl.col("metric").replace_strict(declared, default=None, return_dtype=pl.String)
    return stats.select(
        pl.when(pl.col("_is01") & kind.is_in(["binary"]).fill_null(True))
        .then(pl.lit("binary"))
        .otherwise(kind.replace("binary", "continuous").fill_null("continuous"))
    ).to_series()


def _statistics(
    stats: pl.DataFrame,
    reasons: pl.DataFrame,
    by: list[str],
    reg: MetricRegistry,
    errors_known: bool,
) -> pl.DataFrame:
    keys = [*by, "metric"]
    metrics = stats["metric"].unique().to_list()
    higher = {m: reg.spec_or_default(m).higher_is_better for m in metrics}
    skips = (
        reasons.sort("_reason")
        .group_by(keys)
        .agg(skip_breakdown=pl.struct(reason="_reason", count=pl.col("count").cast(pl.Int64)))
    )
    out = stats.with_columns(_kind=_kinds(stats, reg)).with_row_index("_g")
    return (
        out.join(skips, on=keys, how="left", nulls_equal=True)
        .sort("_g")
        .with_columns(
            n_total=pl.col("n_total").cast(pl.Int64),
            n_valid=pl.col("n_valid").cast(pl.Int64),
            n_errors=(pl.col("n_errors") if errors_known else pl.lit(None)).cast(pl.Int64),
            errors=pl.col("errors").cast(pl.String),
            skip_breakdown=pl.col("skip_breakdown").fill_null(pl.lit([], dtype=_REASON)),
        )
        .with_columns(
            n_skipped=pl.col("n_total") - pl.col("n_valid"),
            coverage=pl.col("n_valid") / pl.col("n_total"),
            stderr=pl.col("std") / pl.col("n_valid").sqrt(),
            optimality_gap=pl.when(
                pl.col("metric").is_in([m for m, h in higher.items() if h])
            ).then(pl.col("_gap")),
            higher_is_better=pl.col("metric").replace_strict(higher, return_dtype=pl.Boolean),
        )
    )


def _check_statistics(statistics: Sequence[str] | None) -> list[str]:
    if statistics is None:
        return list(STATISTICS)
    known = (*STATISTICS, *ON_REQUEST)
    unknown = [s for s in statistics if s not in known]
    if unknown:
        raise InputError(
            f"aggregate: unknown statistics {unknown}{did_you_mean(unknown, known)}; known: "
            f"{', '.join(known)}"
        )
    return list(statistics)


def _order(out: pl.DataFrame, by: list[str], wanted: list[str], clustered: bool) -> pl.DataFrame:
    counts = ["n_total", "n_valid", "n_skipped", "skip_breakdown", "coverage"]
    interval = ["ci_low", "ci_high", "ci_level", "ci_method"]
    stats = ["mean", *(s for s in STATISTICS[1:] if s in wanted)]
    if "sum" in wanted:  # the sum of no valid value is unknown, not 0
        out = out.with_columns(sum=pl.when(pl.col("n_valid") > 0).then(pl.col("_sum")))
        stats.append("sum")
    extra = ["n_clusters", "stderr_clustered", "stderr_clustered_corrected"] if clustered else []
    head = [*by, "metric", "reducer", *counts[:3], "n_errors", "errors", *counts[3:]]
    cols = [*head, *stats, *interval, *extra, "higher_is_better"]
    return out.select(cols)
