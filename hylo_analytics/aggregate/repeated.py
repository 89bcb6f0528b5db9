"""Repeated samples of an item in stored runs (or a frame): pass@k and pass^k curves.

An **item** is a key (``<task_id>#<seed>``, the default ``item="key"``) or, by the user's
choice, any column naming what the benchmark samples (``item="task_id"``: a task whose seeds
and epochs are its samples); the suite (``benchmark_id``, ``split``) is part of it where the
rows have one, so two suites' keys are never one item. Its **samples** are its valid scores
in a group's runs: every epoch of the key in every run of the group (``by``, as
``aggregate``'s; default each run alone). The rows are the aggregate's own
(:func:`~hylo_analytics.aggregate._rows._store_rows`: the one score resolution, the run
filter at the scan, the errors policy applied, aliases merged), counted per (group, item) in
one DuckDB pass (:meth:`GroupRows.moments`); the statistics are
:mod:`hylo_analytics.stats.repeated`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import ExitStack
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from hylo_analytics._harness import Errors, check_errors
from hylo_analytics.aggregate._query import GroupRows, frame_rows
from hylo_analytics.aggregate._rows import _load, _not_binary, _prepare, _store_rows
from hylo_analytics.errors import InputError, SelectionError
from hylo_analytics.metrics import MetricRegistry, default_registry
from hylo_analytics.stats.closed_form import DEFAULT_LEVEL
from hylo_analytics.stats.methods import DEFAULT_RESAMPLES, DEFAULT_SEED, Seed
from hylo_analytics.stats.repeated import CURVE_METHODS, CurveMethod, pass_curves

if TYPE_CHECKING:
    from hylo_analytics.store import ParquetStore

__all__ = ["SUITE", "item_columns", "item_samples", "pass_k_curves"]

SUITE = ("benchmark_id", "split")
_TAIL = ("n_errors", "errors", "ci_level", "ci_method")
_CURVE_COLUMNS = (
    "k", "pass_at_k", "pass_at_k_low", "pass_at_k_high", "pass_hat_k", "pass_hat_k_low",
    "pass_hat_k_high", "n_items", "n_items_short", "n_samples",
)  # fmt: skip


def item_columns(item: str, names: Sequence[str] | None = None) -> list[str]:
    """The columns naming an item: the suite's (those ``names`` holds; a store has both),
    then ``item``."""
    if not isinstance(item, str) or not item:
        raise InputError(f"item={item!r}: name the column of an item ('key' or 'task_id')")
    suite = [c for c in SUITE if c != item and (names is None or c in names)]
    return [*suite, item]


def item_samples(
    scores: pl.DataFrame | pl.LazyFrame | ParquetStore,
    *,
    by: Sequence[str],
    metric: str,
    item: str = "key",
    runs: Sequence[str] | None = None,
    errors: Errors | None = None,
    source: str | Sequence[str] | None = None,
    registry: MetricRegistry | None = None,
    caller: str = "pass_at_k",
) -> tuple[pl.DataFrame, list[str], str]:
    """One row per (group, item), groups in order: the ``by`` and item columns, ``n_total``,
    ``n_valid``, ``sum``, ``mean``, ``var`` (ddof 1), ``n_errors``, ``errors`` and ``_is01``
    of the item's samples; the item columns; and the metric read (``success`` is a store's
    inspect-robots ``success_at_end`` when its runs have no ``success``). ``caller`` names
    the verb in errors."""
    from hylo_analytics.store import ParquetStore, unwrap_store

    scores = unwrap_store(scores)
    reg = registry or default_registry()
    errors = check_errors(errors, f"{caller}: errors")
    by = list(dict.fromkeys(by))
    with ExitStack() as stack:
        if isinstance(scores, ParquetStore):
            items = item_columns(item)
            keys = list(dict.fromkeys([*by, *items]))
            try:
                rows = _rows(scores, keys, metric, reg, runs, errors, source, stack)
            except SelectionError as exc:
                named = _success_of(scores, runs) if metric == "success" else None
                if named is None:  # the aggregate's message, said by the verb asked
                    text = str(exc).removeprefix("aggregate: ")
                    raise SelectionError(f"{caller}: {text}") from None
                metric = named
                rows = _rows(scores, keys, metric, reg, runs, errors, source, stack)
        else:
            frame = scores.collect() if isinstance(scores, pl.LazyFrame) else scores
            items = item_columns(item, frame.columns)
            keys = list(dict.fromkeys([*by, *items]))
            frame = _load(frame, keys, source, [])
            if runs is not None:
                frame = frame.filter(pl.col("run_id").is_in(list(runs)))
            frame = frame.with_columns(metric=pl.col("metric").replace(reg.alias_map()))
            frame = frame.filter(pl.col("metric") == (reg.resolve(metric) if metric in reg
                                                      else metric))  # fmt: skip
            frame, _ = _prepare(frame, keys, [], None, lone=False, errors=errors)
            rows = stack.enter_context(frame_rows(frame, keys, _not_binary(reg)))
        got = rows.moments()
    if got.is_empty():
        raise SelectionError(
            f"{caller}: no scores of metric {metric!r} in the runs selected; check the metric "
            "name and runs= (see 'hylo-analytics runs')"
        )
    return got, items, metric


def _rows(
    store: ParquetStore,
    keys: list[str],
    metric: str,
    reg: MetricRegistry,
    runs: Sequence[str] | None,
    errors: Errors | None,
    source: str | Sequence[str] | None,
    stack: ExitStack,
) -> GroupRows:
    """The aggregate's rows of ``metric`` (every epoch: no reducer), grouped by ``keys``."""
    keep = [reg.resolve(metric) if metric in reg else metric]
    rows, _ = _store_rows(store, keys, source, [], keep, reg, None, runs, [metric], stack,
                          errors)  # fmt: skip
    return rows


def _success_of(store: ParquetStore, runs: Sequence[str] | None) -> str | None:
    from hylo_analytics.resolution import success_metric

    ids = list(runs) if runs is not None else store.sql("select run_id from stg_runs")["run_id"]
    named = success_metric(store, list(ids))
    return named if named not in (None, "success") else None


def pass_k_curves(
    scores: pl.DataFrame | pl.LazyFrame | ParquetStore,
    *,
    by: Sequence[str] = ("run_id",),
    metric: str = "success",
    item: str = "key",
    k: int | Sequence[int] | None = None,
    runs: Sequence[str] | None = None,
    errors: Errors | None = None,
    ci: CurveMethod = "wilson",
    level: float = DEFAULT_LEVEL,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: Seed = DEFAULT_SEED,
    source: str | Sequence[str] | None = None,
    registry: MetricRegistry | None = None,
) -> pl.DataFrame:
    """pass@k and pass^k of each ``by`` group over its items, for k = 1 .. the most samples
    an item of the group has (or the ``k`` asked), each with its interval over items.

    One row per (group, k): the ``by`` columns, ``metric``, ``item`` (the item's column),
    ``k``, ``pass_at_k`` (the mean over items of the unbiased ``1 - C(n - c, k) / C(n,
    k)``) and ``pass_hat_k`` (of ``C(c, k) / C(n, k)``) with their ``_low`` / ``_high``
    bounds, ``n_items`` (the items with at least ``k`` valid samples: the mean's),
    ``n_items_short`` (those with fewer, left out of this ``k``: an item whose samples
    errored under ``errors="exclude"`` is one), ``n_samples`` (the valid samples of the
    items used), ``n_errors`` (the group's errored samples), ``errors``, ``ci_level`` and
    ``ci_method``. ``metric`` must be 0/1 (a success). ``ci``: ``wilson`` (default; Wilson
    at the effective sample size), ``normal`` or ``percentile`` (the bootstrap over items;
    a loop over groups, for tens of groups): see :func:`~hylo_analytics.stats.repeated.
    pass_curves`. ``item``, ``by``, ``runs``, ``errors``, ``source``, ``registry``: see the
    module docstring and :func:`~hylo_analytics.aggregate.aggregate_scores`.
    """
    if ci not in CURVE_METHODS:
        raise InputError(f"pass_at_k: ci={ci!r}; expected one of {', '.join(CURVE_METHODS)}")
    ks = None if k is None else ([k] if isinstance(k, int) else list(k))
    by = list(dict.fromkeys(by))
    got, _, metric = item_samples(scores, by=by, metric=metric, item=item, runs=runs,
                                      errors=errors, source=source, registry=registry)  # fmt: skip
    _check_zero_one(got, metric)
    code = pl.struct(by).is_first_distinct().cum_sum().cast(pl.Int64) - 1 if by else pl.lit(0)
    got = got.with_columns(_g=code)  # moments come in group order
    curves = pass_curves(
        got["n_valid"].to_numpy(),
        np.rint(got["sum"].to_numpy()),
        got["_g"].to_numpy(),
        ks=ks, method=ci, level=level, n_resamples=n_resamples, seed=seed,
    )  # fmt: skip
    groups = got.group_by("_g", maintain_order=True).agg(
        *(pl.col(c).first() for c in by),
        n_errors=pl.col("n_errors").sum().cast(pl.Int64),
        errors=pl.col("errors").drop_nulls().unique().sort().str.join(","),
    )
    points = pl.DataFrame(
        {"_g": curves.group, **{c: getattr(curves, c) for c in _CURVE_COLUMNS}}
    ).with_columns(pl.col(pl.Float64).fill_nan(None))
    return (
        points.join(groups, on="_g", how="left", maintain_order="left")
        .with_columns(
            metric=pl.lit(metric),
            item=pl.lit(item),
            errors=pl.when(pl.col("errors") != "").then("errors"),
            ci_level=pl.lit(level),
            ci_method=pl.lit(curves.ci_method),
        )
        .select(*by, "metric", "item", *_CURVE_COLUMNS, *_TAIL)
    )


def _check_zero_one(got: pl.DataFrame, metric: str) -> None:
    """pass@k counts successes: every valid sample must be 0 or 1."""
    bad = got.filter(~pl.col("_is01"), pl.col("n_valid") > 0)
    if bad.height:
        raise InputError(
            f"pass_at_k: metric {metric!r} has values other than 0 and 1 in {bad.height:,} "
            "item(s); pass@k and pass^k count successes: pick a 0/1 metric such as success "
            "(epochs_plan splits the variance of any metric)"
        )
