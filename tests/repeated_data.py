"""Stores whose keys have several epochs: a literal one small enough to check by hand, and
one made with numpy at any size (committed as tables: no logs, no ingest).

The literal store (``E`` an errored epoch, a tuple a key's epochs; run ``r-b`` is vla-eval,
whose harness counts an errored episode as a failure, the others leave it out):

    key     r-a          r-b          r-c (agent "other")
    t0#0    (1, 0, 1)    (1, 1, 1)    (0, 0)
    t0#1    (0, 0, 0)    (0, 1, 0)    (1, 1)
    t1#0    (1, 1)       (1, E, 1)    (0,)
    t1#1    (1, E, 0)    (0, 0, 1)    (1, 0)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from flip_data import E, commit, episode_rows, run_row

import hylo_analytics as ha

CELLS: dict[str, dict[str, tuple[Any, ...]]] = {
    "t0#0": {"r-a": (1, 0, 1), "r-b": (1, 1, 1), "r-c": (0, 0)},
    "t0#1": {"r-a": (0, 0, 0), "r-b": (0, 1, 0), "r-c": (1, 1)},
    "t1#0": {"r-a": (1, 1), "r-b": (1, E, 1), "r-c": (0,)},
    "t1#1": {"r-a": (1, E, 0), "r-b": (0, 0, 1), "r-c": (1, 0)},
}
RUNS = {"r-a": ("1.0", "hylo.evallog/v0.1"), "r-b": ("2.0", "vla-eval"),
        "r-c": ("1.0", "hylo.evallog/v0.1")}  # fmt: skip


def literal_store(root: Path) -> ha.Store:
    """The three runs of the module docstring (r-a and r-b of agent ``octo``)."""
    runs = []
    for i, (run, (version, fmt)) in enumerate(RUNS.items()):
        row = run_row(run, version, fmt, at=i)
        if run == "r-c":
            row["agent_name"] = "other"
        runs.append(row)
    samples: list[dict[str, Any]] = []
    scores: list[dict[str, Any]] = []
    for key, row in CELLS.items():
        for run, cell in row.items():
            got = episode_rows(run, key, cell)
            samples += got[0]
            scores += got[1]
    return commit(root, runs, samples, scores)


def epochs_store(
    root: Path, n_runs: int, n_keys: int, n_epochs: int, *, seed: int = 0, agents: int = 10
) -> tuple[ha.Store, np.ndarray]:
    """``n_runs`` runs (dealt to ``agents`` agents) of ``n_keys`` keys with ``n_epochs``
    0/1 epochs each (item difficulty shared, each run its own skill); returns the store and
    the runs x keys x epochs values."""
    rng = np.random.default_rng(seed)
    item = rng.normal(0, 1.5, n_keys)
    skill = rng.normal(0, 0.5, n_runs)
    prob = 1 / (1 + np.exp(-(item[None, :] + skill[:, None])))
    values = (rng.random((n_runs, n_keys, n_epochs)) < prob[:, :, None]).astype(np.float64)
    ids = np.array([f"run-{i:04d}" for i in range(n_runs)])
    keys = np.array([f"task{k % 20}#{k}" for k in range(n_keys)])
    size = values.size
    run_col = np.repeat(ids, n_keys * n_epochs)
    key_col = np.tile(np.repeat(keys, n_epochs), n_runs)
    epoch = np.tile(np.arange(1, n_epochs + 1), n_runs * n_keys)
    ident = {
        "run_id": pa.array(run_col),
        "key": pa.array(key_col),
        "task_id": pa.array(np.char.partition(key_col, "#")[:, 0]),
        "seed": pa.array(np.tile(np.repeat(np.arange(n_keys), n_epochs), n_runs)),
        "epoch": pa.array(epoch.astype(np.int64)),
        "episode_id": pa.array(np.char.add(np.char.add(run_col, "/"),
                                           np.char.add(key_col, epoch.astype(str)))),
    }  # fmt: skip
    samples = pa.table({**ident, "status": pa.array(np.full(size, "success")),
                        "trace_status": pa.array(np.full(size, "none"))})  # fmt: skip
    scores = pa.table({
        **ident, "metric": pa.array(np.full(size, "success")),
        "value": pa.array(values.ravel()), "valid": pa.array(np.ones(size, bool)),
        "skip_reason": pa.nulls(size, pa.string()),
        "source": pa.array(np.full(size, "evallog")),
        "source_kind": pa.array(np.full(size, "imported")),
        "scorer_version": pa.array(np.full(size, "")),
    })  # fmt: skip
    runs = []
    for i, run in enumerate(ids.tolist()):
        row = run_row(run, f"{i // agents + 1}.0", "hylo.evallog/v0.1", at=i)
        row["agent_name"] = f"policy-{i % agents:03d}"
        runs.append(row)
    store = ha.open_store(root)
    with store.parquet.lock():
        store.parquet.commit(
            {"runs": pa.Table.from_pylist(runs), "samples": samples, "scores": scores}
        )
    return store, values
