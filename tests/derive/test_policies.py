"""Policies: every operator at its boundary, exactly-one-requirement, status change, the store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pytest

import hylo_analytics as ha
from hylo_analytics.derive import commit_policy_results
from hylo_analytics.derive.policies import Between, Policy, evaluate_policies, parse_policies


def _metrics(values: list[float | None], metric: str = "m") -> pl.DataFrame:
    return pl.DataFrame(
        {
            "run_id": ["r"] * len(values),
            "key": [f"k{i}" for i in range(len(values))],
            "metric": [metric] * len(values),
            "value": values,
        },
        schema_overrides={"value": pl.Float64},
    )


@pytest.mark.parametrize(
    ("op", "req", "values", "expected"),
    [
        ("must_equal", 1.0, [1.0, 0.999], [True, False]),
        ("must_equal", True, [1.0, 0.0], [True, False]),  # booleans are 1/0 metrics
        ("must_not_equal", 1.0, [1.0, 1.001], [False, True]),
        ("must_greater", 5.0, [5.0, 5.000001, 4.9], [False, True, False]),
        ("must_greater_equal", 5.0, [5.0, 4.999999, 6.0], [True, False, True]),
        ("must_less", 0.001, [0.001, 0.000999, 0.002], [False, True, False]),
        ("must_less_equal", 0.001, [0.001, 0.0010001, 0.0], [True, False, True]),
        ("must_in", (1, 2), [1.0, 2.0, 1.5], [True, True, False]),
        ("must_not_in", (1, 2), [1.0, 2.0, 1.5], [False, False, True]),
        (
            "must_between",
            Between(0, 500, True),
            [0.0, 500.0, -0.1, 500.1],
            [True, True, False, False],
        ),
        (
            "must_between",
            Between(0, 500, False),
            [0.0, 500.0, 0.1, 499.9],
            [False, False, True, True],
        ),
    ],
)
def test_every_operator_at_its_boundary(
    op: str, req: Any, values: list[float], expected: list[bool]
) -> None:
    policy = Policy("p", "m", **{op: req})
    ev = evaluate_policies(_metrics(values), [policy])
    assert ev.results.sort("key")["passed"].to_list() == expected
    assert ev.results["requirement"][0] == policy.describe()


def test_string_metrics_compare_as_strings() -> None:
    df = pl.DataFrame(
        {"run_id": ["r", "r"], "key": ["a", "b"], "metric": ["q"] * 2, "value": ["gold", "lead"]}
    )
    ev = evaluate_policies(df, [Policy("p", "q", must_in=("gold", "silver"))])
    assert ev.results["passed"].to_list() == [True, False]


def test_a_string_requirement_on_a_numeric_metric_is_a_config_error() -> None:
    policies = parse_policies([{"name": "p", "metric": "m", "must_equal": "yes"}])
    with pytest.raises(ha.ConfigError, match=r"^policies\[0\]\.must_equal: expected a number"):
        evaluate_policies(_metrics([1.0]), policies)


@pytest.mark.parametrize(
    ("kwargs", "found"),
    [({}, "none"), ({"must_less": 1.0, "must_greater": 0.0}, "must_greater, must_less")],
)
def test_exactly_one_requirement(kwargs: dict[str, Any], found: str) -> None:
    with pytest.raises(ha.ConfigError, match=f"found {found}$") as info:
        Policy("cap", "m", **kwargs)
    assert info.value.path == "policy 'cap'"


def test_null_values_are_not_checked_and_make_the_run_unverified() -> None:
    ev = evaluate_policies(_metrics([1.0, None]), [Policy("p", "m", must_less_equal=1.0)])
    assert ev.results["passed"].to_list() == [True, None]
    assert "not checked" in ev.results["explanation"][1]
    assert ev.run_status["final_status"].to_list() == ["unverified"]


def test_missing_metric_for_a_sample_is_unchecked_not_failed() -> None:
    df = pl.concat([_metrics([0.5, 0.5]), _metrics([3.0], metric="other")])
    df = df.with_columns(key=pl.Series(["k0", "k1", "k2"]))
    ev = evaluate_policies(df, [Policy("p", "m", must_less=1.0)])
    assert ev.results.select("key", "passed").rows() == [("k0", True), ("k1", True), ("k2", None)]


def test_failed_constraint_changes_final_status_but_not_the_evidence() -> None:
    df = pl.DataFrame(
        {
            "run_id": ["good", "good", "bad", "bad"],
            "key": ["a", "b", "a", "b"],
            "metric": ["cost"] * 4,
            "value": [0.0005, 0.001, 0.0005, 0.002],
        }
    )
    policies = [
        Policy("cost-cap", "cost", must_less_equal=0.001),
        Policy("cost-watch", "cost", must_less=0.0001, role="diagnostic"),  # fails, status kept
    ]
    ev = evaluate_policies(df, policies)
    status = {r["run_id"]: r for r in ev.run_status.iter_rows(named=True)}
    assert status["good"]["final_status"] == "passed"
    assert status["bad"]["final_status"] == "failed_policy"
    assert status["bad"]["failed_policies"] == ["cost-cap"]
    assert status["bad"]["n_failed"] == 1 and status["good"]["n_failed"] == 0
    # all evidence kept: every check, including the passing ones and the diagnostic failures
    assert ev.results.height == 8
    assert ev.results.filter(pl.col("policy") == "cost-watch")["passed"].to_list() == [False] * 4
    assert "failed_policy=1" in repr(ev) and "passed=1" in repr(ev)


def test_run_policies_use_run_rows_or_aggregate_samples() -> None:
    df = pl.DataFrame(
        {
            "run_id": ["r1", "r1", "r1", "r2", "r2"],
            "key": [None, "a", "b", "a", "b"],
            "metric": ["m"] * 5,
            "value": [10.0, 1.0, 2.0, 1.0, None],
        }
    )
    mean = evaluate_policies(df, [Policy("p", "m", must_less=5.0, per="run")])
    rows = {r["run_id"]: r for r in mean.results.iter_rows(named=True)}
    assert rows["r1"]["passed"] is False  # the run-level row wins over the samples
    assert json.loads(rows["r1"]["observed"]) == {"value": 10.0, "n": None, "n_null": None}
    assert json.loads(rows["r2"]["observed"]) == {"value": 1.0, "n": 2, "n_null": 1}
    total = evaluate_policies(df, [Policy("p", "m", must_greater=1.5, per="run", aggregate="sum")])
    assert total.results.sort("run_id")["passed"].to_list() == [True, False]


@pytest.mark.parametrize(
    ("spec", "path", "message"),
    [
        ({"name": "p", "metric": "m"}, "policies[0]", "exactly one requirement"),
        (
            {"name": "p", "metric": "m", "must_less": 1, "must_equal": 1},
            "policies[0]",
            "found must_equal, must_less",
        ),
        ({"name": "p", "metric": "m", "must_less": "x"}, "policies[0].must_less", "number"),
        ({"name": "p", "must_less": 1}, "policies[0].metric", "non-empty string"),
        ({"name": "p", "metric": "m", "must_les": 1}, "policies[0].must_les", "unknown key"),
        ({"name": "p", "metric": "m", "must_in": 3}, "policies[0].must_in", "expected a list"),
        ({"name": "p", "metric": "m", "must_in": [[1]]}, "policies[0].must_in[0]", "number"),
        (
            {"name": "p", "metric": "m", "must_between": {"min": "a", "max": 1}},
            "policies[0].must_between.min",
            "expected a number",
        ),
        (
            {"name": "p", "metric": "m", "must_between": {"min": 2, "max": 1}},
            "policies[0].must_between",
            "min <= max",
        ),
        (
            {"name": "p", "metric": "m", "must_between": {"min": 0, "max": 1, "inclusive": "y"}},
            "policies[0].must_between.inclusive",
            "true or false",
        ),
        ({"name": "p", "metric": "m", "must_equal": None}, "policies[0].must_equal", "null"),
        ({"name": "p", "metric": "m", "must_equal": 1, "per": "episode"}, "policies[0].per", ""),
        ({"name": "p", "metric": "m", "must_equal": 1, "role": "x"}, "policies[0].role", ""),
    ],
)
def test_yaml_errors_name_the_key_path(spec: dict[str, Any], path: str, message: str) -> None:
    with pytest.raises(ha.ConfigError) as info:
        parse_policies([spec])
    assert info.value.path == path
    assert message in info.value.message


def test_duplicate_policy_names() -> None:
    p = {"name": "p", "metric": "m", "must_equal": 1}
    with pytest.raises(ha.ConfigError, match=r"policies\[1\]\.name: duplicate"):
        parse_policies([p, p])


def test_spec_example_parses() -> None:
    policies = parse_policies(
        [
            {"name": "request-must-succeed", "metric": "result.success", "must_equal": True},
            {"name": "cost-cap", "metric": "money.cost", "must_less_equal": 0.001},
            {
                "name": "acceptable-latency",
                "metric": "time.latency",
                "must_between": {"min": 0, "max": 500, "inclusive": True},
            },
        ]
    )
    assert [p.describe() for p in policies] == [
        "must_equal true",
        "must_less_equal 0.001",
        "must_between [0.0, 500.0]",
    ]


def test_store_round_trip_and_status_view(tmp_path: Path) -> None:
    store = ha.open_store(tmp_path / "s")
    scores = pa.table(
        {
            "run_id": ["r1", "r2"],
            "key": ["a", "a"],
            "metric": ["request_cost", "request_cost"],
            "value": [0.0005, 0.002],
            "source": ["derive:token_cost"] * 2,
            "source_kind": ["derived"] * 2,
            "metadata": [json.dumps({"semantic_type": "money.cost"})] * 2,
        }
    )
    with store.parquet.lock():
        store.parquet.commit({"runs": pa.table({"run_id": ["r1", "r2"]}), "scores": scores})
    # the spec's policy names the semantic type; the derived metric is request_cost
    ev = evaluate_policies(store, [Policy("cost-cap", "money.cost", must_less_equal=0.001)])
    assert ev.results["passed"].to_list() == [True, False]
    commit_policy_results(store.parquet, ev)
    commit_policy_results(store.parquet, ev)  # re-evaluating supersedes, no duplicates
    assert store.sql("select count(*) as n from stg_policy_results")["n"][0] == 2
    view = store.sql("select run_id, final_status, n_failed from mart_run_policy_status order by 1")
    assert view.rows() == [("r1", "passed", 0), ("r2", "failed_policy", 1)]
    # the evidence (the score rows) is untouched
    assert store.sql("select count(*) as n from stg_scores")["n"][0] == 2
