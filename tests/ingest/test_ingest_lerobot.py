"""LeRobot ``eval_info.json``: the real files of ``../shared/data/real/lerobot`` (both
``per_task`` shapes), and hand fixtures of the shapes no public file has (``per_episode``,
several checkpoints in one file), written from ``lerobot-eval``'s source
(``src/lerobot/scripts/lerobot_eval.py``: ``eval_policy`` builds ``{"per_episode": [...],
"aggregated": {...}}``, ``eval_policy_all`` ``{"per_task", "per_group", "overall"}``)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import hylo_analytics as ha
from hylo_analytics.ingest import detect
from hylo_analytics.stats import wilson

PARENT = "2021147571__smolvla-libero-100k-reproduction__results__full400_h1__parent_spatial_eval_info.json"
TEACHER = PARENT.replace("parent_spatial", "teacher31d_spatial")
KYH = "KYH-99__GAF-SmolVLA__runs__baseline__libero_spatial__task00__eval_info.json"
NOT_LEROBOT = (
    "Hwihwa-Lab__cartpole-v1-ppo__eval_info.json",  # a PPO summary that shares the name
    "KYH-99__GAF-SmolVLA__results__final_summary_5models.json",  # a hand-made table
)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, real_dir: Path) -> ha.Store:
    s = ha.open_store(tmp_path_factory.mktemp("lerobot") / "store")
    report = s.ingest(real_dir / "lerobot", progress=False)
    assert dict(report.formats) == {"lerobot.eval_info": 3}
    quarantined = sorted(Path(p.path).name for p in report.problems)
    assert quarantined == sorted(NOT_LEROBOT)  # unknown format: said so, never read as LeRobot
    assert all("unknown format" in p.error for p in report.problems)
    return s


def _run(store: ha.Store, name: str) -> str:
    return str(store.sql("select run_id from runs where ends_with(source_path, ?)", [name]).item())


def test_sniffing_takes_lerobot_files_and_nothing_else(real_dir: Path) -> None:
    for path in sorted((real_dir / "lerobot").iterdir()):
        reader = detect(path.read_bytes()[:4096], path)
        if path.name in NOT_LEROBOT:
            assert reader is None, path.name
        else:
            assert reader is not None and reader.format == "lerobot.eval_info", path.name


def test_aggregate_is_the_files_own_pc_success(store: ha.Store, real_dir: Path) -> None:
    """The file's overall.pc_success (87.0 parent, 78.0 teacher31d, 80.0 KYH-99 task00) is
    aggregate's success, with the Wilson interval of its episode count."""
    agg = store.aggregate(by=["run_id"], metrics=["success"])
    assert agg.height == 3
    for row in agg.iter_rows(named=True):
        path = (
            real_dir
            / "lerobot"
            / store.sql("select source_path from runs where run_id = ?", [row["run_id"]]).item()
        )
        overall = json.loads(path.read_text())["overall"]
        n = overall["n_episodes"]
        assert row["n_total"] == row["n_valid"] == n
        assert row["mean"] == pytest.approx(overall["pc_success"] / 100, abs=1e-12)
        lo, hi = wilson([round(overall["pc_success"] * n / 100)], [n])
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((lo[0], hi[0]), rel=1e-12)
        assert row["errors"] == "exclude"
    pcs = dict(zip(agg["run_id"], agg["mean"], strict=True))
    assert pcs[_run(store, PARENT)] == 0.87 and pcs[_run(store, TEACHER)] == 0.78
    # the rewards are 0/1 and equal the success flag in these files
    rewards = store.aggregate(by=["run_id"], metrics=["sum_reward", "max_reward"])
    assert set(rewards["mean"].round(12)) == {0.87, 0.78, 0.8}


def test_two_policies_pair_on_task_and_episode(store: ha.Store) -> None:
    """parent vs teacher31d on the same 10 tasks x 10 episodes: 14 episodes succeed only
    under parent, 5 only under teacher31d; task 5 is 6/10 against 0/10."""
    parent, teacher = _run(store, PARENT), _run(store, TEACHER)
    cmp = store.compare(teacher, parent, metrics=["success"], by=["task_id"])
    overall = cmp.filter(pl.col("level") == "overall").row(0, named=True)
    assert (overall["n_pairs"], overall["n_dropped"]) == (100, 0)
    assert (overall["candidate_wins"], overall["parent_wins"]) == (5, 14)
    assert overall["mean_diff"] == pytest.approx(-0.09)
    task5 = cmp.filter(pl.col("task_id") == "libero_spatial/5").row(0, named=True)
    assert (task5["candidate_wins"], task5["parent_wins"]) == (0, 6)
    flips = store.flips(teacher, parent, metrics=["success"])
    assert flips.height == 19
    assert (flips["change"] == "regression").sum() == 14
    # the KYH-99 run has 50 episodes of task 0: its first 10 pair with parent's
    kyh = store.compare(_run(store, KYH), parent, metrics=["success"]).row(0, named=True)
    assert kyh["n_pairs"] == 10


def test_identity_and_seeds(store: ha.Store) -> None:
    runs = store.sql("select * from runs order by run_id")
    kyh = runs.filter(pl.col("run_id") == _run(store, KYH)).row(0, named=True)
    assert kyh["agent_name"] == "smolvla_libero"  # run_config.policy_path .../smolvla_libero
    assert kyh["benchmark_id"] == "libero_spatial"
    assert json.loads(kyh["extra"])["agent_name_from"] == "run_config.policy_path"
    assert json.loads(kyh["results"])["overall"]["pc_success"] == 80.0
    seeds = store.sql(
        "select min(seed), max(seed) from samples where run_id = ?", [kyh["run_id"]]
    ).row(0)
    assert seeds == (0, 49)  # the episode index, the start state the key names
    assert json.loads(kyh["extra"])["run_config"]["seed"] == 3000
    parent = store.sql(
        "select seed, extra from samples where run_id = ? limit 1", [_run(store, PARENT)]
    )
    assert parent["seed"].item() == 0
    assert json.loads(parent["extra"].item())["video_path"].endswith(".mp4")


def _per_episode(successes: list[bool], seed0: int = 1000) -> dict[str, object]:
    """``eval_policy``'s info, as lerobot-eval before ``eval_policy_all`` wrote it."""
    rows = [
        {"episode_ix": i, "sum_reward": float(s) * 3.5, "max_reward": float(s), "success": s,
         "seed": seed0 + i}
        for i, s in enumerate(successes)
    ]  # fmt: skip
    pc = 100 * sum(successes) / len(successes)
    return {
        "per_episode": rows,
        "aggregated": {"avg_sum_reward": 3.5 * pc / 100, "avg_max_reward": pc / 100,
                       "pc_success": pc, "eval_s": 12.5, "eval_ep_s": 1.25},
        "video_paths": [],
    }  # fmt: skip


def test_the_per_episode_shape(tmp_path: Path) -> None:
    folder = tmp_path / "outputs" / "eval" / "2024-05-01" / "12-00-00_pusht_diffusion"
    folder.mkdir(parents=True)
    (folder / "eval_info.json").write_text(json.dumps(_per_episode([True, False, True, True])))
    store = ha.open_store(tmp_path / "store")
    assert dict(store.ingest(folder, progress=False).formats) == {"lerobot.eval_info": 1}
    run = store.runs().row(0, named=True)
    assert run["agent_name"] == "12-00-00_pusht_diffusion"  # the run's output folder
    assert run["benchmark_id"] is None and run["n_samples"] == 4
    agg = store.aggregate(metrics=["success", "sum_reward"]).sort("metric")
    assert agg["mean"].to_list() == [0.75, 3.5 * 0.75]
    keys = store.sql("select key, seed from samples order by seed")
    assert keys["key"].to_list() == [f"default#{1000 + i}" for i in range(4)]


def _checkpoints(tmp_path: Path, evals: dict[str, dict[str, object]]) -> Path:
    path = tmp_path / "task2_smolvla" / "eval_info.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(evals, indent=2))
    return path


def _per_task(successes: list[list[bool]]) -> dict[str, object]:
    tasks = [
        {"task_group": "libero_10", "task_id": k,
         "metrics": {"sum_rewards": [float(s) for s in ss], "max_rewards": [float(s) for s in ss],
                     "successes": ss, "video_paths": []}}
        for k, ss in enumerate(successes)
    ]  # fmt: skip
    flat = [s for ss in successes for s in ss]
    pc = 100 * sum(flat) / len(flat)
    return {"per_task": tasks, "per_group": {"libero_10": {"pc_success": pc}},
            "overall": {"pc_success": pc, "n_episodes": len(flat)}}  # fmt: skip


def test_several_checkpoints_in_one_file_are_runs_that_pair(tmp_path: Path) -> None:
    path = _checkpoints(
        tmp_path,
        {"eval_results_400": _per_task([[True, False, False], [False, False, True]]),
         "eval_results_800": _per_task([[True, True, False], [True, False, True]]),
         "notes": {"what": "not an evaluation"}},
    )  # fmt: skip
    store = ha.open_store(tmp_path / "store")
    assert store.ingest(path, progress=False).runs_added == 2
    runs = store.sql("select run_id, agent_name, agent_version from runs order by run_id")
    assert runs["agent_version"].to_list() == ["400", "800"]
    assert set(runs["agent_name"]) == {"task2_smolvla"}
    assert runs["run_id"][0].startswith("lerobot:task2_smolvla@eval_results_400:")
    agg = store.aggregate(by=["agent_version"], metrics=["success"]).sort("agent_version")
    assert agg["mean"].to_list() == pytest.approx([2 / 6, 4 / 6])
    row = store.compare("version=800", "version=400", metrics=["success"]).row(0, named=True)
    assert (row["n_pairs"], row["candidate_wins"], row["parent_wins"]) == (6, 2, 0)
    # the file changes and keeps one checkpoint: both old runs go, the new one stays
    _checkpoints(tmp_path, {"eval_results_1200": _per_task([[True, True, True], [True] * 3])})
    assert store.ingest(path, progress=False).runs_added == 1
    assert store.sql("select agent_version from runs").to_series().to_list() == ["1200"]
    assert store.sql("select count(*) from samples").item() == 6


@pytest.mark.parametrize(
    ("edit", "field", "message"),
    [
        (lambda d: d["per_task"][1]["metrics"]["successes"].__setitem__(2, "yes"),
         "per_task[1].metrics.successes[2]", "expected true or false"),
        (lambda d: d["per_task"][0]["metrics"]["sum_rewards"].pop(),
         "per_task[0].metrics.sum_rewards", "has 2 values; successes has 3"),
        (lambda d: d["per_task"][1].__setitem__("task_id", 0),
         "per_task[1]", "duplicate episode"),
        (lambda d: d["per_task"][0].__setitem__("task_group", ["x"]),
         "per_task[0].task_group", "expected a string, got array"),
        (lambda d: d["per_task"][0]["metrics"].__setitem__("successes", "all"),
         "per_task[0].metrics.successes", "expected an array, got varchar"),
        (lambda d: d.__setitem__("per_task", {"task_group": "x"}), "per_task", "expected an array"),
    ],
)  # fmt: skip
def test_a_bad_field_is_quarantined_with_its_line(
    tmp_path: Path, edit: object, field: str, message: str
) -> None:
    doc = _per_task([[True, False, False], [False, False, True]])
    edit(doc)  # type: ignore[operator]
    path = tmp_path / "eval_info.json"
    path.write_text(json.dumps(doc, indent=2))
    store = ha.open_store(tmp_path / "store")
    report = store.ingest(path, progress=False)
    assert report.runs_added == 0
    problem = next(p for p in report.problems if p.field == field)
    assert message in problem.error
    assert problem.line is not None and problem.line > 1
    assert store.sql("select count(*) from quarantine where field = ?", [field]).item() >= 1


def test_a_non_finite_reward_is_a_field_error(tmp_path: Path) -> None:
    path = tmp_path / "eval_info.json"
    text = json.dumps(_per_episode([True, False]), indent=2).replace(
        '"sum_reward": 0.0', '"sum_reward": NaN'
    )
    path.write_text(text)
    report = ha.open_store(tmp_path / "store").ingest(path, progress=False)
    (problem,) = report.problems
    assert problem.field == "per_episode[1].sum_reward" and "finite" in problem.error
