"""The pairing join and the counts of a paired comparison, in DuckDB: one implementation.

:func:`~hylo_analytics.compare.compare_scores` hands every comparison to this module, whether
its scores are a polars frame (registered on a fresh in-memory connection) or the store's
resolved scores (read where they lie, filtered to the runs asked for at the scan). The rows
are one per (run, pair key, metric) already: epochs reduced, errors counted as failures if
asked. What leaves DuckDB is small: the pairs counted by pattern (candidate, metric, ``by`` group,
the two values, and why a dropped pair was dropped), the parent's row counts, and the paired
differences of only the metrics a bootstrap resamples, in the rows' own order (the bootstrap
reads values by position). The engine's counts, sums, tie blocks, ranges and drop reasons
are weighted sums over the patterns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import duckdb
import polars as pl

__all__ = ["PairedRows", "frame_rows"]

Runner = Callable[[str, Mapping[str, Any]], pl.DataFrame]


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True)
class PairedRows:
    """Scores, one row per (run, pair key, metric), as a SQL relation to pair and count.

    ``relation``: SQL text of the rows (columns ``run_id``, the pair key ``pk``, ``metric``,
    ``value`` (null: an abstention), ``skip_reason`` when ``has_reason``, the ``by``
    columns); ``params``: the parameters it reads; ``order``: the columns that give the rows'
    order (the order a bootstrap reads the differences in); ``run``: executes a query.
    """

    run: Runner
    relation: str
    pk: tuple[str, ...]
    by: tuple[str, ...]
    has_reason: bool
    order: tuple[str, ...]
    params: Mapping[str, Any] = field(default_factory=dict)
    #: the rows carry ``_err``: the key abstained for a harness error (under ``exclude``)
    #: or its value is such an abstention counted as a failure (under ``failure``)
    has_errored: bool = False
    #: the column whose values are the clusters (``task_id``): the patterns then carry each
    #: pair's (the candidate row's, as text; null keys together form one cluster) as ``_cl``
    cluster: str | None = None

    def _pairs(self) -> str:
        """Each candidate row with the parent's value of its pair key (left join)."""
        on = " and ".join(f"p.{_q(c)} = c.{_q(c)}" for c in (*self.pk, "metric"))
        by = "".join(f", c.{_q(b)} as {_q(b)}" for b in self.by)
        order = "".join(f", c.{_q(o)} as {_q('_o_' + o)}" for o in self.order)
        # the pair key itself, for the rows of the pairs (``discordant``); unread by counts
        order += "".join(f", c.{_q(k)} as {_q('_k_' + k)}" for k in self.pk)
        pk = ", ".join(_q(c) for c in self.pk)
        reason = "skip_reason" if self.has_reason else "cast(null as varchar)"
        c_reason = "c.skip_reason" if self.has_reason else reason
        err = "coalesce(_err, false)" if self.has_errored else "false"
        c_err = "coalesce(c._err, false)" if self.has_errored else "false"
        if self.cluster is not None:
            order += f", cast(c.{_q(self.cluster)} as varchar) as _cl"
        return f"""
        par as (
            select {pk}, metric, value as pv, {reason} as parent_reason, true as m,
                {err} as p_err
            from {self.relation} where run_id = $parent
        ),
        pairs as (
            select c.run_id as candidate, c.metric{by}, c.value as v, {c_reason} as reason,
                p.pv, p.parent_reason, coalesce(p.m, false) as matched,
                {c_err} as c_err, coalesce(p.p_err, false) as p_err,
                c.value is not null and p.pv is not null as ok, c.value - p.pv as d{order}
            from {self.relation} as c left join par as p on {on}
            where c.run_id <> $parent
        )"""

    def _sql(self, body: str, parent: str, extra: Mapping[str, Any] | None = None) -> pl.DataFrame:
        return self.run(
            f"with {self._pairs()} {body}", {**self.params, "parent": parent, **(extra or {})}
        )

    def _groups(self) -> str:
        return ", ".join(["candidate", "metric", *(_q(b) for b in self.by)])

    def patterns(self, parent: str) -> pl.DataFrame:
        """The pairs counted by what the statistics read: per (candidate, metric, by group,
        candidate value, parent value, matched, and for a dropped pair the reasons), ``n``.

        A 0/1 metric has a handful of patterns per group whatever its size, so the counts,
        sums, tie blocks, ranges and drop reasons come from a small frame. ``c_err`` /
        ``p_err``: the side's key is a harness error (see ``has_errored``), which is what the
        other errors policy would count differently.
        """
        g = self._groups()
        if self.cluster is not None:
            g += ", _cl"
        return self._sql(
            f"""
            select {g}, v, pv, matched, c_err, p_err,
                case when not ok then reason end as reason,
                case when not ok then parent_reason end as parent_reason,
                count(*) as n
            from pairs group by all
            -- in one order whatever the plan: the sums over the patterns are then the same
            order by all""",
            parent,
        )

    def parent_rows(self, parent: str) -> pl.DataFrame:
        """Per (metric, by): how many rows the parent has."""
        keys = ", ".join(["metric", *(_q(b) for b in self.by)])
        return self.run(
            f"select {keys}, count(*) as n_parent from {self.relation} "
            f"where run_id = $parent group by {keys}",
            {**self.params, "parent": parent},
        )

    def discordant(self, parent: str) -> pl.DataFrame:
        """The pairs whose two values differ, one row each (the pairs :meth:`patterns` counts
        as wins of either side): ``candidate``, ``metric``, the ``by`` columns, the pair key
        (``_k_`` + its column), ``candidate_value`` and ``parent_value``."""
        keys = ", ".join(_q("_k_" + k) for k in self.pk)
        return self._sql(
            f"""
            select {self._groups()}, {keys}, v as candidate_value, pv as parent_value
            from pairs where ok and v <> pv""",
            parent,
        )

    def differences(self, parent: str, metrics: Sequence[str]) -> pl.DataFrame:
        """The paired differences of ``metrics``, in the rows' order within each candidate."""
        order = ", ".join(["candidate", "metric", *(_q("_o_" + o) for o in self.order)])
        return self._sql(
            f"""
            select {self._groups()}, d as diff from pairs
            where ok and list_contains($diff_metrics, metric) order by {order}""",
            parent,
            {"diff_metrics": list(metrics)},
        )


@contextmanager
def frame_rows(
    frame: pl.DataFrame,
    pk: Sequence[str],
    by: Sequence[str],
    has_reason: bool,
    cluster: str | None = None,
) -> Iterator[PairedRows]:
    """``frame`` (one row per run, pair key and metric) on a fresh in-memory connection;
    ``cluster``: the column of ``frame`` whose values are the clusters."""
    con = duckdb.connect(":memory:")
    try:
        con.register("_scores", frame.with_row_index("_row").to_arrow())

        def run(query: str, params: Mapping[str, Any]) -> pl.DataFrame:
            used = {k: v for k, v in params.items() if f"${k}" in query}
            frame: pl.DataFrame = con.sql(query, params=used).pl()
            return frame

        errored = "_err" in frame.columns
        yield PairedRows(run, "_scores", tuple(pk), tuple(by), has_reason, ("_row",),
                         has_errored=errored, cluster=cluster)  # fmt: skip
    finally:
        con.close()
