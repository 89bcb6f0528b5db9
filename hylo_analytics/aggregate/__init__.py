"""The aggregate stage: group-by statistics over the one score resolution.

:func:`aggregate_scores` returns a polars frame with one row per group and metric;
:class:`AggregateResult` is the WorldFoundry contract view of one of its rows.
"""

from hylo_analytics.aggregate._engine import CI_METHODS, STATISTICS, aggregate_scores
from hylo_analytics.aggregate.result import AggregateResult, results_from_frame

__all__ = ["CI_METHODS", "STATISTICS", "AggregateResult", "aggregate_scores", "results_from_frame"]
