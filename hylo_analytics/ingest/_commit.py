"""The commits of a chunk: its rows with their trace statuses, tombstones and records.

Besides the rows read, a commit records what the ingest did with each file (``ingested_files``,
so the next ingest skips it) and what it refused (``quarantine``, once per file content). A
run's rows are committed with its last trace, so a killed ingest leaves no half run behind.
"""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hylo_analytics.ingest._files import SourceFile
from hylo_analytics.ingest._identity import ProblemKey
from hylo_analytics.ingest._report import Problem
from hylo_analytics.ingest.traces import TRACE_FORMAT, TraceBatch, TraceRef
from hylo_analytics.store import Tombstone

__all__ = ["ChunkCommits", "file_row", "merge_batches", "rows_of"]


class ChunkCommits:
    """A chunk's parsed logs, committed run by run as their traces are read.

    Each commit holds a batch of trace events and the runs whose last trace is in it (runs,
    samples, scores, ingested_files), with the tombstones of the runs whose first trace is in
    it. A run whose traces fit in one batch is therefore one atomic commit; a larger run's
    events come in several, its metadata with the last one, so a killed ingest leaves no run
    row and no ingested_files row for it, and the next ingest redoes it whole.
    """

    def __init__(
        self,
        claimed: list[SourceFile],
        fmt_of: list[str],
        runs: pa.Table,
        samples: pa.Table,
        scores: pa.Table,
        refs: list[TraceRef],
        run_of_file: dict[int, str],
        stones_of: dict[int, list[Tombstone]],
        partial_runs: set[str],
        sha_of: dict[str, str],
        now: datetime,
        recorded: set[ProblemKey],
    ) -> None:
        self.claimed, self.fmt_of, self.now = claimed, fmt_of, now
        self.runs, self.samples, self.scores, self.refs = runs, samples, scores, refs
        self.run_of_file, self.stones_of = run_of_file, stones_of
        self.partial_runs, self.sha_of = set(partial_runs), sha_of
        self.recorded = recorded
        self.status = np.full(len(refs), None, dtype=object)
        self.paths = np.full(len(refs), None, dtype=object)
        self.trace_rows: dict[int, list[dict[str, object]]] = {}
        self.problems: list[Problem] = []
        self.log_rows: list[dict[str, object]] = []
        self.events_added = 0
        self.files_kept: set[tuple[str, str]] = set()  # (run_id, path) in trace_files

    def take(self, batch: TraceBatch) -> None:
        """Remember a parsed batch's statuses and trace files (committed with their runs)."""
        for i, st in batch.status.items():
            ref = self.refs[i]
            self.status[i] = st
            if st not in ("refused", "missing"):
                self.paths[i] = str(ref.log_path.parent / ref.rel)
            if st != "ok":
                self.partial_runs.add(ref.run_id)
        for i, sf in batch.files:
            fi = self.refs[i].file_idx
            rid = self.run_of_file.get(fi)
            row = file_row(sf, "trace", rid, "ingested", self.now, fmt=TRACE_FORMAT)
            self.trace_rows.setdefault(fi, []).append(row)

    def commit_tables(
        self,
        events: pa.Table,
        problems: list[Problem],
        file_rows: list[dict[str, object]],
        *,
        done: set[int],
        started: set[int],
        files: pa.Table | None = None,
    ) -> tuple[dict[str, pa.Table], list[Tombstone]]:
        """The commit of ``events`` with the runs of the files ``done`` and the tombstones of
        ``started`` (written by the caller's writer thread)."""
        tombstones = [t for i in sorted(started) for t in self.stones_of.get(i, [])]
        sel = pa.array(sorted(done), pa.int32())
        runs = rows_of(self.runs, sel)
        samples = self._samples(rows_of(self.samples, sel))
        scores = rows_of(self.scores, sel)
        rows = list(file_rows)
        for i in sorted(done):
            rid = self.run_of_file.get(i)
            if rid is None:
                continue
            outcome = "partial" if rid in self.partial_runs else "ingested"
            row = file_row(self.claimed[i], "log", rid, outcome, self.now, fmt=self.fmt_of[i])
            self.log_rows.append(row)
            rows.append(row)
            rows += self.trace_rows.pop(i, [])
        # a problem stored before for the same content (an unchanged file re-read because
        # a trace is missing, or with ``replace``) is not stored twice
        new = []
        for p in problems:
            key = (p.path, p.line, p.field, p.error, self.sha_of.get(p.path))
            if key not in self.recorded:
                self.recorded.add(key)
                new.append(p)
        quarantine = pa.table(
            {
                "path": [p.path for p in new],
                "line": pa.array([p.line for p in new], pa.int64()),
                "field": [p.field for p in new],
                "error": [p.error for p in new],
                "sha256": [self.sha_of.get(p.path) for p in new],
                "ingested_at": pa.array([self.now] * len(new), pa.timestamp("us", tz="UTC")),
            }
        )
        tables = {
            "runs": runs.drop_columns([c for c in runs.column_names if c not in _RUN_COLS]),
            "samples": samples.drop_columns(["file_idx", "trace_ref"]),
            "events": events.drop_columns(["file_idx"]),
            "scores": scores.drop_columns(["file_idx"]),
            "quarantine": quarantine,
            "ingested_files": pa.Table.from_pylist(rows, schema=_file_schema()) if rows else None,
            "trace_files": self._new_files(files),
        }
        self.problems += problems
        self.events_added += events.num_rows
        return {k: v for k, v in tables.items() if v is not None}, tombstones

    def _new_files(self, files: pa.Table | None) -> pa.Table | None:
        """The trace files not kept yet for their run (two samples may name one file)."""
        if files is None or not files.num_rows:
            return None
        keys = list(zip(files["run_id"].to_pylist(), files["path"].to_pylist(), strict=True))
        keep = []
        for k in keys:
            keep.append(k not in self.files_kept)
            self.files_kept.add(k)
        return files if all(keep) else files.filter(pa.array(keep))

    def _samples(self, samples: pa.Table) -> pa.Table:
        """Samples with the status and path of their trace, once it has been read."""
        ref = samples["trace_ref"].combine_chunks()
        if not len(self.refs) or not ref.null_count < len(ref):  # no sample here has a trace
            at = samples.column_names.index("trace_status")
            return samples.set_column(
                at, "trace_status", pc.fill_null(samples["trace_status"], "none")
            )
        has = ref.is_valid()
        at = pc.fill_null(ref, 0).to_numpy(zero_copy_only=False)
        status = pc.if_else(has, pa.array(self.status[at], pa.string()), samples["trace_status"])
        path = pc.if_else(has, pa.array(self.paths[at], pa.string()), samples["trace_path"])
        samples = samples.set_column(
            samples.column_names.index("trace_status"), "trace_status", pc.fill_null(status, "none")
        )
        return samples.set_column(samples.column_names.index("trace_path"), "trace_path", path)


def rows_of(table: pa.Table, files: pa.Array) -> pa.Table:
    """The rows of ``table`` from ``files`` (by ``file_idx``); the table itself, not a copy,
    when that is every row (a chunk without traces: one huge log must not be held twice)."""
    mask = pc.is_in(table["file_idx"], files)
    if pc.sum(mask).as_py() == table.num_rows:  # no nulls: file_idx is never null
        return table
    return table.filter(mask)


def merge_batches(batches: list[TraceBatch]) -> TraceBatch:
    """Trace batches as one (a strict ingest checks every trace before it commits)."""
    return TraceBatch(
        batches[0].start if batches else 0,
        batches[-1].stop if batches else 0,
        pa.concat_tables([b.events for b in batches]),
        [q for b in batches for q in b.problems],
        {i: st for b in batches for i, st in b.status.items()},
        [f for b in batches for f in b.files],
        pa.concat_tables([b.trace_files for b in batches if b.trace_files is not None])
        if any(b.trace_files is not None for b in batches)
        else None,
    )


_RUN_COLS = {
    "run_id",
    "source_format",
    "source_path",
    "source_sha256",
    "benchmark_id",
    "benchmark_version",
    "benchmark_digest",
    "split",
    "requires_privileged",
    "episodes_per_task",
    "max_steps",
    "benchmark_upstream",
    "agent_name",
    "agent_version",
    "agent_components",
    "parent_run_id",
    "results",
    "status",
    "created",
    "errors_policy",
    "n_samples",
    "extra",
    "ingested_at",
}


def _file_schema() -> pa.Schema:
    from hylo_analytics._schema import INGESTED_FILES

    return pa.schema([f for f in INGESTED_FILES if f.name != "batch_seq"])


def file_row(
    sf: SourceFile, role: str, run_id: str | None, outcome: str, now: datetime, *, fmt: str | None
) -> dict[str, object]:
    """The ``ingested_files`` row of a file."""
    return {
        "path": str(sf.path),
        "sha256": sf.sha256,
        "size": sf.size,
        "mtime_ns": sf.mtime_ns,
        "format": fmt,
        "role": role,
        "run_id": run_id,
        "outcome": outcome,
        "ingested_at": now,
    }
