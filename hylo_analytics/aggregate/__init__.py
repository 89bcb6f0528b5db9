"""The aggregate stage: group-by statistics over the one score resolution.

:func:`aggregate_scores` returns a polars frame with one row per group and metric;
:class:`AggregateResult` is the WorldFoundry contract view of one of its rows.
:func:`hylo_analytics.aggregate.scorecard.scorecard` (``ha.scorecard``) reports each metric as
its spec declares (aggregator, statistics, weight, primary) with one weighted score per run.
:func:`task_summaries` summarizes tasks beyond the mean (IQM, profiles, P(X > Y));
:func:`pass_k_curves` gives pass@k and pass^k curves over the items of repeated samples;
:func:`shrunk_rates` shrinks per-task rates toward their suite (small-n pooling).
"""

from hylo_analytics.aggregate._engine import CI_METHODS, STATISTICS, aggregate_scores
from hylo_analytics.aggregate.repeated import pass_k_curves
from hylo_analytics.aggregate.result import AggregateResult, results_from_frame
from hylo_analytics.aggregate.scorecard import Scorecard  # the function stays in its module
from hylo_analytics.aggregate.shrinkage import shrunk_rates
from hylo_analytics.aggregate.summaries import TaskSummaries, task_summaries

__all__ = [
    "CI_METHODS",
    "STATISTICS",
    "AggregateResult",
    "Scorecard",
    "TaskSummaries",
    "aggregate_scores",
    "pass_k_curves",
    "results_from_frame",
    "shrunk_rates",
    "task_summaries",
]
