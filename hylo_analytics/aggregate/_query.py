"""The group statistics of ``aggregate`` in DuckDB: one implementation for a store and a frame.

:func:`~hylo_analytics.aggregate.aggregate_scores` hands every aggregation to this module,
whether its rows are the store's resolved scores (read where they lie, the run filter at the
scan) or a polars frame (registered on a fresh in-memory connection). The rows carry the
validity columns of :func:`~hylo_analytics.aggregate._rows._validity` (``_value``,
``_valid``, ``_reason``, ``_errored``), one per key after any epoch reduction. What leaves
DuckDB is small: one row per group and metric with its counts and statistics, the skip
reasons counted, and the valid values of only the groups a bootstrap resamples, in group
order and sorted within each group (the bootstrap reads values by position).

Every statistic is computed from the group's sorted valid values (``list`` ordered by value),
so it does not depend on how DuckDB's threads split the rows: one store gives one answer on
every call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import duckdb
import numpy as np
import numpy.typing as npt
import polars as pl

from hylo_analytics._sql import duckdb_memory_limit

__all__ = ["GroupRows", "frame_rows", "q"]

Runner = Callable[[str, Mapping[str, Any]], pl.DataFrame]
# (kind, lo, hi) of a metric's normalizer: minmax or inverse_minmax
Normalizer = tuple[str, float, float]


def q(name: str) -> str:
    """``name`` as a quoted SQL identifier (column names are the caller's, never interpolated
    unquoted)."""
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True)
class GroupRows:
    """Rows to aggregate, one per (group, key, metric), as a SQL relation.

    ``relation``: SQL text of the rows (columns: the ``by`` columns, ``metric``, ``_value``
    (null unless valid), ``_valid``, ``_reason``, ``_errored``, ``_policy`` (the row's errors
    policy) and any extra column such as a stratum or a cluster); ``params``: the parameters it reads; ``run``: executes a query.
    """

    run: Runner
    relation: str
    by: tuple[str, ...]
    params: Mapping[str, Any] = field(default_factory=dict)
    # the errors policy applied (hylo_analytics._harness): with ``fill``, an errored row whose
    # ``_policy`` is ``failure`` is a valid 0 when its group's metric is 0/1 (declared binary,
    # or not declared otherwise: ``not_binary`` lists the metrics declared of another kind)
    fill: bool = False
    not_binary: tuple[str, ...] = ()

    def _sql(self, body: str, extra: Mapping[str, Any] | None = None) -> pl.DataFrame:
        params = {**self.params, **(extra or {})}
        if not self.fill:
            return self.run(f"with s as (select * from {self.relation}) {body}", params)
        keys = self._keys()
        on = "".join(f"k.{q(b)} is not distinct from r.{q(b)} and " for b in self.by)
        head = f"""with r as (select * from {self.relation}),
        k as (
            select {keys}metric, bool_and(_value in (0.0, 1.0) or _value is null) as _01
            from r group by all
        ),
        f as (
            select r.*, coalesce(
                r._errored and r._policy = 'failure' and k._01
                    and not list_contains($_not_binary, r.metric),
                false
            ) as _f
            from r join k on {on}k.metric = r.metric
        ),
        s as (
            select * exclude (_f) replace (
                case when _f then 0.0 else _value end as _value,
                _valid or _f as _valid,
                case when _f then null else _reason end as _reason
            ) from f
        )"""
        return self.run(f"{head} {body}", {**params, "_not_binary": list(self.not_binary)})

    def _keys(self) -> str:
        return "".join(f"{q(b)}, " for b in self.by)

    def _order(self) -> str:
        return "".join(f"{q(b)} nulls last, " for b in self.by)

    def statistics(self, norms: Mapping[str, Normalizer], threshold: float) -> pl.DataFrame:
        """One row per (group, metric) in group order (the ``by`` columns then the metric,
        nulls last): counts, sums, mean, std (ddof 1), median, p95 (linear), min, max, the
        interquartile mean, the normalized mean, the optimality gap ``mean(max(threshold -
        x, 0))`` (on normalized values where the metric has a normalizer), errored keys, the
        errors policy of the group's rows (``mixed`` when they differ), the plug-in skewness
        ``m3 / m2**1.5`` (central moments over n; null for a flat group: ``_skew``, Hall's
        interval reads it), and whether every valid value is 0/1 (``_is01``) or -1/0/1
        (``_is101``)."""
        params: dict[str, Any] = {"threshold": float(threshold)}
        # the normalized values of a group: its sorted values mapped (the map is monotone)
        norm = "cast(null as double[])"
        for i, (metric, (kind, lo, hi)) in enumerate(sorted(norms.items())):
            params |= {f"nm{i}": metric, f"lo{i}": lo, f"hi{i}": hi}
            value = f"(x - $lo{i})" if kind == "minmax" else f"($hi{i} - x)"
            mapped = f"list_transform(_vals, lambda x: {value} / ($hi{i} - $lo{i}))"
            norm = f"case when metric = $nm{i} then {mapped} else {norm} end"
        keys = self._keys()
        body = f"""
        , g as (
            select {keys}metric,
                count(*) as n_total,
                count(*) filter (where _valid) as n_valid,
                list_sort(list(_value) filter (where _valid)) as _vals,
                count(*) filter (where _errored) as n_errors,
                case when min(_policy) = max(_policy) then min(_policy) else 'mixed' end
                    as errors,
                bool_and(_value in (0.0, 1.0) or _value is null) as _is01,
                bool_and(_value in (-1.0, 0.0, 1.0) or _value is null) as _is101
            from s
            group by all
        ),
        n as (select *, {norm} as _norms, list_avg(_vals) as _mu from g),
        m as (
            select *,
                list_avg(list_transform(_vals, lambda x: (x - _mu) * (x - _mu))) as _m2,
                list_avg(list_transform(_vals, lambda x: (x - _mu) * (x - _mu) * (x - _mu)))
                    as _m3
            from n
        )
        select {keys}metric, n_total, n_valid, n_errors, errors, _is01, _is101,
            _mu as mean,
            case when _m2 > 0 then _m3 / pow(_m2, 1.5) end as _skew,
            list_aggregate(_vals, 'stddev_samp') as std,
            {_quantile(0.5)} as median,
            {_quantile(0.95)} as p95,
            _vals[1] as min,
            _vals[-1] as max,
            list_avg(list_slice(
                _vals, floor(n_valid * 0.25)::bigint + 1, n_valid - floor(n_valid * 0.25)::bigint
            )) as iqm,
            list_avg(list_transform(coalesce(_norms, _vals), lambda x: greatest($threshold - x, 0)))
                as _gap,
            list_avg(_norms) as normalized_mean,
            coalesce(list_sum(_vals), 0.0) as _sum
        from m
        order by {self._order()}metric
        """
        return self._sql(body, params)

    def moments(self) -> pl.DataFrame:
        """One row per (group, metric) in group order: ``n_total``, ``n_valid``, the valid
        values' ``sum``, ``mean`` and ``var`` (ddof 1; null under two values), ``n_errors``,
        ``errors`` and ``_is01``: an item's samples, as the repeated-sample statistics read
        them (no list per group: a million items are one pass)."""
        keys = self._keys()
        return self._sql(
            f"""select {keys}metric,
                count(*) as n_total,
                count(*) filter (where _valid) as n_valid,
                coalesce(sum(_value) filter (where _valid), 0.0) as sum,
                avg(_value) filter (where _valid) as mean,
                var_samp(_value) filter (where _valid) as var,
                count(*) filter (where _errored) as n_errors,
                case when min(_policy) = max(_policy) then min(_policy) else 'mixed' end
                    as errors,
                bool_and(_value in (0.0, 1.0) or _value is null) as _is01
            from s group by all order by {self._order()}metric"""
        )

    def reasons(self) -> pl.DataFrame:
        """How many rows of each (group, metric) abstained, per reason."""
        keys = self._keys()
        return self._sql(
            f"select {keys}metric, _reason, count(*) as count from s where not _valid "
            f"group by {keys}metric, _reason"
        )

    def values(
        self, metrics: Sequence[str], stratify: str | None = None
    ) -> tuple[npt.NDArray[np.float64], pl.DataFrame | None]:
        """The valid values of ``metrics``, in group order, strata within, sorted within each;
        with ``stratify`` also the size of each (group, stratum) in that order."""
        strat = f"{q(stratify)} nulls last, " if stratify else ""
        where = "where _valid and list_contains($bm, metric)"
        frame = self._sql(
            f"select _value from s {where} order by {self._order()}metric, {strat}_value",
            {"bm": list(metrics)},
        )
        values = frame["_value"].to_numpy().astype(np.float64, copy=False)
        if not stratify:
            return values, None
        sizes = self._sql(
            f"select {self._keys()}metric, {q(stratify)}, count(*) as len from s {where} "
            f"group by all order by {self._order()}metric, {strat.rstrip(', ')}",
            {"bm": list(metrics)},
        )
        return values, sizes

    def clustered(self, cluster: str) -> pl.DataFrame:
        """The valid values with their cluster, in group order."""
        return self._sql(
            f"select {self._keys()}metric, _value, cast({q(cluster)} as varchar) as _cluster "
            f"from s where _valid order by {self._order()}metric"
        )


def _quantile(p: float) -> str:
    """The linear-interpolation quantile ``p`` of the sorted list ``_vals`` (polars' and
    numpy's ``linear``: position ``p (n - 1)``), read off the list by position."""
    pos = f"(len(_vals) - 1) * {p!r}"
    lo, hi = f"_vals[floor({pos})::bigint + 1]", f"_vals[ceil({pos})::bigint + 1]"
    return f"({lo} + ({pos} - floor({pos})) * ({hi} - {lo}))"


@contextmanager
def frame_rows(
    frame: pl.DataFrame, by: Sequence[str], not_binary: Sequence[str] = ()
) -> Iterator[GroupRows]:
    """``frame`` (validity columns present) registered on a fresh in-memory connection; the
    errors policy is applied (``fill``) when a row of it is errored under ``failure``."""
    con = duckdb.connect()
    try:
        # as the store's own connection: bounded, and spilling rather than failing
        con.execute(f"set memory_limit = '{duckdb_memory_limit()}'")
        con.register("_rows", frame.to_arrow())

        def run(query: str, params: Mapping[str, Any]) -> pl.DataFrame:
            out: pl.DataFrame = con.sql(query, params=dict(params) or None).pl()
            return out

        fill = (
            "_policy" in frame.columns
            and frame.select(
                (pl.col("_errored").fill_null(False) & (pl.col("_policy") == "failure")).any()
            ).item()
        )
        yield GroupRows(
            run=run, relation="_rows", by=tuple(by), fill=bool(fill), not_binary=tuple(not_binary)
        )
    finally:
        con.close()
