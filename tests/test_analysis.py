"""The analysis spec: validation with key paths, dispatch, and `hylo-analytics evaluate`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml

import hylo_analytics as ha
from hylo_analytics.cli import main

PRICING = {
    "pricing": {
        "version": 1,
        "provider": "openai",
        "models": {
            "openai/gpt-demo": {
                "aliases": ["openai:gpt-demo", "gpt-demo"],
                "input": {"unit": "mtok", "price_per_million_tokens": 1.0},
                "output": {
                    "unit": "mtok",
                    "tiers": [
                        {"up_to_tokens": 100000, "price_per_million_tokens": 4.0},
                        {"price_per_million_tokens": 6.0},
                    ],
                },
            }
        },
    }
}

SPEC: dict[str, Any] = {
    "derive": [
        {
            "kind": "token_cost",
            "pricing": "file://pricing/models.yaml",
            "output": {
                "name": "request_cost",
                "semantic_type": "money.cost",
                "unit": "usd",
                "direction": "minimize",
                "role": "constraint",
            },
        }
    ],
    "policies": [
        {"name": "cost-cap", "metric": "money.cost", "must_less_equal": 0.001},
        {"name": "mostly-cheap", "metric": "request_cost", "must_less": 1.0, "per": "run"},
    ],
}


def _write_spec(tmp_path: Path, spec: dict[str, Any]) -> Path:
    (tmp_path / "pricing").mkdir(exist_ok=True)
    (tmp_path / "pricing" / "models.yaml").write_text(yaml.safe_dump(PRICING))
    path = tmp_path / "analysis.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _store(root: Path) -> ha.Store:
    store = ha.open_store(root)
    samples = pa.table(
        {
            "run_id": ["cheap", "cheap", "dear"],
            "key": ["t#1", "t#2", "t#1"],
            "extra": [json.dumps({"llm.model.name": "openai:gpt-demo"})] * 3,
        }
    )
    # cheap: 100 in + 100 out = 0.0005 each; dear: 1000 in + 1000 out = 0.005
    scores = pa.table(
        {
            "run_id": ["cheap", "cheap", "cheap", "cheap", "dear", "dear"],
            "key": ["t#1", "t#1", "t#2", "t#2", "t#1", "t#1"],
            "metric": ["llm.tokens.input", "llm.tokens.output"] * 3,
            "value": [100.0, 100.0, 100.0, 100.0, 1000.0, 1000.0],
            "source": ["evallog"] * 6,
            "source_kind": ["imported"] * 6,
        }
    )
    with store.parquet.lock():
        store.parquet.commit(
            {"runs": pa.table({"run_id": ["cheap", "dear"]}), "samples": samples, "scores": scores}
        )
    return store


def test_run_analysis_derives_and_checks(tmp_path: Path) -> None:
    spec = ha.load_analysis_spec(_write_spec(tmp_path, SPEC))
    assert spec.derive[0].pricing.sha256  # the pricing file was loaded relative to the spec
    store = _store(tmp_path / "s")
    report = ha.run_analysis(store, spec)
    status = {r["run_id"]: r["final_status"] for r in report.run_status().iter_rows(named=True)}
    assert status == {"cheap": "passed", "dear": "failed_policy"}
    costs = store.sql(
        "select run_id, key, value, metadata from stg_scores where metric = 'request_cost' "
        "order by run_id, key"
    )
    assert costs["value"].to_list() == pytest.approx([0.0005, 0.0005, 0.005])
    assert {json.loads(m)["pricing_sha256"] for m in costs["metadata"]} == {
        spec.derive[0].pricing.sha256
    }
    assert store.sql("select count(*) as n from stg_policy_results")["n"][0] == 5
    assert "failed_policy=1" in repr(report)


def test_dry_run_writes_nothing_but_sees_the_derived_values(tmp_path: Path) -> None:
    spec = ha.load_analysis_spec(_write_spec(tmp_path, SPEC))
    store = _store(tmp_path / "s")
    report = ha.run_analysis(store, spec, write=False)
    assert report.run_status()["final_status"].to_list() == ["passed", "failed_policy"]
    assert (
        store.sql("select count(*) as n from stg_scores where source like 'derive:%'")["n"][0] == 0
    )
    assert store.sql("select count(*) as n from stg_policy_results")["n"][0] == 0


@pytest.mark.parametrize(
    ("patch", "path", "message"),
    [
        ({"scroe": {}}, "scroe", "unknown key"),
        ({"policies": [{}, {}, {"name": "x", "metric": "m", "must_between": {"min": "zero", "max": 1}}]},
         "policies[2].must_between.min", "expected a number"),
        ({"derive": [{"kind": "token_price", "pricing": "x"}]}, "derive[0].kind", "token_cost"),
        ({"derive": [{"kind": "token_cost", "pricing": "file://nope.yaml"}]}, "derive[0].pricing", "not found"),
        ({"derive": [{"kind": "token_cost", "pricing": {"models": {"m": {"input": {"price_per_million_tokens": "x"}}}}}]},
         "derive[0].pricing.models['m'].input.price_per_million_tokens", "expected a number"),
        ({"derive": [{"kind": "token_cost", "pricing": "file://pricing/models.yaml", "output": {"direction": "up"}}]},
         "derive[0].output.direction", "minimize"),
        ({"derive": [{"kind": "token_cost", "pricing": "file://pricing/models.yaml", "inputs": {"modle": "x"}}]},
         "derive[0].inputs.modle", "unknown key"),
        ({"score": {"coverage": {"value": "output.coverage", "pass": "output.ok"}}}, "score.coverage", "exactly one"),
        ({"score": {"coverage": {"value": "output.coverage", "goal": "max"}}}, "score.coverage.goal", "maximize"),
        ({"score": {"coverage": {"value": "output..coverage"}}}, "score.coverage.value", "bad segment"),
        ({"score": {"coverage": {"exact": {"actual": "output.q", "expect": "case.q"}}}},
         "score.coverage.exact.expect", "unknown key"),
        ({"score": {"coverage": {"value": "output.coverage", "unti": "ratio"}}}, "score.coverage.unti", "unknown key"),
        ({"post_derive": [{"kind": "paired_baseline", "baseline_variant": "b", "metric": "m",
                           "formula": "ratio", "output": {"name": "speedup"}}]},
         "post_derive[0].formula", "baseline_over_candidate"),
        ({"post_derive": [{"kind": "paired_baseline", "baseline_variant": "b", "metric": "m",
                           "match_on": [{"kind": "factor"}], "output": {"name": "s"}}]},
         "post_derive[0].match_on[0].name", "non-empty string"),
        ({"post_derive": [{"kind": "paired_baseline", "baseline_variant": "b", "metric": "m",
                           "output": {"name": "s", "direction": "faster"}}]},
         "post_derive[0].output.direction", "maximize"),
        ({"post_derive": [{"kind": "paired_baseline", "baseline_variant": "b", "metric": "m",
                           "output": {"name": "s"}},
                          {"kind": "paired_baseline", "baseline_variant": "b", "metric": "m",
                           "output": {"name": "s"}}]},
         "post_derive[1].output.name", "duplicate output 's'"),
    ],
)  # fmt: skip
def test_spec_errors_name_the_key_path(
    tmp_path: Path, patch: dict[str, Any], path: str, message: str
) -> None:
    if "policies" in patch:
        patch["policies"][:2] = SPEC["policies"]
    doc = {**SPEC, **patch}
    with pytest.raises(ha.ConfigError) as info:
        ha.load_analysis_spec(_write_spec(tmp_path, doc))
    assert info.value.path == path
    assert message in info.value.message


def test_error_in_a_pricing_file_names_the_file(tmp_path: Path) -> None:
    spec_path = _write_spec(tmp_path, SPEC)
    (tmp_path / "pricing" / "models.yaml").write_text("pricing: {models: {m: {}}}")
    with pytest.raises(
        ha.ConfigError, match=r"derive\[0\]\.pricing \(file://pricing/models.yaml\)"
    ):
        ha.load_analysis_spec(spec_path)


SCORE_AND_POST: dict[str, Any] = {
    "score": {"coverage": {"value": "output.coverage", "semantic": "coverage.ratio", "goal": "maximize", "role": "objective"}},
    "post_derive": [{"kind": "paired_baseline", "baseline_variant": "baseline",
                     "match_on": [{"kind": "case_id"}, {"kind": "factor", "name": "workload.size"}],
                     "metric": "time.latency", "formula": "baseline_over_candidate", "include_baseline": True,
                     "output": {"name": "speedup", "semantic_type": "performance.speedup"}}],
}  # fmt: skip


def test_score_and_post_derive_are_parsed_by_their_modules(tmp_path: Path) -> None:
    spec = ha.load_analysis_spec(_write_spec(tmp_path, {**SPEC, **SCORE_AND_POST}))
    (scorer,) = spec.score
    assert (scorer.name, scorer.kind, scorer.path) == ("coverage", "value", "output.coverage")
    assert scorer.declaration.semantic == "coverage.ratio"
    (step,) = spec.post_derive
    assert step.spec.match_on == ("key", "epoch", "workload.size")
    assert step.source == "post_derive:speedup"
    assert step.spec.output == ha.DerivedMetricOutput("speedup", "performance.speedup")


@pytest.mark.slow
def test_cli_evaluate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec_path = _write_spec(tmp_path, SPEC)
    _store(tmp_path / "s")
    args = ["evaluate", "--store", str(tmp_path / "s"), "--spec", str(spec_path)]
    assert main([*args, "--format", "csv"]) == 0
    out = capsys.readouterr()
    assert "run_id,status" not in out.out  # the status table, not the runs table
    lines = out.out.strip().splitlines()
    assert lines[0].startswith("run_id,n_checks,n_failed,n_unchecked,failed_policies,final_status")
    assert lines[2] == "dear,2,1,0,cost-cap,failed_policy"
    assert "TokenCostResult('request_cost': 3 rows, 3 costed" in out.err
    assert main([*args, "--fail-on-policy", "--run", "dear"]) == 1
    assert main([*args, "--fail-on-policy", "--run", "cheap"]) == 0


def test_cli_evaluate_reports_spec_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = {**SPEC, "policies": [{"name": "p", "metric": "m", "must_less": 1, "must_greater": 0}]}
    spec_path = _write_spec(tmp_path, bad)
    code = main(["evaluate", "--store", str(tmp_path / "s"), "--spec", str(spec_path)])
    assert code == 2
    err = capsys.readouterr().err
    assert "policies[0]: expected exactly one requirement" in err
    assert "found must_greater, must_less" in err


def test_two_token_cost_steps_keep_both_outputs(tmp_path: Path) -> None:
    second = {**SPEC["derive"][0], "output": {"name": "cost_again"}}
    spec = ha.load_analysis_spec(
        _write_spec(tmp_path, {**SPEC, "derive": [SPEC["derive"][0], second]})
    )
    store = _store(tmp_path / "s")
    ha.run_analysis(store, spec)
    ha.run_analysis(store, spec)  # re-running replaces, keeps both
    got = store.sql(
        "select metric, count(*) as n from stg_scores where source like 'derive:%' group by 1 order by 1"
    )
    assert got.rows() == [("cost_again", 3), ("request_cost", 3)]
    dup = {**SPEC, "derive": [SPEC["derive"][0], SPEC["derive"][0]]}
    with pytest.raises(
        ha.ConfigError, match=r"^derive\[1\]\.output\.name: duplicate output 'request_cost'"
    ):
        ha.load_analysis_spec(_write_spec(tmp_path, dup))


def test_yaml_syntax_error_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("policies:\n  - name: [unclosed\n")
    with pytest.raises(ha.ConfigError) as info:
        ha.load_analysis_spec(path)
    assert info.value.path == str(path)
    assert "not valid YAML" in info.value.message and "line" in info.value.message
