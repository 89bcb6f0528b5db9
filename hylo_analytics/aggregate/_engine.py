"""Aggregate scores: one row per group and metric, with counts, statistics and an interval.

``aggregate_scores`` is a group-by. It returns a plain polars frame (composable: filter, join, chart
it) with one row per group and metric; :class:`AggregateResult` (``results.py``) is the
per-row object view of the same data (``result.py``). Abstentions (null ``value``, ``valid = false`` or NaN)
are never averaged as 0: they are counted in ``n_skipped`` and broken down by reason in
``skip_breakdown``, a ``List[Struct{reason: str, count: i64}]`` sorted by reason (a list, not a
struct, because each group has its own set of reasons). ``n_total == n_valid + sum(count)``
holds in every row. For binary metrics ``success_rate_errors_as_failures`` is shown next to
``mean`` (abstentions excluded), never instead of it: errored keys (``errored``: the episode's
sample status is ``error``) count as 0, over ``n_valid + n_errors``; other abstentions stay out.
A frame without an ``errored`` column has no known errors, so that rate and ``n_errors`` are
null there.

From a store the scores are the one score resolution (:mod:`hylo_analytics.resolution`: one
score per run, key, epoch and metric); ``source=`` reads one source through the same view. The
mart views (``mart_aggregate_run``, ``mart_success_rates``, ...) give the same figures (tested).
On a plain frame, the epoch reducer keeps sources apart, so a key scored by two sources counts
twice (visibly, in ``n_total``) rather than averaging two scorers.
"""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Literal

import numpy as np
import polars as pl

from hylo_analytics.metrics import MetricRegistry, MetricSpec, default_registry, normalize_expr
from hylo_analytics.resolution import EPISODE_VIEW, preferred_query
from hylo_analytics.stats import intervals
from hylo_analytics.stats.bootstrap import DEFAULT_RESAMPLES, Seed, bootstrap_ci
from hylo_analytics.stats.intervals import DEFAULT_LEVEL
from hylo_analytics.stats.reducers import Reducer, reduce_epochs, reducer
from hylo_analytics.store import ParquetStore, pinned

__all__ = ["CI_METHODS", "STATISTICS", "aggregate_scores"]

CIMethod = Literal[
    "auto", "wilson", "clopper_pearson", "normal", "percentile", "bca", "studentized", "none"
]
CI_METHODS: tuple[str, ...] = (
    "auto", "wilson", "clopper_pearson", "normal", "percentile", "bca", "studentized", "none",
)  # fmt: skip
STATISTICS: tuple[str, ...] = (
    "mean", "std", "stderr", "median", "p95", "min", "max", "iqm", "optimality_gap",
    "normalized_mean",
)  # fmt: skip
# Computed for every group but a column only when asked for (``statistics=[..., "sum"]``): the
# scorecard reads it for a metric whose aggregator is ``sum``; the default frame stays as it was.
ON_REQUEST: tuple[str, ...] = ("sum",)
_BINARY_ONLY = ("wilson", "clopper_pearson")
_RUN_COLUMNS = (
    "agent_name", "agent_version", "benchmark_id", "benchmark_version", "split", "source_format",
)  # fmt: skip
# reducers whose value of one epoch is that epoch's value (its reason, its error)
_IDENTITY_ON_ONE = ("mean", "median", "max", "min")
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
    seed: Seed = 0,
    n_resamples: int = DEFAULT_RESAMPLES,
    reduce: str | Reducer | None = "mean",
    stratify: str | None = None,
    cluster: str | None = None,
    optimality_threshold: float = 1.0,
    source: str | Sequence[str] | None = None,
    registry: MetricRegistry | None = None,
    runs: Sequence[str] | None = None,
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
        binary metrics, the studentized bootstrap otherwise (it holds its coverage on skewed
        metrics such as latencies: 0.93 at n = 20 on lognormal data, where the percentile
        bootstrap gives 0.86; ``benchmarks/bench_coverage.py``), the percentile bootstrap when
        ``stratify`` is set. ``normal`` is ``mean -/+ z * stderr`` (warns for 0/1 metrics with
        fewer than 10 successes or failures, where it is known to fail).
    reduce
        How several epochs of one key are reduced first (``mean``, ``median``, ``max``, ``min``,
        ``at_least(k)``, ``pass_at_k(k)``), recorded in the ``reducer`` column; ``None`` keeps
        every row. Needs a ``key`` column; without one no reduction happens (``reducer`` none).
    stratify
        Column (usually ``task_id``) whose levels the bootstrap resamples within, as rliable.
    cluster
        Column (usually ``task_id``) for the clustered standard error (Miller 2024): adds
        ``n_clusters``, ``stderr_clustered`` and ``stderr_clustered_corrected`` (x G/(G-1)).
    optimality_threshold
        rliable's optimality gap ``mean(max(threshold - x, 0))`` on normalized values (raw
        when the metric has no normalizer); only for higher-is-better metrics, else null.
    """
    reg = registry or default_registry()
    by = [c for c in dict.fromkeys(by) if c != "metric"]  # every row is per metric anyway
    wanted = _check_statistics(statistics)
    keep = None if metrics is None else [reg.resolve(m) if m in reg else m for m in metrics]
    extra = [c for c in (stratify, cluster) if c]
    if isinstance(scores, ParquetStore):
        frame = _load_store(scores, by, source, extra, _names_of(keep, reg), runs)
    else:
        frame = _load(scores, by, source, extra)
        if runs is not None:
            if "run_id" not in frame.columns:
                raise ValueError("aggregate: runs= given but the scores have no 'run_id' column")
            frame = frame.filter(pl.col("run_id").is_in(list(runs)))
    errors_known = "errored" in frame.columns
    # the store counts a key's epochs per stored name: exact unless two names read as one
    lone = isinstance(scores, ParquetStore) and not _merges_names(frame, reg)
    frame = frame.with_columns(metric=pl.col("metric").replace(reg.alias_map()))
    if metrics is not None and keep is not None:
        present = set(frame["metric"].unique().to_list())
        absent = [m for m, k in zip(metrics, keep, strict=True) if k not in present]
        if absent:
            if isinstance(scores, ParquetStore):  # the store's every metric, for the message
                every = scores.sql("select distinct metric from int_scores_preferred")["metric"]
                present = set(every.replace(reg.alias_map()).to_list())
            raise ValueError(
                f"aggregate: no scores of metric(s) {absent}; the scores hold "
                f"{', '.join(sorted(present)) or 'none'}"
            )
        frame = frame.filter(pl.col("metric").is_in(keep))
    frame = _validity(frame)
    how = reducer(reduce) if reduce is not None and "key" in frame.columns else None
    if how is not None:
        # Scores of one episode from two sources are not epochs: keep them apart (visible in
        # the counts) rather than average two scorers; pass source= to choose one. Resolved
        # scores have one per episode, and the epochs of a key may come from two sources.
        unit = [c for c in ("run_id", "source", "key") if c in frame.columns]
        if "source" in unit and _one_per_episode(frame):
            unit.remove("source")
        keys = list(dict.fromkeys([*by, *unit, "metric", *(c for c in (stratify, cluster) if c)]))
        frame = _reduce(frame, keys, how, lone=lone)
    specs = _specs(frame, reg)
    # One sort puts every group's rows together in the output's order (strata within), so the
    # bootstrap reads its values off the frame without a join. The values are sorted too: the
    # resampling weights are then applied to the same values whatever order the store's
    # parallel scan returned the rows in, so one store gives one interval on every run.
    order = [*by, "metric", *([stratify] if stratify else [])]
    frame = frame.with_columns(_norm=_normalized(specs)).sort([*order, "_value"], nulls_last=True)
    out = _statistics(frame, by, specs, optimality_threshold, errors_known)
    out = out.with_columns(reducer=pl.lit(str(how) if how else "none"))
    out = _with_intervals(out, frame, by, specs, ci, level, seed, n_resamples, stratify)
    if cluster:
        out = _with_clustered(out, frame, by, cluster)
    return _order(out, by, wanted, cluster is not None)


def _load(
    scores: pl.DataFrame | pl.LazyFrame,
    by: Sequence[str],
    source: str | Sequence[str] | None,
    extra: Sequence[str],
) -> pl.DataFrame:
    if isinstance(scores, pl.LazyFrame):
        frame = scores.collect()
    elif isinstance(scores, pl.DataFrame):
        frame = scores
    else:
        raise TypeError(
            f"aggregate: expected a polars frame or a Store, got {type(scores).__name__}"
        )
    missing = [c for c in ("metric", "value", *by, *extra) if c not in frame.columns]
    if missing:
        known = list(frame.columns)
        near = {c: difflib.get_close_matches(c, known, n=1) for c in missing}
        hint = "".join(f"; did you mean {m[0]!r} for {c!r}?" for c, m in near.items() if m)
        raise ValueError(
            f"aggregate: scores have no column(s) {missing}{hint} (columns: {', '.join(known)})"
        )
    if source is not None:
        if "source" not in frame.columns:
            raise ValueError("aggregate: source= given but the scores have no 'source' column")
        frame = frame.filter(
            pl.col("source").is_in([source] if isinstance(source, str) else source)
        )
    return frame.with_columns(pl.col("value").cast(pl.Float64))


def _load_store(
    store: ParquetStore,
    by: Sequence[str],
    source: str | Sequence[str] | None,
    extra: Sequence[str],
    metrics: Sequence[str] | None,
    runs: Sequence[str] | None = None,
) -> pl.DataFrame:
    """The resolved scores of ``metrics`` (every metric when None) of ``runs`` (every run when
    None): only the columns asked.

    One resolved score per (run, key, epoch, metric), of one source when asked for; the
    epochs of a key may then come from different sources: they are still epochs. The rows
    carry ``n_key_epochs``, so a key of one epoch needs no reduction (:func:`_reduce`).
    """
    params: dict[str, object] = {}
    if source is not None:
        params["sources"] = [source] if isinstance(source, str) else list(source)
    if metrics is not None:
        params["metrics"] = list(metrics)
    if runs is not None:
        params["runs"] = list(runs)
    query = preferred_query(
        EPISODE_VIEW,
        runs=runs is not None,
        metrics=metrics is not None,
        sources=source is not None,
    )
    have = store.sql(f"select * from ({query}) limit 0", params or None).columns
    # group by what a run is (agent, version, benchmark, split) as well as by its id
    runs = [c for c in dict.fromkeys((*by, *extra)) if c not in have and c in _RUN_COLUMNS]
    asked = ("metric", "value", *by, *extra)
    missing = [c for c in asked if c not in have and c not in runs]
    if missing:
        known = [*have, *(c for c in _RUN_COLUMNS if c not in have)]
        near = {c: difflib.get_close_matches(c, known, n=1) for c in missing}
        hint = "".join(f"; did you mean {m[0]!r} for {c!r}?" for c, m in near.items() if m)
        raise ValueError(
            f"aggregate: scores have no column(s) {missing}{hint} (columns: {', '.join(known)})"
        )
    # source stays out: the resolution gives one score per episode whatever its sources
    wanted = ("run_id", "key", "epoch", "n_key_epochs", "valid", "skip_reason", "errored")
    cols = list(dict.fromkeys([*asked, *(c for c in wanted if c in have)]))
    select = ", ".join(f"s.{c}" if c in have else f"r.{c}" for c in cols)
    joined = (
        f" left join (select run_id, {', '.join(runs)} from stg_runs) as r on r.run_id = s.run_id"
        if runs
        else ""
    )
    frame = store.sql(f"select {select} from ({query}) as s{joined}", params or None)
    return frame.with_columns(pl.col("value").cast(pl.Float64))


def _names_of(keep: Sequence[str] | None, reg: MetricRegistry) -> list[str] | None:
    """Every stored name that reads as one of ``keep`` (ids and their aliases)."""
    if keep is None:
        return None
    return sorted({*keep, *(a for a, m in reg.alias_map().items() if m in keep)})


def _merges_names(frame: pl.DataFrame, reg: MetricRegistry) -> bool:
    """Whether two names of the frame's metrics read as one metric (an id and its alias)."""
    names = frame["metric"].unique().to_list()
    aliases = reg.alias_map()
    return len({aliases.get(n, n) for n in names}) < len(names)


def _reduce(frame: pl.DataFrame, keys: list[str], how: Reducer, *, lone: bool) -> pl.DataFrame:
    """:func:`reduce_epochs`, passing the keys of one epoch (``n_key_epochs``) through.

    A key of one epoch is its own mean, median, max and min: the same row the reducer gives,
    without a group-by over every row. ``lone`` is False when two metric names merged into
    one, so the store's epoch counts (per name) no longer count a group's rows.
    """
    if not (lone and "n_key_epochs" in frame.columns and how.name in _IDENTITY_ON_ONE):
        return reduce_epochs(frame, keys, how)
    one = pl.col("n_key_epochs") == 1
    single = frame.filter(one).select([*keys, "_value", "_valid", "_reason", "_errored"])
    several = frame.filter(~one)
    if several.height:
        reduced = reduce_epochs(several, keys, how).select(single.columns)
        single = pl.concat([single, reduced], how="vertical")
    return single


def _one_per_episode(frame: pl.DataFrame) -> bool:
    episode = [c for c in ("run_id", "key", "epoch", "metric") if c in frame.columns]
    return "epoch" in episode and frame.select(pl.struct(episode).is_unique().all()).item()


def _validity(frame: pl.DataFrame) -> pl.DataFrame:
    """``_valid``/``_value``/``_reason``/``_errored``: a row counts when its value is a real number.

    The same rule as the SQL macro ``score_is_valid`` (the resolution applies it in SQL).
    """
    value = pl.col("value")
    flag = pl.col("valid").fill_null(True) if "valid" in frame.columns else pl.lit(True)
    reason = pl.col("skip_reason") if "skip_reason" in frame.columns else pl.lit(None, pl.String)
    ok = value.is_not_null() & value.is_not_nan() & flag
    fallback = (
        pl.when(value.is_null())
        .then(pl.lit("abstained"))
        .when(value.is_nan())
        .then(pl.lit("nan"))
        .otherwise(pl.lit("invalid"))
    )
    errored = pl.col("errored") & ~ok if "errored" in frame.columns else pl.lit(None, pl.Boolean)
    return frame.with_columns(
        _valid=ok,
        _value=pl.when(ok).then(value),
        _reason=pl.when(ok).then(None).otherwise(reason.fill_null(fallback)),
        _errored=errored,
    )


def _specs(frame: pl.DataFrame, reg: MetricRegistry) -> dict[str, MetricSpec]:
    # Metrics only the data knows are binary when every valid value is 0 or 1.
    summary = frame.group_by("metric").agg(
        binary=(pl.col("_value").is_in([0.0, 1.0]) | pl.col("_value").is_null()).all()
    )
    specs = {}
    for m, b in summary.iter_rows():
        spec = reg.spec_or_default(m, "binary" if b else "continuous")
        # A "binary" metric holding other values (a grader's 0.5) cannot take binomial intervals.
        specs[m] = replace(spec, kind="continuous") if spec.kind == "binary" and not b else spec
    return specs


def _normalized(specs: Mapping[str, MetricSpec]) -> pl.Expr:
    expr: pl.Expr = pl.lit(None, dtype=pl.Float64)
    for m, spec in specs.items():
        norm = normalize_expr(spec, "_value")
        if norm is not None:
            expr = pl.when(pl.col("metric") == m).then(norm).otherwise(expr)
    return expr


def _statistics(
    frame: pl.DataFrame,
    by: list[str],
    specs: Mapping[str, MetricSpec],
    threshold: float,
    errors_known: bool,
) -> pl.DataFrame:
    keys = [*by, "metric"]
    v = pl.col("_value").drop_nulls()
    n = pl.col("_valid").sum()
    k = (n * 0.25).floor().cast(pl.Int64)
    higher = [m for m, s in specs.items() if s.higher_is_better is True]
    binary = [m for m, s in specs.items() if s.kind == "binary"]
    gap_base = pl.coalesce(pl.col("_norm"), pl.col("_value")).drop_nulls()
    stats = frame.group_by(keys).agg(
        n_total=pl.len().cast(pl.Int64),
        n_valid=n.cast(pl.Int64),
        mean=v.mean(),
        std=v.std(ddof=1),
        median=v.median(),
        p95=v.quantile(0.95, "linear"),
        min=v.min(),
        max=v.max(),
        iqm=v.sort().slice(k, n - 2 * k).mean(),
        _gap=(threshold - gap_base).clip(lower_bound=0).mean(),
        normalized_mean=pl.col("_norm").drop_nulls().mean(),
        _sum=v.sum(),
        # null when the frame cannot tell an error from another abstention
        n_errors=(pl.col("_errored").sum() if errors_known else pl.lit(None)).cast(pl.Int64),
    )
    skips = (
        frame.filter(~pl.col("_valid"))
        .group_by([*keys, "_reason"])
        .agg(count=pl.len().cast(pl.Int64))
        .sort("_reason")
        .group_by(keys)
        .agg(skip_breakdown=pl.struct(reason="_reason", count="count"))
    )
    is_bin = pl.col("metric").is_in(binary)
    return (
        stats.join(skips, on=keys, how="left", nulls_equal=True)
        .with_columns(
            skip_breakdown=pl.col("skip_breakdown").fill_null(pl.lit([], dtype=_REASON)),
            n_skipped=pl.col("n_total") - pl.col("n_valid"),
            coverage=pl.col("n_valid") / pl.col("n_total"),
            stderr=pl.col("std") / pl.col("n_valid").sqrt(),
            optimality_gap=pl.when(pl.col("metric").is_in(higher)).then(pl.col("_gap")),
            success_rate_errors_as_failures=pl.when(
                is_bin & (pl.col("n_valid") + pl.col("n_errors") > 0)
            ).then(pl.col("_sum").fill_null(0) / (pl.col("n_valid") + pl.col("n_errors"))),
            higher_is_better=pl.col("metric").replace_strict(
                {m: s.higher_is_better for m, s in specs.items()}, return_dtype=pl.Boolean
            ),
        )
        .sort(keys, nulls_last=True)
    )


def _with_intervals(
    out: pl.DataFrame,
    frame: pl.DataFrame,
    by: list[str],
    specs: Mapping[str, MetricSpec],
    ci: CIMethod | Mapping[str, CIMethod],
    level: float,
    seed: int | np.random.Generator | None,
    n_resamples: int,
    stratify: str | None,
) -> pl.DataFrame:
    methods = {m: _method(m, specs[m], ci, stratify is not None) for m in specs}
    out = out.with_row_index("_g").with_columns(
        ci_method=pl.col("metric").replace_strict(methods, return_dtype=pl.String)
    )
    low = np.full(out.height, np.nan)
    high = np.full(out.height, np.nan)
    n_valid = out["n_valid"].to_numpy()
    for method in sorted(set(methods.values()) - {"none"}):
        rows = out.filter(pl.col("ci_method") == method)
        idx = rows["_g"].to_numpy()
        k, n = rows["_sum"].fill_null(0).to_numpy(), rows["n_valid"].to_numpy()
        if method in ("wilson", "clopper_pearson"):
            fn = intervals.wilson if method == "wilson" else intervals.clopper_pearson
            low[idx], high[idx] = fn(k, n, level)
        elif method == "normal":
            mean, se = rows["mean"].fill_null(np.nan), rows["stderr"].fill_null(np.nan)
            low[idx], high[idx] = intervals.normal_ci(mean.to_numpy(), se.to_numpy(), level)
            binary = np.array([specs[m].kind == "binary" for m in rows["metric"]], dtype=bool)
            weak = binary & (np.minimum(k, n - k) < 10) & (n > 0)
            if weak.any():
                warnings.warn(
                    f"aggregate: ci='normal' on {int(weak.sum())} 0/1 group(s) with fewer than "
                    "10 successes or failures: the Wald interval covers far less than its level "
                    "there (0.64 at p = 0.95, n = 20); use 'wilson'",
                    intervals.StatisticsWarning,
                    stacklevel=4,
                )
        else:
            sub = idx[n_valid[idx] > 0]
            values, strata = _bootstrap_layout(frame, by, rows["metric"].unique(), stratify)
            lo, hi = bootstrap_ci(
                values,
                n_valid[sub],
                method=method,  # type: ignore[arg-type]
                level=level,
                strata_sizes=strata,
                n_resamples=n_resamples,
                seed=seed,
                binary=all(specs[m].kind == "binary" for m in rows["metric"].unique()),
            )
            low[sub], high[sub] = lo, hi
    return out.with_columns(
        ci_low=pl.Series(low).fill_nan(None),
        ci_high=pl.Series(high).fill_nan(None),
        ci_level=pl.when(pl.col("ci_method") != "none").then(pl.lit(level)),
    )


def _bootstrap_layout(
    frame: pl.DataFrame, by: list[str], metrics: pl.Series, stratify: str | None
) -> tuple[np.ndarray, np.ndarray | None]:
    """Valid values of ``metrics``, back to back in output group order (strata within).

    ``frame`` is sorted by the group keys (and ``stratify``) exactly as the output is, and a
    group with no valid value has no rows here, as it has no size in the caller.
    """
    rows = frame.filter(pl.col("_valid") & pl.col("metric").is_in(metrics.implode()))
    values = rows["_value"].to_numpy()
    if not stratify:
        return values, None
    order = [*by, "metric", stratify]
    strata = rows.group_by(order, maintain_order=True).len()["len"].to_numpy()
    return values, strata


def _with_clustered(
    out: pl.DataFrame, frame: pl.DataFrame, by: list[str], cluster: str
) -> pl.DataFrame:
    keys = [*by, "metric"]
    rows = frame.filter(pl.col("_valid")).join(
        out.select([*keys, "_g"]), on=keys, how="inner", nulls_equal=True
    )
    g = rows["_g"].to_numpy()
    values, clusters = rows["_value"].to_numpy(), rows[cluster].cast(pl.String).to_numpy()
    plain = intervals.clustered_stderr(values, clusters, g)
    corrected = intervals.clustered_stderr(values, clusters, g, small_sample=True)
    counts = rows.group_by("_g").agg(n_clusters=pl.col(cluster).n_unique().cast(pl.Int64))
    used = np.unique(g)
    se = pl.DataFrame(
        {
            "_g": used.astype(np.uint32),
            "stderr_clustered": plain,
            "stderr_clustered_corrected": corrected,
        }
    ).join(counts.with_columns(pl.col("_g").cast(pl.UInt32)), on="_g")
    return out.join(se.with_columns(pl.all().fill_nan(None)), on="_g", how="left")


def _method(
    metric: str, spec: MetricSpec, ci: CIMethod | Mapping[str, CIMethod], stratified: bool
) -> str:
    chosen = ci.get(metric, "auto") if isinstance(ci, Mapping) else ci
    if chosen not in CI_METHODS:
        raise ValueError(f"aggregate: unknown ci method {chosen!r}; known: {', '.join(CI_METHODS)}")
    if chosen == "auto":
        if spec.kind == "binary":
            return "wilson"
        return "percentile" if stratified else "studentized"
    if chosen in _BINARY_ONLY and spec.kind != "binary":
        raise ValueError(
            f"aggregate: ci={chosen!r} needs 0/1 values but metric {metric!r} is {spec.kind}; "
            f"pass a mapping, e.g. ci={{{metric!r}: 'bca'}}"
        )
    return chosen


def _check_statistics(statistics: Sequence[str] | None) -> list[str]:
    if statistics is None:
        return list(STATISTICS)
    known = (*STATISTICS, *ON_REQUEST)
    unknown = [s for s in statistics if s not in known]
    if unknown:
        raise ValueError(f"aggregate: unknown statistics {unknown}; known: {', '.join(known)}")
    return list(statistics)


def _order(out: pl.DataFrame, by: list[str], wanted: list[str], clustered: bool) -> pl.DataFrame:
    counts = ["n_total", "n_valid", "n_skipped", "skip_breakdown", "coverage"]
    interval = ["ci_low", "ci_high", "ci_level", "ci_method"]
    # mean first, so the errors-as-failures rate always sits right after it
    stats = ["mean", *(s for s in STATISTICS[1:] if s in wanted)]
    if "sum" in wanted:  # the sum of no valid value is unknown, not 0
        out = out.with_columns(sum=pl.when(pl.col("n_valid") > 0).then(pl.col("_sum")))
        stats.append("sum")
    extra = ["n_clusters", "stderr_clustered", "stderr_clustered_corrected"] if clustered else []
    head = [*by, "metric", "reducer", *counts[:3], "n_errors", *counts[3:]]
    rate = ["success_rate_errors_as_failures"]
    cols = [*head, *stats[:1], *rate, *stats[1:], *interval, *extra, "higher_is_better"]
    return out.select(cols)
