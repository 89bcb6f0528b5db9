"""int_scores_preferred: one score per (run, key, epoch, metric) by documented precedence."""

from __future__ import annotations

from typing import Any

import duckdb
import pytest

from hylo_analytics._sql import connect, view_sql

COLS = "run_id, key, epoch, metric, value, source, source_kind"


def _con(
    rows: list[tuple[Any, ...]], samples: list[tuple[Any, ...]] = ()
) -> duckdb.DuckDBPyConnection:
    con = connect(threads=1)  # the macros the views share
    con.execute(
        "create table stg_samples (run_id varchar, key varchar, epoch bigint, status varchar)"
    )
    if samples:
        con.executemany("insert into stg_samples values (?, ?, ?, ?)", list(samples))
    con.execute(
        "create table stg_scores (run_id varchar, key varchar, task_id varchar, seed bigint, "
        "epoch bigint, episode_id varchar, metric varchar, value double, valid boolean, "
        "skip_reason varchar, explanation varchar, source varchar, source_kind varchar, "
        "scorer_version varchar, metadata varchar, batch_seq bigint)"
    )
    con.executemany(
        f"insert into stg_scores ({COLS}, valid) values (?, ?, ?, ?, ?, ?, ?, ?)",
        [(*r, r[4] is not None) for r in rows],
    )
    con.execute(f"create view int_scores_preferred as {view_sql('int_scores_resolution')}")
    return con


def _preferred(rows: list[tuple[Any, ...]]) -> dict[str, tuple[Any, ...]]:
    out = (
        _con(rows)
        .execute(
            "select key, value, source, ambiguous, n_sources, n_abstained "
            "from int_scores_preferred order by key"
        )
        .fetchall()
    )
    keys = [r[0] for r in out]
    assert len(keys) == len(set(keys)), "one row per (run, key, epoch, metric)"
    return {r[0]: r[1:] for r in out}


def _row(key: str, value: float | None, source: str, kind: str) -> tuple[Any, ...]:
    return ("r", key, 1, "success", value, source, kind)


@pytest.mark.parametrize(
    ("rows", "want"),
    [
        pytest.param(
            [
                _row("a", 0.0, "evallog", "imported"),
                _row("a", 0.0, "grade:vlm_judge", "observation"),
                _row("a", 1.0, "scorer:success", "score"),
                _row("a", 0.5, "derive:x", "derived"),
            ],
            (1.0, "scorer:success", False, 4, 0),
            id="score beats derived, observation and imported",
        ),
        pytest.param(
            [_row("a", 0.5, "derive:x", "derived"), _row("a", 1.0, "grade:op", "observation")],
            (0.5, "derive:x", False, 2, 0),
            id="derived beats observation",
        ),
        pytest.param(
            [_row("a", None, "scorer:success", "score"), _row("a", 1.0, "evallog", "imported")],
            (1.0, "evallog", False, 2, 1),
            id="an abstention never hides a value",
        ),
        pytest.param(
            [_row("a", None, "scorer:success", "score"), _row("a", None, "evallog", "imported")],
            (None, "evallog", False, 2, 2),
            id="all abstain: the log's own abstention over a re-scorer's",
        ),
        pytest.param(
            [
                _row("a", None, "scorer:success", "score"),
                _row("a", None, "grade:op", "observation"),
            ],
            (None, "grade:op", False, 2, 2),
            id="all abstain: a grader's abstention over a re-scorer's",
        ),
        pytest.param(
            [
                _row("a", float("nan"), "scorer:success", "score"),
                _row("a", 0.0, "evallog", "imported"),
            ],
            (0.0, "evallog", False, 2, 1),
            id="NaN is an abstention, never a value",
        ),
        pytest.param(
            [
                _row("a", 1.0, "grade:vlm_judge", "observation"),
                _row("a", 0.0, "grade:operator", "observation"),
                _row("a", 1.0, "evallog", "imported"),
            ],
            (0.0, "grade:operator", True, 3, 0),
            id="two graders disagree: ambiguous, first by source name",
        ),
        pytest.param(
            [
                _row("a", 1.0, "grade:vlm_judge", "observation"),
                _row("a", 1.0, "grade:operator", "observation"),
                _row("a", 0.0, "evallog", "imported"),
            ],
            (1.0, "grade:operator", False, 3, 0),
            id="two graders agree: not ambiguous",
        ),
        pytest.param(
            [
                _row("a", 1.0, "scorer:success", "score"),
                _row("a", 0.0, "grade:a", "observation"),
                _row("a", 1.0, "grade:b", "observation"),
            ],
            (1.0, "scorer:success", False, 3, 0),
            id="disagreement below the top kind is not ambiguity",
        ),
    ],
)
def test_precedence(rows: list[tuple[Any, ...]], want: tuple[Any, ...]) -> None:
    assert _preferred(rows) == {"a": want}


def test_keys_epochs_metrics_are_separate() -> None:
    rows = [
        ("r", "a", 1, "success", 1.0, "evallog", "imported"),
        ("r", "a", 2, "success", 0.0, "evallog", "imported"),
        ("r", "a", 1, "steps", 5.0, "evallog", "imported"),
        ("q", "a", 1, "steps", 6.0, "evallog", "imported"),
    ]
    con = _con(rows)
    got = con.execute(
        "select run_id, epoch, metric, value from int_scores_preferred order by all"
    ).fetchall()
    assert got == [
        ("q", 1, "steps", 6.0),
        ("r", 1, "steps", 5.0),
        ("r", 1, "success", 1.0),
        ("r", 2, "success", 0.0),
    ]


def test_abstentions_get_a_reason_and_errors_are_marked() -> None:
    rows = [
        ("r", "a", 1, "success", None, "evallog", "imported"),
        ("r", "b", 1, "success", None, "evallog", "imported"),
        ("r", "c", 1, "success", float("nan"), "scorer:success", "score"),
        ("r", "d", 1, "success", 1.0, "evallog", "imported"),
    ]
    samples = [("r", "a", 1, "error"), ("r", "b", 1, "success"), ("r", "d", 1, "error")]
    got = (
        _con(rows, samples)
        .execute(
            "select key, value, valid, skip_reason, errored from int_scores_preferred order by key"
        )
        .fetchall()
    )
    assert got == [
        ("a", None, False, "abstained", True),  # the episode errored: a failure, if counted
        ("b", None, False, "abstained", False),
        ("c", None, False, "nan", False),
        ("d", 1.0, True, None, False),  # a value is a value, whatever the sample status
    ]
