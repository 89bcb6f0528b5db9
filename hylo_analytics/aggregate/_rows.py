"""The rows ``aggregate`` reads: validity columns, the errors policy, epochs reduced.

From a frame (:func:`_load`, :func:`_prepare`) or a store's resolved scores
(:func:`_store_rows`, whose rows stay in DuckDB unless their epochs need reducing), every row
carries ``_value`` (null unless valid), ``_valid``, ``_reason``, ``_errored`` and ``_policy``,
the columns :class:`~hylo_analytics.aggregate._query.GroupRows` aggregates.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from typing import Any

import polars as pl

from hylo_analytics._harness import Errors, policy_column
from hylo_analytics.aggregate._query import GroupRows, frame_rows, q
from hylo_analytics.errors import InputError, InputTypeError, SelectionError
from hylo_analytics.metrics import MetricRegistry
from hylo_analytics.resolution import EPISODE_VIEW, preferred_query, run_filter
from hylo_analytics.stats.reducers import Reducer, reduce_epochs, reducer
from hylo_analytics.store import ParquetStore

_RUN_COLUMNS = (
    "agent_name", "agent_version", "benchmark_id", "benchmark_version", "split", "source_format",
)  # fmt: skip
# reducers whose value of one epoch is that epoch's value (its reason, its error)
_IDENTITY_ON_ONE = ("mean", "median", "max", "min")


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
        raise InputTypeError(
            f"aggregate: expected a polars frame or a Store, got {type(scores).__name__}"
        )
    missing = [c for c in ("metric", "value", *by, *extra) if c not in frame.columns]
    if missing:
        known = list(frame.columns)
        near = {c: difflib.get_close_matches(c, known, n=1) for c in missing}
        hint = "".join(f"; did you mean {m[0]!r} for {c!r}?" for c, m in near.items() if m)
        raise InputError(
            f"aggregate: scores have no column(s) {missing}{hint} (columns: {', '.join(known)})"
        )
    if source is not None:
        if "source" not in frame.columns:
            raise InputError(
                "aggregate: source= given but the scores have no 'source' column; drop source= or "
                "pass scores with a source column"
            )
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
        raise InputError(
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
        raise SelectionError(
            f"aggregate: no scores of metric(s) {absent}{hint}; the scores hold "
            f"{', '.join(held) or 'none'}"
        )
