"""Reading: each claimed file to its reader, a batch per parser, and the rows merged.

A reader parses a whole batch at once; one file that makes it fail must not lose the files
beside it, so a failed batch is halved until the failing files are alone. The readers' rows
are then fitted to the store schema (plus ``file_idx``) and stacked, with the traces their
samples name renumbered for the chunk.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hylo_analytics.ingest._files import SourceFile
from hylo_analytics.ingest._reader import Parsed, ParseFn, remap_file_idx
from hylo_analytics.ingest._report import IngestError, Problem
from hylo_analytics.ingest.traces import TraceRef

__all__ = ["conform", "drop_traces_of_dropped", "parse_isolated", "read_claimed"]


def read_claimed(
    con: duckdb.DuckDBPyConnection,
    claimed: list[SourceFile],
    fmt_of: list[str],
    by_reader: dict[ParseFn, list[int]],
    *,
    strict: bool,
) -> tuple[list[Parsed], Parsed, list[TraceRef], list[Problem]]:
    """Parse the files each reader claimed (``by_reader``: parse function -> positions in
    ``claimed``, in the readers' order); returns the readers' parts, their rows merged (``file_idx`` = position in
    ``claimed``), the traces named (``trace_ref`` = position in them) and the problems."""
    problems: list[Problem] = []
    pieces: list[tuple[list[int], Parsed]] = []
    for parse, idx in by_reader.items():  # in the order the readers are asked
        read, failed = parse_isolated(con, parse, claimed, fmt_of, idx)
        if strict and failed:
            raise IngestError(failed[0])
        problems.extend(failed)
        pieces += read
    parts: list[Parsed] = []
    refs: list[TraceRef] = []
    companions: dict[int, str | None] = {}
    for idx, part in pieces:
        if strict and part.problems:
            raise IngestError(part.problems[0])
        mapping = np.asarray(idx, dtype=np.int32)
        companions.update((int(mapping[i]), rid) for i, rid in part.companions.items())
        part.runs = remap_file_idx(part.runs, mapping)
        part.samples = remap_file_idx(part.samples, mapping)
        part.scores = remap_file_idx(part.scores, mapping)
        part.events = remap_file_idx(part.events, mapping)
        if part.traces:
            offset = pa.scalar(len(refs), pa.int32())
            pos = part.samples.column_names.index("trace_ref")
            shifted = pc.add(part.samples["trace_ref"], offset)
            part.samples = part.samples.set_column(pos, "trace_ref", shifted)
            refs += [replace(r, file_idx=int(mapping[r.file_idx])) for r in part.traces]
        parts.append(part)
        problems.extend(part.problems)
    merged = Parsed(
        conform([p.runs for p in parts], "runs"),
        conform([p.samples for p in parts], "samples"),
        conform([p.scores for p in parts], "scores"),
        conform([p.events for p in parts if p.events is not None], "events"),
        companions=companions,
    )
    return parts, merged, refs, problems


def parse_isolated(
    con: duckdb.DuckDBPyConnection,
    parse: Callable[[duckdb.DuckDBPyConnection, Sequence[SourceFile]], Parsed],
    claimed: list[SourceFile],
    fmt_of: list[str],
    idx: list[int],
) -> tuple[list[tuple[list[int], Parsed]], list[Problem]]:
    """``parse`` the files ``claimed[idx]`` as one batch; if it raises, split and retry.

    One file's failure (a parser error, RecursionError, MemoryError, ...) must not lose the
    files beside it: a failed batch is halved until the failing files are alone, and each of
    those is a problem. The good path stays one call. Returns the parsed pieces in file order
    (the files' positions in ``claimed`` with their rows) and the problems.
    """
    pieces: list[tuple[list[int], Parsed]] = []
    failed: list[Problem] = []
    todo = [idx] if idx else []
    while todo:
        part = todo.pop()
        try:
            pieces.append((part, parse(con, [claimed[i] for i in part])))
        except Exception as exc:  # not KeyboardInterrupt / SystemExit: those end the ingest
            if len(part) > 1:
                half = len(part) // 2
                todo += [part[half:], part[:half]]
                continue
            text = " ".join(str(exc).split())
            text = text if len(text) <= 300 else text[:300] + "..."
            why = f"{fmt_of[part[0]]} reader failed: {type(exc).__name__}: {text}"
            failed.append(Problem(str(claimed[part[0]].path), None, None, why))
    pieces.sort(key=lambda p: p[0][0])
    return pieces, failed


def drop_traces_of_dropped(
    runs: pa.Table, samples: pa.Table, refs: list[TraceRef]
) -> tuple[pa.Table, list[TraceRef]]:
    """The traces of the runs still in ``runs`` only (a dropped run's are never read), with
    the samples' ``trace_ref`` renumbered to match."""
    alive = set(runs["file_idx"].to_pylist())
    keep = np.fromiter((r.file_idx in alive for r in refs), bool, count=len(refs))
    new_pos = (np.cumsum(keep) - 1).astype(np.int32)
    pos = samples.column_names.index("trace_ref")
    ref_col = samples["trace_ref"].combine_chunks()
    moved = pa.array(new_pos).take(pc.fill_null(ref_col, 0))
    samples = samples.set_column(pos, "trace_ref", pc.if_else(ref_col.is_valid(), moved, None))
    return samples, [r for r, k in zip(refs, keep, strict=True) if k]


def conform(tables: list[pa.Table], name: str) -> pa.Table:
    """Fit each reader's table to the store schema (plus ``file_idx``) and stack them."""
    from hylo_analytics import _schema

    fitted = []
    for t in tables:
        fi = t["file_idx"]
        ref = t["trace_ref"] if "trace_ref" in t.column_names else pa.nulls(t.num_rows, pa.int32())
        body = t.drop_columns([c for c in t.column_names if c in ("file_idx", "trace_ref")])
        body = _schema.conform(body, name).drop_columns(["batch_seq"])
        if name == "runs":
            body = _with_errors_policy(body)
        body = body.append_column("file_idx", fi.cast(pa.int32()))
        if name == "samples":  # the position of the sample's trace in the chunk's refs
            body = body.append_column("trace_ref", ref.cast(pa.int32()))
        fitted.append(body)
    if not fitted:
        empty = _schema.empty(name).drop_columns(["batch_seq"])
        empty = empty.append_column("file_idx", pa.array([], pa.int32()))
        if name == "samples":
            empty = empty.append_column("trace_ref", pa.array([], pa.int32()))
        return empty
    return pa.concat_tables(fitted) if len(fitted) > 1 else fitted[0]


def _with_errors_policy(runs: pa.Table) -> pa.Table:
    """Each run's errors convention: the log's own (an exported run keeps its harness's),
    else the one of the format that wrote it (:func:`hylo_analytics._harness.default_errors`)."""
    from hylo_analytics._harness import FAILURE_FORMATS

    failing = pc.is_in(runs["source_format"], value_set=pa.array(FAILURE_FORMATS, pa.string()))
    derived = pc.if_else(pc.fill_null(failing, False), "failure", "exclude")
    given = runs["errors_policy"]
    at = runs.schema.get_field_index("errors_policy")
    return runs.set_column(at, "errors_policy", pc.coalesce(given, derived))
