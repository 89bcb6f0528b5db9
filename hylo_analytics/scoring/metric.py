"""The old path of :mod:`hylo_analytics.scoring.metric_protocol`, kept so old imports work.

The module was renamed (issue 30): three modules were called "metric". This one only
re-exports; new code imports from :mod:`hylo_analytics.scoring.metric_protocol`.
"""

from __future__ import annotations

from hylo_analytics.scoring.metric_protocol import (
    METRIC_RESULT_COLUMNS,
    METRIC_RESULT_SCHEMA_VERSION,
    Metric,
    MetricRequest,
    MetricResult,
    MetricScorer,
    MetricSubject,
    as_metric_scorer,
    is_metric,
    metric_rows,
)

__all__ = [
    "METRIC_RESULT_COLUMNS",
    "METRIC_RESULT_SCHEMA_VERSION",
    "Metric",
    "MetricRequest",
    "MetricResult",
    "MetricScorer",
    "MetricSubject",
    "as_metric_scorer",
    "is_metric",
    "metric_rows",
]
