"""The reader contract: a format's name, content test and batch parser, and the rows it returns.

A reader is three things: a ``FORMAT`` name (stored in ``runs.source_format`` and
``ingested_files.format``), a cheap ``sniff(head, path)`` test on the file's first bytes, and a
``parse(con, files)`` function returning the rows of a whole batch at once. The orchestrator
asks the readers in :data:`READERS` order and hands each file to the first that claims it, so
the order puts the most specific tests first. The file name is passed to ``sniff`` only as a
hint for formats whose content is ambiguous; every reader here decides by content.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

from hylo_analytics.ingest._files import SourceFile
from hylo_analytics.ingest._report import Problem
from hylo_analytics.ingest.traces import TraceRef

__all__ = ["SNIFF_BYTES", "Parsed", "Reader", "json_strings", "remap_file_idx"]

SNIFF_BYTES = 4096


@dataclass
class Parsed:
    """Rows read from a batch of files of one format, and what was rejected.

    Every table carries ``file_idx`` (the file's position in the batch handed to ``parse``);
    the orchestrator uses it to drop runs claimed twice and to record provenance. ``runs``
    holds columns of the runs schema (without provenance), ``samples``/``scores``/``events``
    columns of theirs. ``side_files`` are files read on the way (traces): ``(file, role,
    run_id, format)``; ``partial_runs`` are runs to re-read on the next ingest.

    ``companions`` are files of the batch that hold no run of their own because their rows
    belong to another file's run (a lm-eval samples file beside its results file): file_idx
    -> that run's id (None when not known). Recorded with outcome ``companion``, never as
    rejected; a changed companion makes the next ingest read its owner again.

    ``traces`` are traces the samples name, not read yet: the orchestrator reads and commits
    them a batch at a time (so memory follows the batch, not the input). Samples then carry
    ``trace_ref``, the position of their trace in ``traces`` (null when none), and get their
    ``trace_status`` / ``trace_path`` once it is read.
    """

    runs: pa.Table
    samples: pa.Table
    scores: pa.Table
    events: pa.Table | None = None
    problems: list[Problem] = field(default_factory=list)
    side_files: list[tuple[SourceFile, str, str | None, str]] = field(default_factory=list)
    partial_runs: set[str] = field(default_factory=set)
    traces: list[TraceRef] = field(default_factory=list)
    companions: dict[int, str | None] = field(default_factory=dict)


ParseFn = Callable[[duckdb.DuckDBPyConnection, Sequence[SourceFile]], Parsed]


@dataclass(frozen=True)
class Reader:
    """One source format: its name, its content test and its batch parser.

    ``version_of`` names the format of a file from its first bytes where one reader reads
    several versions (the hylo reader: v0.1 and v0.2), for the files no run was read from
    (quarantined); a stored run's file has its run's ``source_format``. ``suffixes`` are
    file name endings a folder walk should offer besides ``.json``, ``.eval``, ``.jsonl`` and
    ``.ndjson`` (a plug-in reading ``.csv`` files names ``(".csv",)``).
    """

    format: str
    sniff: Callable[[bytes, Path], bool]
    parse: ParseFn
    version_of: Callable[[bytes], str] | None = None
    suffixes: tuple[str, ...] = ()

    def format_of(self, head: bytes) -> str:
        """The format of a file this reader claims, from its first bytes."""
        return self.format if self.version_of is None else self.version_of(head)


def json_strings(chunks: Sequence[bytes]) -> pa.LargeStringArray:
    """Many byte strings as one Arrow string array, without copying them one by one."""
    sizes = np.fromiter((len(c) for c in chunks), dtype=np.int64, count=len(chunks))
    offsets = np.zeros(len(chunks) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    return pa.LargeStringArray.from_buffers(
        len(chunks), pa.py_buffer(offsets), pa.py_buffer(b"".join(chunks))
    )


def remap_file_idx(table: pa.Table | None, mapping: np.ndarray) -> pa.Table | None:
    """Replace a table's batch-local ``file_idx`` by ``mapping[file_idx]``."""
    if table is None:
        return None
    local = table["file_idx"].to_numpy()
    pos = table.column_names.index("file_idx")
    return table.set_column(pos, "file_idx", pa.array(mapping[local].astype(np.int32)))


def drop_duplicate_runs(parsed: Parsed, paths: Sequence[str]) -> tuple[Parsed, list[Problem]]:
    """Keep the first file claiming each ``run_id``; the others become problems.

    Two files of one ingest claiming one run would otherwise replace each other in an order
    nobody chose. ``paths[file_idx]`` names the files in the problems.
    """
    run_ids = parsed.runs.column("run_id").to_pylist()
    file_of_run = parsed.runs.column("file_idx").to_pylist()
    seen: dict[str, int] = {}
    dup: set[int] = set()
    problems: list[Problem] = []
    for rid, fi in sorted(zip(run_ids, file_of_run, strict=True), key=lambda t: t[1]):
        if rid in seen and seen[rid] != fi:
            dup.add(fi)
            problems.append(
                Problem(
                    paths[fi],
                    None,
                    "run_id",
                    f"run_id {rid!r} is also in {paths[seen[rid]]!r} in this ingest",
                )
            )
        else:
            seen.setdefault(rid, fi)
    if not dup:
        return parsed, problems
    keep = pa.array(sorted(dup), pa.int32())

    def _drop(t: pa.Table | None) -> pa.Table | None:
        if t is None:
            return None
        import pyarrow.compute as pc

        return t.filter(pc.invert(pc.is_in(t["file_idx"], keep)))

    runs = _drop(parsed.runs)
    samples = _drop(parsed.samples)
    scores = _drop(parsed.scores)
    assert runs is not None and samples is not None and scores is not None
    return (
        Parsed(
            runs,
            samples,
            scores,
            _drop(parsed.events),
            parsed.problems,
            parsed.side_files,
            parsed.partial_runs,
            parsed.traces,
        ),
        problems,
    )
