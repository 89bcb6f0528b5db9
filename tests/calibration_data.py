"""Small stores for judge calibration: an oracle's ``success`` on some keys, a judge's on all."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
from pareto_data import commit, run_row

import hylo_analytics as ha


def calibration_store(
    root: Path,
    agents: dict[str, float],
    *,
    n_keys: int = 300,
    labelled: float = 0.25,
    splits: tuple[str, ...] = ("s1",),
    judge_metric: str = "success",
    judge_source: str = "grade:judge",
    seed: int = 11,
) -> ha.Store:
    """Agents (name -> true success rate) on ``splits``: the oracle (source ``oracle``,
    imported) grades a random ``labelled`` share of the keys (the same keys for every agent),
    the judge (``judge_metric`` from ``judge_source``, an observation) every key: right 85% of
    the time, a false success more often than a false failure, and it abstains on ~3%."""
    rng = np.random.default_rng(seed)
    lab = rng.random(n_keys) < labelled
    runs, cols = [], {c: [] for c in ("run_id", "key", "seed", "metric", "value", "source")}
    for agent, rate in agents.items():
        for split in splits:
            run = f"{agent}-{split}"
            runs.append(run_row(run, agent, split))
            truth = (rng.random(n_keys) < rate).astype(float)
            flip = rng.random(n_keys) < np.where(truth == 1, 0.08, 0.22)
            judged = np.where(flip, 1 - truth, truth)
            abstain = rng.random(n_keys) < 0.03
            for k in range(n_keys):
                rows = [(judge_metric, None if abstain[k] else float(judged[k]), judge_source)]
                if lab[k]:
                    rows.append(("success", float(truth[k]), "oracle"))
                for metric, value, source in rows:
                    for c, v in zip(cols, (run, f"t#{k}", k, metric, value, source), strict=True):
                        cols[c].append(v)
    n = len(cols["run_id"])
    ident = {"run_id": cols["run_id"], "key": cols["key"], "task_id": ["t"] * n,
             "seed": cols["seed"], "epoch": [1] * n,
             "episode_id": [f"{r}-{k}" for r, k in zip(cols["run_id"], cols["key"], strict=True)]}  # fmt: skip
    samples = pl.DataFrame({**ident, "status": ["success"] * n, "trace_status": ["none"] * n})
    samples = samples.unique(["run_id", "key", "epoch"], maintain_order=True)
    valid = [v is not None for v in cols["value"]]
    kinds = ["imported" if s == "oracle" else "observation" for s in cols["source"]]
    scores = {**ident, "metric": cols["metric"], "value": pa.array(cols["value"], pa.float64()),
              "valid": valid, "skip_reason": [None if v else "grader abstained" for v in valid],
              "source": cols["source"], "source_kind": kinds,
              "scorer_version": [""] * n}  # fmt: skip
    return commit(root, runs, samples.to_dict(as_series=False), scores)
