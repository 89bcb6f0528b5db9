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
