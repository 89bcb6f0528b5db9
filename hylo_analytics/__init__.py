"""hylo_analytics: evaluation results of agents and robot policies, as dataframes."""

from hylo_analytics._config import ConfigError
from hylo_analytics.analysis import (
    AnalysisReport,
    AnalysisSpec,
    NotAvailableError,
    load_analysis_spec,
    run_analysis,
)
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
from hylo_analytics.derive import (
    DerivedMetricOutput,
    TokenCostInputs,
    TokenCostResult,
    commit_scores,
    token_cost,
)
from hylo_analytics.ingest import IngestError, IngestReport, Problem
from hylo_analytics.measure import (
    Measurement,
    MeasurementBudget,
    measure_callable,
    record_measurement,
)
from hylo_analytics.policies import (
    Between,
    Policy,
    PolicyEvaluation,
    commit_policy_results,
    evaluate_policies,
    parse_policies,
)
from hylo_analytics.pricing import PricingTable, load_pricing
from hylo_analytics.store import Store, Tombstone, open_store

__all__ = [
    "AnalysisReport",
    "AnalysisSpec",
    "Benchmark",
    "Between",
    "ConfigError",
    "DerivedMetricOutput",
    "IngestError",
    "IngestReport",
    "InitStateRef",
    "Measurement",
    "MeasurementBudget",
    "NotAvailableError",
    "Policy",
    "PolicyEvaluation",
    "Predicate",
    "PricingTable",
    "Problem",
    "Score",
    "SeedInit",
    "SnapshotInit",
    "Store",
    "TaskInstance",
    "TaskSpec",
    "TokenCostInputs",
    "TokenCostResult",
    "Tombstone",
    "commit_policy_results",
    "commit_scores",
    "evaluate_policies",
    "load_analysis_spec",
    "load_pricing",
    "measure_callable",
    "open_store",
    "parse_policies",
    "record_measurement",
    "run_analysis",
    "token_cost",
]

__version__ = "0.1.0"
