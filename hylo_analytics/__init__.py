"""hylo_analytics: evaluation results of agents and robot policies, as dataframes."""

from hylo_analytics.aggregate import aggregate
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

__all__ = [
    "AggregateResult",
    "Benchmark",
    "DeclarativeScorer",
    "EpisodeScorer",
    "IngestError",
    "IngestReport",
    "InitStateRef",
    "MetricRegistry",
    "MetricSpec",
    "Predicate",
    "Problem",
    "Reducer",
    "Score",
    "ScorerDeclaration",
    "ScoringCall",
    "ScoringReport",
    "SeedInit",
    "SnapshotInit",
    "Store",
    "TaskInstance",
    "TaskSpec",
    "Tombstone",
    "VectorizedScorer",
    "aggregate",
    "at_least",
    "default_registry",
    "get_metric",
    "load_scorers",
    "open_store",
    "pass_at_k",
    "results_from_frame",
]

__version__ = "0.1.0"
