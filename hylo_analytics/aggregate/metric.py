"""A WorldFoundry Metric's aggregate per run, from the MetricResults the store holds.

Here (stage ``aggregate``) rather than beside the protocol in :mod:`hylo_analytics.scoring.metric`,
which comes earlier in the module map.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from hylo_analytics.aggregate._engine import aggregate_scores
from hylo_analytics.aggregate.result import AggregateResult, results_from_frame
from hylo_analytics.errors import InputTypeError
from hylo_analytics.scoring.metric import MetricResult, as_metric_scorer

if TYPE_CHECKING:
    from hylo_analytics.store import ParquetStore

__all__ = ["aggregate_metric"]


def aggregate_metric(
    store: ParquetStore, metric: Any, runs: Sequence[str] | None = None
) -> dict[str, AggregateResult]:
    """``AggregateResult`` per run of ``metric``'s stored results (resolved scores).

    With ``metric.aggregate`` it is called once per run with that run's MetricResults (the
    preferred row per sample, in key order); without it, the standard aggregate applies.
    """
    name = metric if isinstance(metric, str) else as_metric_scorer(metric).name
    run_ids = store.resolve_runs(runs) if runs is not None else None
    own = None if isinstance(metric, str) else getattr(metric, "aggregate", None)
    if not callable(own):
        frame = aggregate_scores(store, metrics=[name])
        if run_ids is not None:
            frame = frame.filter(pl.col("run_id").is_in(run_ids))
        return {r.group["run_id"]: r for r in results_from_frame(frame)}
    rows = store.sql(
        """select s.* from int_scores_preferred as p
           join stg_scores as s on s.run_id = p.run_id and s.key is not distinct from p.key
                and s.epoch is not distinct from p.epoch and s.metric = p.metric
                and s.source = p.source
           where p.metric = $m and ($runs is null or list_contains($runs, p.run_id))
           order by s.run_id, s.key, s.epoch""",
        {"m": name, "runs": run_ids},
    )
    out: dict[str, AggregateResult] = {}
    for (run_id,), part in rows.group_by("run_id", maintain_order=True):
        results = [MetricResult.from_score_row(r) for r in part.iter_rows(named=True)]
        agg = own(results)
        if not isinstance(agg, AggregateResult):
            raise InputTypeError(
                f"{name}.aggregate returned {type(agg).__name__}, expected AggregateResult"
            )
        out[str(run_id)] = agg
    return out
