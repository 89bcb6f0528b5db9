"""Runs whose traces carry ``span`` events (tool / llm calls), written as real files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import hylo_analytics as ha


def span(name: str, kind: str = "tool", **arguments: Any) -> dict[str, Any]:
    return {
        "type": "span",
        "name": name,
        "kind": kind,
        "attributes": {"arguments": arguments},
        "start": 0.0,
        "end": 0.1,
    }


def write_span_run(
    root: Path,
    run_id: str,
    traces: dict[str, list[dict[str, Any]] | None],
    extra: dict[str, dict[str, Any]] | None = None,
    scores: dict[str, dict[str, Any]] | None = None,
) -> None:
    """One EvalLog ``root/run_id/evallog.json``; a ``None`` trace means the sample has none."""
    run_dir = root / run_id
    (run_dir / "episodes").mkdir(parents=True, exist_ok=True)
    samples = []
    for i, (key, trace) in enumerate(traces.items()):
        sample: dict[str, Any] = {
            "key": key,
            "task_id": key.split("#")[0],
            "seed": int(key.split("#")[1]),
            "episode_id": f"{run_id}-ep{i}",
            "status": "success",
            "scores": (scores or {}).get(key, {}),
            **(extra or {}).get(key, {}),
        }
        if trace is not None:
            events = [
                {"type": "start", "t": 0},
                *trace,
                {"type": "end", "t": 9, "status": "success"},
            ]
            sample["trace"] = f"episodes/ep{i}.jsonl"
            (run_dir / sample["trace"]).write_text("".join(json.dumps(e) + "\n" for e in events))
        samples.append(sample)
    log = {
        "version": "hylo.evallog/v0.1",
        "run_id": run_id,
        "benchmark": {"id": "spans", "version": "1", "split": "test"},
        "agent": {"name": "agent", "version": run_id[-1]},
        "results": {},
        "samples": samples,
    }
    (run_dir / "evallog.json").write_text(json.dumps(log))


def open_ingested(tmp_path: Path) -> ha.Store:
    st = ha.open_store(tmp_path / "store")
    st.ingest(tmp_path / "data", progress=False)
    assert st.sql("select count(*) as n from stg_quarantine")["n"][0] == 0
    return st
