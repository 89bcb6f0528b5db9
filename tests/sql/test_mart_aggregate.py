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
    py = aggregate_scores(sample_store, by=by, reducer=None, ci="auto").sort(keys)
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
    assert sql["errors"].to_list() == py["errors"].to_list()
    assert sql["n_errors"].to_list() == py["n_errors"].to_list()


@pytest.mark.parametrize("source_format", ["vla-eval", "inspect.eval"])
def test_sql_and_python_agree_under_each_harness_convention(tmp_path, source_format):
    """A run's errors policy is its harness's: the marts and aggregate() fill the same keys."""
    import pyarrow as pa

    import hylo_analytics as ha

    store = ha.open_store(tmp_path / "s")
    n = 12
    values = [1.0, 0.0, 1.0, None, None, 1.0, 0.0, None, 1.0, 1.0, 1.0, 0.0]
    status = ["success", "failure", "success", "error", "error", "success", "failure",
              "success", "success", "success", "success", "failure"]  # fmt: skip
    keys = [f"t{i % 2}#{i}" for i in range(n)]
    rows = {
        "run_id": ["r"] * n, "key": keys, "task_id": [k.split("#")[0] for k in keys],
        "epoch": pa.array([1] * n, pa.int64()),
    }  # fmt: skip
    scores = pa.table(
        {
            **rows,
            "metric": ["success"] * n,
            "value": pa.array(values, pa.float64()),
            "valid": [v is not None for v in values],
            "skip_reason": [None if v is not None else "harness error: timeout" for v in values],
            "source": ["evallog"] * n,
            "source_kind": ["imported"] * n,
        }
    )
    steps = scores.set_column(
        scores.schema.get_field_index("metric"), "metric", pa.array(["steps"] * n)
    )
    runs = pa.table({"run_id": ["r"], "agent_name": ["a"], "source_format": [source_format]})
    samples = pa.table({**rows, "status": status})
    with store.parquet.lock():
        store.parquet.commit(
            {"runs": runs, "samples": samples, "scores": pa.concat_tables([scores, steps])}
        )
    want = "failure" if source_format == "vla-eval" else "exclude"
    for view, by in (
        ("mart_aggregate_run", ["run_id"]),
        ("mart_aggregate_task", ["run_id", "task_id"]),
    ):
        keys_ = [*by, "metric"]
        sql = store.sql(f"select * from {view}").sort(keys_)
        py = aggregate_scores(store, by=by, reducer=None).sort(keys_)
        assert sql["errors"].to_list() == py["errors"].to_list() == [want] * sql.height
        for col in ("n_total", "n_valid", "n_skipped", "n_errors"):
            assert sql[col].to_list() == py[col].to_list(), (view, col)
        for col in ("mean", "std", "stderr"):
            assert sql[col].to_list() == pytest.approx(py[col].to_list(), nan_ok=True), col
        assert sql["skip_breakdown"].to_list() == py["skip_breakdown"].to_list()
        binary = py["metric"] == "success"
        assert sql.filter(binary)["wilson_low"].to_list() == pytest.approx(
            py.filter(binary)["ci_low"].to_list()
        )
    run = store.sql("select * from mart_aggregate_run order by metric").rows_by_key(
        "metric", named=True
    )
    success, count = run["success"][0], run["steps"][0]
    # the 0/1 metric: its 2 errors filled under failure (the third abstention is no error);
    # the count metric never
    assert (success["n_valid"], success["n_errors"]) == ((11, 2) if want == "failure" else (9, 2))
    assert (count["n_valid"], count["n_errors"]) == (9, 2)
    rate = store.sql("select * from mart_success_rates").row(0, named=True)
    assert rate["success_rate"] == pytest.approx(success["mean"])
    assert rate["success_rate_errors_excluded"] == pytest.approx(6 / 9)
    assert rate["success_rate_errors_as_failures"] == pytest.approx(6 / 11)


def test_sql_reconciliation_invariant(sample_store):
    for view in ("mart_aggregate_run", "mart_aggregate_task"):
        df = sample_store.sql(f"select * from {view}")
        skipped = df["skip_breakdown"].list.eval(pl.element().struct.field("count")).list.sum()
        assert (df["n_total"] == df["n_valid"] + skipped).all()


@pytest.mark.slow
def test_after_scoring_each_episode_counts_once(tmp_path, sample_dir):
    """Re-scored, graded and imported rows of one episode are one preferred score, in SQL too."""
    import hylo_analytics as ha

    store = ha.open_store(tmp_path / "s")
    store.ingest(sample_dir, progress=False)
    store.score()
    sql = store.sql("select * from mart_aggregate_run where metric = 'success'").sort("run_id")
    assert sql["n_total"].to_list() == [200, 200, 200]
    py = aggregate_scores(store, by=["run_id"], metrics=["success"], reducer=None).sort("run_id")
    assert sql["n_valid"].to_list() == py["n_valid"].to_list()
    assert sql["mean"].to_list() == pytest.approx(py["mean"].to_list())
    assert sql["wilson_low"].to_list() == pytest.approx(py["ci_low"].to_list())
    task = store.sql("select * from mart_task_success")
    assert (task["n_total"] == 20).all() and task.height == 30
