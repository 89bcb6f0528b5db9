"""``hylo-analytics compare``: JSON, CSV and the gate's exit code."""

from __future__ import annotations

import json

import pytest

import hylo_analytics as ha
from hylo_analytics.cli import main

PARENT, CAND = "run-octo-ft-1.0.0-0000", "run-octo-ft-1.1.0-0001"


def test_json_output(sample_store: ha.Store, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "compare",
        "--store",
        str(sample_store.root),
        "--candidate",
        CAND,
        "--parent",
        PARENT,
        "--by",
        "task_id",
        "--format",
        "json",
        "--resamples",
        "100",
    ]
    assert main(argv) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 11
    need = {
        "n_pairs",
        "candidate_wins",
        "parent_wins",
        "ties",
        "p_value",
        "p_holm",
        "p_bh",
        "verdict",
        "forced",
    }
    assert need <= set(rows[0])
    overall = next(r for r in rows if r["level"] == "overall")
    pc = ha.paired_compare(
        *(
            dict(
                sample_store.sql(
                    "SELECT key, value FROM stg_scores WHERE run_id = ? AND metric = 'success'", [r]
                ).iter_rows()
            )
            for r in (CAND, PARENT)
        )
    )
    assert (overall["candidate_wins"], overall["parent_wins"]) == (
        pc.candidate_wins,
        pc.parent_wins,
    )
    assert overall["p_value"] == pytest.approx(pc.p_value)


def test_table_and_csv(sample_store: ha.Store, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["compare", "--store", str(sample_store.root), "--candidate", CAND, "--parent", PARENT]
    assert main([*base, "--metric", "steps", "--ci", "normal", "--format", "csv"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("candidate,parent,metric,level,direction,n_pairs")
    assert ",minimize," in text
    assert main([*base, "--ci", "none"]) == 0
    assert "verdict" in capsys.readouterr().out


def test_unknown_run_is_an_error(
    sample_store: ha.Store, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["compare", "--store", str(sample_store.root), "--candidate", "nope", "--parent", PARENT]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "no run matches 'nope'" in err and "hylo-analytics runs" in err
