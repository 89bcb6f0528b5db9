"""hylo v0.2 benchmark members (episodes_per_task, max_steps, upstream) are run fields."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

import hylo_analytics as ha
from hylo_analytics.ingest._files import SourceFile
from hylo_analytics.ingest.hylo import _parse_checked, parse_evallogs

UPSTREAM = {
    "repo": "https://github.com/robocasa/robocasa",
    "commit": "9f1c2e7a",
    "assets": {"objects/é.zip": "sha256:ab12"},
}


def _log(run: str = "r1", **bench: Any) -> dict[str, Any]:
    return {
        "version": "hylo.evallog/v0.1",
        "run_id": run,
        "benchmark": {"id": "robocasa", "version": "1", **bench},
        "agent": {"name": "a"},
        "samples": [
            {
                "key": f"t/a#{s}",
                "task_id": "t/a",
                "seed": s,
                "epoch": e,
                "status": "success",
                "scores": {"success": 1},
            }
            for s in (1, 2)
            for e in (1, 2)
        ],
    }


def _write(tmp_path: Path, doc: dict[str, Any], name: str = "log.json") -> Path:
    p = tmp_path / "in" / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(doc, ensure_ascii=False))
    return p


V02_FIELDS = {"episodes_per_task": 2, "max_steps": {"t/a": 120}, "upstream": UPSTREAM}


def test_benchmark_v02_members_are_stored_as_run_fields(tmp_path: Path) -> None:
    store = ha.open_store(tmp_path / "s")
    rep = store.ingest(_write(tmp_path, _log(**V02_FIELDS)), progress=False)
    assert rep.quarantined == 0
    row = store.sql(
        "SELECT episodes_per_task, max_steps, benchmark_upstream, extra FROM stg_runs"
    ).to_dicts()[0]
    assert row["episodes_per_task"] == 2
    assert json.loads(row["max_steps"]) == {"t/a": 120}
    assert json.loads(row["benchmark_upstream"]) == UPSTREAM
    assert row["extra"] is None


def test_fast_and_checked_paths_agree(tmp_path: Path) -> None:
    data = json.dumps(_log(**V02_FIELDS), ensure_ascii=False).encode()
    sf = SourceFile(tmp_path / "l.json", len(data), 0, data, "0" * 64)
    cols = ["episodes_per_task", "max_steps", "benchmark_upstream"]
    con = duckdb.connect()
    fast = parse_evallogs(con, [sf]).runs.select(cols).to_pylist()
    checked = _parse_checked(con, [sf]).runs.select(cols).to_pylist()
    assert fast == checked and fast[0]["episodes_per_task"] == 2


@pytest.mark.parametrize(
    ("bench", "field", "error"),
    [
        ({"episodes_per_task": "2"}, "benchmark.episodes_per_task", "expected integer, got string"),
        (
            {"episodes_per_task": 0},
            "benchmark.episodes_per_task",
            "expected an integer >= 1, got 0",
        ),
        ({"max_steps": [1]}, "benchmark.max_steps", "expected object, got array"),
        ({"max_steps": {"t/a": 0}}, "benchmark.max_steps.t/a", "expected a positive integer"),
        ({"max_steps": {"t/a": 1.5}}, "benchmark.max_steps.t/a", "got 1.5"),
        ({"upstream": "git@x"}, "benchmark.upstream", "expected object, got string"),
        ({"upstream": {"repo": "r"}}, "benchmark.upstream.commit", "expected a string"),
        ({"upstream": {"repo": 1, "commit": "ab"}}, "benchmark.upstream.repo", "got integer"),
        (
            {"upstream": {"repo": "r", "commit": "ab", "assets": {"x": 3}}},
            "benchmark.upstream.assets.x",
            "expected a string (a hash), got 3",
        ),
        (
            {"upstream": {"repo": "r", "commit": "ab", "assets": []}},
            "benchmark.upstream.assets",
            "expected an object",
        ),
    ],
)
@pytest.mark.slow
def test_bad_benchmark_v02_members_are_quarantined(
    bench: dict[str, Any], field: str, error: str, tmp_path: Path
) -> None:
    store = ha.open_store(tmp_path / "s")
    good = _write(tmp_path, _log("good"), "good.json")
    bad = _write(tmp_path, _log("bad", **bench), "bad.json")
    rep = store.ingest(good.parent, progress=False)
    assert rep.quarantined == 1
    q = store.sql("SELECT path, line, field, error FROM stg_quarantine").to_dicts()
    assert [(r["path"], r["field"]) for r in q] == [(str(bad), field)]
    assert error in q[0]["error"]
    assert store.sql("SELECT run_id FROM stg_runs")["run_id"].to_list() == ["good"]
