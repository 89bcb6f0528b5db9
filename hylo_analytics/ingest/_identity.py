"""Identity: what the store already holds about files, runs and problems, and what follows.

A file is known by its path, size and mtime (skipped unread when all three match), then by its
content hash (skipped once read); a run by its run_id and the file it came from. The decisions
made from them are here: skip a file, replace a run, refuse a run another file holds, tombstone
the run a changed file no longer holds. Reading the store once per ingest (or per claim) keeps
these decisions a dictionary lookup each.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from hylo_analytics.ingest._files import SourceFile
from hylo_analytics.ingest._reader import Parsed
from hylo_analytics.ingest._report import Problem
from hylo_analytics.store import Tombstone

if TYPE_CHECKING:
    from hylo_analytics.store import ParquetStore

__all__ = [
    "RUN_TABLES",
    "Known",
    "ProblemKey",
    "claimed_elsewhere",
    "known_files",
    "moved",
    "recorded_problems",
    "run_tombstones",
    "stored_runs",
    "to_read",
    "unchanged_content",
]

# the tables a run's rows are in: a run replaced is tombstoned in each
RUN_TABLES = ("runs", "samples", "events", "scores", "trace_files")

ProblemKey = tuple[str, int | None, str | None, str, str | None]  # path, line, field, error, sha


@dataclass(frozen=True)
class Known:
    """A file the store holds (a row of ``ingested_files``)."""

    sha256: str
    size: int
    mtime_ns: int
    outcome: str
    run_id: str | None
    format: str | None = None


def known_files(
    store: ParquetStore,
) -> tuple[dict[str, Known], dict[str, list[tuple[str, Known]]]]:
    """The stored log files by path, and the stored trace files by run_id (with the
    companion files a run's reader read beside its log: a lm-eval results file's samples)."""
    rows = store.con.execute(
        "SELECT path, sha256, size, mtime_ns, outcome, run_id, role, format FROM stg_ingested_files"
    ).fetchall()
    logs: dict[str, Known] = {}
    traces: dict[str, list[tuple[str, Known]]] = {}
    for path, sha, size, mtime, outcome, run_id, role, fmt in rows:
        k = Known(sha, size, mtime, outcome, run_id, fmt)
        if role == "trace":
            traces.setdefault(run_id, []).append((path, k))
        else:
            logs[path] = k
            if outcome == "companion" and run_id is not None:  # read by its owner run's reader
                traces.setdefault(run_id, []).append((path, k))
    return logs, traces


def _traces_unchanged(entries: list[tuple[str, Known]]) -> bool:
    for path, k in entries:
        try:
            st = os.stat(path)
        except OSError:
            return False
        if st.st_size != k.size or st.st_mtime_ns != k.mtime_ns:
            return False
    return True


def _still_stored(
    k: Known, known_traces: dict[str, list[tuple[str, Known]]], *, replace: bool
) -> bool:
    """Whether a known file's stored rows stand as they are (when its bytes did not change):
    not a partial run (a trace missing), not a quarantined file that ``replace`` may now
    let claim a run_id, and its traces unchanged."""
    return (
        k.outcome != "partial"
        and not (replace and k.outcome == "quarantined")
        and _traces_unchanged(known_traces.get(k.run_id or "", []))
    )


def to_read(
    candidates: list[Path],
    known_logs: dict[str, Known],
    known_traces: dict[str, list[tuple[str, Known]]],
    *,
    replace: bool,
) -> tuple[list[Path], int]:
    """The files to read (not stored unchanged by size and mtime) and how many are skipped."""
    todo: list[Path] = []
    unchanged = 0
    for p in candidates:
        k = known_logs.get(str(p))
        try:
            st = p.stat()
        except OSError:
            todo.append(p)  # reported as unreadable by the reader
            continue
        if (
            k is not None
            and k.size == st.st_size
            and k.mtime_ns == st.st_mtime_ns
            and _still_stored(k, known_traces, replace=replace)
        ):
            unchanged += 1
        else:
            todo.append(p)
    return todo, unchanged


def unchanged_content(
    k: Known | None,
    sf: SourceFile,
    known_traces: dict[str, list[tuple[str, Known]]],
    *,
    replace: bool,
) -> bool:
    """Whether a file read is stored with the same content (touched, not changed)."""
    return (
        k is not None and k.sha256 == sf.sha256 and _still_stored(k, known_traces, replace=replace)
    )


def stored_runs(store: ParquetStore) -> dict[str, tuple[str, str]]:
    """Each stored run_id's ``(source_path, source_sha256)``."""
    rows = store.con.execute("SELECT run_id, source_path, source_sha256 FROM stg_runs").fetchall()
    return {rid: (path, sha) for rid, path, sha in rows}


def recorded_problems(store: ParquetStore) -> set[ProblemKey]:
    """The quarantine rows stored, as keys (one set per ingest: quarantine rows are few)."""
    rows = store.con.execute(
        "SELECT path, line, field, error, sha256 FROM stg_quarantine"
    ).fetchall()
    return {(p, ln, f, e, sha) for p, ln, f, e, sha in rows}


def claimed_elsewhere(
    merged: Parsed,
    claimed: list[SourceFile],
    stored: dict[str, tuple[str, str]],
    *,
    replace: bool,
) -> tuple[Parsed, list[Problem]]:
    """Drop the runs whose run_id is stored from another file; each becomes a problem.

    Re-ingesting a file (same path) replaces its run, as documented; so does the same
    content at another path (a moved or copied file: the run is the same). Another file
    with other content replaces a stored run only with ``replace``: silently, it would be
    one run overwritten by an unrelated one.
    """
    if replace or not stored or not merged.runs.num_rows:
        return merged, []
    problems: list[Problem] = []
    drop: list[int] = []
    for rid, fi in zip(
        merged.runs["run_id"].to_pylist(), merged.runs["file_idx"].to_pylist(), strict=True
    ):
        old = stored.get(rid)
        sf = claimed[fi]
        if old is None or old[0] == str(sf.path) or old[1] == sf.sha256:
            continue
        drop.append(fi)
        problems.append(
            Problem(
                str(sf.path),
                None,
                "run_id",
                f"run_id {rid!r} is already stored from {old[0]!r}; "
                "pass replace=True / --replace to replace it",
            )
        )
    if not drop:
        return merged, []
    gone = pa.array(drop, pa.int32())

    def keep(t: pa.Table) -> pa.Table:
        return t.filter(pc.invert(pc.is_in(t["file_idx"], gone)))

    events = merged.events
    return (
        Parsed(
            keep(merged.runs),
            keep(merged.samples),
            keep(merged.scores),
            None if events is None else keep(events),
        ),
        problems,
    )


def run_tombstones(
    runs_of_file: dict[int, list[str]],
    claimed: list[SourceFile],
    stored: dict[str, tuple[str, str]],
) -> dict[int, list[Tombstone]]:
    """Each file's tombstones: its runs' earlier rows, and the runs it held before that it
    holds no more (ids derived from content change with it; a file of several runs, such
    as a LeRobot file of several checkpoints, may hold fewer), unless another file holds
    them now.

    ``stored`` is updated: the chunk's runs are stored from their files from now on.
    """
    by_path: dict[str, list[str]] = {}
    for rid, (path, _sha) in stored.items():
        by_path.setdefault(path, []).append(rid)
    stones_of: dict[int, list[Tombstone]] = {}
    for i, rids in runs_of_file.items():
        path = str(claimed[i].path)
        old = [r for r in by_path.get(path, []) if r not in rids]
        stones_of[i] = [Tombstone(table, rid) for rid in [*rids, *old] for table in RUN_TABLES]
        for rid in old:
            stored.pop(rid, None)
        for rid in rids:
            stored[rid] = (path, claimed[i].sha256)
    return stones_of


def moved(
    store: ParquetStore,
    run_ids: list[str],
    before: dict[str, tuple[str, str]],
    paths: Sequence[Path],
    known: dict[str, Known],
) -> bool:
    """Whether a run or file a parse decided on was published by another writer since."""
    now = {
        rid: (path, sha)
        for rid, path, sha in store.con.execute(
            "SELECT run_id, source_path, source_sha256 FROM stg_runs "
            "WHERE list_contains(?, run_id)",
            [run_ids],
        ).fetchall()
    }
    if any(now.get(r) != before.get(r) for r in run_ids):
        return True
    rows = store.con.execute(
        "SELECT path, sha256, outcome, run_id FROM stg_ingested_files "
        "WHERE role = 'log' AND list_contains(?, path)",
        [[str(p) for p in paths]],
    ).fetchall()
    seen = {path: (sha, outcome, rid) for path, sha, outcome, rid in rows}
    was = {
        str(p): (k.sha256, k.outcome, k.run_id)
        for p in paths
        if (k := known.get(str(p))) is not None
    }
    return seen != was
