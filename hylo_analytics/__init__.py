"""hylo_analytics: evaluation results of agents and robot policies, as dataframes."""

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
from hylo_analytics.paired import ComparabilityError, compare_runs, compare_scores
from hylo_analytics.store import Store, Tombstone, open_store
from hylo_analytics.verdicts import RelativeNoiseRule, StatisticalRule, add_verdicts

__all__ = [
    "BaselineResult",
    "Benchmark",
    "ComparabilityError",
    "DerivedMetricOutput",
    "IngestError",
    "IngestReport",
    "InitStateRef",
    "PairedBaseline",
    "PairedComparison",
    "Predicate",
    "Problem",
    "RelativeNoiseRule",
    "Score",
    "SeedInit",
    "SnapshotInit",
    "StatisticalRule",
    "Store",
    "TaskInstance",
    "TaskSpec",
    "Tombstone",
    "add_verdicts",
    "compare_runs",
    "compare_scores",
    "mcnemar_exact",
    "open_store",
    "paired_baseline",
    "paired_compare",
]

__version__ = "0.1.0"
