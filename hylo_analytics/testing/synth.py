"""Deterministic synthetic EvalLogs and traces, at any size.

Used for ``data/``, the tests and the benchmarks. Agents differ in per-task skill; episodes of
the same (task, seed) share a difficulty draw across agents, as real paired evaluations do, so
paired comparisons have something to find. Some episodes error (abstain), some have safety
interventions, a few carry grade events, and some succeed mid-episode but not at the end.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["SynthConfig", "write_dataset"]

TASK_NAMES = (
    "pick_cube",
    "stack_blocks",
    "open_drawer",
    "close_drawer",
    "push_button",
    "place_in_bowl",
    "turn_faucet",
    "insert_peg",
    "wipe_table",
    "pour_cup",
)


@dataclass(frozen=True)
class SynthConfig:
    runs: int = 3
    tasks: int = 10
    seeds: int = 20
    traces_per_run: int | None = None  # None: every sample has a trace
    mean_steps: int = 25
    error_rate: float = 0.04
    seed: int = 0
    benchmark_id: str = "hylo-sim/tabletop"
    split: str = "heldout"
    # None: one agent (octo-ft) at a new version per run; else runs dealt round-robin to this
    # many agents (policy-0000, ...), each agent's runs its seeds at versions 1.0, 2.0, ...
    agents: int | None = None


def _task_ids(n: int) -> list[str]:
    return [
        f"tabletop/{TASK_NAMES[i % len(TASK_NAMES)]}"
        + (f"_{i // len(TASK_NAMES)}" if i >= len(TASK_NAMES) else "")
        for i in range(n)
    ]


def _agents(n: int, agents: int | None = None) -> list[tuple[str, str]]:
    if agents is not None:
        return [(f"policy-{i % agents:04d}", f"{i // agents + 1}.0") for i in range(n)]
    base = [("octo-ft", "1.0.0"), ("octo-ft", "1.1.0"), ("octo-ft", "1.2.0-rc1")]
    return [base[i] if i < len(base) else ("octo-ft", f"2.{i}.0") for i in range(n)]


def write_dataset(out: str | os.PathLike[str], cfg: SynthConfig = SynthConfig()) -> list[Path]:
    """Write ``cfg.runs`` EvalLogs (``<out>/<run_id>/evallog.json`` plus ``episodes/``)."""
    rng = np.random.default_rng(cfg.seed)
    out = Path(out)
    tasks = _task_ids(cfg.tasks)
    seeds = [1000 + s for s in range(cfg.seeds)]
    n_t, n_s = len(tasks), len(seeds)
    base_skill = rng.uniform(0.25, 0.85, size=n_t)
    shared = rng.uniform(size=(n_t, n_s))  # difficulty shared by all agents: paired design
    digest = (
        "sha256:"
        + hashlib.sha256(json.dumps([cfg.benchmark_id, tasks, seeds]).encode()).hexdigest()
    )
    written = []
    for r, (name, version) in enumerate(_agents(cfg.runs, cfg.agents)):
        arng = np.random.default_rng([cfg.seed, r])
        # later versions improve on most tasks and regress on the last one
        delta = np.where(np.arange(n_t) == n_t - 1, -0.15, 0.12) * min(r, 2)
        noise = arng.normal(0, 0.03, n_t)
        if cfg.agents is not None:  # each agent its own skill, shared by its runs (seeds)
            noise = noise + np.random.default_rng([cfg.seed, 7919, r % cfg.agents]).normal(0, 0.08)
        skill = np.clip(base_skill + delta + noise, 0.02, 0.98)
        u = 0.5 * shared + 0.5 * arng.uniform(size=(n_t, n_s))
        success = u < skill[:, None]
        errored = arng.uniform(size=(n_t, n_s)) < cfg.error_rate
        run_id = f"run-{name}-{version}-{r:04d}"
        run_dir = out / run_id
        (run_dir / "episodes").mkdir(parents=True, exist_ok=True)
        n_samples = n_t * n_s
        with_trace = (
            np.ones(n_samples, bool)
            if cfg.traces_per_run is None
            else np.isin(
                np.arange(n_samples),
                arng.choice(n_samples, min(cfg.traces_per_run, n_samples), replace=False),
            )
        )
        samples: list[dict[str, Any]] = []
        for ti, task in enumerate(tasks):
            for si, seed in enumerate(seeds):
                i = ti * n_s + si
                key = f"{task}#{seed}"
                ep = f"{run_id}-ep{i:05d}"
                err = bool(errored[ti, si])
                ok = bool(success[ti, si]) and not err
                steps = max(3, int(arng.poisson(cfg.mean_steps * (0.7 if ok else 1.2))))
                if err:
                    steps = int(arng.integers(0, 4))
                interventions = int(arng.poisson(0.15)) if not err else 0
                status = "error" if err else ("success" if ok else "failure")
                sample = {
                    "key": key,
                    "task_id": task,
                    "seed": seed,
                    "episode_id": ep,
                    "status": status,
                    "scores": {
                        "success": None if err else float(ok),
                        "steps": None if err else float(steps),
                        "safety_interventions": None if err else float(interventions),
                    },
                }
                if with_trace[i]:
                    rel = f"episodes/{ep}.jsonl"
                    sample["trace"] = rel
                    _write_trace(run_dir / rel, arng, ep, task, seed, steps, ok, err, interventions)
                samples.append(sample)
        valid = [s for s in samples if s["status"] != "error"]
        log = {
            "version": "hylo.evallog/v0.1",
            "run_id": run_id,
            "benchmark": {
                "id": cfg.benchmark_id,
                "version": "1.0",
                "digest": digest,
                "split": cfg.split,
                "requires_privileged": False,
            },
            "agent": {
                "name": name,
                "version": version,
                "components": {"policy": f"{name}@{version}", "planner": "none"},
            },
            "results": {
                "success_mean": float(np.mean([s["scores"]["success"] for s in valid]))
                if valid
                else None,
                "steps_mean": float(np.mean([s["scores"]["steps"] for s in valid]))
                if valid
                else None,
                "n_episodes": len(samples),
                "n_scored": len(valid),
            },
            "samples": samples,
        }
        path = run_dir / "evallog.json"
        path.write_text(json.dumps(log, indent=1))
        written.append(path)
    return written


def _write_trace(
    path: Path,
    rng: np.random.Generator,
    ep: str,
    task: str,
    seed: int,
    steps: int,
    ok: bool,
    err: bool,
    interventions: int,
) -> None:
    lat = rng.lognormal(np.log(45), 0.35, size=steps)
    rew = np.round(rng.normal(0, 0.1, size=steps), 4)
    # some failures touch success mid-episode and lose it (success_once != success_at_end)
    touch = (not ok) and (not err) and steps > 4 and rng.uniform() < 0.25
    touch_at = int(rng.integers(1, steps - 1)) if touch else -1
    inter_at = set(rng.integers(0, max(steps, 1), size=interventions).tolist()) if steps else set()
    lines = [
        json.dumps(
            {
                "type": "start",
                "t": 0,
                "episode_id": ep,
                "task_id": task,
                "seed": seed,
                "instruction": task.split("/")[-1].replace("_", " "),
            }
        )
    ]
    for t in range(steps):
        last = t == steps - 1
        succ = (ok and last) or t == touch_at
        lines.append(
            json.dumps(
                {
                    "type": "step",
                    "t": t + 1,
                    "action": [round(float(x), 3) for x in rng.normal(0, 1, 3)],
                    "reward": float(rew[t]) + (1.0 if succ else 0.0),
                    "terminated": bool(ok and last),
                    "truncated": bool(last and not ok and not err),
                    "info": {"success": bool(succ)},
                    "latency_ms": round(float(lat[t]), 2),
                }
            )
        )
        if t in inter_at:
            lines.append(
                json.dumps({"type": "intervention", "t": t + 1, "reason": "workspace_limit"})
            )
    if not err and rng.uniform() < 0.1:
        judged = None if rng.uniform() < 0.2 else float(ok)
        lines.append(
            json.dumps(
                {
                    "type": "grade",
                    "grader": "vlm_judge",
                    "name": "success",
                    "value": judged,
                    "explanation": "judge unsure" if judged is None else "final frame checked",
                }
            )
        )
    end = {
        "type": "end",
        "t": steps,
        "status": "error" if err else ("success" if ok else "failure"),
    }
    if err:
        end["reason"] = "simulator crashed"
    elif not ok:
        end["reason"] = "max_steps" if steps else "no progress"
    lines.append(json.dumps(end))
    path.write_text("\n".join(lines) + "\n")
