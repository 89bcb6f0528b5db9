"""Readers see committed states only; writers in several processes all land (real processes).

A writer process re-ingests two runs whose content changes every round (version ``v`` stamps
its number into every sample, event and score) and re-scores them; meanwhile this process
queries through a long-lived :class:`~hylo_analytics.Store` and a fresh ``open_store`` per
query and checks, after each query, invariants that hold only in a committed state.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import duckdb
import polars as pl
import pytest

import hylo_analytics as ha
from hylo_analytics import _manifest
from hylo_analytics.store import StaleSnapshotError
from hylo_analytics.testing import SynthConfig, write_dataset

RUNS = ("run-a", "run-b")


def n_samples(v: int) -> int:
    return 3 + v % 4


def n_steps(v: int) -> int:
    return 2 + v % 3


def write_version(out: Path, v: int) -> None:
    """Both runs at version ``v``: ``n_samples(v)`` samples of ``n_steps(v)`` steps each."""
    for run in RUNS:
        d = out / run
        (d / "episodes").mkdir(parents=True, exist_ok=True)
        samples = []
        for i in range(n_samples(v)):
            ep = f"{run}-v{v}-ep{i}"
            steps = n_steps(v)
            lines = [{"type": "start", "t": 0, "episode_id": ep, "task_id": f"t{i}", "seed": i}]
            lines += [
                {"type": "step", "t": t + 1, "reward": 0.0, "terminated": t == steps - 1,
                 "truncated": False, "info": {"success": t == steps - 1}}
                for t in range(steps)
            ]  # fmt: skip
            lines.append({"type": "end", "t": steps, "status": "success"})
            (d / "episodes" / f"ep{i}.jsonl").write_text(
                "".join(json.dumps(x) + "\n" for x in lines)
            )
            samples.append(
                {"key": f"t{i}#{i}", "task_id": f"t{i}", "seed": i, "episode_id": ep,
                 "status": "success", "scores": {"success": 1.0, "vstamp": float(v)},
                 "trace": f"episodes/ep{i}.jsonl"}
            )  # fmt: skip
        log = {
            "version": "hylo.evallog/v0.1",
            "run_id": run,
            "benchmark": {"id": "b", "version": "1", "digest": "sha256:0", "split": "s"},
            "agent": {"name": run, "version": str(v)},
            "samples": samples,
        }
        tmp = d / ".evallog.json.tmp"
        tmp.write_text(json.dumps(log))
        os.replace(tmp, d / "evallog.json")


# one query, so one snapshot: every row of the four tables that the invariant needs
INVARIANT_SQL = """
SELECT 'run' AS t, run_id, agent_version AS name, n_samples::DOUBLE AS x FROM stg_runs
UNION ALL SELECT 'sample', run_id, episode_id, NULL FROM stg_samples
UNION ALL SELECT 'event', run_id, episode_id, NULL FROM stg_events
UNION ALL SELECT 'score', run_id, episode_id || '|' || source || '|' || metric, value
FROM stg_scores
"""


def _version(episode_id: str) -> int:
    return int(episode_id.split("-v")[1].split("-")[0])


def check_committed(frame: pl.DataFrame) -> int:
    """Raise unless ``frame`` (of INVARIANT_SQL) is a committed state; return its version."""
    rows = frame.rows()
    runs = {r: (int(name), int(x)) for t, r, name, x in rows if t == "run"}
    assert set(runs) == set(RUNS), runs
    versions = {v for v, _ in runs.values()}
    assert len(versions) == 1, f"runs of two versions: {runs}"  # both runs: one commit
    (v,) = versions
    samples = Counter(r for t, r, _, _ in rows if t == "sample")
    for run, (_, n) in runs.items():
        assert n == n_samples(v) == samples[run], (run, n, samples[run], v)
    seen = {_version(name.split("|")[0]) for t, _, name, _ in rows if t != "run"}
    assert seen == {v}, f"rows of versions {seen} beside runs of version {v}"
    events = Counter(name for t, _, name, _ in rows if t == "event")
    assert set(events.values()) == {n_steps(v) + 2}, events
    scores = [(name, x) for t, _, name, x in rows if t == "score"]
    keys = Counter(name for name, _ in scores)
    assert max(keys.values()) == 1, "duplicate score rows"
    for name, x in scores:
        _, source, metric = name.split("|")
        if metric == "vstamp":
            assert x == v
        if source == "scorer:steps":
            assert x == n_steps(v)
    assert sum(1 for name, _ in scores if name.endswith("|vstamp")) == 2 * n_samples(v)
    return v


def check_aggregate(frame: pl.DataFrame) -> int:
    """An aggregate (several queries) answers from one state: each run's mean is its version."""
    assert sorted(frame["run_id"].to_list()) == sorted(RUNS)
    for row in frame.iter_rows(named=True):
        v = int(row["agent_version"])
        assert row["mean"] == v and row["n_valid"] == n_samples(v), row
    return int(frame["agent_version"][0])


def _writer(root: str, data: str, seconds: float) -> None:
    """The writer child: re-ingest a new version, re-score every other round, until told."""
    store = ha.open_store(root)
    v, deadline = 1, time.monotonic() + seconds
    stop = Path(data) / "STOP"
    while time.monotonic() < deadline and not stop.exists():
        v += 1
        write_version(Path(data), v)
        store.ingest(data, progress=False)
        if v % 2:
            store.score(["steps"])
    print(v, flush=True)


def _child(*args: str, out: bool = False) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    return subprocess.Popen(
        [sys.executable, __file__, *args],
        env=env,
        stdout=subprocess.PIPE if out else None,
        text=True,
    )


@pytest.mark.slow
def test_readers_never_see_a_mix(tmp_path: Path) -> None:
    root, data = tmp_path / "s", tmp_path / "data"
    write_version(data, 1)
    ha.open_store(root).ingest(data, progress=False)
    writer = _child("writer", str(root), str(data), "900", out=True)  # until STOP, at most 15 min
    long = ha.open_store(root, create=False)
    versions: set[int] = set()
    t0 = time.monotonic()
    try:
        _read_while_writing(root, long, writer, versions, t0)
    except BaseException:
        writer.kill()
        writer.communicate()
        raise
    (data / "STOP").touch()
    out, _ = writer.communicate()
    assert writer.returncode == 0
    last = int(out.split()[-1])
    print(f"200 queries in {time.monotonic() - t0:.1f} s, {len(versions)} of {last} versions seen")
    assert len(versions) >= 5, versions  # the readers did see the writer's commits land
    assert check_committed(long.sql(INVARIANT_SQL)) == last


def _read_while_writing(
    root: Path, long: ha.Store, writer: subprocess.Popen[str], versions: set[int], t0: float
) -> None:
    """200 queries, each checked: a third through ``long``, a third through a fresh store, a
    third through ``long.aggregate`` (several queries for one answer)."""
    queries = 0
    while queries < 200:
        kind = queries % 3
        if kind == 0:
            versions.add(check_committed(long.sql(INVARIANT_SQL)))
        elif kind == 1:
            fresh = ha.open_store(root, create=False)
            versions.add(check_committed(fresh.sql(INVARIANT_SQL)))
        else:
            agg = long.aggregate(by=["run_id", "agent_version"], metrics=["vstamp"])
            versions.add(check_aggregate(agg))
        queries += 1
        assert writer.poll() is None, "the writer ended before the readers were done"
        # a guard only (~40 s on a quiet 2-core machine; a loaded one took over 50 s)
        assert time.monotonic() - t0 < 600


@pytest.mark.slow
def test_a_snapshot_holds_across_commits_and_says_when_its_files_are_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, data = tmp_path / "s", tmp_path / "data"
    write_version(data, 1)
    writer = ha.open_store(root)
    writer.ingest(data, progress=False)
    reader = ha.open_store(root, create=False)
    with reader.snapshot():
        assert check_committed(reader.sql(INVARIANT_SQL)) == 1
        write_version(data, 2)
        writer.ingest(data, progress=False)
        assert check_committed(reader.sql(INVARIANT_SQL)) == 1  # pinned: still version 1
        monkeypatch.setattr(_manifest, "RETIRE_SECONDS", 0.0)
        with writer.parquet.lock():
            writer.parquet.compact()  # retires version 1's batches, collected at once
        with pytest.raises(StaleSnapshotError, match="run the operation again"):
            reader.sql(INVARIANT_SQL)
    # outside a snapshot the next query reads the newest manifest
    assert check_committed(reader.sql(INVARIANT_SQL)) == 2


@pytest.mark.slow
def test_a_query_planned_on_collected_files_is_rerun_on_the_new_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, data = tmp_path / "s", tmp_path / "data"
    write_version(data, 1)
    writer = ha.open_store(root)
    writer.ingest(data, progress=False)
    write_version(data, 2)
    writer.ingest(data, progress=False)
    reader = ha.open_store(root, create=False)
    assert check_committed(reader.sql(INVARIANT_SQL)) == 2
    monkeypatch.setattr(_manifest, "RETIRE_SECONDS", 0.0)
    with writer.parquet.lock():
        writer.parquet.compact()
    # the reader's views still name the collected files (as a query that ran past the
    # retirement period would): the query is re-run, never answered from a partial list
    reader.parquet._stamp = _manifest.stamp(root, root / "batches")
    with pytest.raises(duckdb.IOException):
        reader.parquet.con.sql(INVARIANT_SQL).fetchall()  # the old plan's files are gone
    assert check_committed(reader.sql(INVARIANT_SQL)) == 2


def _halves(tmp_path: Path) -> tuple[Path, Path, Path]:
    every = tmp_path / "every"
    write_dataset(every, SynthConfig(runs=6, tasks=3, seeds=4, mean_steps=5, seed=9))
    a, b = tmp_path / "a", tmp_path / "b"
    for i, run in enumerate(sorted(p for p in every.iterdir() if p.is_dir())):
        (a if i < 3 else b).mkdir(exist_ok=True)
        run.rename((a if i < 3 else b) / run.name)
    return every, a, b


def _counts(store: ha.Store) -> tuple[int, int, int]:
    return (
        store.sql("SELECT count(*) FROM stg_runs").item(),
        store.sql("SELECT count(*) FROM stg_samples").item(),
        store.sql("SELECT count(*) FROM stg_events").item(),
    )


@pytest.mark.slow
def test_two_writers_both_land(tmp_path: Path) -> None:
    _, a, b = _halves(tmp_path)
    truth = ha.open_store(tmp_path / "truth")
    truth.ingest([a, b], progress=False)
    root = tmp_path / "s"
    ha.open_store(root).parquet.ensure_on_disk()
    first, second = _child("ingest", str(root), str(a)), _child("ingest", str(root), str(b))
    assert first.wait(60) == 0 and second.wait(60) == 0
    store = ha.open_store(root, create=False)
    assert _counts(store) == _counts(truth)
    assert store.sql("SELECT count(*) FROM stg_runs").item() == 6


@pytest.mark.slow
def test_ingest_beside_score_and_compact(tmp_path: Path) -> None:
    _, a, b = _halves(tmp_path)
    truth = ha.open_store(tmp_path / "truth")
    truth.ingest([a, b], progress=False)
    truth.score(["steps"])
    root = tmp_path / "s"
    store = ha.open_store(root)
    store.ingest(a, progress=False)
    children = [
        _child("ingest", str(root), str(b)),
        _child("score", str(root)),
        _child("compact", str(root)),
    ]
    assert [c.wait(60) for c in children] == [0, 0, 0]
    assert _counts(store) == _counts(truth)
    # the score ran before or after the second ingest: a's runs are scored either way
    scored = store.sql("SELECT DISTINCT run_id FROM stg_scores WHERE source = 'scorer:steps'")[
        "run_id"
    ].to_list()
    assert {p.name for p in a.iterdir()} <= set(scored)
    store.score(["steps"])
    assert (
        store.sql("SELECT count(*) FROM stg_scores").item()
        == truth.sql("SELECT count(*) FROM stg_scores").item()
    )


if __name__ == "__main__":  # the child processes of the tests above
    verb, *rest = sys.argv[1:]
    if verb == "writer":
        _writer(rest[0], rest[1], float(rest[2]))
    elif verb == "ingest":
        ha.open_store(rest[0]).ingest(rest[1], progress=False)
    elif verb == "score":
        ha.open_store(rest[0]).score(["steps"])
    elif verb == "compact":
        s = ha.open_store(rest[0])
        with s.parquet.lock():
            s.parquet.compact()
