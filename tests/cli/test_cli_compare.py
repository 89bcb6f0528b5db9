"""``hylo-analytics compare``: JSON, CSV and the gate's exit code."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
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
    assert overall["p_value"] == pytest.approx(pc.p_test)
    assert overall["p_mcnemar"] == pytest.approx(pc.p_value)


def test_table_and_csv(sample_store: ha.Store, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["compare", "--store", str(sample_store.root), "--candidate", CAND, "--parent", PARENT]
    assert main([*base, "--metric", "steps", "--ci", "normal", "--format", "csv"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("candidate,parent,metric,level,direction,direction_source,n_pairs")
    assert ",minimize,registry," in text
    assert main([*base, "--ci", "none"]) == 0
    out = capsys.readouterr().out
    assert "verdict_note" in out
    # the table is followed by the rule in words and what the dropped pairs could change
    assert "* statistical rule: improved / regressed when the one-sided p of the test the" in out
    assert "pair(s) dropped" in out and "episode errored" in out


@pytest.mark.slow
def test_verdict_options(sample_store: ha.Store, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["compare", "--store", str(sample_store.root), "--candidate", CAND, "--parent", PARENT]
    # steps' direction turned round: the fewer-steps candidate now "loses"
    assert main([*base, "--metric", "steps", "--format", "json"]) == 0
    down = json.loads(capsys.readouterr().out)[0]
    assert (
        main([*base, "--metric", "steps", "--direction", "steps=maximize", "--format", "json"]) == 0
    )
    up = json.loads(capsys.readouterr().out)[0]
    assert (up["direction"], up["direction_source"]) == ("maximize", "argument")
    assert (up["candidate_wins"], up["parent_wins"]) == (
        down["parent_wins"],
        down["candidate_wins"],
    )
    assert main([*base, "--margin", "0.5", "--format", "json"]) == 0
    row = json.loads(capsys.readouterr().out)[0]
    assert (row["margin"] == 0.5 and "inside +-0.5" in row["verdict_note"]) or row["verdict"] in (
        "improved",
        "regressed",
    )
    assert main([*base, "--errors", "failure", "--format", "json"]) == 0
    ef = json.loads(capsys.readouterr().out)[0]
    assert ef["errors"] == "failure" and ef["n_dropped"] == 0  # errored episodes now count
    assert main([*base, "--errors-as-failures", "--format", "json"]) == 0  # the old spelling
    assert json.loads(capsys.readouterr().out)[0] == ef
    assert main([*base, "--direction", "steps"]) == 2
    assert "expected METRIC=maximize or METRIC=minimize" in capsys.readouterr().err


def test_unknown_run_is_an_error(
    sample_store: ha.Store, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["compare", "--store", str(sample_store.root), "--candidate", "nope", "--parent", PARENT]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "no run matches 'nope'" in err and "hylo-analytics runs" in err


def test_help_names_the_methods_the_engine_uses(sample_store: ha.Store) -> None:
    """The help's default intervals are the ``ci_method`` the engine writes (issue 27)."""
    from hylo_analytics.cli import compare as cli_compare

    runs = sorted(sample_store.runs()["run_id"])
    out = sample_store.compare(runs[1:], runs[0], metrics=["success", "steps"])
    used = dict(zip(out["metric"].to_list(), out["ci_method"].to_list(), strict=False))
    help_text = " ".join(cli_compare.HELP.split()).lower()
    assert used == {"success": "tango", "steps": "percentile"}
    assert "tango's score interval for 0/1 metrics" in help_text
    assert "percentile bootstrap of the paired differences otherwise" in help_text
    assert "bca bootstrap otherwise" not in help_text


def _two_epoch_store(root: Path) -> ha.Store:
    """Two runs of one task, 4 seeds, 2 epochs a key: success per epoch."""
    import pyarrow as pa

    runs, samples, scores = [], [], []
    values = {"P": [0, 0, 1, 0, 1, 0, 0, 0], "C": [1, 1, 1, 0, 1, 1, 0, 1]}
    for run, vals in values.items():
        runs.append(
            {
                "run_id": run,
                "source_format": "hylo.evallog/v0.1",
                "benchmark_id": "b",
                "split": "test",
                "agent_name": run,
                "agent_version": "1",
                "status": "success",
            }
        )
        for i, v in enumerate(vals):
            seed, epoch = i // 2, i % 2
            row = {
                "run_id": run,
                "key": f"t#{seed}",
                "task_id": "t",
                "seed": seed,
                "epoch": epoch,
                "episode_id": f"{run}-{i}",
            }
            samples.append({**row, "status": "success", "trace_status": "none"})
            scores.append(
                {
                    **row,
                    "metric": "success",
                    "value": float(v),
                    "valid": True,
                    "source": "evallog",
                    "source_kind": "imported",
                    "scorer_version": "",
                }
            )
    store = ha.open_store(root)
    with store.parquet.lock():
        store.parquet.commit(
            {
                "runs": pa.Table.from_pylist(runs),
                "samples": pa.Table.from_pylist(samples),
                "scores": pa.Table.from_pylist(scores),
            }
        )
    return store


def test_epochs_reduce_by_mean_as_python_does_or_pair_on_the_epoch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """CLI parity (issue 27): several epochs of a key are averaged by default, as
    ``Store.compare`` does; ``--pair-on-epoch`` pairs them; ``--reducer none`` refuses with
    the CLI's own flags named."""
    store = _two_epoch_store(tmp_path / "s")
    base = ["compare", "--store", str(store.root), "--candidate", "C", "--parent", "P"]
    assert main([*base, "--format", "json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    py = store.compare(["C"], "P").filter(pl.col("level") == "overall").row(0, named=True)
    assert cli[0]["n_pairs"] == py["n_pairs"] == 4
    assert cli[0]["mean_diff"] == pytest.approx(py["mean_diff"])
    assert main([*base, "--pair-on-epoch", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["n_pairs"] == 8
    assert main([*base, "--reducer", "none"]) == 2
    err = capsys.readouterr().err
    assert "--reducer" in err and "--pair-on-epoch" in err


def test_flips_json_is_store_flips(
    sample_store: ha.Store, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["compare", "--store", str(sample_store.root), "--candidate", CAND, "--parent",
            PARENT, "--flips", "--format", "json"]  # fmt: skip
    assert main(argv) == 0
    rows = json.loads(capsys.readouterr().out)
    want = sample_store.flips(CAND, PARENT)
    assert len(rows) == want.height > 0
    assert [r["key"] for r in rows] == want["key"].to_list()
    assert {r["change"] for r in rows} <= {"regression", "fix", "worse", "better"}


def test_flips_table_groups_by_task_with_compares_counts(
    sample_store: ha.Store, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["compare", "--store", str(sample_store.root), "--candidate", CAND, "--parent",
            PARENT, "--flips"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    compared = sample_store.compare(CAND, PARENT, by=["task_id"], ci="none")
    tasks = compared.filter(pl.col("level") != "overall")
    for row in tasks.filter(pl.col("candidate_wins") + pl.col("parent_wins") > 0).iter_rows(
        named=True
    ):
        head = next(line for line in out.splitlines() if f"task {row['task_id']} (" in line)
        n_fix = row["candidate_wins"]
        n_reg = row["parent_wins"]
        assert (f"{n_fix} fix" in head) == (n_fix > 0), head
        assert (f"{n_reg} regression" in head) == (n_reg > 0), head
    o = tasks.select(pl.col("candidate_wins", "parent_wins").sum()).row(0)
    assert out.strip().splitlines()[-1].startswith("* ")
    assert f"{o[0]} fix" in out.splitlines()[-1] and f"{o[1]} regression" in out.splitlines()[-1]
