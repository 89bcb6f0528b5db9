"""One chunk through the rooms: identity, then the readers, then its commits.

Each file of the chunk passes each step once: a file stored with the same content is only
touched; a file too big or too deep, or of no known format, is quarantined unread; the rest
go to their readers. The runs read are checked against each other and the store (one file
per run_id), get their provenance and tombstones, and are handed to ``submit`` commit by
commit as their traces are read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa

from hylo_analytics.ingest._commit import ChunkCommits, file_row, merge_batches
from hylo_analytics.ingest._files import MAX_DOC_BYTES, SourceFile, deep_json, too_deep
from hylo_analytics.ingest._identity import (
    Known,
    ProblemKey,
    claimed_elsewhere,
    run_tombstones,
    unchanged_content,
)
from hylo_analytics.ingest._parse import conform, drop_traces_of_dropped, read_claimed
from hylo_analytics.ingest._reader import SNIFF_BYTES, Parsed, ParseFn, drop_duplicate_runs
from hylo_analytics.ingest._registry import detect, readers
from hylo_analytics.ingest._report import IngestError, IngestReport, Problem
from hylo_analytics.ingest.traces import iter_traces

if TYPE_CHECKING:
    from hylo_analytics.store import ParquetStore, Tombstone

__all__ = ["Submit", "commit_held", "ingest_chunk"]

Submit = Callable[[dict[str, pa.Table], list["Tombstone"]], None]


def commit_held(store: ParquetStore, tables: dict[str, pa.Table], stones: list[Tombstone]) -> None:
    """A commit written unpublished (published with the rest of its chunk or claim)."""
    store.commit(tables, stones, publish=False)


@dataclass
class _Triage:
    """A chunk's files sorted before any parser sees them."""

    problems: list[Problem]
    unchanged: int = 0
    file_rows: list[dict[str, object]] = field(default_factory=list)
    claimed: list[SourceFile] = field(default_factory=list)  # the files a reader claimed
    fmt_of: list[str] = field(default_factory=list)
    # by parse function (formats sharing one are one batch): positions in ``claimed``
    by_reader: dict[ParseFn, list[int]] = field(default_factory=dict)


def ingest_chunk(
    con: duckdb.DuckDBPyConnection,
    files: list[SourceFile],
    known_logs: dict[str, Known],
    known_traces: dict[str, list[tuple[str, Known]]],
    stored: dict[str, tuple[str, str]],
    recorded: set[ProblemKey],
    *,
    strict: bool,
    replace_runs: bool,
    submit: Submit,
    notes: Sequence[Problem] = (),
) -> IngestReport:
    """Parse one chunk and hand each of its commits (tables, tombstones) to ``submit``.

    ``stored`` maps each stored run_id to its ``(source_path, source_sha256)``; the chunk's
    runs are added to it. ``recorded`` are the quarantine rows stored (and committed by this
    ingest): a problem already recorded for the same file content is not stored again.
    ``notes`` are problems found before reading (folders skipped), committed with it.
    """
    now = datetime.now(UTC)
    tri = _triage(files, known_logs, known_traces, replace=replace_runs, now=now, notes=notes)
    problems, claimed, fmt_of = tri.problems, tri.claimed, tri.fmt_of
    if strict and problems:
        raise IngestError(problems[0])
    parts, merged, refs, read_problems = read_claimed(
        con, claimed, fmt_of, tri.by_reader, strict=strict
    )
    problems.extend(read_problems)
    companions = merged.companions  # files read for another file's run: no run of their own
    # a run claimed by files of two formats: keep the first file
    merged, dups = drop_duplicate_runs(merged, [str(f.path) for f in claimed])
    # a run stored from another file: replaced only when asked (``replace``)
    merged, taken = claimed_elsewhere(merged, claimed, stored, replace=replace_runs)
    dups += taken
    problems.extend(dups)
    if strict and dups:
        raise IngestError(dups[0])
    runs, samples, scores, events = merged.runs, merged.samples, merged.scores, merged.events
    assert events is not None
    partial_runs = set().union(*(p.partial_runs for p in parts)) if parts else set()
    if dups and refs:  # the traces of a dropped run are never read
        samples, refs = drop_traces_of_dropped(runs, samples, refs)
    runs = _with_provenance(runs, claimed, now)
    runs_of_file: dict[int, list[str]] = {}
    for i, rid in zip(runs["file_idx"].to_pylist(), runs["run_id"].to_pylist(), strict=True):
        runs_of_file.setdefault(i, []).append(rid)
    run_of_file = {i: rids[0] for i, rids in runs_of_file.items()}  # ingested_files.run_id
    stones_of = run_tombstones(runs_of_file, claimed, stored)
    formats = _formats(tri, runs, run_of_file, companions, now)
    chunk = ChunkCommits(
        claimed, fmt_of, runs, samples, scores, refs, run_of_file, stones_of,
        partial_runs, _shas(files, parts), now, recorded,
    )  # fmt: skip
    _submit_all(con, chunk, events, problems, tri.file_rows, strict=strict, submit=submit)
    return IngestReport(
        files_read=len(files),
        files_unchanged=tri.unchanged,
        runs_added=runs.num_rows,
        samples_added=samples.num_rows,
        events_added=chunk.events_added,
        scores_added=scores.num_rows,
        quarantined=len(chunk.problems),
        problems=tuple(chunk.problems),
        formats=tuple(sorted(formats.items())),
        file_formats=tuple(
            (str(r["path"]), r["format"])  # type: ignore[misc]
            for r in [*tri.file_rows, *chunk.log_rows]
            if r["role"] == "log"
        ),
    )


def _triage(
    files: list[SourceFile],
    known_logs: dict[str, Known],
    known_traces: dict[str, list[tuple[str, Known]]],
    *,
    replace: bool,
    now: datetime,
    notes: Sequence[Problem],
) -> _Triage:
    """Each file: unreadable, stored unchanged, unsafe, of no known format, or a reader's."""
    tri = _Triage(list(notes))
    chosen = readers()  # the built-in readers and the plug-ins, read once per chunk
    order = {r.parse: i for i, r in reversed(list(enumerate(chosen)))}
    unsafe = _unsafe(files)
    for n, sf in enumerate(files):
        k = known_logs.get(str(sf.path))
        if sf.error is not None:
            tri.problems.append(Problem(str(sf.path), None, None, sf.error))
            continue
        if unchanged_content(k, sf, known_traces, replace=replace):
            assert k is not None
            tri.unchanged += 1  # touched, not changed: remember the new mtime
            tri.file_rows.append(file_row(sf, "log", k.run_id, k.outcome, now, fmt=k.format))
            continue
        reader = detect(sf.data[:SNIFF_BYTES], sf.path, chosen)
        if n in unsafe:  # never offered to a parser
            line, why = unsafe[n]
            tri.problems.append(Problem(str(sf.path), line, None, why))
            fmt = reader.format_of(sf.data[:SNIFF_BYTES]) if reader is not None else None
            tri.file_rows.append(file_row(sf, "log", None, "quarantined", now, fmt=fmt))
            continue
        if reader is None:
            tri.problems.append(
                Problem(
                    str(sf.path),
                    None,
                    None,
                    "unknown format: no reader recognises this file's content "
                    f"(known formats: {', '.join(r.format for r in chosen)})",
                )
            )
            tri.file_rows.append(file_row(sf, "log", None, "quarantined", now, fmt=None))
            continue
        tri.by_reader.setdefault(reader.parse, []).append(len(tri.claimed))
        tri.claimed.append(sf)
        tri.fmt_of.append(reader.format_of(sf.data[:SNIFF_BYTES]))
    tri.by_reader = dict(sorted(tri.by_reader.items(), key=lambda kv: order[kv[0]]))
    return tri


def _shas(files: list[SourceFile], parts: list[Parsed]) -> dict[str, str]:
    """Each file's sha256 by path: the chunk's, and those its readers read on the way (a
    companion file read from disk), so a problem found again in unchanged bytes is known."""
    out = {str(sf.path): sf.sha256 for p in parts for sf, *_ in p.side_files}
    out.update((str(f.path), f.sha256) for f in files)
    return out


def _unsafe(files: list[SourceFile]) -> dict[int, tuple[int | None, str]]:
    """The JSON files no parser may see (too big, too deep): bounded before any parser sees
    the bytes (zips: member by member, by their reader)."""
    plain = [i for i, sf in enumerate(files) if sf.error is None and sf.data[:2] != b"PK"]
    deep = deep_json([files[i].data for i in plain])
    unsafe: dict[int, tuple[int | None, str]] = {
        i: (None, f"JSON file of {files[i].size} bytes, over the limit of {MAX_DOC_BYTES} bytes")
        for i in plain
        if files[i].size > MAX_DOC_BYTES
    }
    unsafe.update((plain[j], (at[0], too_deep(*at))) for j, at in deep.items())
    return unsafe


def _with_provenance(runs: pa.Table, claimed: list[SourceFile], now: datetime) -> pa.Table:
    """The runs with the path and hash of the file each came from, and the ingest time."""
    src = [claimed[i] for i in runs["file_idx"].to_pylist()]
    for name, col in (
        ("source_path", pa.array([str(f.path) for f in src], pa.string())),
        ("source_sha256", pa.array([f.sha256 for f in src], pa.string())),
        ("ingested_at", pa.array([now] * runs.num_rows, pa.timestamp("us", tz="UTC"))),
    ):
        runs = runs.set_column(runs.column_names.index(name), name, col)
    return runs


def _formats(
    tri: _Triage,
    runs: pa.Table,
    run_of_file: dict[int, str],
    companions: dict[int, str | None],
    now: datetime,
) -> dict[str, int]:
    """Files per format; a rejected file's ``ingested_files`` row is added to the triage's.

    A log's format is the one its run was read as (ingested_files.format =
    runs.source_format): one reader reads both hylo versions, and a v0.2 log is no v0.1 log.
    """
    fmt_of = tri.fmt_of
    for i, fmt in zip(runs["file_idx"].to_pylist(), runs["source_format"].to_pylist(), strict=True):
        fmt_of[i] = fmt or fmt_of[i]
    formats: dict[str, int] = {}
    for i, sf in enumerate(tri.claimed):
        if i in companions and i not in run_of_file:  # its rows are its owner run's
            tri.file_rows.append(
                file_row(sf, "log", companions[i], "companion", now, fmt=fmt_of[i])
            )
        elif i not in run_of_file:  # rejected: recorded with the chunk's first commit
            tri.file_rows.append(file_row(sf, "log", None, "quarantined", now, fmt=fmt_of[i]))
        formats[fmt_of[i]] = formats.get(fmt_of[i], 0) + 1
    return formats


def _submit_all(
    con: duckdb.DuckDBPyConnection,
    chunk: ChunkCommits,
    events: pa.Table,
    problems: list[Problem],
    file_rows: list[dict[str, object]],
    *,
    strict: bool,
    submit: Submit,
) -> None:
    """Hand the chunk's commits to ``submit``: one without traces, else one per trace batch.

    Each commit is written (``submit``: one in flight) while the next batch is parsed; the
    first carries the chunk's problems, file rows and the runs without traces.
    """
    refs, run_of_file = chunk.refs, chunk.run_of_file
    if not refs:
        done = set(run_of_file)
        submit(*chunk.commit_tables(events, problems, file_rows, done=done, started=done))
        return
    untraced = set(run_of_file) - {r.file_idx for r in refs}
    batches = iter_traces(con, refs, threads=4)
    if strict:  # every trace checked before anything is stored: one commit
        every = list(batches)
        bad = [q for b in every for q in b.problems]
        if bad:
            raise IngestError(bad[0])
        batches = iter([merge_batches(every)])
    first = True
    seen: set[int] = set()  # runs whose tombstones are committed
    remaining = Counter(r.file_idx for r in refs)
    for batch in batches:
        chunk.take(batch)
        ev = conform([batch.events], "events")
        done = set()
        for r in refs[batch.start : batch.stop]:
            remaining[r.file_idx] -= 1
            if not remaining[r.file_idx]:
                done.add(r.file_idx)
        started = {r.file_idx for r in refs[batch.start : batch.stop]} - seen
        seen |= started
        batch_problems, rows = batch.problems, []
        if first:
            ev = pa.concat_tables([events, ev]) if events.num_rows else ev
            done |= untraced
            started |= untraced
            batch_problems, rows = problems + batch.problems, file_rows
            first = False
        submit(
            *chunk.commit_tables(
                ev, batch_problems, rows, done=done, started=started, files=batch.trace_files
            )
        )
