"""The writer lock: one writer at a time by ``flock``, who holds it, and whether a writer lives."""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import logging
import os
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from hylo_analytics import _atomic
from hylo_analytics.errors import (
    ConfigError,
    StoreLockedError,
)
from hylo_analytics.store.batches import _OWNER, _write_error
from hylo_analytics.store.connection import StoreConnection

log = logging.getLogger("hylo_analytics.store")

_LOCK = ".lock"
_HOLDER = ".lock.json"  # who holds the lock: written after acquiring, for the waiters' message
_LOCK_POLL = 0.05


def stale_seconds() -> float:
    """Seconds without a heartbeat after which another host's staging folder is a dead
    writer's (``HYLO_ANALYTICS_STALE_SECONDS``, default 600)."""
    env = os.environ.get("HYLO_ANALYTICS_STALE_SECONDS", "").strip()
    try:
        return float(env) if env else 600.0
    except ValueError:
        raise ConfigError(
            "", f"HYLO_ANALYTICS_STALE_SECONDS must be a number of seconds, got {env!r}"
        ) from None


def _age(path: Path) -> float:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return float("inf")


def process_alive(host: str, pid: int, start: str | None) -> bool | None:
    """Whether the process ``pid`` (started at ``start``) of ``host`` still runs; ``None``
    when that cannot be told from here (another host)."""
    if host != socket.gethostname():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, another user's
    return start is None or _process_start(pid) in (None, start)


def _stale_owner(path: Path) -> bool:
    """A writer's staging folder whose writer is gone (see :meth:`ParquetStore.clean_staging`)."""
    try:
        info = json.loads((path / _OWNER).read_text())
        alive = process_alive(str(info["host"]), int(info["pid"]), info.get("start"))
    except (OSError, ValueError, KeyError, TypeError):
        return _age(path) > stale_seconds()
    if alive is None:
        return _age(path / _OWNER) > stale_seconds()
    return not alive


def lock_timeout_from_env() -> float | None:
    """``HYLO_ANALYTICS_LOCK_TIMEOUT`` seconds (unset or empty: wait for as long as it takes)."""
    env = os.environ.get("HYLO_ANALYTICS_LOCK_TIMEOUT", "").strip()
    if not env:
        return None
    try:
        value = float(env)
    except ValueError:
        value = -1.0
    if not value >= 0:  # also NaN
        raise ConfigError(
            "", f"HYLO_ANALYTICS_LOCK_TIMEOUT must be a number of seconds >= 0, got {env!r}"
        )
    return value


def _process_start(pid: int) -> str | None:
    """The start time of ``pid`` in clock ticks since boot (tells a reused pid from the holder)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[19]


def _write_holder(root: Path) -> None:
    """Record who holds the lock (temp file then rename: a waiter never reads half of it)."""
    info = {
        "pid": os.getpid(),
        "start": _process_start(os.getpid()),
        "host": socket.gethostname(),
        "command": " ".join(sys.argv)[:200] or sys.executable,
        "since": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
    }
    with suppress(OSError):  # advisory: the lock itself is held
        _atomic.write_text(root / _HOLDER, json.dumps(info))


def _clear_holder(root: Path) -> None:
    with suppress(OSError):
        (root / _HOLDER).unlink(missing_ok=True)


def _holder(root: Path) -> str:
    """Who holds the lock, as the waiting message names it.

    A record left by a killed holder (its pid gone, or reused by another process) names no one.
    """
    unknown = "another process (it has not recorded itself yet)"
    try:
        info = json.loads((root / _HOLDER).read_text())
        pid, host = int(info["pid"]), str(info["host"])
    except (OSError, ValueError, KeyError, TypeError):
        return unknown
    if host == socket.gethostname():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return unknown
        except PermissionError:
            pass  # alive, another user's
        start = info.get("start")
        if start is not None and _process_start(pid) not in (None, start):
            return unknown
    return f"pid {pid} ({host}, {info.get('command')}) since {info.get('since')}"


def _acquire(fd: int, root: Path, timeout: float | None, *, quiet: bool = False) -> None:
    """Take the lock on ``fd``: at once, or after saying once who holds it and waiting."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        pass
    limit = "" if timeout is None else f" (for up to {timeout:g} s)"
    if not quiet:
        log.warning("store %s is locked by %s; waiting%s...", root, _holder(root), limit)
    if timeout is None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(_LOCK_POLL, left))
    raise StoreLockedError(
        f"store {root} is still locked by {_holder(root)} after waiting {timeout:g} s; "
        "nothing was written (wait longer with --lock-timeout / HYLO_ANALYTICS_LOCK_TIMEOUT, "
        "or without one to wait for as long as it takes)"
    )


class Locking(StoreConnection):
    """The store's writer lock (see :class:`~hylo_analytics.store.ParquetStore`)."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        threads: int | None = None,
        create: bool = True,
        lock_timeout: float | None = None,
    ) -> None:
        self.lock_timeout = lock_timeout if lock_timeout is not None else lock_timeout_from_env()
        super().__init__(root, threads=threads, create=create)

    @contextmanager
    def lock(self, timeout: float | None = None, *, quiet: bool = False) -> Iterator[None]:
        """Hold the store's writer lock; another writer holding it is waited for.

        The wait is announced once (a ``logging`` warning naming the holder, shown on stderr
        in a terminal and in Jupyter) and lasts at most ``timeout`` seconds (default
        :attr:`lock_timeout`), then :class:`StoreLockedError`. ``flock``: a killed holder
        releases the lock with its last file descriptor. ``quiet``: no warning (workers of one
        sharded ingest wait for each other's publish as a matter of course).
        """
        timeout = self.lock_timeout if timeout is None else timeout
        self.ensure_on_disk()  # a store opened at an empty folder is made by its first writer
        path = self.root / _LOCK
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as exc:
            raise _write_error(exc, "locking the store", prep="at") from exc
        try:
            _acquire(fd, self.root, timeout, quiet=quiet)
            try:
                _write_holder(self.root)
                if self._stale_empty:  # what a read-only open made in memory, now on disk
                    try:
                        self._ensure_empty_batch()
                    except OSError as exc:
                        raise _write_error(exc, "writing the empty batch 0") from exc
                    self._refresh()
                _ = self.con  # the newest manifest's views, before writing them out
                self._write_views_file()
                yield
            finally:
                _clear_holder(self.root)
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    @contextmanager
    def lock_timeout_for(self, timeout: float | None) -> Iterator[None]:
        """:attr:`lock_timeout` set to ``timeout`` (None: unchanged) for one call's writes."""
        before = self.lock_timeout
        if timeout is not None:
            self.lock_timeout = timeout
        try:
            yield
        finally:
            self.lock_timeout = before
