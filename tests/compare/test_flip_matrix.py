"""The flip matrix: golden on four literal runs, the view equals the frame, 2,000 runs by numpy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from flip_data import CELLS, RUNS, VERSION_ORDER, literal_store, many_runs_store
from polars.testing import assert_frame_equal

import hylo_analytics as ha
from hylo_analytics.compare import OUTCOMES, flip_matrix
from hylo_analytics.errors import InputError, SelectionError

KEY_ORDER = ["t0#1", "t2#1", "t1#0", "t1#1", "t0#0", "t2#0"]  # solve rate, then key
VIEW_COLUMNS = [
    "benchmark_id", "split", "key", "task_id", "errors", "n_runs", "n_valid", "n_success",
    "n_failure", "n_partial", "n_errored", "n_errored_as_failure", "n_abstained", "n_missing",
    "solve_rate", "always_fails", "always_solved",
]  # fmt: skip


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> ha.Store:
    return literal_store(tmp_path_factory.mktemp("flip") / "store")


def _by_key(frame: pl.DataFrame, column: str) -> dict[str, object]:
    return dict(zip(frame["key"].to_list(), frame[column].to_list(), strict=True))


def test_golden_keys_under_each_runs_convention(store: ha.Store) -> None:
    fm = store.flip_matrix()
    keys = fm.keys
    assert keys["key"].to_list() == KEY_ORDER
    want = {  # key: (n_valid, n_success, n_failure, n_partial, n_errored, as_failure,
        #        n_abstained, n_missing, solve_rate)
        "t0#0": (4, 3, 1, 0, 0, 0, 0, 0, 0.75),
        "t0#1": (4, 0, 4, 0, 0, 0, 0, 0, 0.0),
        "t1#0": (4, 2, 2, 0, 0, 0, 0, 0, 0.5),
        "t1#1": (3, 2, 0, 0, 2, 1, 0, 0, 2 / 3),  # r-b's error a failure, r-a's left out
        "t2#0": (2, 1, 0, 1, 1, 0, 0, 1, 0.75),  # (1 + 0.5) / 2
        "t2#1": (1, 0, 0, 0, 3, 1, 1, 0, 0.0),
    }
    cols = ["n_valid", "n_success", "n_failure", "n_partial", "n_errored",
            "n_errored_as_failure", "n_abstained", "n_missing", "solve_rate"]  # fmt: skip
    for row in keys.iter_rows(named=True):
        assert tuple(row[c] for c in cols) == pytest.approx(want[row["key"]]), row["key"]
        assert row["n_runs"] == 4
        assert row["n_runs"] == sum(row[c] for c in cols[1:5] + cols[6:8])
        assert row["errors"] == "mixed"  # r-b is vla-eval's 'failure', the others 'exclude'
    assert _by_key(keys, "difficulty_rank") == {
        "t0#1": 1, "t2#1": 1, "t1#0": 3, "t1#1": 4, "t0#0": 5, "t2#0": 5,
    }  # fmt: skip
    flags = {c: sorted(keys.filter(c)["key"].to_list()) for c in (
        "always_fails", "always_solved", "newly_broken", "newly_fixed", "newly_errored",
        "broken_since_solved",
    )}  # fmt: skip
    assert flags == {
        "always_fails": ["t0#1"],  # t2#1 only errored (a 0 under r-b's policy): not a failure
        "always_solved": [],
        "newly_broken": ["t0#0"],
        "newly_fixed": ["t1#0"],
        "newly_errored": ["t2#0"],  # a harness error is never "newly broken"
        "broken_since_solved": ["t0#0"],
    }
    assert _by_key(keys, "latest_outcome")["t2#1"] == "abstained"
    assert _by_key(keys, "previous_outcome")["t1#1"] == "error"
    assert _by_key(keys, "last_solved_run") == {
        "t0#1": None, "t2#1": None, "t1#0": "r-c", "t1#1": "r-d", "t0#0": "r-b", "t2#0": "r-b",
    }  # fmt: skip


def test_runs_in_natural_version_order_with_their_rates_and_flips(store: ha.Store) -> None:
    fm = store.flip_matrix()
    runs = fm.runs
    assert runs["run_id"].to_list() == VERSION_ORDER  # 1.2.0-rc1 < 1.2.0 < 1.9.0 < 1.10.0
    assert runs["position"].to_list() == [0, 1, 2, 3]
    assert runs["is_latest"].to_list() == [False, False, False, True]
    assert runs["errors"].to_list() == ["exclude", "exclude", "failure", "exclude"]
    assert runs["n_broken"].to_list() == [0, 1, 0, 1]  # t1#0 in r-d, t0#0 in r-a
    assert runs["n_fixed"].to_list() == [0, 0, 0, 1]  # t1#0 in r-a (t2#0: missing, then 1)
    assert runs["n_missing"].to_list() == [0, 1, 0, 0]
    # a run's solve rate is its success rate under its policy: the mart's
    rates = store.sql("select run_id, success_rate from mart_success_rates")
    joined = runs.join(rates, on="run_id")
    assert joined["solve_rate"].to_list() == pytest.approx(joined["success_rate"].to_list())
    assert fm.suites.select("latest_run", "previous_run", "n_runs", "n_keys").row(0) == (
        "r-a", "r-b", 4, 6,
    )  # fmt: skip
    assert "natural version order of agent_version" in fm.order
    assert fm.errors is None and fm.metric == "success" and fm.left_out.is_empty()


def test_outcomes_hold_every_cell_with_missing_ones_named(store: ha.Store) -> None:
    out = store.flip_matrix().outcomes
    assert out.height == len(CELLS) * len(RUNS)
    assert out.schema["outcome"] == pl.Enum(OUTCOMES)
    got = {(r, k): o for r, k, o in out.select("run_id", "key", "outcome").iter_rows()}
    names = {1: "success", 0: "failure", "E": "error", "A": "abstained", None: "missing",
             (1, 0): "partial"}  # fmt: skip
    assert got == {(r, k): names[c] for k, row in CELLS.items() for r, c in row.items()}
    errored = out.filter(pl.col("outcome") == "error")
    assert set(errored["skip_reason"]) == {"episode errored"}
    # value: r-b's errors are 0 (its harness counts them as failures), the others' null
    assert errored.filter(run_id="r-b")["value"].to_list() == [0.0, 0.0]
    assert errored.filter(pl.col("run_id") != "r-b")["value"].null_count() == errored.height - 2


@pytest.mark.parametrize(
    ("errors", "t1_1", "t2_0", "t2_1"),
    [
        ("exclude", (2, 1.0), (2, 0.75), (0, None)),  # every error left out
        ("failure", (4, 0.5), (3, 0.5), (3, 0.0)),  # every error a 0 (the abstention stays out)
    ],
)
def test_one_errors_policy_for_every_run(
    store: ha.Store,
    errors: str,
    t1_1: tuple[int, float],
    t2_0: tuple[int, float],
    t2_1: tuple[int, float | None],
) -> None:
    fm = store.flip_matrix(errors=errors)  # type: ignore[arg-type]
    got = {k: (n, r) for k, n, r in fm.keys.select("key", "n_valid", "solve_rate").iter_rows()}
    assert got["t1#1"] == pytest.approx(t1_1)
    assert got["t2#0"] == pytest.approx(t2_0)
    assert got["t2#1"][0] == t2_1[0]
    assert got["t2#1"][1] == (None if t2_1[1] is None else pytest.approx(t2_1[1]))
    assert set(fm.runs["errors"]) == {errors} and set(fm.keys["errors"]) == {errors}
    assert fm.errors == errors
    # the outcome never changes with the policy: an error stays an error
    assert fm.outcomes["outcome"].equals(store.flip_matrix().outcomes["outcome"])
    assert sorted(fm.keys.filter("always_fails")["key"]) == ["t0#1"]
    assert sorted(fm.keys.filter("newly_broken")["key"]) == ["t0#0"]


def test_other_orders_change_the_latest_run(store: ha.Store) -> None:
    ingested = store.flip_matrix(order="ingested")
    assert ingested.runs["run_id"].to_list() == ["r-a", "r-c", "r-d", "r-b"]
    assert "ingested_at" in ingested.order
    given = store.flip_matrix(["r-b", "r-a"], order="given")
    assert given.runs["run_id"].to_list() == ["r-b", "r-a"]
    assert given.order == "the order the runs were given in"
    # latest r-d, previous r-c: t1#0 went 1 -> 0
    last = store.flip_matrix(["r-a", "r-b", "r-c", "r-d"], order="given")
    assert last.suites["latest_run"].item() == "r-d"
    assert sorted(last.keys.filter("newly_broken")["key"]) == ["t1#0"]
    assert last.keys.height == 6  # t2#0 is a key of the suite, missing in the latest run
    assert _by_key(last.keys, "latest_outcome")["t2#0"] == "missing"


def test_selectors_name_every_run_they_match(store: ha.Store) -> None:
    assert store.flip_matrix("agent=octo").runs.height == 4
    assert store.flip_matrix(["version=1.9.0", "r-a"]).runs["run_id"].to_list() == ["r-b", "r-a"]


def test_one_run_has_no_previous_and_no_flip(store: ha.Store) -> None:
    fm = store.flip_matrix(["r-a"])
    assert fm.suites["previous_run"].item() is None
    assert fm.keys["previous_outcome"].null_count() == fm.keys.height
    assert not fm.keys["newly_broken"].any() and not fm.keys["newly_fixed"].any()


def test_refusals_name_what_to_do(store: ha.Store) -> None:
    with pytest.raises(InputError, match="order='given' needs the runs"):
        store.flip_matrix(order="given")
    with pytest.raises(InputError, match="order="):
        store.flip_matrix(order="text")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="not an errors policy"):
        store.flip_matrix(errors="fail")  # type: ignore[arg-type]
    with pytest.raises(SelectionError, match="no run has 'steps' scores"):
        store.flip_matrix(metric="steps")


def test_a_metric_outside_zero_one_leaves_its_runs_out_and_says_why(tmp_path: Path) -> None:
    store = literal_store(tmp_path / "s")
    frame = store.sql("select * from raw_scores where run_id = 'r-a'").drop("batch_seq")
    bad = frame.with_columns(
        value=pl.when(pl.col("key") == "t0#0").then(3.0).otherwise("value"),
        source=pl.lit("rescore"), source_kind=pl.lit("score"),
    )  # fmt: skip
    from hylo_analytics.store import commit_scores

    commit_scores(store.parquet, bad.to_arrow())  # takes the writer lock itself
    fm = store.flip_matrix()
    assert fm.left_out.rows() == [("r-a", "1 of its 6 values outside [0, 1]")]
    assert fm.runs["run_id"].to_list() == ["r-c", "r-d", "r-b"]


def test_the_view_equals_the_frame(store: ha.Store, sample_store: ha.Store) -> None:
    for s in (store, sample_store):
        view = s.sql("select * from mart_flip_matrix").drop("metric")
        frame = s.flip_matrix().keys.select(VIEW_COLUMNS)
        cast = {c: pl.Int64 for c in VIEW_COLUMNS if c.startswith("n_")}
        assert_frame_equal(
            frame.with_columns(pl.col(list(cast)).cast(pl.Int64)).sort("key"),
            view.select(VIEW_COLUMNS).sort("key"),
        )


def test_wide_is_one_column_per_run_in_order(store: ha.Store) -> None:
    fm = store.flip_matrix()
    wide = fm.wide()
    assert wide.columns == ["benchmark_id", "split", "key", *VERSION_ORDER]
    assert wide["key"].to_list() == KEY_ORDER
    assert wide.filter(key="t2#0").select(VERSION_ORDER).row(0) == (
        "partial", "missing", "success", "error",
    )  # fmt: skip
    assert fm.wide("value").filter(key="t2#0")["r-c"].item() == 0.5


def test_suites_are_apart(tmp_path: Path) -> None:
    from flip_data import commit, episode_rows, run_row

    runs = [run_row("x1", "1.0", "hylo.evallog/v0.1", "b1"),
            run_row("x2", "2.0", "hylo.evallog/v0.1", "b1"),
            run_row("y1", "1.5", "hylo.evallog/v0.1", "b2")]  # fmt: skip
    cells = {("x1", "k#0"): 1, ("x2", "k#0"): 0, ("y1", "k#0"): 1, ("y1", "j#0"): 0}
    samples, scores = [], []
    for (run, key), value in cells.items():
        got = episode_rows(run, key, value)
        samples += got[0]
        scores += got[1]
    store = commit(tmp_path / "s", runs, samples, scores)
    fm = store.flip_matrix()
    suites = fm.suites.select("benchmark_id", "latest_run", "previous_run", "n_keys").rows()
    assert suites == [("b1", "x2", "x1", 1), ("b2", "y1", None, 2)]
    assert fm.outcomes.height == 4  # no cell across suites, no "missing" for j#0 in b1
    assert fm.keys.filter(benchmark_id="b1", key="k#0")["newly_broken"].item()
    assert fm.runs.select("run_id", "suite_position").rows() == [("x1", 0), ("y1", 0), ("x2", 1)]


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> tuple[ha.Store, np.ndarray]:
    return many_runs_store(tmp_path_factory.mktemp("flip2000") / "store")


def test_2000_runs_agree_with_numpy(many: tuple[ha.Store, np.ndarray]) -> None:
    store, values = many
    fm = flip_matrix(store)
    n_runs, n_keys = values.shape
    assert fm.runs.height == n_runs and fm.keys.height == n_keys
    assert fm.outcomes.height == n_runs * n_keys
    assert fm.runs["agent_version"].to_list() == [f"2.{i}.0" for i in range(n_runs)]
    valid = ~np.isnan(values)
    solved = np.nan_to_num(values) == 1
    keys = fm.keys.with_columns(i=pl.col("key").str.split("#").list.last().cast(pl.Int64))
    keys = keys.sort("i")
    assert keys["n_valid"].to_list() == valid.sum(axis=0).tolist()
    assert keys["n_success"].to_list() == solved.sum(axis=0).tolist()
    rate = solved.sum(axis=0) / valid.sum(axis=0)
    assert keys["solve_rate"].to_numpy() == pytest.approx(rate)
    broken = solved[-2] & valid[-1] & ~solved[-1]
    assert keys["newly_broken"].to_list() == broken.tolist()
    errored_now = solved[-2] & ~valid[-1]
    assert keys["newly_errored"].to_list() == errored_now.tolist()
    runs_broken = (solved[:-1] & valid[1:] & ~solved[1:]).sum(axis=1)
    assert fm.runs["n_broken"].to_list() == [0, *runs_broken.tolist()]
    assert fm.runs["is_latest"].to_list() == [False] * (n_runs - 1) + [True]


def test_each_read_path_gives_the_same_cells(
    store: ha.Store, many: tuple[ha.Store, np.ndarray]
) -> None:
    """A few runs (their keys alone), many runs (the view, filtered at its end), every run
    (the view) and one source (the rule over that source) read the same cells."""
    whole = store.flip_matrix()
    one_source = store.flip_matrix(source="evallog")
    assert_frame_equal(one_source.keys, whole.keys)
    few = store.flip_matrix(["r-a", "r-b"])
    both = whole.outcomes.filter(pl.col("run_id").is_in(["r-a", "r-b"]))
    assert_frame_equal(
        few.outcomes.drop("position").sort("run_id", "key"),
        both.drop("position").sort("run_id", "key"),
    )
    big, values = many
    ids = big.flip_matrix().runs["run_id"].to_list()
    for n in (10, 100):  # under and over hylo_analytics.store.FEW_RUNS (64)
        part = big.flip_matrix(ids[:n])
        keys = part.keys.sort(pl.col("key").str.split("#").list.last().cast(pl.Int64))
        assert keys["n_success"].to_list() == (values[:n] == 1).sum(axis=0).tolist()
        assert part.runs["run_id"].to_list() == ids[:n]
