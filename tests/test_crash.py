"""A process killed mid-ingest, -score, -evaluate or -compaction leaves a readable store in a
committed state; running the operation again converges to exactly the ground truth."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import hylo_analytics as ha
from hylo_analytics.ingest import ingest_paths
from hylo_analytics.store import publish as store_mod
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


@pytest.mark.slow
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


@pytest.mark.slow
@pytest.mark.parametrize("after_batches", [1, 4, 8])
def test_sigkill_mid_ingest(
    tmp_path: Path, many_runs: Path, expected: tuple[int, int, int], after_batches: int
) -> None:
    root = tmp_path / "s"
    ha.open_store(root).parquet.ensure_on_disk()
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


# -- kill -9 at random points of ingest, score, evaluate and compaction ------------------------
#
# One "zygote" process imports the package once, then forks a child per trial on request, so a
# trial costs the operation, not Python's start-up, and the kill lands inside the operation.
# The kill time is drawn from a seeded RNG over the operation's duration, measured once by an
# unkilled run that also gives the ground truth.

_ZYGOTE = r"""
import json, os, sys, traceback
from pathlib import Path
import hylo_analytics as ha
from hylo_analytics.analysis import load_analysis_spec, run_analysis
from hylo_analytics.ingest import ingest_paths

def run(op, root, arg):
    store = ha.open_store(root)
    if op == "ingest":
        ingest_paths(store, [Path(arg)], progress=False, chunk_bytes=20_000)
    elif op == "score":
        store.score(json.loads(arg))
    elif op == "evaluate":
        run_analysis(store, load_analysis_spec(json.loads(arg)))
    elif op == "compact":
        with store.parquet.lock():
            store.parquet.compact()

for line in sys.stdin:
    cmd, *args = line.split("\t")
    args = [a.rstrip("\n") for a in args]
    if cmd == "run":
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                run(*args)
            except BaseException:
                traceback.print_exc()
                code = 1
            os._exit(code)
        print(pid, flush=True)
    elif cmd == "wait":
        print(os.waitpid(int(args[0]), 0)[1], flush=True)
"""

TRIALS = 20
SCORERS = ["success", "steps", "return"]
SPEC = {
    "score": {"episode_steps": {"value": "trace.steps", "unit": "steps", "goal": "minimize"}},
    "policies": [{"name": "short", "metric": "episode_steps", "must_less_equal": 1000.0}],
}


class _Zygote:
    def __init__(self) -> None:
        env = {**os.environ, "HYLO_ANALYTICS_THREADS": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _ZYGOTE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )

    def _ask(self, *words: str) -> int:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("\t".join(words) + "\n")
        self.proc.stdin.flush()
        return int(self.proc.stdout.readline())

    def start(self, op: str, root: Path, arg: str) -> int:
        return self._ask("run", op, str(root), arg)

    def wait(self, pid: int) -> int:
        return self._ask("wait", str(pid))

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.wait(10)
        self.proc.stdout.close()


@pytest.fixture(scope="module")
def zygote() -> Iterator[_Zygote]:
    z = _Zygote()
    yield z
    z.close()


def _prefix_consistent(store: ha.Store) -> tuple[int, int, int]:
    """:func:`_consistent`, and no score of a missing sample, no duplicate score rows."""
    counts = _consistent(store)
    orphans = store.sql(
        "SELECT count(*) FROM stg_scores s "
        "ANTI JOIN stg_samples USING (run_id, episode_id) WHERE s.episode_id IS NOT NULL"
    ).item()
    assert orphans == 0
    dups = store.sql(
        "SELECT count(*) FROM (SELECT run_id, episode_id, epoch, metric, source FROM stg_scores "
        "GROUP BY ALL HAVING count(*) > 1)"
    ).item()
    assert dups == 0
    return counts


def _scored_runs(store: ha.Store, source: str) -> int:
    return int(
        store.sql(
            "SELECT count(DISTINCT run_id) FROM stg_scores WHERE source LIKE $s", {"s": source}
        ).item()
    )


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("small")
    write_dataset(out, SynthConfig(runs=4, tasks=2, seeds=4, mean_steps=6, seed=5))
    return out


@pytest.fixture(scope="module")
def templates(small: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The store each operation starts from (compact's: one batch per run, unmerged)."""
    base = tmp_path_factory.mktemp("templates")
    empty = base / "empty"
    ha.open_store(empty).parquet.ensure_on_disk()
    ingested = base / "ingested"
    ha.open_store(ingested).ingest(small, progress=False)
    batches = base / "batches"
    old = os.environ.get("HYLO_ANALYTICS_COMPACT_AT")
    os.environ["HYLO_ANALYTICS_COMPACT_AT"] = "0"
    try:
        store = ha.open_store(batches)
        for run in sorted(p for p in small.iterdir() if p.is_dir()):
            store.ingest(run, progress=False)
    finally:
        if old is None:
            del os.environ["HYLO_ANALYTICS_COMPACT_AT"]
        else:
            os.environ["HYLO_ANALYTICS_COMPACT_AT"] = old
    return {"ingest": empty, "score": ingested, "evaluate": ingested, "compact": batches}


def _rerun(op: str, store: ha.Store, small: Path) -> None:
    """The operation again, in this process: what a user does after a crash."""
    if op == "ingest":
        store.ingest(small, progress=False)
    elif op == "score":
        store.score(SCORERS)
    elif op == "evaluate":
        from hylo_analytics.analysis import load_analysis_spec, run_analysis

        run_analysis(store, load_analysis_spec(SPEC))
    else:
        with store.parquet.lock():
            store.parquet.compact()


@pytest.mark.slow
@pytest.mark.parametrize("op", ["ingest", "score", "evaluate", "compact"])
def test_sigkill_at_random_points(
    op: str, zygote: _Zygote, templates: dict[str, Path], small: Path, tmp_path: Path
) -> None:
    from hylo_analytics.testing.checksums import store_checksums

    arg = {"ingest": str(small), "score": json.dumps(SCORERS), "evaluate": json.dumps(SPEC)}
    arg_text = arg.get(op, "-")
    # one unkilled run: the operation's duration and the ground truth
    truth_root = tmp_path / "truth"
    shutil.copytree(templates[op], truth_root)
    t0 = time.perf_counter()
    assert zygote.wait(zygote.start(op, truth_root, arg_text)) == 0
    duration = time.perf_counter() - t0
    truth_store = ha.open_store(truth_root)
    truth = _prefix_consistent(truth_store)
    truth_sums = store_checksums(truth_store.parquet)
    before = _prefix_consistent(ha.open_store(templates[op]))
    rng = random.Random(f"crash-{op}")
    killed = 0
    for trial in range(TRIALS):
        root = tmp_path / f"t{trial}"
        shutil.copytree(templates[op], root)
        pid = zygote.start(op, root, arg_text)
        time.sleep(rng.uniform(0.0, 0.9 * duration))  # the duration varies with load
        os.kill(pid, signal.SIGKILL)
        status = zygote.wait(pid)
        killed += os.WIFSIGNALED(status)
        store = ha.open_store(root)
        counts = _prefix_consistent(store)  # opens, and holds a committed state
        if op == "ingest":
            assert counts[0] <= truth[0]
        elif op == "score":  # one commit: every run re-scored or none
            assert _scored_runs(store, "scorer:return") in (0, truth[0])
        elif op == "evaluate":  # sections commit in order: no policy verdict before its scores
            scored = _scored_runs(store, "scorer:%")
            assert scored in (0, truth[0])
            if store.sql("SELECT count(*) FROM stg_policy_results").item():
                assert scored == truth[0]
        if op != "ingest":
            assert counts == before == truth  # rows are only added beside, or merged
        _rerun(op, store, small)
        assert _prefix_consistent(store) == truth
        if trial == TRIALS - 1:
            assert store_checksums(store.parquet) == truth_sums
        shutil.rmtree(root)
    print(f"{op}: {duration:.2f} s unkilled, {killed} of {TRIALS} kills landed inside")
    assert killed >= TRIALS // 4, f"only {killed} of {TRIALS} kills landed inside {op}"
