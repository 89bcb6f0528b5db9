"""A process killed mid-ingest leaves a readable store; the next ingest completes the work."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import hylo_analytics as ha
from hylo_analytics import store as store_mod
from hylo_analytics.ingest import ingest_paths
from hylo_analytics.testing import SynthConfig, write_dataset


def _consistent(store: ha.Store) -> tuple[int, int, int]:
    """Counts, after checking that no run is half-present and nothing is duplicated."""
    runs = store.sql("SELECT run_id, n_samples FROM stg_runs")
    samples = store.sql("SELECT run_id, count(*) AS n FROM stg_samples GROUP BY run_id")
    assert dict(zip(runs["run_id"], runs["n_samples"], strict=True)) == dict(
        zip(samples["run_id"], samples["n"], strict=True)
    )
    dups = store.sql(
        "SELECT count(*) FROM (SELECT run_id, episode_id, idx FROM stg_events GROUP BY ALL HAVING count(*) > 1)"
    ).item()
    assert dups == 0
    return (
        len(runs),
        int(samples["n"].sum() or 0),
        store.sql("SELECT count(*) FROM stg_events").item(),
    )


@pytest.fixture(scope="module")
def many_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("many")
    write_dataset(out, SynthConfig(runs=12, tasks=5, seeds=10, mean_steps=10, seed=3))
    return out


@pytest.fixture(scope="module")
def expected(many_runs: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[int, int, int]:
    store = ha.open_store(tmp_path_factory.mktemp("clean") / "s")
    store.ingest(many_runs, progress=False)
    return _consistent(store)


def test_crash_before_the_commit_rename(
    tmp_path: Path, many_runs: Path, expected: tuple[int, int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ha.open_store(tmp_path / "s")
    real_rename = os.rename
    calls = {"n": 0}

    def dying_rename(src: str, dst: str) -> None:
        calls["n"] += 1
        if calls["n"] == 3:  # third commit dies with its files written but not published
            raise KeyboardInterrupt("killed")
        real_rename(src, dst)

    monkeypatch.setattr(store_mod.os, "rename", dying_rename)
    with pytest.raises(KeyboardInterrupt):
        ingest_paths(store, [many_runs], progress=False, chunk_bytes=1)
    monkeypatch.undo()
    runs, _, _ = _consistent(ha.open_store(store.root))
    assert runs == 2  # the two published commits, nothing of the third
    ingest_paths(store, [many_runs], progress=False, chunk_bytes=1)
    assert _consistent(store) == expected


def _published(root: Path) -> int:
    try:
        return len(json.loads((root / "manifest.json").read_text())["batches"])
    except (FileNotFoundError, ValueError):
        return 0


_CHILD = """
import sys
from pathlib import Path
import hylo_analytics as ha
from hylo_analytics.ingest import ingest_paths
ingest_paths(ha.open_store(sys.argv[1]), [Path(sys.argv[2])], progress=False, chunk_bytes=1)
"""


@pytest.mark.parametrize("after_batches", [1, 4, 8])
def test_sigkill_mid_ingest(
    tmp_path: Path, many_runs: Path, expected: tuple[int, int, int], after_batches: int
) -> None:
    root = tmp_path / "s"
    ha.open_store(root)
    env = {**os.environ, "HYLO_ANALYTICS_COMPACT_AT": "0"}  # count commits, not merges
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(root), str(many_runs)], env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and child.poll() is None:
        if _published(root) > after_batches:  # commits readers can see
            break
        time.sleep(0.002)
    child.send_signal(signal.SIGKILL)
    child.wait()
    store = ha.open_store(root)
    runs, _, _ = _consistent(store)
    assert 0 < runs <= expected[0]
    store.ingest(many_runs, progress=False)
    assert _consistent(store) == expected
    assert not any((root / "_staging").glob("*"))
