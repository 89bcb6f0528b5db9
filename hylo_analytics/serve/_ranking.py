"""The ranking page's reads: ``Store.rank`` in the background, kept small per data version.

A ranking of 2,000 policies takes seconds and its matrix holds two million pairs (half a
gigabyte): the page keeps what it shows, :class:`RankView` (every policy's rank row and, for
each page of :data:`PAGE_SIZE` ranks, the pairs between that page's policies: the heatmap of
the page), computed once per store state and :class:`RankQuery` in a thread of its own
(:meth:`StoreReader.background`, on a connection of its own), so the page says
"computing" meanwhile instead of hanging, and the other pages keep answering.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import polars as pl

from hylo_analytics._harness import Errors
from hylo_analytics.api import Store
from hylo_analytics.errors import BadRequestError
from hylo_analytics.serve._data import NAME_CHARS, PAGE_SIZE, StoreReader, parse_errors
from hylo_analytics.serve._jobs import Job

__all__ = ["MAX_RUN_SELECTORS", "RANK_FIELDS", "RankQuery", "RankView", "rank_job"]

#: The run fields a policy or a stratum is (``Store.rank``'s ``policy`` and ``strata``).
RANK_FIELDS = ("agent_name", "run_id", "agent_version", "benchmark_id", "split")
MAX_RUN_SELECTORS = 20  # ?run= selectors a ranking takes (each a filter of the runs table)
_PAIR_COLUMNS = ("policy", "opponent", "verdict", "mean_diff", "wins", "losses", "p_holm",
                 "p_worse_holm")  # fmt: skip


@dataclass(frozen=True)
class RankQuery:
    """What a ranking page ranks: ``Store.rank``'s ``policy``, ``strata``, ``metric``,
    ``errors`` and ``runs`` (selectors; empty: every run). Its defaults are the CLI's."""

    policy: str = "agent_name"
    strata: tuple[str, ...] = ("benchmark_id", "split")
    metric: str = "success"
    errors: Errors | None = None
    runs: tuple[str, ...] = ()

    @classmethod
    def parse(
        cls, get: Callable[[str], str | None], getlist: Callable[[str], list[str]]
    ) -> RankQuery:
        """The query of a request's parameters; a bad one is a :class:`BadRequestError`
        that says what is allowed."""
        policy = get("policy") or "agent_name"
        if policy not in RANK_FIELDS:
            raise BadRequestError(f"policy must be one of {', '.join(RANK_FIELDS)}")
        raw = get("strata")
        strata = (
            cls.strata if raw is None else tuple(s.strip() for s in raw.split(",") if s.strip())
        )
        bad = [s for s in strata if s not in RANK_FIELDS]
        if bad or len(set(strata)) < len(strata):
            raise BadRequestError(
                f"strata must be distinct run fields joined by commas ({', '.join(RANK_FIELDS)}; "
                "empty for none)"
            )
        metric = get("metric") or "success"
        if len(metric) > NAME_CHARS:
            raise BadRequestError(
                f"metric must be a metric's name (at most {NAME_CHARS} characters)"
            )
        runs = tuple(dict.fromkeys(r for r in getlist("run") if r))
        if len(runs) > MAX_RUN_SELECTORS or any(len(r) > NAME_CHARS for r in runs):
            raise BadRequestError(
                f"run takes at most {MAX_RUN_SELECTORS} ids or selectors (agent=pi05), each at "
                f"most {NAME_CHARS} characters"
            )
        try:
            errors = parse_errors(get("errors"))
        except ValueError as exc:
            raise BadRequestError(f"{exc}: on a page, leave errors= out for that") from exc
        return cls(policy, strata, metric, errors, runs)

    def params(self) -> list[tuple[str, Any]]:
        """The query as URL parameters (defaults left out), for links and charts."""
        default = RankQuery()
        return [
            ("policy", None if self.policy == default.policy else self.policy),
            ("strata", None if self.strata == default.strata else ",".join(self.strata) or ","),
            ("metric", None if self.metric == default.metric else self.metric),
            *(("run", r) for r in self.runs),
            ("errors", self.errors),
        ]


@dataclass(frozen=True)
class RankView:
    """What the ranking page shows of a :class:`~hylo_analytics.compare.Ranking`.

    ``ranks``: every policy, best first (``Ranking.ranks`` and ``page``, the page of
    :data:`PAGE_SIZE` ranks it is on); ``pairs``: the matrix's pairs between two policies
    of one page (``page`` and the heatmap's columns), so a page's heatmap is a filter;
    ``n_pairs``: the pairs of the whole matrix (one Holm family); ``errors``: the errors
    policies its pairs applied; ``seconds``: how long ``Store.rank`` took.
    """

    ranks: pl.DataFrame
    pairs: pl.DataFrame
    metric: str
    n_pairs: int
    level: float
    strength_method: str
    errors: tuple[str, ...]
    seconds: float

    @property
    def pages(self) -> int:
        return max(1, -(-self.ranks.height // PAGE_SIZE))

    def page(self, n: int) -> tuple[pl.DataFrame, pl.DataFrame]:
        """Page ``n``'s rank rows and the pairs between its policies."""
        return (
            self.ranks.filter(pl.col("page") == n),
            self.pairs.filter(pl.col("page") == n).drop("page"),
        )


def _view(store: Store, query: RankQuery) -> RankView:
    """``store.rank`` of ``query``, cut to what the page shows (vectorized: two joins)."""
    started = time.perf_counter()
    ranking = store.rank(
        list(query.runs) or None, policy=query.policy, strata=query.strata,
        metric=query.metric, errors=query.errors, progress=False,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    ranks = ranking.ranks.with_row_index("_i").with_columns(
        page=(pl.col("_i") // PAGE_SIZE + 1).cast(pl.Int64)
    )
    pages = ranks.select("policy", "page")
    pairs = (
        ranking.matrix.select(_PAIR_COLUMNS)
        .with_columns(pl.col("policy", "opponent", "verdict").cast(pl.String))
        .join(pages, on="policy")
        .join(pages.rename({"policy": "opponent", "page": "_o"}), on="opponent")
        .filter(pl.col("page") == pl.col("_o"))
        .drop("_o")
    )
    errors = tuple(sorted(ranking.matrix["errors"].cast(pl.String).drop_nulls().unique()))
    return RankView(
        ranks=ranks.drop("_i"),
        pairs=pairs,
        metric=ranking.metric,
        n_pairs=ranking.matrix.height,
        level=ranking.level,
        strength_method=str(ranking.ranks["strength_method"][0]),
        errors=errors,
        seconds=seconds,
    )


def rank_job(reader: StoreReader, query: RankQuery) -> Job:
    """The job computing ``query``'s :class:`RankView` at this data version (started by
    the first request that asks; later ones find it)."""
    return reader.background(("rank", query), lambda store: _view(store, query))
