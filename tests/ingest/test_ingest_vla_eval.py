"""vla-eval merged results: the real LIBERO files in ../shared/data/real (never copied)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import hylo_analytics as ha
from hylo_analytics.ingest import vla_eval

POLICIES = ("oft-joint", "pi05", "xvla")
SUITES = ("libero_spatial", "libero_object", "libero_goal", "libero_10")


@pytest.fixture(scope="module")
def vla_dir(real_dir: Path) -> Path:
    return real_dir / "vla-eval-harness"


@pytest.fixture(scope="module")
def vla_store(tmp_path_factory: pytest.TempPathFactory, vla_dir: Path) -> ha.Store:
    store = ha.open_store(tmp_path_factory.mktemp("vla") / "store")
    files = [vla_dir / f"{p}_{s}.json" for p in POLICIES for s in SUITES]
    report = store.ingest(files, progress=False)
    assert report.quarantined == 0 and report.formats == (("vla-eval", 12),)
    return store


def test_counts(vla_store: ha.Store) -> None:
    runs = vla_store.sql("SELECT agent_name, split, n_samples FROM stg_runs")
    assert runs.height == 12
    assert sorted(set(runs["agent_name"])) == list(POLICIES)  # from the file names
    assert sorted(set(runs["split"])) == sorted(SUITES)
    assert set(runs["n_samples"]) == {500}
    per = vla_store.sql(
        "SELECT run_id, count(DISTINCT task_id) AS t, count(*) AS n FROM stg_samples GROUP BY 1"
    )
    assert set(per["t"]) == {10} and set(per["n"]) == {500}
    assert vla_store.sql("SELECT count(*) FROM stg_samples").item() == 6000


def test_success_rates_match_the_files(vla_store: ha.Store, vla_dir: Path) -> None:
    rates = vla_store.sql("SELECT * FROM mart_success_rates")
    for row in rates.iter_rows(named=True):
        doc = json.loads((vla_dir / f"{row['agent_name']}_{row['split']}.json").read_text())
        # the harness counts a timeout as a failure
        assert row["success_rate_errors_as_failures"] == pytest.approx(doc["overall_success_rate"])
        n_err = sum(
            1
            for t in doc["tasks"]
            for e in t["episodes"]
            if "failure_reason" in e and "steps" not in e
        )
        assert row["n_errors"] == n_err
        assert row["success_rate_errors_excluded"] == pytest.approx(
            row["successes"] / (500 - n_err)
        )
    per_task = vla_store.sql(
        """SELECT r.agent_name, r.split, s.task_id,
                  sum(coalesce(s.value, 0)) / count(*) AS rate
           FROM stg_scores AS s JOIN stg_runs AS r USING (run_id)
           WHERE s.metric = 'success' GROUP BY ALL"""
    )
    for row in per_task.iter_rows(named=True):
        doc = json.loads((vla_dir / f"{row['agent_name']}_{row['split']}.json").read_text())
        want = {t["task"]: t["success_rate"] for t in doc["tasks"]}
        assert row["rate"] == pytest.approx(want[row["task_id"]])


def test_per_task_summary(vla_store: ha.Store, vla_dir: Path) -> None:
    text = (vla_dir / "_per_task_summary.txt").read_text()
    got = vla_store.sql(
        """SELECT r.agent_name, r.split, s.task_id,
                  CAST(sum(CASE WHEN s.metric = 'success' THEN s.value END) AS BIGINT) AS k,
                  avg(CASE WHEN s.metric = 'steps' THEN s.value END) AS steps
           FROM stg_scores AS s JOIN stg_runs AS r USING (run_id) GROUP BY ALL"""
    )
    index = {
        (r["agent_name"], r["split"], r["task_id"][:70].rstrip()): r
        for r in got.iter_rows(named=True)
    }
    suite = ""
    checked = 0
    for line in text.splitlines():
        if line.startswith("## "):
            suite = line[3:].strip()
            continue
        if "|" not in line:
            continue
        task, *cells = (c.strip() for c in line.split("|"))
        for cell in cells:
            m = re.fullmatch(r"(\S+)=(\d+)/(\d+) avg_steps=([\d.]+)", cell)
            assert m, cell
            row = index[(m[1], suite, task)]
            assert row["k"] == int(m[2]) and int(m[3]) == 50
            assert round(row["steps"], 1) == pytest.approx(float(m[4]))
            checked += 1
    assert checked == 120


def test_timeouts_are_harness_errors(vla_store: ha.Store) -> None:
    err = vla_store.sql(
        """SELECT s.* FROM stg_samples AS s JOIN stg_runs AS r USING (run_id)
           WHERE r.agent_name = 'pi05' AND r.split = 'libero_spatial' AND s.status = 'error'"""
    )
    assert err.height == 30
    sc = vla_store.sql(
        "SELECT value, valid, skip_reason FROM stg_scores WHERE metric = 'success' "
        "AND run_id = ? AND episode_id IN (SELECT unnest(?::VARCHAR[]))",
        [err["run_id"][0], err["episode_id"].to_list()],
    )
    assert sc.height == 30 and sc["value"].null_count() == 30
    assert set(sc["skip_reason"]) == {"harness error: timeout"} and not any(sc["valid"])
    assert vla_store.sql("SELECT count(*) FROM stg_samples WHERE status = 'error'").item() == 30


def test_keys_pair_across_policies(vla_store: ha.Store) -> None:
    keys = vla_store.sql(
        """SELECT r.split, count(DISTINCT s.key) AS k, count(DISTINCT r.agent_name) AS p
           FROM stg_samples AS s JOIN stg_runs AS r USING (run_id) GROUP BY 1"""
    )
    assert set(keys["k"]) == {500} and set(keys["p"]) == {3}
    one = vla_store.sql("SELECT key, task_id, seed, episode_id FROM stg_samples LIMIT 1").row(0)
    assert one[0] == f"{one[1]}#{one[2]}" and one[3] == f"{one[1]}_ep{one[2]}"


@pytest.mark.slow
def test_run_id_and_agent_fallback(tmp_path: Path, vla_dir: Path) -> None:
    src = vla_dir / "pi05_libero_goal.json"
    assert vla_eval.agent_from_filename(src, "libero_goal") == "pi05"
    assert vla_eval.agent_from_filename(Path("results.json"), "libero_goal") == "results"
    store = ha.open_store(tmp_path / "s")
    copy = tmp_path / "pi05_libero_goal.json"
    copy.write_bytes(src.read_bytes())
    store.ingest(copy, progress=False)
    rid = store.sql("SELECT run_id FROM stg_runs").item()
    assert rid.startswith("vla-eval:pi05:LIBEROBenchmark_libero_goal:")
    # a changed file gets a new content id and replaces the path's old run
    doc = json.loads(copy.read_text())
    doc["tasks"] = doc["tasks"][:2]
    copy.write_text(json.dumps(doc))
    rep = store.ingest(copy, progress=False)
    assert rep.runs_added == 1
    runs = store.sql("SELECT run_id, n_samples FROM stg_runs")
    assert runs.height == 1 and runs["run_id"][0] != rid and runs["n_samples"][0] == 100
    assert store.sql("SELECT count(*) FROM stg_samples").item() == 100
    assert store.ingest(copy, progress=False).files_unchanged == 1


def test_bad_episode_id_rejects_the_file(tmp_path: Path) -> None:
    doc = {
        "benchmark": "B",
        "harness_version": "0",
        "tasks": [{"task": "t", "episodes": [{"task": "t", "episode_id": "t-1", "success": True}]}],
    }
    p = tmp_path / "x.json"
    p.write_text(json.dumps(doc))
    rep = ha.open_store(tmp_path / "s").ingest(p, progress=False)
    assert rep.runs_added == 0
    assert rep.problems[0].field == "tasks[0].episodes[0].episode_id"
