"""vla-eval's current export, ``<benchmark>_aggregate.json``. No public file of this shape
exists (the harness's docs/reproductions/data are Git-LFS pointers), so the fixture here is
written by hand, field for field, from the harness's source at its HEAD:
``vla_eval/results/export.py`` (``_build_aggregate``: the episode rows ``{sid, eid,
episode_id, metrics, steps, elapsed_sec, **context, failure_reason, failure_detail}``, the
body, ``partial`` / ``shard`` / ``seed``) and ``vla_eval/results/collector.py``
(``_build_task_result``, ``_aggregate_metrics``: every episode counts, ``mean_<key>`` rounded
to 4 places), with an infra failure recorded as ``orchestrator.py`` records it
(``metrics: {"success": False}``, a ``failure_reason``)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import hylo_analytics as ha
from hylo_analytics.ingest import detect

TASKS = ("pick up the bowl", "open the drawer", "put the cup on the plate")


def export(model_server: str, outcomes: dict[str, list[bool | None]], *, seed: int = 7) -> dict:
    """One benchmark's aggregate; ``None`` in ``outcomes`` is an episode lost to a timeout."""
    tasks, every = [], []
    for t, task in enumerate(TASKS):
        episodes = []
        for ep, ok in enumerate(outcomes[task]):
            row: dict[str, object] = {
                "sid": f"s{t}", "eid": f"e{t}-{ep}", "episode_id": ep,
                "metrics": {"success": bool(ok)}, "steps": None if ok is None else 100 + ep,
                "elapsed_sec": None if ok is None else 12.5, "name": task, "suite": "libero_spatial",
                "episode_idx": ep,
            }  # fmt: skip
            if ok is None:
                row["failure_reason"] = "timeout"
                row["failure_detail"] = "timeout=30.0s: no action"
            episodes.append(row)
        errors = sum(1 for e in episodes if e.get("failure_reason"))
        steps = sum(e.get("steps") or 0 for e in episodes)  # type: ignore[misc]
        result = {"task": task, "episodes": episodes, "num_episodes": len(episodes),
                  "avg_steps": steps / (len(episodes) or 1)}  # fmt: skip
        if errors:
            result["num_errors"] = errors
        result["mean_success"] = round(
            sum(e["metrics"]["success"] for e in episodes) / len(episodes), 4
        )  # type: ignore[index]
        tasks.append(result)
        every += episodes
    body: dict[str, object] = {
        "benchmark": "libero_spatial", "mode": "sync", "harness_version": "0.1.2",
        "created_at": "2026-08-01T10:00:00+00:00", "tasks": tasks,
        "config": {"benchmark": "vla_eval.benchmarks.libero.benchmark:LIBEROBenchmark",
                   "subname": "libero_spatial", "episodes_per_task": 4, "params": {"seed": seed}},
        "eval_id": f"2026-08-01-{model_server}-libero_spatial",
        "server_info": {"harness_version": "0.1.2", "protocol_version": 1,
                        "model_server": model_server, "capabilities": {}},
        "seed": seed, "metric_keys": {"success": "mean"},
    }  # fmt: skip
    body["mean_success"] = round(sum(e["metrics"]["success"] for e in every) / len(every), 4)  # type: ignore[index]
    body["num_episodes_total"] = len(every)
    body["num_errors"] = sum(t.get("num_errors", 0) for t in tasks)  # type: ignore[misc]
    return body


PI0 = {TASKS[0]: [True, True, False, True], TASKS[1]: [True, None, True, False],
       TASKS[2]: [False, False, True, None]}  # fmt: skip
XVLA = {TASKS[0]: [True, True, True, True], TASKS[1]: [True, True, True, False],
        TASKS[2]: [True, False, True, True]}  # fmt: skip


@pytest.fixture()
def store(tmp_path: Path) -> ha.Store:
    for name, server, outcomes in (
        ("pi0", "Pi0ModelServer", PI0),
        ("xvla", "XVLAModelServer", XVLA),
    ):
        folder = tmp_path / "results" / name
        folder.mkdir(parents=True)
        (folder / "libero_spatial_aggregate.json").write_text(
            json.dumps(export(server, outcomes), indent=2)
        )
    s = ha.open_store(tmp_path / "store")
    assert dict(s.ingest(tmp_path / "results", progress=False).formats) == {"vla-eval/aggregate": 2}
    return s


def test_the_export_is_told_from_the_merged_results(tmp_path: Path, real_dir: Path) -> None:
    text = json.dumps(export("Pi0ModelServer", PI0), indent=2).encode()
    assert detect(text[:4096], Path("x_aggregate.json")).format == "vla-eval/aggregate"  # type: ignore[union-attr]
    merged = real_dir / "vla-eval-harness" / "pi05_libero_goal.json"
    assert detect(merged.read_bytes()[:4096], merged).format == "vla-eval"  # type: ignore[union-attr]


def test_aggregate_is_the_exports_own_mean_success(store: ha.Store, tmp_path: Path) -> None:
    """The harness counts a timed-out episode as a failure (its mean_success 0.5 for pi0:
    6 of 12): the default rate, with errors 'failure'; excluded, 6 of 10."""
    agg = store.aggregate(by=["agent_name"], metrics=["success"]).sort("agent_name")
    for row, name in zip(agg.iter_rows(named=True), ("pi0", "xvla"), strict=True):
        doc = json.loads(
            (tmp_path / "results" / name / "libero_spatial_aggregate.json").read_text()
        )
        assert row["errors"] == "failure" and row["n_total"] == doc["num_episodes_total"] == 12
        assert row["mean"] == pytest.approx(doc["mean_success"], abs=5e-5)
        assert row["n_errors"] == doc["num_errors"]
    excluded = store.aggregate(by=["agent_name"], metrics=["success"], errors="exclude")
    pi0 = excluded.filter(pl.col("agent_name") == "Pi0ModelServer").row(0, named=True)
    assert (pi0["n_valid"], pi0["mean"]) == (10, 0.6)
    per_task = store.aggregate(by=["agent_name", "task_id"], metrics=["success"])
    doc = json.loads((tmp_path / "results" / "pi0" / "libero_spatial_aggregate.json").read_text())
    for task in doc["tasks"]:
        row = per_task.filter(
            (pl.col("agent_name") == "Pi0ModelServer") & (pl.col("task_id") == task["task"])
        )
        assert row["mean"].item() == pytest.approx(task["mean_success"], abs=5e-5)
    reasons = store.sql(
        "select distinct skip_reason from scores where value is null and metric = 'success'"
    )
    assert reasons["skip_reason"].to_list() == ["harness error: timeout"]


def test_two_policies_pair_on_task_and_start_state(store: ha.Store) -> None:
    row = store.compare("agent=XVLAModelServer", "agent=Pi0ModelServer", metrics=["success"]).row(
        0, named=True
    )
    assert row["errors"] == "failure" and row["n_pairs"] == 12
    assert (row["candidate_wins"], row["parent_wins"]) == (4, 0)  # two of them pi0's timeouts
    excluded = store.compare("agent=XVLAModelServer", "agent=Pi0ModelServer", metrics=["success"],
                             errors="exclude").row(0, named=True)  # fmt: skip
    assert (excluded["n_pairs"], excluded["n_dropped"]) == (10, 2)
    keys = store.sql("select distinct key from samples order by key")["key"].to_list()
    assert keys[0] == "open the drawer#0" and len(keys) == 12
    run = store.sql("select * from runs where agent_name = 'Pi0ModelServer'").row(0, named=True)
    assert (run["benchmark_id"], run["split"]) == ("libero_spatial", "libero_spatial")
    assert json.loads(run["extra"])["agent_name_from"] == "server_info.model_server"


@pytest.mark.parametrize(
    ("edit", "field", "message"),
    [
        (lambda d: d["tasks"][1]["episodes"][2]["metrics"].update(success="yes"),
         "tasks[1].episodes[2].metrics.success", "expected a number or a boolean"),
        (lambda d: d["tasks"][0]["episodes"][1].update(episode_idx=0),
         "tasks[0].episodes[1].episode_id", "duplicate episode"),
        (lambda d: d["tasks"][2].update(episodes={"a": 1}), "tasks[2].episodes", "expected an array, got an object"),
        (lambda d: d["tasks"][0]["episodes"][0].update(steps="many"), "tasks[0].episodes[0].steps", "finite number"),
    ],
)  # fmt: skip
def test_a_bad_field_is_quarantined_with_its_line(
    tmp_path: Path, edit: object, field: str, message: str
) -> None:
    doc = export("Pi0ModelServer", PI0)
    edit(doc)  # type: ignore[operator]
    path = tmp_path / "libero_spatial_aggregate.json"
    path.write_text(json.dumps(doc, indent=2))
    report = ha.open_store(tmp_path / "store").ingest(path, progress=False)
    assert report.runs_added == 0
    problem = next(p for p in report.problems if p.field == field)
    assert message in problem.error and problem.line is not None and problem.line > 1
