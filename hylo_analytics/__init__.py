"""hylo_analytics: evaluation results of agents and robot policies, as dataframes."""

from hylo_analytics._config import ConfigError
from hylo_analytics.aggregate import aggregate
from hylo_analytics.analysis import (
    AnalysisReport,
    AnalysisSpec,
    load_analysis_spec,
    run_analysis,
)
from hylo_analytics.baseline import (
    BaselineResult,
    PairedBaseline,
    paired_baseline,
)
from hylo_analytics.compare import PairedComparison, mcnemar_exact, paired_compare
from hylo_analytics.contracts import (
    Benchmark,
    DerivedMetricOutput,
    InitStateRef,
    Predicate,
    Score,
    SeedInit,
    SnapshotInit,
    TaskInstance,
    TaskSpec,
)
from hylo_analytics.derive import (
    TokenCostInputs,
    TokenCostResult,
    commit_scores,
    token_cost,
)
from hylo_analytics.export import export_evallog
from hylo_analytics.ingest import IngestError, IngestReport, Problem
from hylo_analytics.measure import (
    Measurement,
    MeasurementBudget,
    measure_callable,
    record_measurement,
)
from hylo_analytics.metrics import MetricRegistry, MetricSpec, default_registry, get_metric
from hylo_analytics.paired import ComparabilityError, compare_runs, compare_scores
from hylo_analytics.policies import (
    Between,
    Policy,
    PolicyEvaluation,
    commit_policy_results,
    evaluate_policies,
    parse_policies,
)
from hylo_analytics.post_derive import StoreBaselineResult
from hylo_analytics.pricing import PricingTable, load_pricing
from hylo_analytics.reducers import Reducer, at_least, pass_at_k
from hylo_analytics.report import ComparisonReport, build_report, report_frames, write_report
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
    "AnalysisReport",
    "AnalysisSpec",
    "BaselineResult",
    "Benchmark",
    "Between",
    "ComparabilityError",
    "ComparisonReport",
    "ConfigError",
    "DeclarativeScorer",
    "DerivedMetricOutput",
    "EpisodeScorer",
    "IngestError",
    "IngestReport",
    "InitStateRef",
    "Measurement",
    "MeasurementBudget",
    "MetricRegistry",
    "MetricSpec",
    "PairedBaseline",
    "PairedComparison",
    "Policy",
    "PolicyEvaluation",
    "Predicate",
    "PricingTable",
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
    "StoreBaselineResult",
    "TaskInstance",
    "TaskSpec",
    "TokenCostInputs",
    "TokenCostResult",
    "Tombstone",
    "VectorizedScorer",
    "add_verdicts",
    "aggregate",
    "at_least",
    "build_report",
    "commit_policy_results",
    "commit_scores",
    "compare_runs",
    "compare_scores",
    "default_registry",
    "evaluate_policies",
    "export_evallog",
    "get_metric",
    "load_analysis_spec",
    "load_pricing",
    "load_scorers",
    "mcnemar_exact",
    "measure_callable",
    "open_store",
    "paired_baseline",
    "paired_compare",
    "parse_policies",
    "pass_at_k",
    "record_measurement",
    "report_frames",
    "results_from_frame",
    "run_analysis",
    "token_cost",
    "write_report",
]

__version__ = "0.1.0"
