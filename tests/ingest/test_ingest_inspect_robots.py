"""inspect-robots logs: the real success and error examples in ../shared/data/real."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import hylo_analytics as ha


@pytest.fixture(scope="module")
def ir_store(tmp_path_factory: pytest.TempPathFactory, real_dir: Path) -> ha.Store:
    store = ha.open_store(tmp_path_factory.mktemp("ir") / "store")
    rep = store.ingest(real_dir / "inspect-robots", progress=False)
    assert rep.quarantined == 0 and rep.formats == (("inspect-robots/v1", 2),)
    return store


def test_success_log(ir_store: ha.Store, real_dir: Path) -> None:
    path = real_dir / "inspect-robots" / "adhoc_2cc4c3a8.success.json"
    doc = json.loads(path.read_text())
    run = ir_store.sql("SELECT * FROM stg_runs WHERE source_path = ?", [str(path)])
    assert run["status"][0] == "success" and run["agent_name"][0] == "molmoact2"
    assert run["benchmark_id"][0] == "adhoc"
    rid = run["run_id"][0]
    smp = ir_store.sql("SELECT * FROM stg_samples WHERE run_id = ?", [rid])
    n_epochs = sum(len(s["epochs"]) for s in doc["samples"])
    assert smp.height == n_epochs == 1
    assert smp["key"][0] == "adhoc#scene-0" and smp["status"][0] == "success"
    assert json.loads(smp["extra"][0])["instruction"] == "place the fork on the plate"
    sc = ir_store.sql("SELECT metric, value FROM stg_scores WHERE run_id = ?", [rid])
    assert sc.rows() == [("success_at_end", doc["results"]["metrics"]["success_at_end"])]


def test_error_log_abstains(ir_store: ha.Store, real_dir: Path) -> None:
    path = real_dir / "inspect-robots" / "adhoc_084f91f0.error.json"
    run = ir_store.sql("SELECT run_id, status FROM stg_runs WHERE source_path = ?", [str(path)])
    assert run["status"][0] == "error"
    rid = run["run_id"][0]
    smp = ir_store.sql("SELECT status FROM stg_samples WHERE run_id = ?", [rid])
    assert smp["status"].to_list() == ["error"]
    sc = ir_store.sql(
        "SELECT metric, value, valid, skip_reason FROM stg_scores WHERE run_id = ?", [rid]
    )
    # it faulted before any step, so it names no metric: it abstains on inspect-robots' own
    # per-trial metric, the one the successful log reports, so the two runs pair
    assert sc.rows() == [
        ("success_at_end", None, False, "sample error: EmbodimentFault: No module named 'i2rt'")
    ]


def test_both_trials_in_mart_success_rates(ir_store: ha.Store, real_dir: Path) -> None:
    """inspect-robots' success is ``success_at_end``: the succeeded trial counts as 1/1, the
    faulted one as an error (0 of 1 when errors count as failures)."""
    got = ir_store.sql(
        "SELECT r.source_path, m.n_total, m.n_valid, m.n_errors, m.successes, "
        "m.success_rate_errors_excluded, m.success_rate_errors_as_failures "
        "FROM mart_success_rates AS m JOIN stg_runs AS r USING (run_id) ORDER BY 1"
    ).rows()
    ir = real_dir / "inspect-robots"
    assert got == [
        (str(ir / "adhoc_084f91f0.error.json"), 1, 0, 1, None, None, 0.0),
        (str(ir / "adhoc_2cc4c3a8.success.json"), 1, 1, 0, 1.0, 1.0, 1.0),
    ]
    tasks = ir_store.sql(
        "SELECT task_id, n_total, successes, success_rate FROM mart_task_success ORDER BY 3"
    ).rows()
    assert tasks == [("adhoc", 1, 1.0, 1.0), ("adhoc", 1, None, None)]


def test_epochs_and_known_metrics(tmp_path: Path, real_dir: Path) -> None:
    doc = json.loads((real_dir / "inspect-robots" / "adhoc_2cc4c3a8.success.json").read_text())
    s = doc["samples"][0]
    doc["samples"] = [
        {
            **s,
            "epochs": [{"success_at_end": 1.0}, {"success_at_end": 0.0}, {"success_at_end": None}],
        },
        {**s, "scene_id": "scene-1", "status": "error", "error": "boom", "epochs": [{}]},
    ]
    p = tmp_path / "log.json"
    p.write_text(json.dumps(doc))
    store = ha.open_store(tmp_path / "s")
    store.ingest(p, progress=False)
    sc = store.sql("SELECT key, epoch, value, skip_reason FROM stg_scores ORDER BY key, epoch")
    assert sc.rows() == [
        ("adhoc#scene-0", 1, 1.0, None),
        ("adhoc#scene-0", 2, 0.0, None),
        ("adhoc#scene-0", 3, None, "unscored"),
        ("adhoc#scene-1", 1, None, "sample error: boom"),
    ]


def test_agent_version_is_the_policys_not_the_harnesss(ir_store: ha.Store, real_dir: Path) -> None:
    """The real logs name no policy version: ``agent_version`` is null and the harness's
    ``inspect_robots_version`` is kept as ``harness_version`` in the run's ``extra``."""
    for name in ("adhoc_2cc4c3a8.success.json", "adhoc_084f91f0.error.json"):
        path = real_dir / "inspect-robots" / name
        doc = json.loads(path.read_text())
        version, extra = ir_store.sql(
            "SELECT agent_version, extra FROM stg_runs WHERE source_path = ?", [str(path)]
        ).row(0)
        assert version is None
        assert json.loads(extra)["harness_version"] == doc["eval"]["inspect_robots_version"]


@pytest.mark.parametrize(
    ("where", "value"),
    [
        (("policy_version",), "2.1"),
        (("policy_config", "version"), "v3"),
        (("model_version",), "m9"),
    ],
)
def test_agent_version_from_policy_fields(
    tmp_path: Path, real_dir: Path, where: tuple[str, ...], value: str
) -> None:
    doc = json.loads((real_dir / "inspect-robots" / "adhoc_2cc4c3a8.success.json").read_text())
    target = doc["eval"]
    for k in where[:-1]:
        target = target[k]
    target[where[-1]] = value
    p = tmp_path / "log.json"
    p.write_text(json.dumps(doc))
    store = ha.open_store(tmp_path / "s")
    store.ingest(p, progress=False)
    got = store.sql("SELECT agent_version, extra FROM stg_runs").row(0)
    assert got[0] == value
    assert json.loads(got[1])["harness_version"] == doc["eval"]["inspect_robots_version"]
