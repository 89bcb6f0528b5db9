"""``Store.trend``: a trend over the store's runs, ordered by a version or a run field.

:func:`trend_runs` reads the resolved scores of the runs asked for (one score per episode,
by the precedence rule), orders the runs by ``agent_version`` in natural version order or by
another field (a path into a run's JSON fields, numeric when every value is a number), and
hands them to :func:`~hylo_analytics.compare.trends.trend_scores`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import polars as pl

from hylo_analytics.compare._prepare import one_direction
from hylo_analytics.compare.trends import Trend, trend_scores
from hylo_analytics.errors import ComparabilityError, InputError
from hylo_analytics.store import ParquetStore, pinned

__all__ = ["ORDER_COLUMNS", "TASK_COLUMNS", "order_field", "trend_runs"]


# the run fields a trend may order by as they are; a JSON path reads one of the JSON fields
ORDER_COLUMNS = ("agent_version", "run_id", "created", "benchmark_version", "agent_name")
_JSON_FIELDS = {
    "metadata": ("extra", "$.metadata"),  # a log's top-level "metadata" (kept in extra)
    "extra": ("extra", "$"),
    "agent_components": ("agent_components", "$"),
    "results": ("results", "$"),
}
_SEGMENT = re.compile(r"[A-Za-z0-9_\-]+")
TASK_COLUMNS = ("benchmark_id", "split", "task_id")


def order_field(order: str) -> tuple[str, str | None]:
    """``order`` as SQL over ``stg_runs`` and the JSON path it reads (a parameter)."""
    if order in ORDER_COLUMNS:
        return f'CAST("{order}" AS VARCHAR)', None
    head, _, rest = order.partition(".")
    segments = rest.split(".") if rest else []
    if head not in _JSON_FIELDS or not segments or not all(_SEGMENT.fullmatch(s) for s in segments):
        raise InputError(
            f"trend: cannot order by {order!r}: use a run field ({', '.join(ORDER_COLUMNS)}) "
            f"or a path into a JSON field ({', '.join(k + '.NAME' for k in _JSON_FIELDS)}, "
            "e.g. metadata.training_step: a log's top-level metadata), names of letters, "
            "digits, '_' and '-' joined by '.'"
        )
    column, root = _JSON_FIELDS[head]
    path = root + "".join(f'."{s}"' for s in segments)
    return f"json_extract_string({column}, $path)", path


@pinned
def trend_runs(
    store: ParquetStore,
    runs: Sequence[str] | str | None = None,
    *,
    order: str = "agent_version",
    metric: str = "success",
    source: str | None = None,
    force: bool = False,
    **options: Any,
) -> Trend:
    """:func:`trend_scores` over the store's resolved scores (``Store.trend``).

    ``runs``: ids, prefixes or selectors, a selector naming every run it matches
    (``agent=octo-ft``); default every run. ``order``: ``agent_version`` (default, natural
    version order) or another run field, or a path into a run's JSON fields
    (``metadata.training_step`` reads the log's top-level ``metadata``; also ``extra.``,
    ``agent_components.``, ``results.``): numeric when every run's value is a number, else
    in natural version order. Tasks are (``benchmark_id``, ``split``, ``task_id``); runs of
    one (benchmark, split) must share its digest (``force=True`` goes on anyway). Each run's
    errors convention is its harness's unless ``errors=`` says otherwise; ``options`` are
    :func:`trend_scores`'.
    """
    from hylo_analytics.compare.runs import _Reader
    from hylo_analytics.resolution import success_metric

    expr, path = order_field(order)
    every = store.sql("SELECT run_id FROM stg_runs ORDER BY run_id")["run_id"].to_list()
    ids = every if runs is None else _named(store, runs, frozenset(every))
    meta = store.sql(
        "SELECT run_id, benchmark_id, split, benchmark_digest, "
        f"run_errors(errors_policy, source_format) AS _policy, {expr} AS _version "
        "FROM stg_runs WHERE list_contains($runs, run_id)",
        {"runs": ids} | ({"path": path} if path else {}),
    )
    if not force:
        _one_digest(meta)
    conventions = dict(zip(meta["run_id"].to_list(), meta["_policy"].to_list(), strict=True))
    read = _Reader(store, ids, source, None, {}, ("task_id",))
    scores = read.scores([metric], conventions)
    if scores.is_empty() and metric == "success":
        named = success_metric(store, ids)  # inspect-robots: success_at_end
        if named is not None and named != "success":
            metric, scores = named, read.scores([named], conventions)
    # what the scores' metadata declare, read in SQL as compare reads it (below an explicit one)
    declared = one_direction(read.declared([metric]))
    given = dict(options.get("directions") or {})
    if metric in declared and metric not in given:
        options["directions"] = {**given, metric: declared[metric]}
    numeric = meta["_version"].cast(pl.Float64, strict=False)
    by_number = meta.height > 0 and numeric.is_finite().fill_null(False).all() and path is not None
    meta = meta.with_columns(numeric.alias("_step"))
    # a run's fields as categories: a million rows hold codes, not copies of the text
    fields = pl.col("benchmark_id", "split", "_version").cast(pl.Categorical)
    scores = scores.join(meta.select("run_id", fields, "_step"), on="run_id")
    return trend_scores(
        scores,
        version="_version",
        order_by="_step" if by_number else None,
        order_label=order,
        tasks=TASK_COLUMNS,
        metric=metric,
        **options,
    )


def _named(store: ParquetStore, specs: Sequence[str] | str, ids: frozenset[str]) -> list[str]:
    """Every run ``specs`` name: an id, a prefix, or a selector naming every run it matches
    (``agent=octo-ft``), the store's one rule (ids first: one may hold ``=``)."""
    del ids  # the store's rule checks the ids itself
    return store.select_runs(specs)


def _one_digest(meta: pl.DataFrame) -> None:
    """Runs of one (benchmark, split) that measured two task sets are not one trend."""
    many = meta.group_by("benchmark_id", "split").agg(
        pl.col("benchmark_digest").n_unique().alias("n"),
        pl.col("benchmark_digest").unique().sort().head(3).alias("digests"),
    )
    bad = many.filter(pl.col("n") > 1)
    if bad.height:
        row = bad.row(0, named=True)
        raise ComparabilityError(
            f"trend: the runs of benchmark {row['benchmark_id']!r} split {row['split']!r} "
            f"have {row['n']} benchmark digests ({', '.join(map(repr, row['digests']))}): "
            "their tasks differ. Select the runs of one digest (--run), or pass force=True "
            "(--force) to pair their keys anyway"
        )
