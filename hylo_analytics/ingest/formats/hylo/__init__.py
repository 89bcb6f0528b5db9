"""hylo EvalLogs (``hylo.evallog/v0.1`` and ``/v0.2``) and their traces (``hylo.trace/v0.1``).

A v0.2 log (the inspect-robots layout: ``eval / results / stats / samples``, one sample per key
with its ``epochs``) is rewritten, in one DuckDB query per batch, into the v0.1 document it
stands for and then read by the same checks onto the same tables; its run ``status`` and
``created`` come from ``status`` and ``eval.created``. A v0.2 key is stored as written (an
inspect-robots key is ``<task>#<scene>``, not ``<task_id>#<seed>``).

A score is a number, a boolean, null (an abstention: ``skip_reason`` ``episode errored`` when
the sample's status is ``error``, else ``abstained``) or ``{value, explanation?, skip_reason?}``:
a ``skip_reason`` given there is the abstention's reason (how the exporter keeps a vla-eval
``harness error: timeout``); v0.2 gives it per epoch in ``episodes[].skip_reason``. A v0.1
log's top-level ``status`` and ``created``, when strings, are the run's (else they stay in
``runs.extra``). A v0.2 log is stored and recorded as ``hylo.evallog/v0.2`` (runs and
ingested_files alike).

The benchmark's v0.2 members (``episodes_per_task``, ``max_steps``, ``upstream``) are run
columns (``benchmark_upstream`` for the last), checked on both paths: a wrong type or value is
a problem naming the member (``benchmark.max_steps.<task_id>``, ``benchmark.upstream.commit``).

Both are parsed by DuckDB's JSON functions over Arrow arrays of whole files (logs) or lines
(traces): one query per batch, no Python loop over samples or events. Python only reads bytes,
resolves trace paths and turns the few rejected items into :class:`Problem` records.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hylo_analytics.ingest._files import SourceFile
from hylo_analytics.ingest._reader import Parsed, Reader, drop_duplicate_runs
from hylo_analytics.ingest.formats.hylo._checked import MAYBE_NON_FINITE
from hylo_analytics.ingest.formats.hylo._checked import parse_checked as _parse_checked
from hylo_analytics.ingest.formats.hylo._spec import (
    FORMAT,
    FORMAT_V02,
    SUPPORTED_VERSIONS,
    ParsedLogs,
)
from hylo_analytics.ingest.formats.hylo._v02 import v02_as_v01, version_of
from hylo_analytics.ingest.traces import TRACE_FORMAT, TraceRef, iter_traces, parse_traces

__all__ = [
    "FORMAT",
    "FORMAT_V02",
    "READER",
    "SUPPORTED_VERSIONS",
    "TRACE_FORMAT",
    "ParsedLogs",
    "iter_traces",
    "parse",
    "parse_evallogs",
    "parse_traces",
    "sniff",
]


def sniff(head: bytes, path: Path | None = None) -> bool:
    """Whether a file's first bytes look like a hylo EvalLog (any version)."""
    return b'"hylo.evallog/' in head[:4096]


def parse_evallogs(con: duckdb.DuckDBPyConnection, files: Sequence[SourceFile]) -> ParsedLogs:
    """Parse and validate EvalLogs; a file with any problem is rejected whole.

    Clean logs take the fast path (``_hylo_fast``: pyarrow's JSON reader, one pass per batch);
    the rest take the checked DuckDB path, which reports each problem's file, line and field.
    """
    from hylo_analytics.ingest.formats.hylo._fast import parse_fast  # pyarrow.json, pandas: on use

    files = v02_as_v01(con, files)
    fast = parse_fast(files, FORMAT)
    slow = list(fast.slow)
    if fast.runs.num_rows and not slow:
        return ParsedLogs(fast.runs, fast.samples, _fast_scores(fast.scores))
    # the tree walk for repeated keys and non-finite numbers: only where either can be
    walk = {
        j
        for j, i in enumerate(slow)
        if i in fast.unparsed or MAYBE_NON_FINITE.search(files[i].data) is not None
    }
    checked = _parse_checked(con, [files[i] for i in slow], walk=walk)
    remap = pa.array(np.asarray(slow, dtype=np.int32))

    def back(t: pa.Table) -> pa.Table:
        """File indices of the checked subset, back to indices into ``files``."""
        i = t.schema.get_field_index("file_idx")
        return t.set_column(
            i, "file_idx", remap.take(t["file_idx"]) if len(slow) else t["file_idx"]
        )

    bad = {slow[i] for i in checked.bad_files}
    if not fast.runs.num_rows:
        return ParsedLogs(
            back(checked.runs), back(checked.samples), back(checked.scores), checked.problems, bad
        )
    runs = pa.concat_tables([fast.runs, back(checked.runs)], promote_options="permissive")
    samples = pa.concat_tables([fast.samples, back(checked.samples)], promote_options="permissive")
    scores = pa.concat_tables(
        [_fast_scores(fast.scores), back(checked.scores)], promote_options="permissive"
    )
    return ParsedLogs(runs, samples, scores, checked.problems, bad)


# the version member of a v0.2 log, where the exporter writes it; confirmed by DuckDB
def _fast_scores(rows: pa.Table) -> pa.Table:
    """The fast path's score rows with the columns the checked path also writes."""
    n = rows.num_rows
    return (
        rows.append_column("explanation", pa.nulls(n, pa.string()))
        .append_column("source", pa.repeat(pa.scalar("evallog"), n))
        .append_column("source_kind", pa.repeat(pa.scalar("imported"), n))
    )


# -- the reader: logs, then the traces they name ----------------------------------------


def parse(con: duckdb.DuckDBPyConnection, files: Sequence[SourceFile]) -> Parsed:
    """Parse EvalLogs, drop runs claimed twice, and name the traces their samples point to.

    The traces are read later, a batch at a time, by the orchestrator (``iter_traces``);
    duplicates are dropped first, so a rejected log's traces are never opened. Samples come
    back with ``trace_ref`` (their trace's position in ``Parsed.traces``).
    """
    parsed = parse_evallogs(con, files)
    paths = [str(f.path) for f in files]
    base, dup_problems = drop_duplicate_runs(
        Parsed(parsed.runs, parsed.samples, parsed.scores), paths
    )
    samples = base.samples
    has_trace = pc.is_valid(samples["trace"])
    ref_rows = samples.filter(has_trace)
    refs = [
        TraceRef(rid, key, ep, files[fi].path, si, rel, fi)
        for rid, key, ep, fi, si, rel in zip(
            *(
                ref_rows[c].to_pylist()
                for c in ("run_id", "key", "episode_id", "file_idx", "sample_idx", "trace")
            ),
            strict=True,
        )
    ]
    ref_of = np.full(samples.num_rows, -1, dtype=np.int32)
    ref_of[np.flatnonzero(has_trace.to_numpy(zero_copy_only=False))] = np.arange(len(refs))
    samples = samples.append_column("trace_ref", pa.array(ref_of, mask=ref_of < 0))
    samples = samples.drop_columns(["sample_idx", "trace"])
    problems = [*parsed.problems, *dup_problems]
    return Parsed(base.runs, samples, base.scores, None, problems, traces=refs)


READER = Reader(FORMAT, sniff, parse, version_of)
