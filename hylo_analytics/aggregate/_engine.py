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
"""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from typing import Any, Literal

import numpy as np
import polars as pl

from hylo_analytics._harness import Errors, check_errors, policy_column
from hylo_analytics._text import did_you_mean
from hylo_analytics.aggregate._query import GroupRows, frame_rows, q
from hylo_analytics.metrics import MetricRegistry, _parse_normalizer, default_registry
from hylo_analytics.resolution import EPISODE_VIEW, preferred_query, run_filter
from hylo_analytics.stats import intervals
from hylo_analytics.stats.bootstrap import DEFAULT_RESAMPLES, Seed, bootstrap_ci
from hylo_analytics.stats.intervals import DEFAULT_LEVEL
from hylo_analytics.stats.reducers import Reducer, reduce_epochs, reducer
from hylo_analytics.store import ParquetStore, pinned

__all__ = ["CI_METHODS", "STATISTICS", "aggregate_scores"]

CIMethod = Literal[
    "auto", "wilson", "clopper_pearson", "normal", "hall", "percentile", "bca", "studentized",
    "none",
]  # fmt: skip
CI_METHODS: tuple[str, ...] = (
    "auto", "wilson", "clopper_pearson", "normal", "hall", "percentile", "bca", "studentized",
    "none",
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
    errors: Errors | None = None,
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
    reduce
        How several epochs of one key are reduced first (``mean``, ``median``, ``max``, ``min``,
        ``at_least(k)``, ``pass_at_k(k)``), recorded in the ``reducer`` column; ``None`` keeps
        every row. Needs a ``key`` column; without one no reduction happens (``reducer`` none).
    stratify
        Column (usually ``task_id``) whose levels the bootstrap resamples within, as rliable.
    cluster
        Column (usually ``task_id``) for the clustered standard error (Miller 2024): adds
        ``n_clusters``, ``stderr_clustered`` and ``stderr_clustered_corrected`` (x G/(G-1)).
    errors
        ``failure``: an errored key of a 0/1 metric counts as 0; ``exclude``: it abstains;
        None (default): each run's harness convention (vla-eval counts failures, Inspect and
        hylo exclude). Named per row in ``errors``; ``n_errors`` counts them either way.
    optimality_threshold
        rliable's optimality gap ``mean(max(threshold - x, 0))`` on normalized values (raw
        when the metric has no normalizer); only for higher-is-better metrics, else null.
    """
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
                    raise ValueError(
                        "aggregate: runs= given but the scores have no 'run_id' column"
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
            rows, by, reg, how, wanted, ci, level, seed, n_resamples, stratify, cluster,
            optimality_threshold, errors_known,
        )  # fmt: skip


def _prepare(
    frame: pl.DataFrame,
    by: Sequence[str],
    extra: Sequence[str],
    reduce: str | Reducer | None,
    *,
    lone: bool,
    errors: Errors | None,
) -> tuple[pl.DataFrame, Reducer | None]:
    """The validity columns, then the epochs of a key reduced (when asked and keyed)."""
    frame = _validity(frame, errors)
    how = reducer(reduce) if reduce is not None and "key" in frame.columns else None
    if how is not None:
        # Scores of one episode from two sources are not epochs: keep them apart (visible in
        # the counts) rather than average two scorers; pass source= to choose one. Resolved
        # scores have one per episode, and the epochs of a key may come from two sources.
        unit = [c for c in ("run_id", "source", "key") if c in frame.columns]
        if "source" in unit and _one_per_episode(frame):
            unit.remove("source")
        keys = list(dict.fromkeys([*by, *unit, "metric", *extra, "_policy"]))
        frame = _reduce(frame, keys, how, lone=lone)
    cols = [
        *dict.fromkeys([*by, *extra]), "metric", "_value", "_valid", "_reason", "_errored",
        "_policy",
    ]  # fmt: skip
    return frame.select(list(dict.fromkeys(cols))), how


def _aggregate(
    rows: GroupRows,
    by: list[str],
    reg: MetricRegistry,
    how: Reducer | None,
    wanted: list[str],
    ci: CIMethod | Mapping[str, CIMethod],
    level: float,
    seed: Seed,
    n_resamples: int,
    stratify: str | None,
    cluster: str | None,
    threshold: float,
    errors_known: bool,
) -> pl.DataFrame:
    """Statistics, then intervals, of the rows (validity columns, epochs reduced)."""
    stats = rows.statistics(_norms(reg), threshold)
    out = _statistics(stats, rows.reasons(), by, reg, errors_known)
    out = out.with_columns(reducer=pl.lit(str(how) if how else "none"))
    out = _with_intervals(out, rows, ci, level, seed, n_resamples, stratify)
    if cluster:
        out = _with_clustered(out, rows, by, cluster)
    out = out.sort([*by, "metric"], nulls_last=True)
    return _order(out, by, wanted, cluster is not None)


def _check_present(
    metrics: Sequence[str],
    keep: Sequence[str],
    present: set[str],
    listed: set[str] | None = None,
) -> None:
    """Every asked metric has scores; the message lists ``listed`` (default ``present``)."""
    absent = [m for m, k in zip(metrics, keep, strict=True) if k not in present]
    if absent:
        held = sorted(present if listed is None else listed)
        near = {m: difflib.get_close_matches(m, held, n=1) for m in absent}
        hint = "".join(f"; did you mean {c[0]!r} for {m!r}?" for m, c in near.items() if c)
        raise ValueError(
            f"aggregate: no scores of metric(s) {absent}{hint}; the scores hold "
            f"{', '.join(held) or 'none'}"
        )


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


def _store_rows(
    store: ParquetStore,
    by: Sequence[str],
    source: str | Sequence[str] | None,
    extra: Sequence[str],
    keep: Sequence[str] | None,
    reg: MetricRegistry,
    reduce: str | Reducer | None,
    runs: Sequence[str] | None,
    asked: Sequence[str] | None,
    stack: ExitStack,
    errors: Errors | None,
) -> tuple[GroupRows, Reducer | None]:
    """The resolved scores of the metrics ``keep`` (every metric when None) of ``runs``
    (every run when None), as rows for :class:`GroupRows`: only the columns asked.

    One resolved score per (run, key, epoch, metric), of one source when asked for; the
    epochs of a key may then come from different sources: they are still epochs. A store
    whose asked keys have one epoch each (``n_key_epochs``, counted at publish) needs no
    reduction: its rows stay in DuckDB, read where they lie. Otherwise they are read and
    reduced here, and the reduced rows registered. Each row carries its errors policy
    (``_policy``: ``errors``, else its run's harness convention).
    """
    metrics = _names_of(keep, reg)
    runs = run_filter(store, runs)
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
    of_run = [c for c in dict.fromkeys((*by, *extra)) if c not in have and c in _RUN_COLUMNS]
    wanted = ("metric", "value", *by, *extra)
    missing = [c for c in wanted if c not in have and c not in of_run]
    if missing:
        known = [*have, *(c for c in _RUN_COLUMNS if c not in have)]
        near = {c: difflib.get_close_matches(c, known, n=1) for c in missing}
        hint = "".join(f"; did you mean {m[0]!r} for {c!r}?" for c, m in near.items() if m)
        raise ValueError(
            f"aggregate: scores have no column(s) {missing}{hint} (columns: {', '.join(known)})"
        )
    epochs = "max(n_key_epochs)" if "n_key_epochs" in have else "2"
    names = store.sql(
        f"select metric, {epochs} as epochs from ({query}) group by metric", params or None
    )
    aliases = reg.alias_map()
    present = {aliases.get(n, n) for n in names["metric"].to_list()}
    if asked is not None and keep is not None and any(k not in present for k in keep):
        every = store.sql("select distinct metric from int_scores_preferred")["metric"]
        _check_present(asked, keep, present, {aliases.get(n, n) for n in every.to_list()})
    merges = len(present) < names.height  # an id and its alias: two names read as one
    how = reducer(reduce) if reduce is not None else None
    one_epoch = bool((names["epochs"] <= 1).all())
    direct = how is None or (not merges and one_epoch and how.name in _IDENTITY_ON_ONE)
    # source stays out: the resolution gives one score per episode whatever its sources
    more = ("run_id", "key", "epoch", "n_key_epochs", "valid", "skip_reason", "errored")
    cols = list(dict.fromkeys([*wanted, *(c for c in more if c in have)]))
    select = ", ".join(f"s.{q(c)}" if c in have else f"r.{q(c)}" for c in cols)
    of_run_sql = [q(c) for c in of_run]
    if errors is None:  # each run's harness convention
        of_run_sql.append("run_errors(errors_policy, source_format) as _policy")
        select += ", r._policy"
    else:
        params["errors"] = errors
        select += ", cast($errors as varchar) as _policy"
    joined = (
        f" left join (select run_id, {', '.join(of_run_sql)} from stg_runs) as r"
        " on r.run_id = s.run_id"
        if of_run_sql
        else ""
    )
    rows = f"(select {select} from ({query}) as s{joined})"
    not_binary = _not_binary(reg)
    if not direct:
        frame = store.sql(f"select * from {rows}", params or None)
        frame = frame.with_columns(pl.col("value").cast(pl.Float64))
        frame = frame.with_columns(metric=pl.col("metric").replace(aliases))
        frame, how = _prepare(frame, by, extra, reduce, lone=not merges, errors=errors)
        return stack.enter_context(frame_rows(frame, by, not_binary)), how
    renamed = "metric"
    for i, name in enumerate(n for n in names["metric"].to_list() if aliases.get(n, n) != n):
        params |= {f"al{i}": name, f"id{i}": aliases[name]}
        renamed = f"case when metric = $al{i} then $id{i} else {renamed} end"
    ok = "value is not null and not isnan(value) and coalesce(valid, true)"
    reason = (
        "coalesce(skip_reason, case when value is null then 'abstained' "
        "when isnan(value) then 'nan' else 'invalid' end)"
    )
    keys = "".join(f"{q(c)}, " for c in dict.fromkeys([*by, *extra]) if c != "metric")
    relation = f"""(
        select {keys}{renamed} as metric,
            case when _ok then value end as _value,
            _ok as _valid,
            case when _ok then null else {reason} end as _reason,
            errored and not _ok as _errored,
            _policy
        from (select *, cast(value as double) as value, {ok} as _ok from {rows})
    )"""
    rows_ = GroupRows(
        run=_runner(store), relation=relation, by=tuple(by), params=params,
        fill=_may_fail(store, errors, runs), not_binary=not_binary,
    )  # fmt: skip
    return rows_, how


def _not_binary(reg: MetricRegistry) -> tuple[str, ...]:
    """The registered metrics (ids and aliases) declared of a kind other than binary."""
    names = {n for m in reg.ids() if reg.get(m).kind != "binary" for n in (m, *reg.get(m).aliases)}
    return tuple(sorted(names))


def _may_fail(store: ParquetStore, errors: Errors | None, runs: Sequence[str] | None) -> bool:
    """Whether a row of ``runs`` can count an error as a failure (so the fill is needed)."""
    if errors is not None:
        return errors == "failure"
    where = "run_errors(errors_policy, source_format) = 'failure'"
    if runs is None:
        return bool(store.sql(f"select count(*) as n from stg_runs where {where}").item())
    found = store.sql(
        f"select count(*) as n from stg_runs where {where} and list_contains($runs, run_id)",
        {"runs": list(runs)},
    )
    return bool(found.item())


def _runner(store: ParquetStore) -> Callable[[str, Mapping[str, Any]], pl.DataFrame]:
    def run(query: str, params: Mapping[str, Any]) -> pl.DataFrame:
        return store.sql(query, dict(params) or None)

    return run


def _names_of(keep: Sequence[str] | None, reg: MetricRegistry) -> list[str] | None:
    """Every stored name that reads as one of ``keep`` (ids and their aliases)."""
    if keep is None:
        return None
    return sorted({*keep, *(a for a, m in reg.alias_map().items() if m in keep)})


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


def _validity(frame: pl.DataFrame, errors: Errors | None = None) -> pl.DataFrame:
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
    policy = policy_column(frame.columns, errors)
    return frame.with_columns(
        _valid=ok,
        _value=pl.when(ok).then(value),
        _reason=pl.when(ok).then(None).otherwise(reason.fill_null(fallback)),
        _errored=errored,
        _policy=policy,
    )


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


def _with_intervals(
    out: pl.DataFrame,
    rows: GroupRows,
    ci: CIMethod | Mapping[str, CIMethod],
    level: float,
    seed: Seed,
    n_resamples: int,
    stratify: str | None,
) -> pl.DataFrame:
    """Each group's interval by its method. Groups resampled together share a path: 0/1
    values, -1/0/1 values, others (``_path``), so a group's bounds depend on its values, the
    seed and the method alone."""
    # the method of each (metric, kind): a handful of pairs, joined onto the groups
    pairs = out.select("metric", "_kind").unique(maintain_order=True)
    methods = pairs.with_columns(
        ci_method=pl.Series(
            [_method(m, k, ci, stratify is not None) for m, k in pairs.iter_rows()],
            dtype=pl.String,
        )
    )
    out = out.join(
        methods, on=["metric", "_kind"], how="left", nulls_equal=True, maintain_order="left"
    ).with_columns(
        _path=pl.when(pl.col("_is01")).then(0).when(pl.col("_is101")).then(1).otherwise(2),
    )
    low = np.full(out.height, np.nan)
    high = np.full(out.height, np.nan)
    n_valid = out["n_valid"].to_numpy()
    boot = out.filter(pl.col("ci_method").is_in(["percentile", "bca", "studentized"]))
    values = np.zeros(0)
    at = np.zeros(0, dtype=np.int64)
    strata: pl.DataFrame | None = None
    if boot.height:
        values, strata = rows.values(sorted(set(boot["metric"].to_list())), stratify)
        # where each fetched group's values start: the fetched groups are the groups (in
        # order) of those metrics with a valid value
        fetched = out.filter(
            pl.col("metric").is_in(boot["metric"].unique().implode()) & (pl.col("n_valid") > 0)
        )
        at = np.full(out.height, -1, dtype=np.int64)
        sizes = fetched["n_valid"].to_numpy()
        at[fetched["_g"].to_numpy()] = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    for (name, path), rows_m in out.group_by(["ci_method", "_path"], maintain_order=True):
        if name == "none":
            continue
        idx = rows_m["_g"].to_numpy()
        k, n = rows_m["_sum"].fill_null(0).to_numpy(), rows_m["n_valid"].to_numpy()
        if name in ("wilson", "clopper_pearson"):
            fn = intervals.wilson if name == "wilson" else intervals.clopper_pearson
            low[idx], high[idx] = fn(k, n, level)
        elif name == "hall":
            moments = [rows_m[c].fill_null(np.nan).to_numpy() for c in ("mean", "std", "_skew")]
            low[idx], high[idx] = intervals.hall_ci(moments[0], moments[1], moments[2], n, level)
        elif name == "normal":
            mean, se = rows_m["mean"].fill_null(np.nan), rows_m["stderr"].fill_null(np.nan)
            low[idx], high[idx] = intervals.normal_ci(mean.to_numpy(), se.to_numpy(), level)
            binary = (rows_m["_kind"] == "binary").to_numpy()
            weak = binary & (np.minimum(k, n - k) < 10) & (n > 0)
            if weak.any():
                warnings.warn(
                    f"aggregate: ci='normal' on {int(weak.sum())} 0/1 group(s) with fewer than "
                    "10 successes or failures: the Wald interval covers far less than its level "
                    "there (0.64 at p = 0.95, n = 20); use 'wilson'",
                    intervals.StatisticsWarning,
                    stacklevel=5,
                )
        else:
            sub = idx[n_valid[idx] > 0]
            if not len(sub):
                continue
            # the positions of the groups' values, back to back (no loop over groups)
            lens = n_valid[sub]
            first = np.concatenate([[0], np.cumsum(lens)[:-1]])
            take = np.arange(lens.sum()) + np.repeat(at[sub] - first, lens)
            strata_sizes = None
            if strata is not None:
                strata_sizes = _strata_sizes(strata, out, sub)
            lo, hi = bootstrap_ci(
                values[take],
                n_valid[sub],
                method=name,
                level=level,
                strata_sizes=strata_sizes,
                n_resamples=n_resamples,
                seed=seed,
                binary=path == 0,
            )
            low[sub], high[sub] = lo, hi
    return out.with_columns(
        ci_low=pl.Series(low).fill_nan(None),
        ci_high=pl.Series(high).fill_nan(None),
        ci_level=pl.when(pl.col("ci_method") != "none").then(pl.lit(level)),
    )


def _strata_sizes(strata: pl.DataFrame, out: pl.DataFrame, sub: np.ndarray) -> np.ndarray:
    """The stratum sizes of groups ``sub`` (ascending), from the (group, stratum) counts in
    group order."""
    keys = [c for c in strata.columns[:-2]]  # the by columns and the metric
    numbered = strata.join(
        out.select([*keys, "_g"]), on=keys, how="left", nulls_equal=True, maintain_order="left"
    )
    picked = numbered.filter(pl.col("_g").is_in(pl.Series(sub).cast(pl.UInt32).implode()))
    sizes: np.ndarray = picked["len"].to_numpy()
    return sizes


def _with_clustered(
    out: pl.DataFrame, rows: GroupRows, by: list[str], cluster: str
) -> pl.DataFrame:
    keys = [*by, "metric"]
    fetched = rows.clustered(cluster).join(
        out.select([*keys, "_g"]), on=keys, how="inner", nulls_equal=True
    )
    g = fetched["_g"].to_numpy()
    values, clusters = fetched["_value"].to_numpy(), fetched["_cluster"].to_numpy()
    plain = intervals.clustered_stderr(values, clusters, g)
    corrected = intervals.clustered_stderr(values, clusters, g, small_sample=True)
    counts = fetched.group_by("_g").agg(n_clusters=pl.col("_cluster").n_unique().cast(pl.Int64))
    used = np.unique(g)
    se = pl.DataFrame(
        {
            "_g": used.astype(np.uint32),
            "stderr_clustered": plain,
            "stderr_clustered_corrected": corrected,
        }
    ).join(counts.with_columns(pl.col("_g").cast(pl.UInt32)), on="_g")
    return out.join(se.with_columns(pl.all().fill_nan(None)), on="_g", how="left")


def _method(metric: str, kind: str, ci: CIMethod | Mapping[str, CIMethod], stratified: bool) -> str:
    chosen = ci.get(metric, "auto") if isinstance(ci, Mapping) else ci
    if chosen not in CI_METHODS:
        raise ValueError(f"aggregate: unknown ci method {chosen!r}; known: {', '.join(CI_METHODS)}")
    if chosen == "auto":
        if kind == "binary":
            return "wilson"
        return "percentile" if stratified else "hall"
    if chosen in _BINARY_ONLY and kind != "binary":
        raise ValueError(
            f"aggregate: ci={chosen!r} needs 0/1 values but metric {metric!r} is {kind}; "
            f"pass a mapping, e.g. ci={{{metric!r}: 'bca'}}"
        )
    return chosen


def _check_statistics(statistics: Sequence[str] | None) -> list[str]:
    if statistics is None:
        return list(STATISTICS)
    known = (*STATISTICS, *ON_REQUEST)
    unknown = [s for s in statistics if s not in known]
    if unknown:
        raise ValueError(
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
