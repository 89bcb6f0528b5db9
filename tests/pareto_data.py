"""Small stores for the Pareto front's tests: agents with a success rate and a step cost."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

import hylo_analytics as ha


def commit(root: Path, runs: list[dict], samples: dict, scores: dict) -> ha.Store:
    store = ha.open_store(root)
    with store.parquet.lock():
        store.parquet.commit(
            {
                "runs": pa.Table.from_pylist(runs),
                "samples": pa.table(samples),
                "scores": pa.table(scores),
            }
        )
    return store


def run_row(run: str, agent: str, split: str) -> dict[str, str]:
    return {"run_id": run, "source_format": "hylo.evallog/v0.1", "source_path": f"/x/{run}",
            "benchmark_id": "b", "benchmark_digest": "sha256:d", "split": split,
            "agent_name": agent, "agent_version": "1", "status": "success"}  # fmt: skip


def pareto_store(
    root: Path,
    agents: dict[str, float],
    *,
    n_keys: int = 30,
    splits: tuple[str, ...] = ("s1", "s2"),
    own_keys: tuple[str, ...] = (),
    no_cost: tuple[str, ...] = (),
    seed: int = 7,
) -> ha.Store:
    """Agents (name -> success rate) on ``splits``; agent ``m`` has two runs per split and
    two epochs on every fifth key; ~10% of episodes errored (no values); ``steps`` costs
    more for the better agents. ``own_keys``: agents that ran seeds of their own;
    ``no_cost``: agents with no steps."""
    rng = np.random.default_rng(seed)
    runs, cols = [], {c: [] for c in ("run_id", "key", "seed", "epoch", "metric", "value")}
    for agent, rate in agents.items():
        for split in splits:
            for r in range(2 if agent == "m" else 1):
                run = f"{agent}-{split}-{r}"
                runs.append(run_row(run, agent, split))
                for k in range(n_keys):
                    seed_k = k + (1000 if agent in own_keys else 0)
                    for epoch in range(1, (2 if agent == "m" and k % 5 == 0 else 1) + 1):
                        err = rng.random() < 0.1
                        success = None if err else float(rng.random() < rate)
                        steps = None if err else float(rng.integers(10, 40) + 20 * rate)
                        for metric, value in (("success", success), ("steps", steps)):
                            if metric == "steps" and agent in no_cost:
                                continue
                            for c, v in zip(cols, (run, f"t#{seed_k}", seed_k, epoch, metric,
                                                   value), strict=True):  # fmt: skip
                                cols[c].append(v)
    n = len(cols["run_id"])
    ident = {
        "run_id": cols["run_id"], "key": cols["key"], "task_id": ["t"] * n, "seed": cols["seed"],
        "epoch": cols["epoch"],
        "episode_id": [f"{r}-{k}-{e}" for r, k, e in zip(cols["run_id"], cols["key"],
                                                         cols["epoch"], strict=True)],
    }  # fmt: skip
    samples = pl.DataFrame({**ident, "status": ["success"] * n, "trace_status": ["none"] * n})
    samples = samples.unique(["run_id", "key", "epoch"], maintain_order=True)
    valid = [v is not None for v in cols["value"]]
    scores = {**ident, "metric": cols["metric"], "value": pa.array(cols["value"], pa.float64()),
              "valid": valid, "skip_reason": [None if v else "errored" for v in valid],
              "source": ["evallog"] * n, "source_kind": ["imported"] * n,
              "scorer_version": [""] * n}  # fmt: skip
    return commit(root, runs, samples.to_dict(as_series=False), scores)
