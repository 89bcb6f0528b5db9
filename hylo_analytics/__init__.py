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
from hylo_analytics.report import ComparisonReport, build_report, report_frames, write_report
from hylo_analytics.store import Store, Tombstone, open_store

__all__ = [
    "Benchmark",
    "ComparisonReport",
    "IngestError",
    "IngestReport",
    "InitStateRef",
    "Predicate",
    "Problem",
    "Score",
    "SeedInit",
    "SnapshotInit",
    "Store",
    "TaskInstance",
    "TaskSpec",
    "Tombstone",
    "build_report",
    "open_store",
    "report_frames",
    "write_report",
]

__version__ = "0.1.0"
