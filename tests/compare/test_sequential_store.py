"""The sequential comparison on a store, shown on two runs ingested in batches.

After every batch both EvalLogs are rewritten with the samples so far (same ``run_id``, so the
store supersedes the runs' old rows) and re-ingested; the monitor then takes a look.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import hylo_analytics as ha
from hylo_analytics.compare.sequential import (
    SequentialMonitor,
    paired_counts,
    sequential_compare,
)

BATCH, N_KEYS = 20, 400
TASKS = ("tabletop/pick_cube", "tabletop/open_drawer", "tabletop/stack_blocks", "tabletop/pour")


def _evallog(run_id: str, version: str, success: np.ndarray) -> dict[str, object]:
    """A hylo EvalLog with one sample per key (shape of data/sample, without traces)."""
    samples = [
        {
            "key": f"{TASKS[i % len(TASKS)]}#{1000 + i}",
            "task_id": TASKS[i % len(TASKS)],
            "seed": 1000 + i,
            "episode_id": f"{run_id}-ep{i:05d}",
            "status": "success" if ok else "failure",
            "scores": {"success": float(ok)},
        }
        for i, ok in enumerate(success.tolist())
    ]
    return {
        "version": "hylo.evallog/v0.1",
        "run_id": run_id,
        "benchmark": {
            "id": "hylo-sim/tabletop",
            "version": "1.0",
            "digest": "sha256:" + "0" * 64,
            "split": "heldout",
            "requires_privileged": False,
        },
        "agent": {"name": "octo-ft", "version": version, "components": {"policy": version}},
        "results": {"success_mean": float(success.mean()), "n_episodes": len(samples)},
        "samples": samples,
    }


def _monitor_in_batches(
    tmp_path: Path,
    p_parent: float,
    p_candidate: float,
    seed: int,
    n_keys: int = N_KEYS,
    batch: int = BATCH,
) -> tuple[SequentialMonitor, ha.Store]:
    """Reveal ``n_keys`` keys of both runs ``batch`` at a time, looking after each ingest."""
    rng = np.random.default_rng(seed)
    parent = rng.uniform(size=n_keys) < p_parent
    candidate = rng.uniform(size=n_keys) < p_candidate
    store = ha.open_store(tmp_path / "store")
    folder = tmp_path / "logs"
    runs = {"run-parent": ("1.0.0", parent), "run-candidate": ("1.1.0", candidate)}
    monitor = SequentialMonitor("run-candidate", "run-parent")
    for end in range(batch, n_keys + 1, batch):
        for run_id, (version, success) in runs.items():
            path = folder / run_id / "evallog.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(_evallog(run_id, version, success[:end])))
        store.ingest(folder, progress=False)
        monitor = monitor.look(store.parquet)
        if monitor.stopped:
            break
    return monitor, store


@pytest.mark.slow
def test_a_better_candidate_is_stopped_early(tmp_path: Path) -> None:
    monitor, store = _monitor_in_batches(tmp_path, 0.6, 0.8, seed=1)
    frame = monitor.to_frame()
    stop = monitor.stopped_at
    assert stop is not None and stop < N_KEYS // BATCH - 1  # before the last batch
    assert frame.height == stop + 1  # one look per batch, the last one the stop
    assert frame["n_pairs"].to_list() == [BATCH * (i + 1) for i in range(frame.height)]
    e = frame["e_value"].to_numpy()
    assert e[-1] >= 20.0 and np.all(e[:-1] < 20.0)
    assert frame["rejected"].to_list() == [False] * stop + [True]
    theta = frame["wins"] / frame["n_discordant"]
    assert ((frame["cs_low"] <= theta) & (theta <= frame["cs_high"])).all()
    # the last look equals a one-off look at the store, and the store's own comparison
    one = sequential_compare(store.parquet, "run-candidate", "run-parent")
    assert one.e_value[0] == pytest.approx(e[-1], rel=1e-12)
    row = store.compare(["run-candidate"], "run-parent", ci="none").row(0, named=True)
    assert (row["candidate_wins"], row["parent_wins"]) == (frame["wins"][-1], frame["losses"][-1])


@pytest.mark.slow
def test_equal_runs_are_not_stopped(tmp_path: Path) -> None:
    monitor, _ = _monitor_in_batches(tmp_path, 0.7, 0.7, seed=2, batch=2 * BATCH)
    assert not monitor.stopped
    assert len(monitor.wins) == N_KEYS // (2 * BATCH)
    assert monitor.n_pairs[-1] == N_KEYS
    assert monitor.to_frame()["e_value"].max() < 20.0  # type: ignore[operator]


@pytest.mark.slow
def test_a_look_reads_only_and_refuses_shrunken_counts(tmp_path: Path) -> None:
    """Pairs seen at an earlier look must stay: a replaced run is a new experiment."""
    monitor, store = _monitor_in_batches(tmp_path, 0.6, 0.8, seed=1, n_keys=BATCH)
    files = sorted((tmp_path / "store").rglob("*"))
    again = monitor.look(store.parquet)
    assert sorted((tmp_path / "store").rglob("*")) == files  # nothing written
    assert again.wins == monitor.wins * 2  # no new data: the same counts again
    n, w, lo = paired_counts(store.parquet, "run-candidate", "run-parent")
    inflated = SequentialMonitor(
        "run-candidate", "run-parent", n_pairs=(n + 1,), wins=(w + 1,), losses=(lo,)
    )
    with pytest.raises(ValueError, match="wins fell from"):
        inflated.look(store.parquet)


def test_a_monitor_without_looks() -> None:
    empty = SequentialMonitor("a", "b")
    assert not empty.stopped and empty.to_frame().height == 0


@pytest.mark.slow
def test_the_counts_follow_the_errors_policy(real_dir: Path, tmp_path: Path) -> None:
    """pi05's 30 timeouts on LIBERO-spatial: failures by vla-eval's convention (the default),
    drops with errors="exclude"; a monitor keeps its policy for every look."""
    from hylo_analytics.compare.sequential import SequentialMonitor, paired_counts

    store = ha.open_store(tmp_path / "s")
    store.ingest(real_dir / "vla-eval-harness", progress=False)
    pi05 = store.resolve_run("agent=pi05,benchmark=libero_spatial")
    xvla = store.resolve_run("agent=xvla,benchmark=libero_spatial")
    assert paired_counts(store.parquet, pi05, xvla) == (500, 9, 36)
    assert paired_counts(store.parquet, pi05, xvla, errors="failure") == (500, 9, 36)
    assert paired_counts(store.parquet, pi05, xvla, errors="exclude") == (470, 9, 7)
    monitor = SequentialMonitor(pi05, xvla, errors="exclude").look(store.parquet)
    assert (monitor.n_pairs, monitor.wins, monitor.losses) == ((470,), (9,), (7,))
