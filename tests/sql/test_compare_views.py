"""int_paired and mart_compare agree with Store.compare on the same store, and hold only the
declared pairs (int_comparisons), never every pair of runs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

import hylo_analytics as ha
from hylo_analytics.testing import SynthConfig, write_dataset

COUNTS = ["n_pairs", "candidate_wins", "parent_wins", "ties", "n_dropped"]
RUNS = ["run-octo-ft-1.0.0-0000", "run-octo-ft-1.1.0-0001", "run-octo-ft-1.2.0-rc1-0002"]
SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample"


@pytest.fixture(scope="module")
def paired_store(tmp_path_factory: pytest.TempPathFactory) -> ha.Store:
    """The sample with every ordered pair of its three runs declared."""
    store = ha.open_store(tmp_path_factory.mktemp("paired") / "store")
    store.ingest(SAMPLE, progress=False)
    for parent in RUNS:
        store.declare_parent([r for r in RUNS if r != parent], parent)
    return store


@pytest.mark.parametrize("parent", RUNS)
def test_mart_compare_equals_python(paired_store: ha.Store, parent: str) -> None:
    cands = [r for r in RUNS if r != parent]
    metrics = ["success", "steps", "safety_interventions"]
    py = paired_store.compare(cands, parent, metrics=metrics, by=["task_id"], ci="none")
    sql = paired_store.sql("SELECT * FROM mart_compare WHERE parent = $p", {"p": parent})
    keys = ["candidate", "metric", "level", "task_id"]
    a = py.select(*keys, *COUNTS, "mean_diff").sort(keys, nulls_last=True)
    b = sql.select(*keys, *COUNTS, "mean_diff").sort(keys, nulls_last=True)
    assert a.height == b.height == 2 * 3 * 11
    assert a.select(*keys, *COUNTS).equals(b.select(*keys, *COUNTS))
    assert (a["mean_diff"] - b["mean_diff"]).abs().max() < 1e-12  # type: ignore[operator]


def test_int_paired_is_symmetric_and_direction_aware(paired_store: ha.Store) -> None:
    p = paired_store.sql("SELECT * FROM int_paired")
    swapped = p.select(
        pl.col("parent").alias("candidate"),
        pl.col("candidate").alias("parent"),
        "key",
        "metric",
        pl.col("outcome").replace({"candidate": "parent", "parent": "candidate"}),
    )
    keys = ["candidate", "parent", "key", "metric"]
    left = p.select(*keys, "outcome").sort(keys)
    assert left.equals(swapped.sort(keys))
    steps = p.filter(pl.col("metric") == "steps", pl.col("outcome") == "candidate")
    assert (steps["candidate_value"] < steps["parent_value"]).all()
    dropped = p.filter(pl.col("outcome") == "dropped")
    assert (dropped["candidate_value"].is_null() | dropped["parent_value"].is_null()).all()


def test_undeclared_runs_are_not_paired(sample_store: ha.Store) -> None:
    # the sample's logs name no parent and nothing was declared: no pairs at all
    for view in ("int_comparisons", "int_paired", "mart_compare"):
        assert sample_store.sql(f"SELECT count(*) FROM {view}").item() == 0, view
    py = sample_store.compare(RUNS[1], RUNS[0], ci="none")  # Store.compare needs none
    assert py.filter(pl.col("level") == "overall")["n_pairs"].item() > 0


@pytest.mark.slow
def test_fifty_runs_hold_only_their_declared_pairs(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    write_dataset(logs, SynthConfig(runs=50, tasks=2, seeds=3, traces_per_run=0))
    ids = sorted(p.name for p in logs.iterdir())
    # runs 1..20 name the run before them as parent in their log; run 25 names itself
    for i, parent in [*((i, ids[i - 1]) for i in range(1, 21)), (25, ids[25])]:
        path = logs / ids[i] / "evallog.json"
        doc = json.loads(path.read_text())
        path.write_text(json.dumps({**doc, "parent_run_id": parent}))
    store = ha.open_store(tmp_path / "store")
    assert store.ingest(logs, progress=False).quarantined == 0
    store.declare_parent(ids[30:40], ids[0])
    store.declare_parent([ids[2], ids[2]], ids[1])  # also in run 2's log; twice
    with pytest.raises(ValueError, match="no candidate other than the parent"):
        store.declare_parent(ids[1], ids[1])  # a run is never its own parent
    want = {(ids[i], ids[i - 1]) for i in range(1, 21)} | {(c, ids[0]) for c in ids[30:40]}
    pairs = store.sql("SELECT candidate, parent, declared_by FROM int_comparisons")
    assert set(pairs.select("candidate", "parent").rows()) == want
    assert pairs.height == 30  # not 50 * 49 = 2,450
    by = {(c, p): d for c, p, d in pairs.rows()}
    assert by[(ids[2], ids[1])] == "log" and by[(ids[30], ids[0])] == "store"
    assert store.sql("SELECT count(*) FROM comparisons").item() == 11
    mart = store.sql("SELECT DISTINCT candidate, parent FROM mart_compare")
    assert set(mart.rows()) == want
    n_paired = store.sql("SELECT count(*) FROM int_paired").item()
    assert n_paired == 30 * 6 * 3  # pairs x keys x metrics
    # a declared pair has exactly Store.compare's counts
    c, p = ids[35], ids[0]
    py = store.compare(c, p, metrics=["success", "steps"], by=["task_id"], ci="none")
    sql = store.sql("SELECT * FROM mart_compare WHERE candidate = $c AND parent = $p "
                    "AND metric IN ('success', 'steps')", {"c": c, "p": p})  # fmt: skip
    keys = ["metric", "level", "task_id"]
    a = py.select(*keys, *COUNTS).sort(keys, nulls_last=True)
    assert a.equals(sql.select(*keys, *COUNTS).sort(keys, nulls_last=True))
    assert a.height == 2 * 3


def test_declare_parent_refuses_an_unknown_run(tmp_path: Path) -> None:
    store = ha.open_store(tmp_path / "store")
    store.ingest(SAMPLE, progress=False)
    with pytest.raises(ValueError, match="no-such-run"):
        store.declare_parent(["no-such-run"], RUNS[0])
    assert store.sql("SELECT count(*) FROM raw_comparisons").item() == 0
    cols = store.sql("SELECT * FROM comparisons").columns
    assert cols == ["run_id", "parent_run_id", "declared_at", "batch_seq"]


def _convention_store(root: Path, seed: int) -> ha.Store:
    """Runs p and c1 of a harness that counts an errored episode as a failure (vla-eval), c2
    of one that leaves it out; errored keys on a declared 0/1 metric (success), an undeclared
    0/1 one (grasped), an undeclared one with other values (reward) and a count (steps)."""
    rng = np.random.default_rng(seed)
    formats = {"p": "vla-eval", "c1": "vla-eval", "c2": "hylo.evallog/v0.1"}
    runs, samples, scores = [], [], []
    for run, fmt in formats.items():
        runs.append({"run_id": run, "source_format": fmt, "source_path": str(root / run),
                     "benchmark_id": "bench", "benchmark_digest": "sha256:d", "split": "test",
                     "agent_name": run, "agent_version": "1", "status": "success"})  # fmt: skip
        for task in ("t0", "t1"):
            for s in range(12):
                key, errored = f"{task}#{s}", rng.random() < 0.25
                ident = {"run_id": run, "key": key, "task_id": task, "seed": s, "epoch": 1,
                         "episode_id": f"{run}-{key}"}  # fmt: skip
                status = "error" if errored else "success"
                samples.append({**ident, "status": status, "trace_status": "none"})
                values = {"success": float(rng.random() < 0.5), "grasped": float(rng.random() < 0.5),
                          "reward": float(rng.choice([0.0, 0.5, 1.0])),
                          "steps": float(rng.integers(5, 40))}  # fmt: skip
                for metric, value in values.items():
                    scores.append({**ident, "metric": metric,
                                   "value": None if errored else value, "valid": not errored,
                                   "skip_reason": "episode errored" if errored else None,
                                   "source": "evallog", "source_kind": "imported",
                                   "scorer_version": ""})  # fmt: skip
    store = ha.open_store(root)
    with store.parquet.lock():
        store.parquet.commit({"runs": pa.Table.from_pylist(runs),
                              "samples": pa.Table.from_pylist(samples),
                              "scores": pa.Table.from_pylist(scores)})  # fmt: skip
    store.declare_parent(["c1", "c2"], "p")
    store.declare_parent(["p"], "c2")
    return store


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mart_compare_reads_each_run_under_its_harness_convention(
    tmp_path: Path, seed: int
) -> None:
    """Under 'failure' an errored key of a declared or undeclared 0/1 metric is a loss of
    that side, of any other metric a drop; a pair of two conventions is 'mixed'. The SQL
    pairing (a window per side, one scan each) has Store.compare's counts."""
    store = _convention_store(tmp_path / "s", seed)
    metrics = ["success", "grasped", "reward", "steps"]
    sql = store.sql("SELECT * FROM mart_compare")
    assert sql.height == 3 * 4 * 3  # pairs x metrics x (overall + two tasks)
    for cand, parent, errors in [("c1", "p", "failure"), ("c2", "p", "mixed"),
                                 ("p", "c2", "mixed")]:  # fmt: skip
        py = store.compare(cand, parent, metrics=metrics, by=["task_id"], ci="none")
        got = sql.filter(pl.col("candidate") == cand, pl.col("parent") == parent)
        keys = ["metric", "level", "task_id"]
        a = py.select(*keys, *COUNTS).sort(keys, nulls_last=True)
        assert a.equals(got.select(*keys, *COUNTS).sort(keys, nulls_last=True)), (cand, parent)
        assert set(got["errors"]) == {errors}
        overall = got.filter(pl.col("level") == "overall")
        dropped = dict(zip(overall["metric"], overall["n_dropped"], strict=True))
        if errors == "failure":  # 0/1 metrics keep every key; the others drop errored keys
            assert dropped["success"] == dropped["grasped"] == 0
            assert dropped["reward"] == dropped["steps"] > 0
