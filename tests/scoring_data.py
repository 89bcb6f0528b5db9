"""Hand-built EvalLogs and traces for the scoring tests, written as real files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RUN = "run-hand-0001"


def _step(t: int, reward: float | None, success: bool | None, lat: float | None) -> dict[str, Any]:
    ev: dict[str, Any] = {"type": "step", "t": t, "action": [0.0], "terminated": False}
    if reward is not None:
        ev["reward"] = reward
    if success is not None:
        ev["info"] = {"success": success}
    if lat is not None:
        ev["latency_ms"] = lat
    return ev


def _start(t: int = 0) -> dict[str, Any]:
    return {"type": "start", "t": t}


def _end(status: str, reason: str | None = None) -> dict[str, Any]:
    ev: dict[str, Any] = {"type": "end", "t": 9, "status": status}
    if reason:
        ev["reason"] = reason
    return ev


def _grade(grader: str, value: Any, name: str = "success") -> dict[str, Any]:
    return {"type": "grade", "grader": grader, "name": name, "value": value, "explanation": "x"}


# key -> trace events (None: the sample names no trace; "missing": names a file that is absent)
TRACES: dict[str, list[dict[str, Any]] | str | None] = {
    # succeeds at the end; one intervention; a VLM grade that agrees
    "t1#1": [
        _start(),
        _step(1, 0.5, False, 10.0),
        _step(2, 1.0, True, 20.0),
        {"type": "intervention", "t": 2, "reason": "workspace_limit"},
        _grade("vlm_judge", 1.0),
        _end("success"),
    ],
    # touches success mid-episode and loses it: success_once = 1, success_at_end = 0
    "t1#2": [
        _start(),
        _step(1, 0.25, False, 10.0),
        _step(2, 1.0, True, 30.0),
        _step(3, -0.5, False, 50.0),
        _grade("vlm_judge", 0.0),
        _grade("vlm_judge", None),  # the judge's last word: abstain
        _grade("operator", True),  # boolean grades count as 1/0
        _end("failure", "max_steps"),
    ],
    # errored episode
    "t1#3": [_start(), _step(1, 0.1, False, 12.0), _end("error", "simulator crashed")],
    # no end event
    "t2#1": [_start(), _step(1, 0.1, False, 12.0), _step(2, 0.2, True, 14.0)],
    # empty trace file
    "t2#2": [],
    # no trace at all, and a trace file that is missing
    "t2#3": None,
    "t2#4": "missing",
    # steps without reward, info.success or latency
    "t3#1": [_start(), _step(1, None, None, None), _step(2, None, None, None), _end("failure")],
    # ended before any step
    "t3#2": [_start(), _end("failure", "no progress")],
}

# extra sample fields, for declarative scorers (output / case)
EXTRA: dict[str, dict[str, Any]] = {
    "t1#1": {
        "output": {"coverage": 0.8, "ok": True, "queue": [1, 2], "obj": {"a": 1, "b": 2}},
        "case": {"expected": {"queue": [1, 2], "obj": {"b": 2, "a": 1}, "n": 0.8}},
    },
    "t1#2": {
        "output": {"coverage": None, "ok": "fail", "queue": [2, 1], "obj": {"a": 1}},
        "case": {"expected": {"queue": [1, 2], "obj": {"a": 2}, "n": 1}},
    },
    "t1#3": {
        "output": {"coverage": "high", "ok": 7, "queue": 3},
        "case": {"expected": {"queue": 3}},
    },
}

# the EvalLog's own scores (imported)
SCORES: dict[str, dict[str, Any]] = {
    "t1#1": {"success": 1.0, "steps": 2.0},
    "t1#2": {"success": 0.0, "steps": 3.0},
    "t1#3": {"success": None},
    "t2#3": {"success": 1.0},
}


def write_run(root: Path, run_id: str = RUN) -> Path:
    """Write the EvalLog and its traces under ``root/run_id``; return the log's path."""
    run_dir = root / run_id
    (run_dir / "episodes").mkdir(parents=True, exist_ok=True)
    samples = []
    for i, (key, trace) in enumerate(TRACES.items()):
        task, seed = key.split("#")
        sample: dict[str, Any] = {
            "key": key,
            "task_id": task,
            "seed": int(seed),
            "episode_id": f"{run_id}-ep{i}",
            "status": "error" if key == "t1#3" else "failure",
            "scores": SCORES.get(key, {}),
            **EXTRA.get(key, {}),
        }
        if trace is not None:
            rel = f"episodes/ep{i}.jsonl"
            sample["trace"] = rel
            if isinstance(trace, list):
                text = "".join(json.dumps(e) + "\n" for e in trace)
                (run_dir / rel).write_text(text)
        samples.append(sample)
    log = {
        "version": "hylo.evallog/v0.1",
        "run_id": run_id,
        "benchmark": {"id": "hand", "version": "1", "split": "test"},
        "agent": {"name": "hand", "version": "1"},
        "results": {},
        "samples": samples,
    }
    path = run_dir / "evallog.json"
    path.write_text(json.dumps(log, indent=1))
    return path
