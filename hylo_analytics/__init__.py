"""hylo_analytics: evaluation results of agents and robot policies, as dataframes."""

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
    "Benchmark",
    "DeclarativeScorer",
    "EpisodeScorer",
    "IngestError",
    "IngestReport",
    "InitStateRef",
    "Predicate",
    "Problem",
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
    "load_scorers",
    "open_store",
]

__version__ = "0.1.0"
