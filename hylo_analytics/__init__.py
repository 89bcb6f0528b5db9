"""hylo_analytics: evaluation results of agents and robot policies, as dataframes.

The public API in verb families, in pipeline order (every name is also importable from its
stage's module; ``docs/architecture.md`` has the module map):

- **store**: :func:`open_store` -> :class:`Store` (``ingest``, ``score``, ``grade``, ``aggregate``,
  ``scorecard``, ``compare``, ``report``, ``sql``, ``table``, ``runs``)
- **ingest**: :class:`IngestReport`, :class:`IngestError`
- **score**: :func:`load_scorers`, :class:`DeclarativeScorer`, :class:`VectorizedScorer`,
  :class:`EpisodeScorer`, :class:`ScoringCall`, :class:`ScoringReport`
- **grade**: :class:`Grader`, :class:`GradeEvent`, :func:`vlm_judge` (run with
  ``Store.grade``; the rest in :mod:`hylo_analytics.scoring.graders`)
- **aggregate**: :func:`aggregate_scores`, :class:`AggregateResult`, :func:`scorecard`
- **compare**: :func:`compare_runs`, :func:`compare_scores`, :func:`paired_compare`,
  :class:`StatisticalRule`, :class:`RelativeNoiseRule`, :class:`ComparabilityError`
- **derive**: :func:`token_cost`, :func:`load_pricing`, :func:`paired_baseline`,
  :func:`evaluate_policies`, :class:`Policy`, :func:`measure_callable`
  (its ``MeasurementBudget`` in :mod:`hylo_analytics.derive`)
- **spec**: :func:`load_analysis_spec`, :func:`run_analysis`
- **output**: :func:`build_report`, :func:`export_evallog`, :mod:`charts`
- **contracts**: :class:`Score`, :class:`TaskSpec`, :class:`TaskInstance`, :class:`Benchmark`,
  :class:`Predicate`, :class:`MetricSpec`, :func:`default_registry`,
  :class:`DerivedMetricOutput`, :class:`ConfigError`
- **stats**: :mod:`stats`, the statistics engine every figure comes from
- **errors**: :class:`HyloError` (catch it for "the toolkit refused"); its families
  (input, selection, comparability, store, config) in :mod:`hylo_analytics.errors`, each
  also the built-in error it was before

Every name is imported on first use (PEP 562 ``__getattr__``): ``import hylo_analytics`` loads
no polars, pyarrow or DuckDB, and a stage loads only its own dependencies (scipy, altair,
jsonschema, ... stay out until a verb needs them; tests/test_lazy.py guards it).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names are loaded on first use (``_LAZY``); type checkers see them here
    from hylo_analytics import charts, stats
    from hylo_analytics.aggregate import AggregateResult, aggregate_scores
    from hylo_analytics.aggregate.scorecard import scorecard
    from hylo_analytics.analysis import load_analysis_spec, run_analysis
    from hylo_analytics.api import Store, open_store
    from hylo_analytics.compare import (
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
        Policy,
        evaluate_policies,
        load_pricing,
        measure_callable,
        paired_baseline,
    )
    from hylo_analytics.derive.token_cost import token_cost  # the function, not the module
    from hylo_analytics.errors import (
        ComparabilityError,
        ConfigError,
        HyloError,
        RunSelectionError,
        StoreNotFoundError,
    )
    from hylo_analytics.export import export_evallog
    from hylo_analytics.ingest import IngestError, IngestReport
    from hylo_analytics.metrics import MetricSpec, default_registry
    from hylo_analytics.report import build_report
    from hylo_analytics.scoring import (
        DeclarativeScorer,
        EpisodeScorer,
        ScoringCall,
        ScoringReport,
        VectorizedScorer,
        load_scorers,
    )
    from hylo_analytics.scoring.graders import GradeEvent, Grader, vlm_judge

__all__ = [
    "AggregateResult",
    "Benchmark",
    "ComparabilityError",
    "ConfigError",
    "DeclarativeScorer",
    "DerivedMetricOutput",
    "EpisodeScorer",
    "GradeEvent",
    "Grader",
    "HyloError",
    "IngestError",
    "IngestReport",
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
    "scorecard",
    "stats",
    "token_cost",
    "vlm_judge",
]

__version__ = "0.1.0"

# name -> the module that defines it. Importing a stage costs polars, pyarrow and DuckDB
# (about 0.4 s); charts and reports add altair and vl-convert (a second). A script that only
# reads a contract, and ``hylo-analytics --help``, pay for none of it.
_LAZY: dict[str, str] = {
    "charts": "hylo_analytics.charts",
    "ComparabilityError": "hylo_analytics.errors",
    "ConfigError": "hylo_analytics.errors",
    "HyloError": "hylo_analytics.errors",
    "IngestError": "hylo_analytics.ingest",
    "RunSelectionError": "hylo_analytics.errors",
    "StoreNotFoundError": "hylo_analytics.errors",
    "stats": "hylo_analytics.stats",
    "AggregateResult": "hylo_analytics.aggregate",
    "aggregate_scores": "hylo_analytics.aggregate",
    "scorecard": "hylo_analytics.aggregate.scorecard",
    "load_analysis_spec": "hylo_analytics.analysis",
    "run_analysis": "hylo_analytics.analysis",
    "Store": "hylo_analytics.api",
    "open_store": "hylo_analytics.api",
    "RelativeNoiseRule": "hylo_analytics.compare",
    "StatisticalRule": "hylo_analytics.compare",
    "compare_runs": "hylo_analytics.compare",
    "compare_scores": "hylo_analytics.compare",
    "paired_compare": "hylo_analytics.compare",
    "Benchmark": "hylo_analytics.contracts",
    "DerivedMetricOutput": "hylo_analytics.contracts",
    "Predicate": "hylo_analytics.contracts",
    "Score": "hylo_analytics.contracts",
    "TaskInstance": "hylo_analytics.contracts",
    "TaskSpec": "hylo_analytics.contracts",
    "Policy": "hylo_analytics.derive",
    "evaluate_policies": "hylo_analytics.derive",
    "load_pricing": "hylo_analytics.derive",
    "measure_callable": "hylo_analytics.derive",
    "paired_baseline": "hylo_analytics.derive",
    "token_cost": "hylo_analytics.derive",
    "export_evallog": "hylo_analytics.export",
    "IngestReport": "hylo_analytics.ingest",
    "MetricSpec": "hylo_analytics.metrics",
    "default_registry": "hylo_analytics.metrics",
    "build_report": "hylo_analytics.report",
    "DeclarativeScorer": "hylo_analytics.scoring",
    "EpisodeScorer": "hylo_analytics.scoring",
    "ScoringCall": "hylo_analytics.scoring",
    "ScoringReport": "hylo_analytics.scoring",
    "VectorizedScorer": "hylo_analytics.scoring",
    "load_scorers": "hylo_analytics.scoring",
    "GradeEvent": "hylo_analytics.scoring.graders",
    "Grader": "hylo_analytics.scoring.graders",
    "vlm_judge": "hylo_analytics.scoring.graders",
}


def __getattr__(name: str) -> Any:
    """Import the defining module at first access (PEP 562) and keep the value."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hylo_analytics' has no attribute {name!r}")
    target = importlib.import_module(module)
    value = target if module == f"{__name__}.{name}" else getattr(target, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
