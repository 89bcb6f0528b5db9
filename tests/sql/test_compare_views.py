"""int_paired and mart_compare agree with Store.compare on the same store, and hold only the
declared pairs (int_comparisons), never every pair of runs."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
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
