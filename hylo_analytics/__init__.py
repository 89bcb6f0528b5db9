"""hylo_analytics: evaluation results of agents and robot policies, as dataframes.

The public API in verb families, in pipeline order (every name is also importable from its
stage's module; ``docs/architecture.md`` has the module map):

- **store**: :func:`open_store` -> :class:`Store` (``ingest``, ``score``, ``aggregate``,
  ``compare``, ``report``, ``sql``, ``table``, ``runs``)
- **ingest**: :class:`IngestReport`, :class:`IngestError`
- **score**: :func:`load_scorers`, :class:`DeclarativeScorer`, :class:`VectorizedScorer`,
  :class:`EpisodeScorer`, :class:`ScoringCall`, :class:`ScoringReport`
- **aggregate**: :func:`aggregate_scores`, :class:`AggregateResult`
- **compare**: :func:`compare_runs`, :func:`compare_scores`, :func:`paired_compare`,
  :class:`StatisticalRule`, :class:`RelativeNoiseRule`, :class:`ComparabilityError`
- **derive**: :func:`token_cost`, :func:`load_pricing`, :func:`paired_baseline`,
  :func:`evaluate_policies`, :class:`Policy`, :func:`measure_callable`,
  :class:`MeasurementBudget`
- **spec**: :func:`load_analysis_spec`, :func:`run_analysis`
- **output**: :func:`build_report`, :func:`export_evallog`, :mod:`charts` (loaded on first use)
- **contracts**: :class:`Score`, :class:`TaskSpec`, :class:`TaskInstance`, :class:`Benchmark`,
  :class:`Predicate`, :class:`MetricSpec`, :func:`default_registry`,
  :class:`DerivedMetricOutput`, :class:`ConfigError`
- **stats**: :mod:`stats`, the statistics engine every figure comes from
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from hylo_analytics import stats
from hylo_analytics._config import ConfigError
from hylo_analytics.aggregate import AggregateResult, aggregate_scores
from hylo_analytics.analysis import load_analysis_spec, run_analysis
from hylo_analytics.api import Store, open_store
from hylo_analytics.compare import (
    ComparabilityError,
    RelativeNoiseRule,
    StatisticalRule,
    compare_runs,
    compare_scores,
    paired_compare,
)
from hylo_analytics.contracts import (
    Benchmark,
    DerivedMetricOutput,
    Predicate,
    Score,
    TaskInstance,
    TaskSpec,
)
from hylo_analytics.derive import (
    MeasurementBudget,
    Policy,
    evaluate_policies,
    load_pricing,
    measure_callable,
    paired_baseline,
    token_cost,
)
from hylo_analytics.export import export_evallog
from hylo_analytics.ingest import IngestError, IngestReport
from hylo_analytics.metrics import MetricSpec, default_registry
from hylo_analytics.scoring import (
    DeclarativeScorer,
    EpisodeScorer,
    ScoringCall,
    ScoringReport,
    VectorizedScorer,
    load_scorers,
)
from hylo_analytics.store import RunSelectionError, StoreNotFoundError

if TYPE_CHECKING:  # loaded on first use: altair and vl-convert take a second to import
    from hylo_analytics import charts
    from hylo_analytics.report import build_report

__all__ = [
    "AggregateResult",
    "Benchmark",
    "ComparabilityError",
    "ConfigError",
    "DeclarativeScorer",
    "DerivedMetricOutput",
    "EpisodeScorer",
    "IngestError",
    "IngestReport",
    "MeasurementBudget",
    "MetricSpec",
    "Policy",
    "Predicate",
    "RelativeNoiseRule",
    "RunSelectionError",
    "Score",
    "ScoringCall",
    "ScoringReport",
    "StatisticalRule",
    "Store",
    "StoreNotFoundError",
    "TaskInstance",
    "TaskSpec",
    "VectorizedScorer",
    "aggregate_scores",
    "build_report",
    "charts",
    "compare_runs",
    "compare_scores",
    "default_registry",
    "evaluate_policies",
    "export_evallog",
    "load_analysis_spec",
    "load_pricing",
    "load_scorers",
    "measure_callable",
    "open_store",
    "paired_baseline",
    "paired_compare",
    "run_analysis",
    "stats",
    "token_cost",
]

__version__ = "0.1.0"

_LAZY = {
    "charts": ("hylo_analytics.charts", None),
    "build_report": ("hylo_analytics.report", "build_report"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'hylo_analytics' has no attribute {name!r}")
    module, attr = _LAZY[name]
    value = importlib.import_module(module)
    return value if attr is None else getattr(value, attr)
