"""int_episode_stats: per-episode reductions over literal event rows."""

from __future__ import annotations

from typing import Any

import duckdb
import pytest

from hylo_analytics._sql import view_sql

SAMPLES = [
    # run_id, key, task_id, seed, epoch, episode_id, status, trace_status
    ("r", "t#1", "t", 1, 1, "e1", "failure", "ok"),
    ("r", "t#2", "t", 2, 1, "e2", "error", "ok"),
    ("r", "t#3", "t", 3, 1, "e3", "failure", "none"),
    ("q", "t#1", "t", 1, 1, "e1", "success", "partial"),  # same episode id, other run
]
EVENTS = [
    # run_id, episode_id, idx, type, reward, success, latency_ms, reason, status
    ("r", "e1", 1, "start", None, None, None, None, None),
    ("r", "e1", 2, "step", 0.5, False, 10.0, None, None),
    ("r", "e1", 3, "step", 1.0, True, 20.0, None, None),
    ("r", "e1", 4, "intervention", None, None, None, "limit", None),
    ("r", "e1", 5, "step", None, None, 40.0, None, None),
    ("r", "e1", 6, "end", None, None, None, "max_steps", "failure"),
    ("r", "e2", 1, "step", 0.1, False, 5.0, None, None),
    ("q", "e1", 1, "step", 2.0, True, 7.0, None, None),
]


@pytest.fixture(scope="module")
def stats() -> dict[tuple[str, str], dict[str, Any]]:
    con = duckdb.connect()
    con.execute(
        "create table stg_samples (run_id varchar, key varchar, task_id varchar, seed bigint, "
        "epoch bigint, episode_id varchar, status varchar, trace_status varchar)"
    )
    con.execute(
        "create table stg_events (run_id varchar, episode_id varchar, idx bigint, type varchar, "
        "reward double, success boolean, latency_ms double, reason varchar, status varchar)"
    )
    con.executemany("insert into stg_samples values (?, ?, ?, ?, ?, ?, ?, ?)", SAMPLES)
    con.executemany("insert into stg_events values (?, ?, ?, ?, ?, ?, ?, ?, ?)", EVENTS)
    con.execute(f"create view v as {view_sql('int_episode_stats')}")
    df = con.sql("select * from v").pl()
    assert df.height == len(SAMPLES)
    return {(r["run_id"], r["key"]): r for r in df.iter_rows(named=True)}


def test_full_episode(stats: dict[tuple[str, str], dict[str, Any]]) -> None:
    e = stats[("r", "t#1")]
    assert (e["n_events"], e["n_steps"], e["n_interventions"], e["n_end_events"]) == (6, 3, 1, 1)
    assert (e["n_rewards"], e["total_reward"]) == (2, 1.5)
    # the last step has no info.success: success_at_end is unknown, not false
    assert (e["success_once"], e["success_at_end"], e["n_success_flags"]) == (True, None, 2)
    assert e["latency_p95"] == pytest.approx(20.0 + 0.9 * 20.0)
    assert (e["end_status"], e["end_reason"], e["errored"], e["has_trace"]) == (
        "failure",
        "max_steps",
        False,
        True,
    )


def test_errored_without_end_falls_back_to_sample_status(
    stats: dict[tuple[str, str], dict[str, Any]],
) -> None:
    e = stats[("r", "t#2")]
    assert (e["errored"], e["n_end_events"], e["end_status"]) == (True, 0, None)


def test_sample_without_trace_has_a_row(stats: dict[tuple[str, str], dict[str, Any]]) -> None:
    e = stats[("r", "t#3")]
    assert (e["has_trace"], e["n_events"], e["n_steps"], e["latency_p95"]) == (False, 0, 0, None)


def test_runs_do_not_mix(stats: dict[tuple[str, str], dict[str, Any]]) -> None:
    e = stats[("q", "t#1")]
    assert (e["n_steps"], e["total_reward"], e["success_at_end"], e["has_trace"]) == (
        1,
        2.0,
        True,
        True,
    )
