"""The writer lock with real processes: who holds it, waiting once, timeouts, killed holders."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import hylo_analytics as ha
from hylo_analytics.store import StoreLockedError

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "sample"

# Holds the store's lock (through the API, or as a bare flock that records no holder) until
# its standard input is closed.
HOLDER = """
import fcntl, sys
import hylo_analytics as ha
store = ha.open_store(sys.argv[1], create=False)
if sys.argv[2] == "api":
    with store.parquet.lock():
        print("locked", flush=True)
        sys.stdin.read()
else:
    with open(store.root / ".lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        print("locked", flush=True)
        sys.stdin.read()
"""


CLI = [sys.executable, "-c", "import sys; from hylo_analytics.cli import main; sys.exit(main())"]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


@pytest.fixture()
def store(tmp_path: Path) -> ha.Store:
    store = ha.open_store(tmp_path / "store")
    store.parquet.ensure_on_disk()  # an empty store on disk, for the other processes to open
    return store


def _hold(store: ha.Store, tmp_path: Path, how: str = "api") -> subprocess.Popen[str]:
    script = tmp_path / "holder.py"
    script.write_text(HOLDER)
    child = subprocess.Popen(
        [sys.executable, str(script), str(store.root), how],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "locked"
    return child


def _stop(child: subprocess.Popen[str]) -> None:
    child.kill()
    child.wait()
    for pipe in (child.stdin, child.stdout, child.stderr):
        if pipe is not None:
            pipe.close()


@pytest.fixture()
def holder(store: ha.Store, tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    child = _hold(store, tmp_path)
    yield child
    _stop(child)


@pytest.mark.slow
def test_a_second_writer_times_out_naming_the_holder(
    store: ha.Store, holder: subprocess.Popen[str]
) -> None:
    """The CLI's --lock-timeout: one waiting line, then a clear error, no traceback."""
    t0 = time.monotonic()
    out = subprocess.run(
        [*CLI, "ingest", str(SAMPLE), "--store", str(store.root), "--lock-timeout", "0.5"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert time.monotonic() - t0 >= 0.5
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    who = f"pid {holder.pid} ({socket.gethostname()}, "
    assert out.stderr.count(f"store {store.root} is locked by {who}") == 1
    assert "holder.py" in out.stderr and "; waiting (for up to 0.5 s)..." in out.stderr
    assert f"store {store.root} is still locked by {who}" in out.stderr
    assert "after waiting 0.5 s; nothing was written" in out.stderr
    assert ha.open_store(store.root, create=False).sql("SELECT * FROM runs").height == 0


@pytest.mark.slow
def test_a_waiting_writer_says_so_once_and_goes_on_when_released(
    store: ha.Store, holder: subprocess.Popen[str], caplog: pytest.LogCaptureFixture
) -> None:
    assert holder.stdin is not None
    release = threading.Timer(0.6, holder.stdin.close)
    release.start()
    t0 = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="hylo_analytics.store"), store.parquet.lock():
        waited = time.monotonic() - t0
        info = json.loads((store.root / ".lock.json").read_text())
    release.join()
    assert waited >= 0.5
    assert info["pid"] == os.getpid()
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1
    assert messages[0].startswith(f"store {store.root} is locked by pid {holder.pid} (")
    assert messages[0].endswith("; waiting...")
    assert not (store.root / ".lock.json").exists()  # removed on release


@pytest.mark.slow
def test_lock_timeout_from_the_store_the_call_and_the_environment(
    store: ha.Store, holder: subprocess.Popen[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(StoreLockedError, match=f"still locked by pid {holder.pid} "):
        store.ingest(SAMPLE, progress=False, lock_timeout=0.2)
    assert store.parquet.lock_timeout is None  # the call's timeout was for that call only
    with pytest.raises(StoreLockedError):
        store.score(lock_timeout=0.1)
    timed = ha.open_store(store.root, create=False, lock_timeout=0.1)
    with pytest.raises(StoreLockedError, match=r"after waiting 0\.1 s"), timed.parquet.lock():
        pass
    monkeypatch.setenv("HYLO_ANALYTICS_LOCK_TIMEOUT", "0.2")
    from_env = ha.open_store(store.root, create=False)
    assert from_env.parquet.lock_timeout == 0.2
    with pytest.raises(StoreLockedError, match=r"after waiting 0\.2 s"), from_env.parquet.lock():
        pass
    monkeypatch.setenv("HYLO_ANALYTICS_LOCK_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="HYLO_ANALYTICS_LOCK_TIMEOUT must be a number"):
        ha.open_store(store.root, create=False)


@pytest.mark.slow
def test_a_killed_holder_releases_the_lock_and_its_record_names_no_one(
    store: ha.Store, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    killed = _hold(store, tmp_path)
    assert json.loads((store.root / ".lock.json").read_text())["pid"] == killed.pid
    killed.send_signal(signal.SIGKILL)
    _stop(killed)
    assert (store.root / ".lock.json").exists()  # a stale record of a dead pid
    with (
        caplog.at_level(logging.WARNING, logger="hylo_analytics.store"),
        store.parquet.lock(timeout=2),
    ):
        pass  # taken at once: flock died with the holder
    assert not caplog.records
    # a stale record again, and a holder that has not recorded itself (yet)
    (store.root / ".lock.json").write_text(
        json.dumps({"pid": killed.pid, "host": socket.gethostname()})
    )
    bare = _hold(store, tmp_path, "bare")
    try:
        with pytest.raises(StoreLockedError) as err, store.parquet.lock(timeout=0.2):
            pass
    finally:
        _stop(bare)
    assert f"pid {killed.pid}" not in str(err.value)
    assert "locked by another process (it has not recorded itself yet)" in str(err.value)
    with store.parquet.lock(timeout=2):
        assert json.loads((store.root / ".lock.json").read_text())["pid"] == os.getpid()


@pytest.mark.slow
def test_a_cli_writer_waits_for_the_holder_then_ingests(store: ha.Store, tmp_path: Path) -> None:
    """Without a timeout the second writer waits for the first and then does its work."""
    child = _hold(store, tmp_path)
    waiter = subprocess.Popen(
        [*CLI, "ingest", str(SAMPLE), "--quiet", "--store", str(store.root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        assert waiter.stderr is not None
        line = waiter.stderr.readline()
        assert line.startswith(f"store {store.root} is locked by pid {child.pid} (")
        assert waiter.poll() is None  # still waiting
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait()
        _stop(child)
    _, err = waiter.communicate(timeout=120)
    assert waiter.returncode == 0, err
    assert ha.open_store(store.root, create=False).sql("SELECT * FROM runs").height == 3
