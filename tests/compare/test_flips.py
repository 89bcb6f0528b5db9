"""The episodes that flipped: the pairs behind a comparison's wins and losses, with links."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal
from test_compare_sql import RUNS, _store

from hylo_analytics.compare import flip_scores
from hylo_analytics.resolution import preferred_scores


def _scores(rows: list[tuple[str, str, str, float | None, bool]]) -> pl.DataFrame:
    """(run, key, metric, value, errored) rows; the task is the key's part before '#'."""
    frame = pl.DataFrame(
        rows,
        schema=["run_id", "key", "metric", "value", "errored"],
        orient="row",
    )
    return frame.with_columns(task_id=pl.col("key").str.split("#").list.first())


DATA = _scores(
    [
        ("p", "a#0", "success", 1.0, False),
        ("c", "a#0", "success", 0.0, False),  # a regression
        ("p", "a#1", "success", 0.0, False),
        ("c", "a#1", "success", 1.0, False),  # a fix
        ("p", "a#2", "success", 1.0, False),
        ("c", "a#2", "success", 1.0, False),  # a tie
        ("p", "b#0", "success", 1.0, False),
        ("c", "b#0", "success", None, True),  # errored: dropped, or a regression as failure
        ("p", "a#0", "steps", 10.0, False),
        ("c", "a#0", "steps", 30.0, False),  # fewer steps is better: worse by 20
        ("p", "a#1", "steps", 10.0, False),
        ("c", "a#1", "steps", 15.0, False),  # worse by 5
        ("p", "b#0", "steps", 10.0, False),
        ("c", "b#0", "steps", 4.0, False),  # better by 6
    ]
)


def test_flips_are_labelled_by_direction_and_sorted_by_size() -> None:
    got = flip_scores(DATA, candidates="c", parent="p", by=["task_id"], errors="exclude")
    want = pl.DataFrame(
        {
            "metric": ["steps", "steps", "steps", "success", "success"],
            "task_id": ["a", "a", "b", "a", "a"],
            "key": ["a#0", "a#1", "b#0", "a#0", "a#1"],
            "change": ["worse", "worse", "better", "regression", "fix"],
            "direction": ["minimize", "minimize", "minimize", "maximize", "maximize"],
            "diff": [20.0, 5.0, -6.0, -1.0, 1.0],
            "improvement": [-20.0, -5.0, 6.0, -1.0, 1.0],
        }
    )
    assert_frame_equal(got.select(want.columns), want)
    assert set(got["errors"]) == {"exclude"}


def test_errors_as_failures_make_the_errored_key_a_regression() -> None:
    got = flip_scores(DATA, candidates="c", parent="p", by=["task_id"], errors="failure")
    row = got.filter((pl.col("metric") == "success") & (pl.col("key") == "b#0"))
    assert row.select("change", "candidate_value", "parent_value").row(0) == (
        "regression",
        0.0,
        1.0,
    )


def test_an_explicit_direction_turns_worse_into_better() -> None:
    got = flip_scores(
        DATA, candidates="c", parent="p", metrics=["steps"], directions={"steps": "maximize"}
    )
    assert got.sort("key")["change"].to_list() == ["better", "better", "worse"]


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("errors", [None, "failure", "exclude"])
@pytest.mark.parametrize("pair_on_epoch", [False, True])
def test_flip_counts_are_compares_wins_per_task(
    tmp_path: Path, seed: int, errors: str | None, pair_on_epoch: bool
) -> None:
    store = _store(tmp_path, seed)
    options: dict[str, Any] = {"errors": errors, "pair_on_epoch": pair_on_epoch}
    metrics = ["success", "steps"]
    flips = store.flips(["c1", "c2"], "p", metrics=metrics, **options)
    compared = store.compare(
        ["c1", "c2"], "p", metrics=metrics, by=["task_id"], ci="none", **options
    ).filter(pl.col("level") != "overall")
    counted = flips.group_by("candidate", "metric", "task_id").agg(
        wins=pl.col("change").is_in(["fix", "better"]).sum(),
        losses=pl.col("change").is_in(["regression", "worse"]).sum(),
    )
    joined = compared.join(counted, on=["candidate", "metric", "task_id"], how="left")
    joined = joined.with_columns(pl.col("wins", "losses").fill_null(0))
    assert joined["candidate_wins"].to_list() == joined["wins"].to_list()
    assert joined["parent_wins"].to_list() == joined["losses"].to_list()
    assert flips.height == int(compared["candidate_wins"].sum() + compared["parent_wins"].sum())
    # the frame path (compare_scores' input) finds the same flips
    frame = preferred_scores(store, runs=list(RUNS), metrics=metrics).drop("source")
    again = flip_scores(
        frame, candidates=["c1", "c2"], parent="p", metrics=metrics, by=["task_id"], **options
    )
    assert_frame_equal(flips.select(again.columns), again)


def test_each_flip_links_to_its_episodes_and_files(tmp_path: Path) -> None:
    store = _store(tmp_path, 0)
    flips = store.flips("c1", "p")
    assert flips.height > 0
    for row in flips.iter_rows(named=True):
        assert row["candidate_path"] == str(tmp_path / "c1")
        assert row["parent_path"] == str(tmp_path / "p")
        assert row["candidate_episode_ids"] == [f"c1-{row['key']}-{e}" for e in row["epochs"]]
        assert all(e.startswith(f"p-{row['key']}-") for e in row["parent_episode_ids"])


def test_the_parent_cannot_be_a_candidate() -> None:
    with pytest.raises(ValueError, match="also listed"):
        flip_scores(DATA, candidates=["p"], parent="p")


def test_a_flip_on_an_errored_side_says_so() -> None:
    """Issue 40: an errored parent key counted as a failure makes a "fix" that is a harness
    error: the flip carries both sides' errored flag and reason, and a note."""
    scores = pl.DataFrame(
        {
            "run_id": ["c", "c", "p", "p"],
            "key": ["k1", "k2", "k1", "k2"],
            "metric": "success",
            "value": [1.0, 1.0, None, 0.0],
            "errored": [False, False, True, False],
            "skip_reason": [None, None, "timeout", None],
        }
    )
    flips = flip_scores(scores, candidates="c", parent="p", errors="failure").sort("key")
    assert flips["change"].to_list() == ["fix", "fix"]
    assert flips["errored_side"].to_list() == ["parent", None]
    assert flips["parent_reason"].to_list() == ["timeout", None]
    assert flips["flip_note"][0] == (
        "the parent errored (timeout): a harness error, counted as a failure under "
        "errors='failure', not a fix of the policy's"
    )
    assert flips["flip_note"][1] is None
    dropped = flip_scores(scores, candidates="c", parent="p", errors="exclude")
    assert dropped["key"].to_list() == ["k2"] and dropped["errored_side"].is_null().all()
