"""The ``verdict:`` block (ComparisonVerdictSpec): parsed with key paths, run end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
import yaml

import hylo_analytics as ha
from hylo_analytics import ConfigError
from hylo_analytics.compare.verdicts import (
    ComparisonVerdictSpec,
    RelativeNoiseRule,
    StatisticalRule,
    parse_verdicts,
)

KEYS = [f"t#{i}" for i in range(30)]
BASE = np.array([10.0 + i % 7 for i in range(30)])


def _store(root: Path) -> ha.Store:
    """parent and four candidates on a 'quality' metric: one per verdict."""
    rng = np.random.default_rng(1)
    vals = {
        "parent": BASE,
        "up": BASE * 1.5,
        "down": BASE * 0.5,
        "same": BASE + rng.normal(0, 0.01, 30),
        "noisy": BASE + rng.normal(0, 6, 30),
    }
    runs = list(vals)
    n = len(KEYS) * len(runs)
    store = ha.open_store(root)
    scores = pa.table(
        {
            "run_id": [r for r in runs for _ in KEYS],
            "key": KEYS * len(runs),
            "metric": ["quality"] * n,
            "value": np.concatenate([vals[r] for r in runs]),
            "source": ["evallog"] * n,
            "source_kind": ["imported"] * n,
        }
    )
    samples = pa.table({"run_id": [r for r in runs for _ in KEYS], "key": KEYS * len(runs)})
    with store.parquet.lock():
        store.parquet.commit(
            {"runs": pa.table({"run_id": runs}), "samples": samples, "scores": scores}
        )
    return store


def _spec_file(tmp_path: Path, spec: dict[str, Any]) -> Path:
    path = tmp_path / "analysis.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_four_verdicts_from_a_spec_file(tmp_path: Path) -> None:
    store = _store(tmp_path / "s")
    spec = ha.load_analysis_spec(
        _spec_file(
            tmp_path,
            {
                "verdict": {
                    "metric": "quality",
                    "parent": "parent",
                    "direction": "maximize",
                    "rule": {"kind": "relative_noise", "noise": 0.05, "alpha": 0.05},
                }
            },
        )
    )
    assert spec.verdict == (
        ComparisonVerdictSpec("quality", "parent", direction="maximize", rule=RelativeNoiseRule()),
    )
    report = ha.run_analysis(store, spec)
    (frame,) = report.verdicts
    got = dict(zip(frame["candidate"], frame["verdict"], strict=True))
    assert got == {
        "up": "improved",
        "down": "regressed",
        "same": "unchanged",
        "noisy": "inconclusive",
    }
    assert set(frame["verdict_rule"]) == {"relative_noise"}
    notes = dict(zip(frame["candidate"], frame["verdict_note"], strict=True))
    assert "inside +-0.642" in notes["same"]  # 5% of the parent's mean (12.83)
    assert "not inside" in notes["noisy"]
    assert "improved=1" in repr(report) and "unchanged=1" in repr(report)


def test_direction_and_candidates_are_honoured(tmp_path: Path) -> None:
    store = _store(tmp_path / "s")
    spec = ha.load_analysis_spec(
        {
            "verdict": [
                {
                    "metric": "quality",
                    "parent": "parent",
                    "candidates": ["up", "down"],
                    "direction": "minimize",
                },
                {"metric": "quality", "parent": "parent", "candidates": "up"},
            ]
        }
    )
    first, second = ha.run_analysis(store, spec).verdicts
    got = dict(zip(first["candidate"], first["verdict"], strict=True))
    assert got == {"up": "regressed", "down": "improved"}  # smaller is better now
    # no direction known: two-sided, never improved; the note says how to give one
    assert second["verdict"].to_list() == ["inconclusive"]
    assert "no direction known for 'quality'" in second["verdict_note"][0]


def test_statistical_rule_and_a_dry_run_reads_pending_rows(tmp_path: Path) -> None:
    """A verdict on a derived cost in a dry run: computed from the rows it would write."""
    store = ha.open_store(tmp_path / "s")
    runs = ["parent", "dear"]
    samples = pa.table(
        {
            "run_id": [r for r in runs for _ in KEYS],
            "key": KEYS * 2,
            "extra": [json.dumps({"llm.model.name": "m"})] * 60,
        }
    )
    tokens = {"parent": 1000.0, "dear": 3000.0}
    scores = pa.table(
        {
            "run_id": [r for r in runs for _ in KEYS for _ in (0, 1)],
            "key": [k for _ in runs for k in KEYS for _ in (0, 1)],
            "metric": ["llm.tokens.input", "llm.tokens.output"] * 60,
            "value": [tokens[r] + i for r in runs for i in range(30) for _ in (0, 1)],
            "source": ["evallog"] * 120,
            "source_kind": ["imported"] * 120,
        }
    )
    with store.parquet.lock():
        store.parquet.commit(
            {"runs": pa.table({"run_id": runs}), "samples": samples, "scores": scores}
        )
    pricing = {
        "models": {
            "acme/m": {
                "aliases": ["m"],
                "input": {"price_per_million_tokens": 1.0},
                "output": {"price_per_million_tokens": 2.0},
            }
        }
    }
    spec = ha.load_analysis_spec(
        {
            "derive": [{"kind": "token_cost", "pricing": pricing}],
            "verdict": {
                "metric": "request_cost",
                "parent": "parent",
                "direction": "minimize",
                "rule": {"kind": "statistical", "alpha": 0.01, "margin": 0.1, "adjust": "none"},
            },
        }
    )
    assert spec.verdict[0].rule == StatisticalRule(alpha=0.01, margin=0.1, adjust="none")
    report = ha.run_analysis(store, spec, write=False)
    assert report.verdicts[0]["verdict"].to_list() == ["regressed"]
    assert report.verdicts[0]["verdict_rule"].to_list() == ["statistical"]
    stored = store.sql("select count(*) as n from stg_scores where metric = 'request_cost'")
    assert stored["n"][0] == 0  # nothing was written


@pytest.mark.parametrize(
    ("block", "path", "message"),
    [
        ({"parent": "p"}, "verdict.metric", "required"),
        ({"metric": "m"}, "verdict.parent", "required"),
        ({"metric": "m", "parent": "p", "direction": "up"}, "verdict.direction", "'maximize'"),
        ({"metric": "m", "parent": "p", "rules": {}}, "verdict.rules", "unknown key"),
        ({"metric": "m", "parent": "p", "rule": {"kind": "vibes"}}, "verdict.rule.kind", "one of"),
        (
            {"metric": "m", "parent": "p", "rule": {"kind": "relative_noise", "margin": 0.1}},
            "verdict.rule.margin",
            "unknown key",
        ),
        ({"metric": "m", "parent": "p", "rule": {"noise": 0}}, "verdict.rule.noise", "> 0"),
        ({"metric": "m", "parent": "p", "rule": {"alpha": 0.7}}, "verdict.rule.alpha", "(0, 0.5)"),
        ({"metric": "m", "parent": "p", "rule": {"adjust": "bonf"}}, "verdict.rule.adjust", "holm"),
        ({"metric": "m", "parent": "p", "candidates": [1]}, "verdict.candidates[0]", ""),
        (
            {"metric": "m", "parent": "p", "rule": {"kind": "statistical", "margin": "x"}},
            "verdict.rule.margin",
            "",
        ),
    ],
)
def test_config_errors_name_the_field(block: dict[str, Any], path: str, message: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_verdicts(block)
    assert exc.value.path == path
    assert message in exc.value.message
    with pytest.raises(ConfigError) as exc:  # through the analysis spec too
        ha.load_analysis_spec({"verdict": [block]})
    assert exc.value.path == path.replace("verdict", "verdict[0]", 1)


def test_no_candidate_is_a_clear_error(tmp_path: Path) -> None:
    store = _store(tmp_path / "s")
    spec = ha.load_analysis_spec({"verdict": {"metric": "quality", "parent": "parent"}})
    with pytest.raises(ConfigError, match="no run to compare with parent 'parent'"):
        ha.run_analysis(store, spec, runs=["parent"])


def test_evaluate_prints_the_verdicts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from hylo_analytics.cli import main

    store = _store(tmp_path / "s")
    spec = _spec_file(
        tmp_path,
        {"verdict": {"metric": "quality", "parent": "parent", "direction": "maximize"}},
    )
    assert main(["evaluate", "--store", str(store.root), "--spec", str(spec)]) == 0
    err = capsys.readouterr().err
    for candidate, verdict in (("up", "improved"), ("down", "regressed")):
        line = next(ln for ln in err.splitlines() if f" {candidate} " in ln and "quality" in ln)
        assert verdict in line, line
