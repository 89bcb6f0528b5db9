"""Literal stores for the flip matrix: four runs small enough to check by hand, and a
2,000-run store made with numpy (committed as tables: no logs, no ingest).

The four runs are ordered so that text order, ingest order and version order all differ:
natural version order is r-c (1.2.0-rc1) < r-d (1.2.0) < r-b (1.9.0) < r-a (1.10.0), so
r-a is the latest and r-b the one before it. r-b is a vla-eval run (its harness counts an
errored episode as a failure); the others leave errors out. ``E`` is an errored episode,
``A`` an abstention (no trace), ``None`` a key the run lacks, a tuple several epochs:

    key    r-c       r-d   r-b  r-a
    t0#0   1         1     1    0     newly broken (and broken since solved)
    t0#1   0         0     0    0     always fails
    t1#0   1         0     0    1     newly fixed
    t1#1   1         1     E    E     errored: a failure for r-b only
    t2#0   (1, 0)    None  1    E     partial, missing, newly errored
    t2#1   E         E     E    A     never a failure: not "always fails"
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

import hylo_analytics as ha

E, A = "E", "A"
RUNS = {  # run_id: (agent_version, source_format, ingest order)
    "r-a": ("1.10.0", "hylo.evallog/v0.1", 0),
    "r-b": ("1.9.0", "vla-eval", 3),
    "r-c": ("1.2.0-rc1", "hylo.evallog/v0.1", 1),
    "r-d": ("1.2.0", "hylo.evallog/v0.1", 2),
}
VERSION_ORDER = ["r-c", "r-d", "r-b", "r-a"]
CELLS: dict[str, dict[str, Any]] = {
    "t0#0": {"r-c": 1, "r-d": 1, "r-b": 1, "r-a": 0},
    "t0#1": {"r-c": 0, "r-d": 0, "r-b": 0, "r-a": 0},
    "t1#0": {"r-c": 1, "r-d": 0, "r-b": 0, "r-a": 1},
    "t1#1": {"r-c": 1, "r-d": 1, "r-b": E, "r-a": E},
    "t2#0": {"r-c": (1, 0), "r-d": None, "r-b": 1, "r-a": E},
    "t2#1": {"r-c": E, "r-d": E, "r-b": E, "r-a": A},
}
_T0 = datetime(2026, 1, 1, tzinfo=UTC)


def run_row(run: str, version: str, fmt: str, benchmark: str = "bench", at: int = 0) -> dict:
    return {
        "run_id": run,
        "source_format": fmt,
        "source_path": f"/logs/{run}",
        "benchmark_id": benchmark,
        "benchmark_digest": "sha256:d",
        "split": "test",
        "agent_name": "octo",
        "agent_version": version,
        "status": "success",
        "ingested_at": _T0 + timedelta(seconds=at),
    }


def episode_rows(run: str, key: str, cell: Any) -> tuple[list[dict], list[dict]]:
    """The samples and success scores of one cell of :data:`CELLS`."""
    task, seed = key.split("#")
    epochs = cell if isinstance(cell, tuple) else (cell,)
    samples, scores = [], []
    for epoch, value in enumerate(epochs, start=1):
        ident = {"run_id": run, "key": key, "task_id": task, "seed": int(seed), "epoch": epoch,
                 "episode_id": f"{run}-{key}-{epoch}"}  # fmt: skip
        status = "error" if value == E else "success"
        samples.append({**ident, "status": status, "trace_status": "none"})
        number = None if value in (E, A) else float(value)
        reason = {E: "episode errored", A: "no trace"}.get(value) if number is None else None
        scores.append({**ident, "metric": "success", "value": number, "valid": number is not None,
                       "skip_reason": reason, "source": "evallog", "source_kind": "imported",
                       "scorer_version": ""})  # fmt: skip
    return samples, scores


def commit(root: Path, runs: list[dict], samples: list[dict], scores: list[dict]) -> ha.Store:
    store = ha.open_store(root)
    with store.parquet.lock():
        store.parquet.commit(
            {
                "runs": pa.Table.from_pylist(runs),
                "samples": pa.Table.from_pylist(samples),
                "scores": pa.Table.from_pylist(scores),
            }
        )
    return store


def literal_store(root: Path) -> ha.Store:
    """The four runs of the module docstring."""
    runs = [run_row(r, v, f, at=at) for r, (v, f, at) in RUNS.items()]
    samples: list[dict] = []
    scores: list[dict] = []
    for key, row in CELLS.items():
        for run, cell in row.items():
            if cell is not None:
                got = episode_rows(run, key, cell)
                samples += got[0]
                scores += got[1]
    return commit(root, runs, samples, scores)


def many_runs_store(
    root: Path, n_runs: int = 2_000, n_keys: int = 120, seed: int = 0
) -> tuple[ha.Store, np.ndarray]:
    """``n_runs`` runs (versions ``2.0.0`` ... in natural order, committed in text order) of
    ``n_keys`` keys each, 0/1 successes with 4 % errored episodes; returns the store and the
    runs x keys matrix of values in version order (NaN: errored)."""
    rng = np.random.default_rng(seed)
    skill = rng.uniform(0.05, 0.98, n_keys)
    values = (rng.random((n_runs, n_keys)) < skill).astype(np.float64)
    values[rng.random((n_runs, n_keys)) < 0.04] = np.nan
    versions = [f"2.{i}.0" for i in range(n_runs)]
    ids = [f"run-{i}" for i in range(n_runs)]  # text order: run-0, run-1, run-10, ...
    keys = [f"task{k % 10}#{k}" for k in range(n_keys)]
    run_col = np.repeat(ids, n_keys)
    key_col = np.tile(keys, n_runs)
    flat = values.ravel()
    errored = np.isnan(flat)
    ident = {
        "run_id": pa.array(run_col),
        "key": pa.array(key_col),
        "task_id": pa.array([k.split("#")[0] for k in key_col]),
        "seed": pa.array(np.tile(np.arange(n_keys), n_runs)),
        "epoch": pa.array(np.ones(flat.size, dtype=np.int64)),
        "episode_id": pa.array(np.char.add(np.char.add(run_col, "/"), key_col)),
    }
    samples = pa.table({**ident, "status": pa.array(np.where(errored, "error", "success")),
                        "trace_status": pa.array(np.full(flat.size, "none"))})  # fmt: skip
    scores = pa.table({
        **ident, "metric": pa.array(np.full(flat.size, "success")),
        "value": pa.array(flat, mask=errored), "valid": pa.array(~errored),
        "skip_reason": pa.array(np.where(errored, "episode errored", None)),
        "source": pa.array(np.full(flat.size, "evallog")),
        "source_kind": pa.array(np.full(flat.size, "imported")),
        "scorer_version": pa.array(np.full(flat.size, "")),
    })  # fmt: skip
    order = sorted(range(n_runs), key=lambda i: ids[i][::-1])  # neither text nor version order
    runs = pa.Table.from_pylist(
        [run_row(ids[i], versions[i], "hylo.evallog/v0.1", at=j) for j, i in enumerate(order)]
    )
    store = ha.open_store(root)
    with store.parquet.lock():
        store.parquet.commit({"runs": runs, "samples": samples, "scores": scores})
    return store, values
