"""MetricSpec and the registry: built-ins, aliases, clear errors."""

from __future__ import annotations

import polars as pl
import pytest

from hylo_analytics.metrics import (
    BUILTIN_METRICS,
    MetricRegistry,
    MetricSpec,
    default_registry,
    get_metric,
    normalize_expr,
)


@pytest.mark.parametrize(
    ("name", "higher", "kind", "unit"),
    [
        ("success", True, "binary", "fraction"),
        ("success_once", True, "binary", "fraction"),
        ("success_at_end", True, "binary", "fraction"),
        ("steps", False, "count", "steps"),
        ("safety_interventions", False, "count", "count"),
        ("return", True, "continuous", ""),
        ("latency_p95", False, "continuous", "ms"),
    ],
)
def test_builtin_specs(name, higher, kind, unit):
    spec = get_metric(name)
    assert (spec.id, spec.higher_is_better, spec.kind, spec.output_unit) == (
        name,
        higher,
        kind,
        unit,
    )


def test_aliases_resolve_to_the_canonical_id():
    reg = default_registry()
    assert reg.resolve("success_rate") == "success"
    assert reg.get("episode_length").id == "steps"
    assert "interventions" in reg
    assert reg.alias_map()["reward_sum"] == "return"


def test_unknown_metric_error_lists_the_known_ones():
    with pytest.raises(KeyError) as exc:
        get_metric("sucess")
    text = str(exc.value)
    assert "unknown metric 'sucess'" in text
    for spec in BUILTIN_METRICS:
        assert spec.id in text


def test_alias_clash_is_an_error_and_registering_copies():
    reg = default_registry()
    with pytest.raises(ValueError, match="already used by 'success'"):
        reg.register(MetricSpec(id="my_success", aliases=("success_rate",)))
    reg.register(MetricSpec(id="score", kind="continuous"))
    assert "score" in reg and "score" not in default_registry()
    with pytest.raises(ValueError, match="already registered"):
        reg.register(MetricSpec(id="score"))


def test_from_dict_accepts_metric_id_and_lists():
    spec = MetricSpec.from_dict({"metric_id": "x", "aliases": ["y"], "statistics": ["mean"]})
    assert spec.id == spec.metric_id == "x"
    assert spec.aliases == ("y",)
    with pytest.raises(ValueError, match="unknown fields \\['colour'\\]"):
        MetricSpec.from_dict({"id": "x", "colour": "red"})


def test_spec_is_frozen_and_validated():
    spec = MetricSpec(id="x", metadata={"a": 1})
    with pytest.raises(AttributeError):
        spec.id = "y"  # type: ignore[misc]
    with pytest.raises(TypeError):
        spec.metadata["a"] = 2  # type: ignore[index]
    with pytest.raises(ValueError, match="kind must be"):
        MetricSpec(id="x", kind="ordinal")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="normalizer 'log' is not understood"):
        MetricSpec(id="x", normalizer="log")


def test_normalizers():
    df = pl.DataFrame({"value": [0.0, 50.0, 100.0]})
    up = normalize_expr(MetricSpec(id="a", normalizer="minmax:0:100"))
    down = normalize_expr(MetricSpec(id="b", normalizer="inverse_minmax:0:100"))
    assert up is not None and down is not None
    assert df.select(up).to_series().to_list() == [0.0, 0.5, 1.0]
    assert df.select(down).to_series().to_list() == [1.0, 0.5, 0.0]
    assert normalize_expr(MetricSpec(id="c")) is None


def test_spec_or_default_for_metrics_only_the_data_knows():
    reg = MetricRegistry()
    spec = reg.spec_or_default("custom", "binary")
    assert spec.kind == "binary" and spec.higher_is_better is None


# --- the aggregation fields are validated, and match what the engine computes -------------


def test_unknown_aggregator_statistic_or_weight_is_an_error_naming_the_field():
    with pytest.raises(ValueError, match=r"MetricSpec.aggregator: metric 'x': 'mode' is not"):
        MetricSpec(id="x", aggregator="mode")
    with pytest.raises(ValueError, match=r"MetricSpec.statistics: metric 'x': \['p99'\]"):
        MetricSpec(id="x", statistics=("mean", "p99"))
    for bad in (-1.0, float("inf"), float("nan"), True, "2"):
        with pytest.raises(ValueError, match=r"MetricSpec\.weight"):
            MetricSpec(id="x", weight=bad)  # type: ignore[arg-type]
    spec = MetricSpec(id="x", aggregator="iqm", statistics=["median", "ci"], weight=2)  # type: ignore[arg-type]
    assert (spec.aggregator, spec.statistics, spec.weight) == ("iqm", ("median", "ci"), 2.0)


def test_every_aggregator_and_statistic_is_a_column_the_engine_computes():
    from hylo_analytics.aggregate._engine import ON_REQUEST, STATISTICS
    from hylo_analytics.metrics import AGGREGATORS, SPEC_STATISTICS

    assert set(SPEC_STATISTICS) - {"ci"} == {*STATISTICS, *ON_REQUEST}
    assert set(AGGREGATORS) <= set(SPEC_STATISTICS)


def test_metric_spec_to_dict_round_trips():
    for spec in BUILTIN_METRICS:
        assert MetricSpec.from_dict(spec.to_dict()) == spec
    spec = MetricSpec(id="x", aggregator="p95", metadata={"k": [1, 2]}, tags=("a",))
    d = spec.to_dict()
    assert d["aggregator"] == "p95" and d["tags"] == ["a"] and d["metadata"] == {"k": [1, 2]}
    assert MetricSpec.from_dict(d) == spec


# --- EvaluationProtocolSpec, WorldTaskConfig, BenchmarkSpec -------------------------------


def test_contract_defaults_and_schema_versions():
    from hylo_analytics.metrics import BenchmarkSpec, EvaluationProtocolSpec, WorldTaskConfig

    p = EvaluationProtocolSpec(name="open")
    assert (p.metric_ids, p.metric_groups, dict(p.metadata)) == ((), (), {})
    assert p.schema_version == "worldfoundry.evaluation_protocol/v1"
    t = WorldTaskConfig(name="t")
    assert (t.protocol, t.evaluation_protocol, t.capability_track, t.schema_type) == (
        "open_loop", "reference_metrics", "core_video", "sample",
    )  # fmt: skip
    assert (t.input_keys, t.output_keys, t.task_id) == ((), ("generated_video",), "t")
    assert t.schema_version == "worldfoundry.world_task_config/v1"
    b = BenchmarkSpec(benchmark_id="nav")
    assert (b.name, b.benchmark_id, b.version, b.splits, b.dataset_root) == (
        "nav", "nav", "1.0", ("default",), None,
    )  # fmt: skip
    assert b.schema_version == "worldfoundry.benchmark_spec/v1"
    with pytest.raises(AttributeError):
        b.name = "other"  # type: ignore[misc]


def test_benchmark_round_trips_and_coerces_tasks_and_metrics():
    from hylo_analytics.metrics import BenchmarkSpec, WorldTaskConfig

    task = WorldTaskConfig(
        name="action-conditioned-video",
        input_keys=("image", "actions"),
        metric_ids=("artifact_count_example",),
        generation_defaults={"fps": 12, "seed": 42},
    )
    bench = BenchmarkSpec(
        name="navigation-smoke-test",
        tasks=[task.to_dict()],  # type: ignore[list-item]
        metrics=[{"metric_id": "artifact_count_example", "aggregator": "median"}],  # type: ignore[list-item]
        splits=["validation"],  # type: ignore[arg-type]
        metadata={"owner": "wf"},
    )
    assert bench.tasks == (task,) and isinstance(bench.metrics[0], MetricSpec)
    assert bench.metrics[0].aggregator == "median" and bench.splits == ("validation",)
    d = bench.to_dict()
    assert d["tasks"][0]["generation_defaults"] == {"fps": 12, "seed": 42}
    assert "task_id" not in d["tasks"][0] and "benchmark_id" not in d
    assert BenchmarkSpec.from_dict(d) == bench
    assert WorldTaskConfig.from_dict({"task_id": "a"}).name == "a"
    assert BenchmarkSpec.from_dict({"benchmark_id": "b"}).benchmark_id == "b"


@pytest.mark.parametrize(
    ("data", "where"),
    [
        ({"name": "b", "metrics": [{"id": "x"}, {"id": "y", "weight": -1}]},
         r"BenchmarkSpec.metrics\[1\].weight: metric 'y'"),
        ({"name": "b", "metrics": [{"id": "x", "colour": "red"}]},
         r"BenchmarkSpec.metrics\[0\]: MetricSpec.from_dict: unknown fields \['colour'\]"),
        ({"name": "b", "tasks": [{"name": "t", "input_keys": 3}]},
         r"BenchmarkSpec.tasks\[0\].input_keys: expected a list of strings"),
        ({"name": "b", "tasks": [{"protocol": "open_loop"}]},
         r"BenchmarkSpec.tasks\[0\].name: expected a non-empty string"),
        ({"name": "b", "tasks": ["t"]}, r"BenchmarkSpec.tasks\[0\]: expected a WorldTaskConfig"),
        ({"name": "b", "metrics": [{"id": "x"}, {"id": "x"}]}, r"'x' is declared twice"),
        ({"name": "b", "split": ["a"]}, r"BenchmarkSpec.split: unknown field"),
        ({"version": "2"}, r"BenchmarkSpec.name: expected a non-empty string"),
        ({"name": "a", "benchmark_id": "b"}, r"BenchmarkSpec.benchmark_id: 'b' differs"),
    ],
)  # fmt: skip
def test_benchmark_errors_name_the_field(data, where):
    from hylo_analytics.metrics import BenchmarkSpec

    with pytest.raises(ValueError, match=where):
        BenchmarkSpec.from_dict(data)


def test_protocol_from_mapping_keeps_extra_keys_and_coerce_many_reads_catalog_forms():
    from hylo_analytics.metrics import EvaluationProtocolSpec as P

    p = P.from_mapping(
        {"name": "judge", "metric_ids": ["vlm"], "judge_model": "m", "metadata": {"a": 1}}
    )
    assert p.metric_ids == ("vlm",) and dict(p.metadata) == {"a": 1, "judge_model": "m"}
    assert P.from_mapping(p.to_dict()) == p
    assert P.coerce_many(None) == ()
    assert P.coerce_many("open_loop") == (P(name="open_loop"),)
    assert P.coerce_many(p) == (p,)
    assert P.coerce_many({"a": ["x", "y"], "b": {"metric_groups": ["g"]}}) == (
        P(name="a", metric_ids=("x", "y")),
        P(name="b", metric_groups=("g",)),
    )
    assert P.coerce_many(["a", {"name": "b"}]) == (P(name="a"), P(name="b"))
    with pytest.raises(ValueError, match=r"EvaluationProtocolSpec\.name: missing"):
        P.from_mapping({"metric_ids": ["x"]})
    with pytest.raises(ValueError, match=r"EvaluationProtocolSpec\.metric_ids"):
        P(name="a", metric_ids=[1])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="cannot make a protocol of 3"):
        P.coerce_many(3)


def test_load_metric_specs_from_yaml_json_and_benchmark_files(tmp_path):
    from hylo_analytics.metrics import BenchmarkSpec, load_metric_specs

    y = tmp_path / "m.yaml"
    y.write_text("- {id: success, aggregator: median}\n- {id: steps, weight: 0}\n")
    specs = load_metric_specs(y)
    assert isinstance(specs, tuple) and [s.aggregator for s in specs] == ["median", "mean"]
    j = tmp_path / "m.json"
    j.write_text('{"metrics": [{"metric_id": "x", "primary": true}]}')
    assert load_metric_specs(j) == (MetricSpec(id="x", primary=True),)
    b = tmp_path / "b.yaml"
    b.write_text("name: bench\nmetrics: [{id: x}]\ntasks: [{name: t}]\n")
    bench = load_metric_specs(b)
    assert isinstance(bench, BenchmarkSpec) and bench.tasks[0].name == "t"
    bad = tmp_path / "bad.yaml"
    bad.write_text("- {id: a}\n- {id: b, aggregator: mode}\n")
    with pytest.raises(ValueError, match=r"bad.yaml: BenchmarkSpec.metrics\[1\].aggregator"):
        load_metric_specs(bad)
    broken = tmp_path / "broken.yaml"
    broken.write_text("- {id: a\n")
    with pytest.raises(ValueError, match=r"broken\.yaml: not valid YAML"):
        load_metric_specs(broken)
    scalar = tmp_path / "s.json"
    scalar.write_text("3")
    with pytest.raises(ValueError, match=r"s\.json: expected a list of metric specs"):
        load_metric_specs(scalar)
    with pytest.raises(FileNotFoundError, match="cannot read"):
        load_metric_specs(tmp_path / "absent.yaml")
