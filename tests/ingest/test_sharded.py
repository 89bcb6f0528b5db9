"""Sharded ingest (``--workers N``, ``--shard i/N``): real processes, real kill -9.

Every outcome is compared with a single-process ingest of the same files by the checksums of
every table and view (:func:`hylo_analytics.testing.checksums.store_checksums`).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import hylo_analytics as ha
from hylo_analytics.cli.ingest import QUARANTINED
from hylo_analytics.ingest._claims import DB_NAME, shard_of
from hylo_analytics.testing.checksums import store_checksums
from hylo_analytics.testing.synth import SynthConfig, write_dataset

_CLI = "import sys; from hylo_analytics.cli import main; sys.exit(main(sys.argv[1:]))"


def _cmd(*args: str) -> list[str]:
    return [sys.executable, "-c", _CLI, *args]


def _env(**extra: str) -> dict[str, str]:
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": root, **extra}
    return env


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """150 small EvalLogs with 3 traces each, and one bad file (a quarantine row)."""
    out = tmp_path_factory.mktemp("corpus") / "logs"
    write_dataset(out, SynthConfig(runs=150, tasks=3, seeds=2, traces_per_run=3, mean_steps=5))
    (out / "broken.json").write_text('{"version": "hylo.evallog/v0.1", "run_id": ')
    return out


@pytest.fixture(scope="module")
def truth(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, str]]:
    store = ha.open_store(tmp_path_factory.mktemp("truth") / "s")
    store.ingest(corpus, progress=False)
    sums = store_checksums(store.parquet)
    assert sums["runs"][0] == 150 and sums["quarantine"][0] == 1
    return sums


def _read_only(root: Path) -> sqlite3.Connection:
    """The claim table, read as the test watches (never creating the file the ingest makes)."""
    return sqlite3.connect(f"file:{root / DB_NAME}?mode=ro", uri=True, timeout=5)


def _claims(root: Path) -> dict[str, int]:
    con = _read_only(root)
    try:
        return dict(con.execute("SELECT state, count(*) FROM claims GROUP BY state").fetchall())
    finally:
        con.close()


def _done(root: Path) -> int:
    try:
        return _claims(root).get("done", 0)
    except sqlite3.OperationalError:  # not made yet, or busy
        return 0


def _worker_pids(root: Path, parent: int) -> list[int]:
    try:
        con = _read_only(root)
        try:
            rows = con.execute("SELECT pid FROM workers").fetchall()
        finally:
            con.close()
    except sqlite3.OperationalError:  # not made yet
        return []
    return [pid for (pid,) in rows if pid != parent]


@pytest.mark.slow
def test_workers_give_the_store_of_one_ingest(
    corpus: Path, truth: dict[str, tuple[int, str]], tmp_path: Path
) -> None:
    root = tmp_path / "s"
    done = subprocess.run(
        _cmd("ingest", str(corpus), "--store", str(root), "--workers", "3", "--quiet"),
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == QUARANTINED, done.stderr  # the corpus's one bad file
    assert "+150 runs" in done.stdout and "1 quarantined" in done.stdout
    assert "Traceback" not in done.stderr and "is locked by" not in done.stderr
    assert store_checksums(ha.open_store(root, create=False).parquet) == truth
    assert _claims(root) == {"done": 151}
    assert not any((root / "_staging").iterdir())  # every worker's folder removed
    # the same command again: nothing to do, nothing changed
    again = ha.open_store(root, create=False).ingest(corpus, progress=False, workers=2)
    assert again.files_unchanged == 151 and again.runs_added == 0
    assert store_checksums(ha.open_store(root, create=False).parquet) == truth


@pytest.mark.slow
@pytest.mark.parametrize("round_", [0, 1, 2])
def test_kill_9_of_a_worker_then_rerun_gives_exact_counts(
    corpus: Path, truth: dict[str, tuple[int, str]], tmp_path: Path, round_: int
) -> None:
    """A worker killed at a random point (round 1: the whole command with it); the survivors
    (or the re-run) finish, with exactly the single-ingest store."""
    rng = random.Random(16_000 + round_)
    root = tmp_path / "s"
    ha.open_store(root).parquet.ensure_on_disk()
    args = _cmd("ingest", str(corpus), "--store", str(root), "--workers", "3", "--quiet")
    # claims of 3 files (about 50 publishes), and the kill at a random point of the progress,
    # not of the clock: a fast machine must not finish before the kill
    env = _env(HYLO_ANALYTICS_CLAIM_LEASE="3", HYLO_ANALYTICS_CLAIM_FILES="3")
    kill_at = rng.randint(3, 100)  # files done (of 151)
    with subprocess.Popen(
        args, env=env, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as proc:
        deadline = time.monotonic() + 120
        pids: list[int] = []
        while not (pids and _done(root) >= kill_at):
            if proc.poll() is not None:
                _, err = proc.communicate()
                pytest.fail(
                    f"the ingest ended (exit {proc.returncode}) before {kill_at} files were "
                    f"done ({_done(root)} were):\n{err.decode()[-3000:]}"
                )
            assert time.monotonic() < deadline, f"{_done(root)} files done after 120 s"
            pids = _worker_pids(root, proc.pid)
            time.sleep(0.01)
        with contextlib.suppress(ProcessLookupError):  # a worker may be done already
            os.kill(rng.choice(pids), signal.SIGKILL)
        if round_ == 1:
            os.killpg(proc.pid, signal.SIGKILL)  # the command and every worker
        _, err = proc.communicate(timeout=600)
    published = store_checksums(ha.open_store(root, create=False).parquet)
    if round_ != 1:  # the survivors took the killed worker's claims
        # the bad file is quarantined by whichever process read it: the killed worker's
        # survivors may have, or the killed one before dying (and its claim is done)
        assert proc.returncode in (0, QUARANTINED), err.decode()
        assert published == truth
    else:
        assert proc.returncode == -signal.SIGKILL
        assert published["runs"][0] <= 150  # whatever was published, never half a run
    rerun = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode in (0, QUARANTINED), rerun.stderr  # if the bad file was left
    assert store_checksums(ha.open_store(root, create=False).parquet) == truth
    assert set(_claims(root)) == {"done"}
    store = ha.open_store(root, create=False)
    with store.parquet.lock():  # round 1's orphaned workers ended on their heartbeat: stale
        store.parquet.clean_staging()
    assert not any((root / "_staging").iterdir())


@pytest.mark.slow
def test_two_shards_as_two_processes_give_the_store_of_one_ingest(
    corpus: Path, truth: dict[str, tuple[int, str]], tmp_path: Path
) -> None:
    root = tmp_path / "s"
    ha.open_store(root).parquet.ensure_on_disk()
    procs = [
        subprocess.Popen(
            _cmd("ingest", str(corpus), "--store", str(root), "--shard", f"{i}/2", "--quiet"),
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in (0, 1)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    # the corpus's one bad file is in one shard: that shard says it quarantined it
    assert sorted(p.returncode for p in procs) == [0, QUARANTINED], outs
    runs = [int(o.split("+")[1].split()[0]) for o, _ in outs]
    assert sum(runs) == 150 and min(runs) > 0  # both shards did part of it
    assert store_checksums(ha.open_store(root, create=False).parquet) == truth


_STAGER = """
import sys, pyarrow as pa
from hylo_analytics.store import ParquetStore
store = ParquetStore(sys.argv[1], create=False)
store.commit({"samples": pa.table({"run_id": ["x"], "key": ["t#1"]})}, publish=False)
print("staged", flush=True)
sys.stdin.readline()
"""


@pytest.mark.slow
def test_clean_staging_removes_a_dead_workers_folder_and_keeps_a_live_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "s"
    store = ha.open_store(root)
    store.parquet.ensure_on_disk()  # for the stagers, which open it with create=False
    live, dead = (
        subprocess.Popen(
            [sys.executable, "-c", _STAGER, str(root)],
            env=_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    )
    for p in (live, dead):
        assert p.stdout is not None and p.stdout.readline().strip() == "staged"
    folders = {p.name for p in (root / "_staging").iterdir()}
    assert len(folders) == 2
    dead.kill()
    dead.communicate()
    # another host's folder: kept while its heartbeat is fresh, removed once stale
    other = root / "_staging" / "w-otherhost"
    other.mkdir()
    (other / "owner.json").write_text(json.dumps({"host": "elsewhere", "pid": 1, "start": None}))
    with store.parquet.lock():
        store.parquet.clean_staging()
    left = {p.name for p in (root / "_staging").iterdir()}
    assert len(left) == 2 and "w-otherhost" in left  # the live worker's and the fresh one
    monkeypatch.setenv("HYLO_ANALYTICS_STALE_SECONDS", "0")
    with store.parquet.lock():
        store.parquet.clean_staging()
    left = {p.name for p in (root / "_staging").iterdir()}
    assert "w-otherhost" not in left and len(left) == 1  # the live worker's only
    assert live.stdin is not None
    live.communicate("\n")
    assert store.sql("SELECT count(*) AS n FROM raw_samples")["n"][0] == 0  # none published


def _same_run_two_files(tmp_path: Path) -> tuple[Path, Path, Path]:
    """Two files of one run_id with other content (b lacks a sample), in different shards."""
    src = tmp_path / "gen"
    write_dataset(src, SynthConfig(runs=1, tasks=3, seeds=2, traces_per_run=3, mean_steps=5))
    (run_dir,) = [p for p in src.iterdir() if p.is_dir()]
    logs = tmp_path / "logs"
    names = [f"copy{k}" for k in range(40)]
    a = names[0]
    b = next(
        n
        for n in names[1:]
        if shard_of(logs / n / "evallog.json", 2) != shard_of(logs / a / "evallog.json", 2)
    )
    for name in (a, b):
        shutil.copytree(run_dir, logs / name)
    doc = json.loads((logs / b / "evallog.json").read_text())
    doc["samples"] = doc["samples"][:-1]
    (logs / b / "evallog.json").write_text(json.dumps(doc))
    return logs, logs / a / "evallog.json", logs / b / "evallog.json"


@pytest.mark.slow
def test_two_workers_racing_on_one_run_keep_one_file_whole_and_quarantine_the_other(
    tmp_path: Path,
) -> None:
    """Both parse before either publishes (the lock is held by the test meanwhile): the one
    publishing second finds the run taken and redoes its file under the lock, as one ingest
    would: one run, from one file, whole, and the other file quarantined naming it."""
    logs, a, b = _same_run_two_files(tmp_path)
    root = tmp_path / "s"
    store = ha.open_store(root)
    with store.parquet.lock():
        procs = [
            subprocess.Popen(
                _cmd("ingest", str(logs), "--store", str(root), "--shard", f"{i}/2", "--quiet"),
                env=_env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for i in (0, 1)
        ]
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # both hold their batches, waiting to publish
            held = [p for p in (root / "_staging").glob("w-*/*") if p.name.isdigit()]
            if len(held) >= 2:
                break
            time.sleep(0.05)
        assert len(held) >= 2
    outs = [p.communicate(timeout=300) for p in procs]
    # one of the two stored the run, the other quarantined its copy and says so
    assert sorted(p.returncode for p in procs) == [0, QUARANTINED], outs
    store = ha.open_store(root, create=False)
    runs = store.sql("SELECT run_id, source_path FROM stg_runs")
    assert runs.height == 1
    winner = runs["source_path"][0]
    loser = str(b) if winner == str(a) else str(a)
    n_winner = len(json.loads(Path(winner).read_text())["samples"])
    assert store.sql("SELECT count(*) AS n FROM stg_samples")["n"][0] == n_winner
    q = store.sql("SELECT path, field, error FROM stg_quarantine")
    assert q.rows() == [
        (
            loser,
            "run_id",
            f"run_id {runs['run_id'][0]!r} is already stored from {winner!r}; "
            "pass replace=True / --replace to replace it",
        )
    ]


def test_bad_options_are_clear_errors(tmp_path: Path, corpus: Path) -> None:
    for args, text in (
        (["--workers", "0"], "--workers: expected a whole number >= 1, got '0'"),
        (["--shard", "2/2"], "--shard: expected i/N with 0 <= i < N (e.g. 0/2), got '2/2'"),
    ):
        done = subprocess.run(
            _cmd("ingest", str(corpus), "--store", str(tmp_path / "s"), *args),
            env=_env(),
            capture_output=True,
            text=True,
        )
        assert done.returncode == 2 and text in done.stderr, done.stderr
    with pytest.raises(ValueError, match="shard must be i/N"):
        ha.open_store(tmp_path / "t").ingest(corpus, shard=(3, 2), progress=False)


@pytest.mark.slow
def test_a_file_every_worker_died_reading_is_quarantined_and_the_rest_stored(
    corpus: Path, tmp_path: Path
) -> None:
    """Three real workers were killed holding one log (as a crashing parser would): the
    command stores every other file, records that one as a quarantine row naming it, and
    does not hand it to another worker; a re-run changes nothing; once the file changes it
    is read again."""
    from dying_worker import die_holding

    from hylo_analytics.ingest._claims import DIED, Claims, job_id

    logs = tmp_path / "logs"
    for run in sorted(p for p in corpus.iterdir() if p.is_dir())[:4]:
        shutil.copytree(run, logs / run.name)
    poison = sorted(logs.glob("*/evallog.json"))[1]
    root = tmp_path / "s"
    ha.open_store(root).parquet.ensure_on_disk()
    job = job_id([logs], 1, 0)
    claims = Claims(root, job, lease=60)
    st = poison.stat()
    claims.register([(str(poison), st.st_size, st.st_mtime_ns)])
    assert [die_holding(root, job) for _ in range(3)] == [[str(poison)]] * 3
    claims.close()

    args = _cmd("ingest", str(logs), "--store", str(root), "--workers", "2", "--quiet")
    first = subprocess.run(args, env=_env(), capture_output=True, text=True, timeout=600)
    assert first.returncode == QUARANTINED, first.stderr
    assert "+3 runs" in first.stdout and "1 quarantined" in first.stdout, first.stdout
    store = ha.open_store(root, create=False)
    paths = set(store.sql("SELECT source_path FROM stg_runs")["source_path"].to_list())
    assert len(paths) == 3 and str(poison) not in paths
    quarantine = store.sql("SELECT path, line, field, error FROM stg_quarantine").rows()
    assert quarantine == [(str(poison), None, None, DIED)]
    again = subprocess.run(args, env=_env(), capture_output=True, text=True, timeout=600)
    # still bad, still out of the store: said again (recorded once, below)
    assert again.returncode == QUARANTINED and "1 quarantined" in again.stdout, again.stdout
    store = ha.open_store(root, create=False)
    assert store.sql("SELECT count(*) AS n FROM stg_runs")["n"][0] == 3
    assert store.sql("SELECT path FROM stg_quarantine").height == 1  # not recorded twice
    os.utime(poison, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # changed
    fixed = subprocess.run(args, env=_env(), capture_output=True, text=True, timeout=600)
    assert fixed.returncode == 0, fixed.stderr
    store = ha.open_store(root, create=False)
    assert str(poison) in store.sql("SELECT source_path FROM stg_runs")["source_path"].to_list()
