"""A Metric's own aggregate over the stored MetricResults, else the standard one."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

import hylo_analytics as ha
from hylo_analytics.aggregate import AggregateResult
from hylo_analytics.aggregate.metric import aggregate_metric
from hylo_analytics.scoring.metric import MetricRequest, MetricResult, MetricSubject


class ArtifactCount:
    """The spec's example metric, as written there (with a value per sample)."""

    name = "artifact_count_example"
    version = "1.0"
    required_artifacts = ()
    higher_is_better = None

    def compute_sample(self, request: MetricRequest, result: MetricSubject) -> MetricResult:
        if request.seed == 3:
            return MetricResult(request.sample_id, self.name, valid=False, skip_reason="no video")
        value = request.seed
        return MetricResult(
            sample_id=request.sample_id, metric_id=self.name, raw_value=value,
            normalized_value=value,
        )  # fmt: skip

    def aggregate(self, results: Sequence[MetricResult]) -> AggregateResult:
        values = [item.raw_value for item in results if item.valid]
        mean = sum(values) / len(values) if values else None
        return AggregateResult(
            metric_id=self.name,
            n_total=len(results),
            n_valid=len(values),
            n_skipped=len(results) - len(values),
            raw_stats={"mean": mean},
            normalized_stats={"mean": mean},
            valid=bool(values),
        )


def _store(tmp_path: Path) -> ha.Store:
    s = ha.open_store(tmp_path / "s")
    for model, seeds in (("a", (1, 2, 3)), ("b", (4, 5, 6, 7))):
        p = tmp_path / f"{model}.jsonl"
        recs = [{"sample_id": f"t#{i}", "metric_id": "m", "raw_value": i} for i in seeds]
        p.write_text("".join(json.dumps(r) + "\n" for r in recs))
        s.ingest(p, progress=False)
    return s


@pytest.mark.slow
def test_the_metrics_own_aggregate_per_run(tmp_path: Path) -> None:
    store = _store(tmp_path)
    m = ArtifactCount()
    store.score([m])
    out = aggregate_metric(store.parquet, m)
    by_agent = {store.sql(
        "select agent_name from stg_runs where run_id = $r", {"r": r}
    ).item(): a for r, a in out.items()}  # fmt: skip
    a, b = by_agent["a"], by_agent["b"]
    assert (a.n_total, a.n_valid, a.n_skipped, a.raw_stats["mean"]) == (3, 2, 1, 1.5)
    assert (b.n_total, b.n_valid, b.raw_stats["mean"]) == (4, 4, 5.5)
    only = aggregate_metric(store.parquet, m, runs=[next(iter(out))])
    assert list(only) == [next(iter(out))]


@pytest.mark.slow
def test_without_aggregate_the_standard_one_applies(tmp_path: Path) -> None:
    store = _store(tmp_path)
    out = aggregate_metric(store.parquet, "m")
    means = sorted(r.raw_stats["mean"] for r in out.values())
    assert means == [2.0, 5.5]
    assert all(r.confidence_interval for r in out.values())  # the standard one has an interval


@pytest.mark.slow
def test_a_wrong_aggregate_type_is_an_error_naming_the_metric(tmp_path: Path) -> None:
    store = _store(tmp_path)

    class Bad(ArtifactCount):
        def aggregate(self, results: Sequence[MetricResult]) -> AggregateResult:
            return {"mean": 1}  # type: ignore[return-value]

    store.score([Bad()])
    with pytest.raises(TypeError, match=r"artifact_count_example\.aggregate returned dict"):
        aggregate_metric(store.parquet, Bad())


def test_aggregate_result_dict_round_trip_and_spec_counts() -> None:
    r = AggregateResult("m", n_total=3, n_valid=1, n_skipped=2, raw_stats={"mean": 0.5})
    assert AggregateResult.from_dict(r.to_dict()) == r
    assert AggregateResult.from_dict(json.loads(json.dumps(r.to_dict()))) == r
    with pytest.raises(ValueError, match="n_total=3"):
        AggregateResult("m", n_total=3, n_valid=1, n_skipped=1)
    with pytest.raises(ValueError, match=r"unknown fields \['nope'\]"):
        AggregateResult.from_dict({"metric_id": "m", "nope": 1})
