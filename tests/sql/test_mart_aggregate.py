"""The SQL aggregate views agree with hylo_analytics.aggregate on the same store."""

from __future__ import annotations

import polars as pl
import pytest

from hylo_analytics.aggregate import aggregate_scores

COLS = ["n_total", "n_valid", "n_skipped", "coverage", "mean", "std", "stderr"]


@pytest.mark.parametrize(
    ("view", "by"),
    [("mart_aggregate_run", ["run_id"]), ("mart_aggregate_task", ["run_id", "task_id"])],
)
def test_sql_and_python_agree(sample_store, view, by):
    keys = [*by, "metric"]
    sql = sample_store.sql(f"select * from {view}").sort(keys)
    py = aggregate_scores(sample_store, by=by, reduce=None, ci="auto").sort(keys)
    assert sql.height == py.height > 0
    assert sql.select(keys).equals(py.select(keys))
    for col in COLS:
        assert sql[col].to_list() == pytest.approx(py[col].to_list(), nan_ok=True), col
    assert sql["skip_breakdown"].to_list() == py["skip_breakdown"].to_list()
    binary = py["ci_method"] == "wilson"
    assert binary.any()
    assert sql.filter(binary)["wilson_low"].to_list() == pytest.approx(
        py.filter(binary)["ci_low"].to_list()
    )
    assert sql.filter(binary)["wilson_high"].to_list() == pytest.approx(
        py.filter(binary)["ci_high"].to_list()
    )
    rate = "success_rate_errors_as_failures"
    assert sql.filter(binary)[rate].to_list() == pytest.approx(py.filter(binary)[rate].to_list())


def test_sql_reconciliation_invariant(sample_store):
    for view in ("mart_aggregate_run", "mart_aggregate_task"):
        df = sample_store.sql(f"select * from {view}")
        skipped = df["skip_breakdown"].list.eval(pl.element().struct.field("count")).list.sum()
        assert (df["n_total"] == df["n_valid"] + skipped).all()


def test_after_scoring_each_episode_counts_once(tmp_path, sample_dir):
    """Re-scored, graded and imported rows of one episode are one preferred score, in SQL too."""
    import hylo_analytics as ha

    store = ha.open_store(tmp_path / "s")
    store.ingest(sample_dir, progress=False)
    store.score()
    sql = store.sql("select * from mart_aggregate_run where metric = 'success'").sort("run_id")
    assert sql["n_total"].to_list() == [200, 200, 200]
    py = aggregate_scores(store, by=["run_id"], metrics=["success"], reduce=None).sort("run_id")
    assert sql["n_valid"].to_list() == py["n_valid"].to_list()
    assert sql["mean"].to_list() == pytest.approx(py["mean"].to_list())
    assert sql["wilson_low"].to_list() == pytest.approx(py["ci_low"].to_list())
    task = store.sql("select * from mart_task_success")
    assert (task["n_total"] == 20).all() and task.height == 30
