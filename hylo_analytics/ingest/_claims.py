"""The claim table of a sharded ingest: which worker reads which input file.

``<store>/_claims.sqlite`` (WAL mode, so readers never block the claimers) holds one row per
input file of a *job* (the command's inputs and shard count): ``pending``, ``claimed`` by a
worker until its lease expires, ``done`` or ``failed``. Claims are taken in ``BEGIN
IMMEDIATE`` transactions, so two workers never take the same file. A worker renews its
leases with a heartbeat; a killed worker's claims are taken again once its lease expires, or
at once when its process is known to be gone (same host). A file whose claim is ``done`` is
stored; re-running the command registers what is left and resumes.

A file taken again after its worker died is claimed alone, so a file that kills its reader
(a crash in a parser, memory) takes no other file down with it; after :data:`MAX_ATTEMPTS`
claims that never finished it is ``failed`` with :data:`DIED`, and the ingest records it as a
quarantine row instead of handing it to yet another worker.

A static split of the files (as vla-eval does into one SQLite database) leaves a dead
worker's share undone; leases let any live worker finish it.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sqlite3
import time
import uuid
import zlib
from collections.abc import Sequence
from pathlib import Path

from hylo_analytics.errors import ConfigError
from hylo_analytics.store import _process_start, process_alive

__all__ = [
    "DB_NAME",
    "DIED",
    "MAX_ATTEMPTS",
    "Claims",
    "claim_files",
    "job_id",
    "lease_seconds",
    "shard_of",
]

DB_NAME = "_claims.sqlite"
MAX_ATTEMPTS = 3
DIED = (
    f"claimed {MAX_ATTEMPTS} times and never finished: each worker that read this file died "
    "(a crash or a kill); not retried: ingest it on its own, without --workers, to see why"
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS claims (
    job TEXT NOT NULL,
    path TEXT NOT NULL,
    size INTEGER NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'claimed', 'done', 'failed')),
    worker TEXT,
    heartbeat REAL,
    lease_until REAL,
    attempts INTEGER NOT NULL DEFAULT 0,  -- claims in a row that never finished
    error TEXT,
    mtime_ns INTEGER,
    PRIMARY KEY (job, path)
);
CREATE TABLE IF NOT EXISTS workers (
    worker TEXT PRIMARY KEY,
    job TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    start TEXT,
    heartbeat REAL NOT NULL
);
"""


def job_id(paths: Sequence[Path], shards: int, shard: int) -> str:
    """The job of a command: its inputs (resolved) and its shard; the same command resumes."""
    key = json.dumps([sorted(str(Path(p).resolve()) for p in paths), shards, shard])
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def shard_of(path: Path, shards: int) -> int:
    """The shard of an input file: a stable hash of its resolved path (machines sharing a
    filesystem must mount it at the same path)."""
    return zlib.crc32(str(path).encode()) % shards


def lease_seconds() -> float:
    """Seconds a worker's claims are held without a heartbeat (``HYLO_ANALYTICS_CLAIM_LEASE``,
    default 60); a worker renews them every third of it."""
    env = os.environ.get("HYLO_ANALYTICS_CLAIM_LEASE", "").strip()
    try:
        value = float(env) if env else 60.0
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ConfigError(
            "", f"HYLO_ANALYTICS_CLAIM_LEASE must be a number of seconds > 0, got {env!r}"
        )
    return value


def claim_files(todo: int, workers: int) -> int:
    """Files per claim: ``HYLO_ANALYTICS_CLAIM_FILES``, else about two claims per worker (at
    most 1,000 files). Smaller claims lose less to a dead worker and cost a publish each."""
    env = os.environ.get("HYLO_ANALYTICS_CLAIM_FILES", "").strip()
    if not env:
        return max(1, min(1000, -(-todo // (workers * 2))))
    if not env.isdigit() or int(env) < 1:
        raise ConfigError(
            "", f"HYLO_ANALYTICS_CLAIM_FILES must be a whole number >= 1, got {env!r}"
        )
    return int(env)


class Claims:
    """One connection to the claim table, for one job; ``lease``: seconds a claim is held
    without a heartbeat."""

    def __init__(self, root: Path, job: str, *, lease: float) -> None:
        self.path = root / DB_NAME
        self.job, self.lease = job, lease
        self.con = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        self.con.execute("PRAGMA busy_timeout = 60000")
        self.con.execute("PRAGMA journal_mode = WAL")
        self.con.executescript(_SCHEMA)
        with self._immediate():
            columns = {row[1] for row in self.con.execute("PRAGMA table_info(claims)")}
            if "mtime_ns" not in columns:  # a claim table of an earlier version
                self.con.execute("ALTER TABLE claims ADD COLUMN mtime_ns INTEGER")

    def close(self) -> None:
        self.con.close()

    def register(self, files: Sequence[tuple[str, int, int | None]]) -> None:
        """Make ``(path, size, mtime_ns)`` pending, unless a live lease holds it. A file that
        changed since it was given up is tried afresh."""
        now = time.time()
        with self._immediate():
            self.con.executemany(
                "INSERT INTO claims (job, path, size, mtime_ns, state) "
                "VALUES (?, ?, ?, ?, 'pending') "
                "ON CONFLICT (job, path) DO UPDATE SET state = 'pending', worker = NULL, "
                "error = NULL, size = excluded.size, mtime_ns = excluded.mtime_ns, "
                "attempts = CASE WHEN claims.size IS excluded.size "
                "AND claims.mtime_ns IS excluded.mtime_ns THEN claims.attempts ELSE 0 END "
                "WHERE claims.state != 'claimed' OR claims.lease_until < ?",
                [(self.job, p, n, t, now) for p, n, t in files],
            )

    def join(self) -> str:
        """A new worker id, recorded with its process so others can tell when it is gone."""
        worker = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        with self._immediate():
            self.con.execute(
                "INSERT INTO workers VALUES (?, ?, ?, ?, ?, ?)",
                (
                    worker,
                    self.job,
                    socket.gethostname(),
                    os.getpid(),
                    _process_start(os.getpid()),
                    time.time(),
                ),
            )
        return worker

    def claim(self, worker: str, *, files: int, size: int) -> list[str]:
        """Take up to ``files`` claimable files (about ``size`` bytes, at least one); a file
        whose worker died is taken alone, and given up after :data:`MAX_ATTEMPTS` claims."""
        now = time.time()
        claimable = "job = ? AND (state = 'pending' OR (state = 'claimed' AND lease_until < ?))"
        with self._immediate():
            self._release_dead(now)
            self.con.execute(
                "UPDATE claims SET state = 'failed', worker = NULL, lease_until = NULL, "
                f"error = ? WHERE {claimable} AND attempts >= ?",
                (DIED, self.job, now, MAX_ATTEMPTS),
            )
            rows = (
                self.con.execute(
                    f"SELECT path FROM claims WHERE {claimable} AND attempts > 0 ORDER BY path LIMIT 1",
                    (self.job, now),
                ).fetchall()
                or self.con.execute(
                    "SELECT path FROM (SELECT path, size, sum(size) OVER (ORDER BY path) AS upto "
                    f"FROM claims WHERE {claimable} ORDER BY path LIMIT ?) "
                    "WHERE upto - size < ? OR upto = size",
                    (self.job, now, files, size),
                ).fetchall()
            )
            paths = [r[0] for r in rows]
            self.con.executemany(
                "UPDATE claims SET state = 'claimed', worker = ?, heartbeat = ?, "
                "lease_until = ?, attempts = attempts + 1 WHERE job = ? AND path = ?",
                [(worker, now, now + self.lease, self.job, p) for p in paths],
            )
        return paths

    def renew(self, worker: str) -> None:
        """The heartbeat: extend this worker's leases."""
        now = time.time()
        with self._immediate():
            self.con.execute(
                "UPDATE claims SET heartbeat = ?, lease_until = ? "
                "WHERE job = ? AND worker = ? AND state = 'claimed'",
                (now, now + self.lease, self.job, worker),
            )
            self.con.execute("UPDATE workers SET heartbeat = ? WHERE worker = ?", (now, worker))

    def finish(
        self, worker: str, paths: Sequence[str], state: str, error: str | None = None
    ) -> None:
        """Mark this worker's claims of ``paths`` ``done`` or ``failed``. ``done`` holds
        whoever claims the file now: it was published (a worker whose lease ran out while it
        worked, taken over by another, still finished the file)."""
        with self._immediate():
            self.con.executemany(
                "UPDATE claims SET state = ?, error = ?, lease_until = NULL, attempts = 0 "
                "WHERE job = ? AND path = ? AND state != 'done' AND (worker = ? OR ? = 'done')",
                [(state, error, self.job, p, worker, state) for p in paths],
            )

    def release(self, worker: str) -> int:
        """Give back the claims a worker ended without finishing; returns how many."""
        with self._immediate():
            cur = self.con.execute(
                "UPDATE claims SET state = 'pending', worker = NULL, lease_until = NULL, "
                "attempts = max(attempts - 1, 0) "  # given back, not died
                "WHERE job = ? AND worker = ? AND state = 'claimed'",
                (self.job, worker),
            )
            self.con.execute("DELETE FROM workers WHERE worker = ?", (worker,))
        return cur.rowcount

    def counts(self) -> dict[str, int]:
        rows = self.con.execute(
            "SELECT state, count(*) FROM claims WHERE job = ? GROUP BY state", (self.job,)
        ).fetchall()
        return {s: int(n) for s, n in rows}

    def next_expiry(self) -> float | None:
        """When the first live lease of another worker runs out (``None``: none held)."""
        row = self.con.execute(
            "SELECT min(lease_until) FROM claims WHERE job = ? AND state = 'claimed'",
            (self.job,),
        ).fetchone()
        return None if row is None or row[0] is None else float(row[0])

    def failures(self) -> list[tuple[str, str]]:
        return self.con.execute(
            "SELECT path, error FROM claims WHERE job = ? AND state = 'failed' ORDER BY path",
            (self.job,),
        ).fetchall()

    def _release_dead(self, now: float) -> None:
        """Free at once the claims of workers of this host whose process is gone."""
        holders = self.con.execute(
            "SELECT DISTINCT w.worker, w.host, w.pid, w.start FROM claims c "
            "JOIN workers w ON w.worker = c.worker "
            "WHERE c.job = ? AND c.state = 'claimed' AND c.lease_until >= ?",
            (self.job, now),
        ).fetchall()
        dead = [w for w, host, pid, start in holders if process_alive(host, pid, start) is False]
        self.con.executemany(
            "UPDATE claims SET state = 'pending', worker = NULL, lease_until = NULL "
            "WHERE job = ? AND worker = ? AND state = 'claimed'",
            [(self.job, w) for w in dead],
        )

    def _immediate(self) -> _Txn:
        return _Txn(self.con)


class _Txn:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on error): the write lock up front,
    so two claimers never read the same pending rows."""

    def __init__(self, con: sqlite3.Connection) -> None:
        self.con = con

    def __enter__(self) -> None:
        self.con.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        self.con.execute("COMMIT" if kind is None else "ROLLBACK")
