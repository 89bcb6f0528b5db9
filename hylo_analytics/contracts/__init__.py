"""The spec's contracts as frozen dataclasses: one checked, hashable definition of each.

Two specs, one module each: the hylo-scorer contracts (``TaskSpec``, ``Benchmark``, ``Score``,
..., in ``_hylo_spec``) and WorldFoundry's (``MetricSpec``, ``EvaluationProtocolSpec``,
``WorldTaskConfig``, ``BenchmarkSpec``, in ``_worldfoundry``). Import them from here.
"""

from __future__ import annotations

from hylo_analytics.contracts._hylo_spec import (
    Benchmark,
    DerivedMetricOutput,
    InitSpec,
    InitStateRef,
    Predicate,
    Score,
    SeedInit,
    SnapshotInit,
    TaskInstance,
    TaskProvider,
    TaskSpec,
    Upstream,
    canonical_json,
)
from hylo_analytics.contracts._worldfoundry import (
    BENCHMARK_SPEC_SCHEMA_VERSION,
    EVALUATION_PROTOCOL_SCHEMA_VERSION,
    METRIC_SPEC_SCHEMA_VERSION,
    WORLD_TASK_CONFIG_SCHEMA_VERSION,
    BenchmarkSpec,
    EvaluationProtocolSpec,
    MetricSpec,
    WorldTaskConfig,
)

__all__ = [
    "BENCHMARK_SPEC_SCHEMA_VERSION",
    "EVALUATION_PROTOCOL_SCHEMA_VERSION",
    "METRIC_SPEC_SCHEMA_VERSION",
    "WORLD_TASK_CONFIG_SCHEMA_VERSION",
    "Benchmark",
    "BenchmarkSpec",
    "DerivedMetricOutput",
    "EvaluationProtocolSpec",
    "InitSpec",
    "InitStateRef",
    "MetricSpec",
    "Predicate",
    "Score",
    "SeedInit",
    "SnapshotInit",
    "TaskInstance",
    "TaskProvider",
    "TaskSpec",
    "Upstream",
    "WorldTaskConfig",
    "canonical_json",
]
