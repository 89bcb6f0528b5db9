"""hylo_analytics: evaluation results of agents and robot policies, as dataframes."""

from hylo_analytics.aggregate import aggregate
from hylo_analytics.baseline import (
    BaselineResult,
    DerivedMetricOutput,
    PairedBaseline,
    paired_baseline,
)
from hylo_analytics.compare import PairedComparison, mcnemar_exact, paired_compare
from hylo_analytics.contracts import (
    Benchmark,
    InitStateRef,
    Predicate,
    Score,
    SeedInit,
    SnapshotInit,
    TaskInstance,
    TaskSpec,
)
from hylo_analytics.ingest import IngestError, IngestReport, Problem
from hylo_analytics.metrics import MetricRegistry, MetricSpec, default_registry, get_metric
from hylo_analytics.paired import ComparabilityError, compare_runs, compare_scores
from hylo_analytics.reducers import Reducer, at_least, pass_at_k
from hylo_analytics.results import AggregateResult, results_from_frame
from hylo_analytics.scoring import (
    DeclarativeScorer,
    EpisodeScorer,
    ScorerDeclaration,
    ScoringCall,
    ScoringReport,
    VectorizedScorer,
    load_scorers,
)
from hylo_analytics.store import Store, Tombstone, open_store
from hylo_analytics.verdicts import RelativeNoiseRule, StatisticalRule, add_verdicts

__all__ = [
    "AggregateResult",
    "BaselineResult",
    "Benchmark",
    "ComparabilityError",
    "DeclarativeScorer",
    "DerivedMetricOutput",
    "EpisodeScorer",
    "IngestError",
    "IngestReport",
    "InitStateRef",
    "MetricRegistry",
    "MetricSpec",
    "PairedBaseline",
    "PairedComparison",
    "Predicate",
    "Problem",
    "Reducer",
    "RelativeNoiseRule",
    "Score",
    "ScorerDeclaration",
    "ScoringCall",
    "ScoringReport",
    "SeedInit",
    "SnapshotInit",
    "StatisticalRule",
    "Store",
    "TaskInstance",
    "TaskSpec",
    "Tombstone",
    "VectorizedScorer",
    "add_verdicts",
    "aggregate",
    "at_least",
    "compare_runs",
    "compare_scores",
    "default_registry",
    "get_metric",
    "load_scorers",
    "mcnemar_exact",
    "open_store",
    "paired_baseline",
    "paired_compare",
    "pass_at_k",
    "results_from_frame",
]

__version__ = "0.1.0"
