"""Python scorers: a vectorized form (a column over all episodes) and a per-episode form.

Prefer :class:`VectorizedScorer`: it gets the polars frame of ``int_episode_stats`` (one row
per sample) and returns a float column, so it scales like the built-ins. :class:`EpisodeScorer`
is for logic that cannot be vectorized; it is called once per episode with a frozen
:class:`ScoringCall`. Its ``fn`` may be async (a coroutine function, or a sync function that
returns an awaitable): the episodes are then awaited concurrently, at most ``concurrency`` at
once, on one event loop per scoring call. When the caller is already inside a running loop
(Jupyter), that loop runs in a worker thread, so ``store.score`` stays a plain blocking call.
Rows keep the episodes' order whatever order the coroutines finish in. Both are validated: a value must be a float (or int) or ``None``
(abstain); anything else, NaN, a wrong length or an exception becomes an error row whose
``skip_reason`` says what was returned, never a silent null.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import json
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa

from hylo_analytics._sql import query_sql
from hylo_analytics._traces import with_raw_sql
from hylo_analytics.contracts import Score
from hylo_analytics.errors import InputError
from hylo_analytics.scoring._common import ScorerDeclaration

__all__ = ["EpisodeScorer", "ScoringCall", "VectorizedScorer", "episode_rows", "vectorized_rows"]

_ID_COLS = ("run_id", "key", "task_id", "seed", "epoch", "episode_id")


@dataclass(frozen=True)
class ScoringCall:
    """What a per-episode Python scorer sees (read-only).

    ``sample`` is the sample's columns plus its unmodelled fields; ``output`` and ``case`` are
    the sample's ``output`` / ``case`` fields when the log has them; ``events`` are the trace
    lines as parsed JSON, in file order; ``trace`` is the episode's ``int_episode_stats`` row.
    ``variant`` is the run's id (a variant is a run, as in ``post_derive``) and ``agent`` its
    ``<agent_name>@<agent_version>``; ``observations`` are the scores the source log wrote for
    this sample (imported, metric -> value), never another scorer's; ``spans`` are the trace's
    ``span`` events (docs/trace-format.md), in file order.
    """

    case: Any
    output: Any
    sample: Mapping[str, Any]
    events: tuple[Mapping[str, Any], ...]
    trace: Mapping[str, Any] = field(default_factory=dict)
    variant: str = ""
    agent: str | None = None
    observations: Mapping[str, float | None] = field(default_factory=dict)

    @property
    def spans(self) -> tuple[Mapping[str, Any], ...]:
        return tuple(e for e in self.events if e.get("type") == "span")

    def selected_spans(
        self, kind: str | None = None, name: str | None = None
    ) -> tuple[Mapping[str, Any], ...]:
        """The spans of ``kind`` (``tool``, ``llm``, ...) and/or ``name``; None matches any."""
        return tuple(
            s
            for s in self.spans
            if (kind is None or s.get("kind") == kind) and (name is None or s.get("name") == name)
        )


@dataclass(frozen=True)
class VectorizedScorer:
    """``fn(episodes: pl.DataFrame) -> pl.Series | pl.Expr`` of floats (null = abstain)."""

    name: str
    fn: Callable[[pl.DataFrame], pl.Series | pl.Expr]
    version: str = "0"
    needs_trace: bool = True  # samples without a usable trace abstain without calling fn
    declaration: ScorerDeclaration = field(default_factory=ScorerDeclaration)

    @property
    def source(self) -> str:
        return f"scorer:{self.name}"


@dataclass(frozen=True)
class EpisodeScorer:
    """``fn(call: ScoringCall) -> float | None | Score`` (or an awaitable of one), per episode.

    ``concurrency`` bounds how many episodes an async ``fn`` has in flight at once.
    """

    name: str
    fn: Callable[[ScoringCall], Any]
    version: str = "0"
    needs_trace: bool = True
    declaration: ScorerDeclaration = field(default_factory=ScorerDeclaration)
    concurrency: int = 16

    def __post_init__(self) -> None:
        if not isinstance(self.concurrency, int) or self.concurrency < 1:
            raise InputError(f"scorer {self.name!r}: concurrency must be >= 1")

    @property
    def source(self) -> str:
        return f"scorer:{self.name}"


def _frame(
    scorer: VectorizedScorer | EpisodeScorer,
    ids: pl.DataFrame,
    value: pl.Series,
    reason: pl.Series,
    explanation: pl.Series,
    error: pl.Series,
) -> pa.Table:
    n = ids.height
    out = ids.select(_ID_COLS).with_columns(
        pl.lit(scorer.name).alias("metric"),
        value.cast(pl.Float64).alias("value"),
        reason.is_null().alias("valid"),
        reason.alias("skip_reason"),
        explanation.alias("explanation"),
        pl.lit(scorer.source).alias("source"),
        pl.lit("score").alias("source_kind"),
        pl.lit(scorer.version).alias("scorer_version"),
        pl.lit(scorer.declaration.metadata_json()).alias("metadata"),
        error.alias("is_error"),
    )
    assert out.height == n
    return out.to_arrow()


def _no_trace() -> pl.Expr:
    return pl.when(~pl.col("has_trace")).then(
        pl.format("no trace (trace_status={})", pl.col("trace_status").fill_null("null"))
    )


def vectorized_rows(scorer: VectorizedScorer, episodes: pl.DataFrame) -> pa.Table:
    """Run a vectorized scorer over every episode and validate its column."""
    n = episodes.height
    gate = (
        episodes.select(_no_trace().alias("g")).to_series()
        if scorer.needs_trace
        else pl.Series("g", [None] * n, pl.String)
    )
    err: str | None = None
    values = pl.Series("v", [None] * n, pl.Float64)
    try:
        got = scorer.fn(episodes)
        series = episodes.select(got).to_series() if isinstance(got, pl.Expr) else got
        if not isinstance(series, pl.Series):
            err = f"error: returned {type(got).__name__}, expected a polars Series or Expr"
        elif series.len() != n:
            err = f"error: returned {series.len()} values for {n} episodes"
        elif not (series.dtype.is_numeric() or series.dtype in (pl.Boolean, pl.Null)):
            err = f"error: returned dtype {series.dtype}, expected floats or nulls"
        else:
            values = series.cast(pl.Float64)
    except Exception as exc:  # a scorer's bug is an error row, not a crash halfway
        err = f"error: {type(exc).__name__}: {exc}"[:300]
    if err is not None:
        reason = pl.Series("r", [err] * n, pl.String)
        is_error = pl.Series("e", [True] * n)
    else:
        frame = pl.DataFrame({"v": values, "g": gate})
        reason = frame.select(
            pl.when(pl.col("g").is_not_null())
            .then(pl.col("g"))
            .when(pl.col("v").is_nan())
            .then(pl.lit("error: returned NaN"))
            .when(pl.col("v").is_null())
            .then(pl.lit("abstained"))
        ).to_series()
        is_error = reason.str.starts_with("error:").fill_null(False)
    values = (
        pl.DataFrame({"v": values, "r": reason})
        .select(pl.when(pl.col("r").is_null()).then(pl.col("v")))
        .to_series()
    )
    return _frame(
        scorer, episodes, values, reason, pl.Series([None] * n, dtype=pl.String), is_error
    )


def _check(result: Any) -> tuple[float | None, str | None, str | None]:
    """(value, skip_reason, explanation) of one per-episode result."""
    explanation = None
    if isinstance(result, Score):
        explanation = result.explanation or None
        result = result.value
    if result is None:
        return None, "abstained", explanation
    if isinstance(result, bool) or not isinstance(result, int | float):
        return None, f"error: returned {type(result).__name__}, expected float or None", None
    if math.isnan(result):
        return None, "error: returned NaN", None
    return float(result), None, explanation


def events_sql(runs: str) -> str:
    """Each episode of the runs in relation ``runs`` with its event lines as written (from the
    trace file kept once, :mod:`hylo_analytics._traces`), in order: ``run_id, episode_id,
    raws``."""
    events = with_raw_sql(
        "select run_id, key, episode_id, idx, raw from stg_events "
        f"where run_id in (select run_id from {runs})"
    )
    return query_sql("scoring_python_events", events=events)


_Result = tuple[float | None, str | None, str | None]


def _is_async(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - an object with an async __call__
    )


def _error(exc: BaseException) -> _Result:
    return None, f"error: {type(exc).__name__}: {exc}"[:300], None


def _await_all(pending: dict[int, Callable[[], Awaitable[Any]]], limit: int) -> dict[int, _Result]:
    """Await every thunk, at most ``limit`` at once, on a fresh loop (a worker thread's when
    this thread already runs one)."""

    async def main() -> dict[int, _Result]:
        sem = asyncio.Semaphore(limit)
        out: dict[int, _Result] = {}

        async def one(i: int, thunk: Callable[[], Awaitable[Any]]) -> None:
            async with sem:
                try:
                    out[i] = _check(await thunk())
                except Exception as exc:  # recorded per episode, like a sync scorer's
                    out[i] = _error(exc)

        await asyncio.gather(*(one(i, t) for i, t in pending.items()))
        return out

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(main())
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, main()).result()


def episode_rows(
    con: duckdb.DuckDBPyConnection, scorer: EpisodeScorer, episodes: pl.DataFrame, runs: str
) -> pa.Table:
    """Call a per-episode scorer for every episode (the one row loop, by design)."""
    extra = con.sql(query_sql("scoring_python_samples", runs=runs)).pl()
    events = con.sql(events_sql(runs)).pl()
    frame = episodes.join(extra, on=["run_id", "episode_id"], how="left").join(
        events, on=["run_id", "episode_id"], how="left"
    )
    results: list[_Result] = []
    pending: dict[int, Callable[[], Awaitable[Any]]] = {}
    defer = _is_async(scorer.fn)
    for i, row in enumerate(frame.iter_rows(named=True)):
        if scorer.needs_trace and not row["has_trace"]:
            results.append((None, f"no trace (trace_status={row['trace_status']})", None))
            continue
        sample_extra = json.loads(row["extra"]) if row["extra"] else {}
        sample = {**sample_extra, **{k: row[k] for k in (*_ID_COLS, "status", "trace_status")}}
        call = ScoringCall(
            case=sample_extra.get("case"),
            output=sample_extra.get("output"),
            sample=MappingProxyType(sample),
            events=tuple(MappingProxyType(json.loads(r)) for r in row["raws"] or ()),
            trace=MappingProxyType({k: row[k] for k in episodes.columns}),
            variant=row["run_id"],
            agent=row["agent"],
            observations=MappingProxyType(json.loads(row["observations"] or "{}")),
        )
        results.append((None, None, None))
        if defer:  # called under the semaphore, so at most ``concurrency`` bodies run at once
            pending[i] = lambda call=call: scorer.fn(call)  # type: ignore[misc]
            continue
        try:
            got = scorer.fn(call)
        except Exception as exc:  # recorded per episode; the others are still scored
            results[i] = _error(exc)
            continue
        if inspect.isawaitable(got):
            pending[i] = lambda got=got: got  # type: ignore[misc]
        else:
            results[i] = _check(got)
    for i, r in _await_all(pending, scorer.concurrency).items() if pending else ():
        results[i] = r
    reason = pl.Series("r", [r[1] for r in results], pl.String)
    return _frame(
        scorer,
        frame,
        pl.Series("v", [r[0] for r in results], pl.Float64),
        reason,
        pl.Series("x", [r[2] for r in results], pl.String),
        reason.str.starts_with("error:").fill_null(False),
    )
