"""hylo EvalLogs (``hylo.evallog/v0.1``) and their episode traces (``hylo.trace/v0.1``).

Both are parsed by DuckDB's JSON functions over Arrow arrays of whole files (logs) or lines
(traces): one query per batch, no Python loop over samples or events. Python only reads bytes,
resolves trace paths and turns the few rejected items into :class:`Problem` records.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hylo_analytics.ingest._files import SourceFile, bad_utf8, read_files, split_lines
from hylo_analytics.ingest._reader import Parsed, Reader, drop_duplicate_runs, json_strings
from hylo_analytics.ingest._report import Problem
from hylo_analytics.ingest._sqlcheck import Check, compile_checks

__all__ = [
    "FORMAT",
    "READER",
    "TRACE_FORMAT",
    "ParsedLogs",
    "parse",
    "parse_evallogs",
    "parse_traces",
    "sniff",
]

FORMAT = "hylo.evallog/v0.1"
TRACE_FORMAT = "hylo.trace/v0.1"
SUPPORTED_VERSIONS = (FORMAT,)

_TOP_KEYS = ("version", "run_id", "benchmark", "agent", "results", "samples")
_SAMPLE_KEYS = ("key", "task_id", "seed", "epoch", "episode_id", "status", "scores", "trace")

_TOP_CHECKS = compile_checks(
    [
        Check("version", "d.version", ("VARCHAR",)),
        Check("run_id", "d.run_id", ("VARCHAR",)),
        Check("benchmark", "d.benchmark", ("OBJECT",)),
        Check("benchmark.id", "json_extract(d.benchmark, '$.id')", ("VARCHAR",)),
        Check("benchmark.version", "json_extract(d.benchmark, '$.version')", ("VARCHAR",), False),
        Check("benchmark.digest", "json_extract(d.benchmark, '$.digest')", ("VARCHAR",), False),
        Check("benchmark.split", "json_extract(d.benchmark, '$.split')", ("VARCHAR",), False),
        Check(
            "benchmark.requires_privileged",
            "json_extract(d.benchmark, '$.requires_privileged')",
            ("BOOLEAN",),
            False,
        ),
        Check("agent", "d.agent", ("OBJECT",)),
        Check("agent.name", "json_extract(d.agent, '$.name')", ("VARCHAR",)),
        Check("agent.version", "json_extract(d.agent, '$.version')", ("VARCHAR",), False),
        Check("results", "d.results", ("OBJECT",), False),
        Check("samples", "d.samples", ("ARRAY",)),
    ]
)

_SAMPLE_CHECKS = compile_checks(
    [
        Check("key", "key", ("VARCHAR",)),
        Check("task_id", "task_id", ("VARCHAR",)),
        Check("seed", "seed", ("BIGINT", "UBIGINT")),
        Check("epoch", "epoch", ("BIGINT", "UBIGINT"), False),
        Check("episode_id", "episode_id", ("VARCHAR",), False),
        Check("status", "status", ("VARCHAR",)),
        Check("scores", "scores", ("OBJECT",), False),
        Check("trace", "trace", ("VARCHAR",), False),
    ],
    field_prefix="'samples[' || CAST(sample_idx AS VARCHAR) || '].'",
)


def sniff(head: bytes, path: Path | None = None) -> bool:
    """Whether a file's first bytes look like a hylo EvalLog (any version)."""
    return b'"hylo.evallog/' in head[:4096]


@dataclass
class ParsedLogs:
    """The rows read from a batch of EvalLogs, and what was rejected."""

    runs: pa.Table
    samples: pa.Table  # includes ``file_idx`` and ``trace`` (relative) for the trace step
    scores: pa.Table
    problems: list[Problem] = field(default_factory=list)
    bad_files: set[int] = field(default_factory=set)


def _json_problem(sf: SourceFile) -> Problem:
    """Why a file that DuckDB could not read as a JSON object is bad (the rare, slow path)."""
    try:
        doc = json.loads(sf.data)
    except json.JSONDecodeError as exc:
        return Problem(
            str(sf.path), exc.lineno, None, f"malformed JSON: {exc.msg} (column {exc.colno})"
        )
    return Problem(str(sf.path), 1, None, f"expected a JSON object, got {type(doc).__name__}")


_KNOWN_SAMPLE = "{" + ", ".join(f'"{k}": null' for k in _SAMPLE_KEYS) + "}"
_SAMPLE_LEAVES = "{" + ",".join(f'"{k}":"JSON"' for k in _SAMPLE_KEYS) + "}"
_NUMERIC = "('BOOLEAN', 'BIGINT', 'UBIGINT', 'DOUBLE')"


def parse_evallogs(con: duckdb.DuckDBPyConnection, files: Sequence[SourceFile]) -> ParsedLogs:
    """Parse and validate EvalLogs; a file with any problem is rejected whole.

    The JSON is parsed twice at most: the document into a map of top-level members, and the
    ``samples`` member into one row per sample. Checks run on the parsed values in SQL, so a
    valid batch costs no Python per sample; only rejected files are looked at again.
    """
    problems: list[Problem] = []
    bad: set[int] = set()
    good_idx: list[int] = []
    for i, sf in enumerate(files):
        pos = bad_utf8(sf.data)
        if pos is not None:
            problems.append(Problem(str(sf.path), pos[0], None, f"not UTF-8 (column {pos[1]})"))
            bad.add(i)
        else:
            good_idx.append(i)
    logs = pa.table(
        {
            "file_idx": pa.array(good_idx, pa.int32()),
            "raw": json_strings([files[i].data for i in good_idx]),
        }
    )
    con.register("_logs", logs)
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE _top AS
        WITH parsed AS (
            SELECT file_idx, try(json_transform(raw, '"MAP(VARCHAR, JSON)"')) AS m FROM _logs
        ), d AS (
            SELECT file_idx, m IS NOT NULL AS ok,
                   {", ".join(f"map_extract_value(m, '{k}') AS {k}" for k in _TOP_KEYS)},
                   to_json(map_from_entries(list_filter(
                       map_entries(m), lambda e: e.key NOT IN ({", ".join(f"'{k}'" for k in _TOP_KEYS)})
                   ))) AS extra
            FROM parsed
        )
        SELECT d.*, CASE WHEN ok THEN {_TOP_CHECKS} END AS problems FROM d
        """
    )
    con.unregister("_logs")
    for file_idx, ok, version, probs in con.execute(
        f"""SELECT file_idx, ok, version->>'$', problems FROM _top
            WHERE NOT ok OR len(problems) > 0
               OR version->>'$' NOT IN ({", ".join(f"'{v}'" for v in SUPPORTED_VERSIONS)})"""
    ).fetchall():
        path = str(files[file_idx].path)
        bad.add(file_idx)
        if not ok:
            problems.append(_json_problem(files[file_idx]))
        elif probs:
            problems.extend(Problem(path, None, p["field"], p["error"]) for p in probs)
        else:
            problems.append(
                Problem(path, None, "version", f"unknown version {version!r}; expected {FORMAT}")
            )
    con.register("_bad", pa.table({"file_idx": pa.array(sorted(bad), pa.int32())}))
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE _samp AS
        WITH l AS (
            SELECT file_idx, run_id->>'$' AS run_id, from_json(samples, '["JSON"]') AS l
            FROM _top WHERE file_idx NOT IN (SELECT file_idx FROM _bad)
        ), s AS (
            SELECT file_idx, run_id, unnest(l) AS s, generate_subscripts(l, 1) - 1 AS sample_idx
            FROM l
        ), tr AS (
            SELECT file_idx, run_id, sample_idx, s,
                   json_transform(s, '{_SAMPLE_LEAVES}') AS t
            FROM s
        ), u AS (
            SELECT file_idx, run_id, sample_idx, s, unnest(t) FROM tr
        )
        SELECT file_idx, run_id, sample_idx, json_type(s) AS s_type,
               key->>'$' AS key, task_id->>'$' AS task_id, TRY_CAST(seed AS BIGINT) AS seed,
               TRY_CAST(epoch AS BIGINT) AS epoch, episode_id->>'$' AS episode_id,
               status->>'$' AS status, scores, trace->>'$' AS trace,
               CASE WHEN len(json_keys(s)) > 0 AND json_merge_patch(s, '{_KNOWN_SAMPLE}') <> '{{}}'
                    THEN json_merge_patch(s, '{_KNOWN_SAMPLE}') END AS extra,
               CASE WHEN json_type(s) = 'OBJECT' THEN {_SAMPLE_CHECKS} END AS problems
        FROM u
        """
    )
    for file_idx, sample_idx, s_type, probs, key, task_id, seed in con.execute(
        """SELECT file_idx, sample_idx, s_type, problems, key, task_id, seed FROM _samp
           WHERE s_type <> 'OBJECT' OR len(problems) > 0
              OR key <> task_id || '#' || CAST(seed AS VARCHAR)
           ORDER BY file_idx, sample_idx LIMIT 1000"""
    ).fetchall():
        path = str(files[file_idx].path)
        bad.add(file_idx)
        where = f"samples[{sample_idx}]"
        if s_type != "OBJECT":
            problems.append(Problem(path, None, where, f"expected an object, got {s_type.lower()}"))
        elif probs:
            problems.extend(Problem(path, None, p["field"], p["error"]) for p in probs)
        else:
            problems.append(
                Problem(
                    path,
                    None,
                    f"{where}.key",
                    f"key {key!r} is not '<task_id>#<seed>' = {f'{task_id}#{seed}'!r}",
                )
            )
    con.register("_bad", pa.table({"file_idx": pa.array(sorted(bad), pa.int32())}))
    con.execute(
        """CREATE OR REPLACE TEMP TABLE _ok AS
           SELECT * EXCLUDE (problems, s_type) FROM _samp
           WHERE file_idx NOT IN (SELECT file_idx FROM _bad)"""
    )
    # repeated keys in one log are epochs, numbered in file order unless the log says
    repeated = con.execute(
        "SELECT count(*) FROM (SELECT file_idx, key FROM _ok GROUP BY ALL HAVING count(*) > 1)"
    ).fetchone()
    epoch = (
        "coalesce(epoch, row_number() OVER (PARTITION BY file_idx, key ORDER BY sample_idx))"
        if repeated and repeated[0]
        else "coalesce(epoch, 1)"
    )
    con.execute(f"CREATE OR REPLACE TEMP TABLE _ok AS SELECT * REPLACE ({epoch} AS epoch) FROM _ok")
    runs = con.sql(
        """
        SELECT file_idx, run_id->>'$' AS run_id,
               version->>'$' AS source_format,
               benchmark->>'$.id' AS benchmark_id,
               benchmark->>'$.version' AS benchmark_version,
               benchmark->>'$.digest' AS benchmark_digest,
               benchmark->>'$.split' AS split,
               CAST(json_extract(benchmark, '$.requires_privileged') AS BOOLEAN) AS requires_privileged,
               agent->>'$.name' AS agent_name,
               agent->>'$.version' AS agent_version,
               CAST(json_extract(agent, '$.components') AS VARCHAR) AS agent_components,
               CAST(results AS VARCHAR) AS results,
               coalesce(n.n, 0) AS n_samples,
               CASE WHEN extra <> '{}' THEN extra END AS extra
        FROM _top
        LEFT JOIN (SELECT file_idx, count(*) AS n FROM _ok GROUP BY file_idx) AS n USING (file_idx)
        WHERE file_idx NOT IN (SELECT file_idx FROM _bad)
        ORDER BY file_idx
        """
    ).to_arrow_table()
    samples = con.sql(
        """
        SELECT file_idx, run_id, key, task_id, seed, epoch,
               coalesce(episode_id, key || CASE WHEN epoch > 1 THEN '@' || CAST(epoch AS VARCHAR) ELSE '' END) AS episode_id,
               status, trace, sample_idx, extra
        FROM _ok ORDER BY file_idx, sample_idx
        """
    ).to_arrow_table()
    scores = con.sql(
        f"""
        WITH ent AS (
            SELECT file_idx, run_id, key, task_id, seed, epoch,
                   coalesce(episode_id, key || CASE WHEN epoch > 1 THEN '@' || CAST(epoch AS VARCHAR) ELSE '' END) AS episode_id,
                   unnest(map_entries(json_transform(scores, '"MAP(VARCHAR, JSON)"'))) AS me
            FROM _ok WHERE json_type(scores) = 'OBJECT'
        ), val AS (
            SELECT * EXCLUDE (me), me.key AS metric,
                   CASE WHEN json_type(me.value) = 'OBJECT' THEN json_extract(me.value, '$.value')
                        ELSE me.value END AS v,
                   CASE WHEN json_type(me.value) = 'OBJECT' THEN me.value->>'$.explanation' END AS explanation
            FROM ent
        )
        SELECT file_idx, run_id, key, task_id, seed, epoch, episode_id, metric,
               CASE WHEN json_type(v) = 'BOOLEAN' THEN CASE WHEN CAST(v AS BOOLEAN) THEN 1.0 ELSE 0.0 END
                    WHEN json_type(v) IN {_NUMERIC} THEN CAST(v AS DOUBLE) END AS value,
               coalesce(json_type(v) IN {_NUMERIC}, false) AS valid,
               CASE WHEN v IS NULL OR json_type(v) = 'NULL' THEN 'abstained'
                    WHEN json_type(v) NOT IN {_NUMERIC}
                    THEN 'non-numeric value: ' || left(CAST(v AS VARCHAR), 80) END AS skip_reason,
               explanation,
               'evallog' AS source,
               'imported' AS source_kind
        FROM val
        """
    ).to_arrow_table()
    con.unregister("_bad")
    for t in ("_top", "_samp", "_ok"):
        con.execute(f"DROP TABLE IF EXISTS {t}")
    return ParsedLogs(runs, samples, scores, problems, bad)


# -- traces -------------------------------------------------------------------------------


@dataclass(frozen=True)
class TraceRef:
    """A sample's trace as the log names it, resolved against the log's folder."""

    run_id: str
    key: str
    episode_id: str
    log_path: Path
    sample_idx: int
    rel: str
    file_idx: int = -1


def resolve_traces(refs: Sequence[TraceRef]) -> list[tuple[Path, Path] | str]:
    """Each trace's ``(path, run root)``, or why it is refused (it escapes the run folder).

    Paths are checked as strings, then the real path of each distinct folder is taken once;
    a trace file that is itself a symlink is checked when it is read (see ``read_files``).
    """
    real_dirs: dict[Path, Path] = {}

    def real(d: Path) -> Path:
        if d not in real_dirs:
            real_dirs[d] = Path(os.path.realpath(d))
        return real_dirs[d]

    out: list[tuple[Path, Path] | str] = []
    for ref in refs:
        rel = ref.rel
        if os.path.isabs(rel) or rel.startswith("~"):
            out.append(f"trace path {rel!r} is absolute; it must be relative to the run folder")
            continue
        root = real(ref.log_path.parent)
        norm = os.path.normpath(rel)
        folder = real(root / os.path.dirname(norm)) if os.path.dirname(norm) else root
        if norm == ".." or norm.startswith("../") or not folder.is_relative_to(root):
            out.append(f"trace path {rel!r} escapes the run folder {str(root)!r}")
            continue
        out.append((folder / os.path.basename(norm), root))
    return out


_EVENT_STRUCT = (
    '{"type":"JSON","t":"JSON","reward":"DOUBLE","terminated":"BOOLEAN","truncated":"BOOLEAN",'
    '"info":{"success":"BOOLEAN"},"latency_ms":"DOUBLE","reason":"VARCHAR","status":"VARCHAR",'
    '"grader":"VARCHAR","name":"VARCHAR","value":"DOUBLE","explanation":"VARCHAR"}'
)


_VALID_EVENT = (
    "e IS NOT NULL AND json_type(e.type) = 'VARCHAR' "
    "AND coalesce(json_type(e.t), 'NULL') IN ('BIGINT', 'UBIGINT', 'NULL')"
)


@dataclass
class ParsedTraces:
    events: pa.Table
    problems: list[Problem]
    trace_status: dict[int, str]  # ref index -> ok | partial | bad | missing | refused
    files: list[SourceFile]  # the trace files read (for ingested_files)


def parse_traces(
    con: duckdb.DuckDBPyConnection, refs: Sequence[TraceRef], *, threads: int = 4
) -> ParsedTraces:
    """Read every referenced trace file and parse all their lines in one query."""
    problems: list[Problem] = []
    status: dict[int, str] = {}
    resolved: list[tuple[int, Path, Path]] = []
    for i, (ref, res) in enumerate(zip(refs, resolve_traces(refs), strict=True)):
        if isinstance(res, str):
            status[i] = "refused"
            problems.append(
                Problem(str(ref.log_path), None, f"samples[{ref.sample_idx}].trace", res)
            )
        else:
            resolved.append((i, res[0], res[1]))
    files: list[SourceFile] = []
    chunks: list[bytes] = []
    owners: list[int] = []
    read = read_files(
        [t for _, t, _ in resolved], roots=[r for _, _, r in resolved], threads=threads
    )
    for (i, target, _), sf in zip(resolved, read, strict=True):
        ref = refs[i]
        if sf.refused:
            status[i] = "refused"
            problems.append(
                Problem(
                    str(ref.log_path),
                    None,
                    f"samples[{ref.sample_idx}].trace",
                    f"trace path {ref.rel!r} escapes the run folder: {sf.error}",
                )
            )
            continue
        if sf.error is not None:
            status[i] = "missing"
            problems.append(
                Problem(
                    str(ref.log_path),
                    None,
                    f"samples[{ref.sample_idx}].trace",
                    f"trace file {str(target)!r}: {sf.error}",
                )
            )
            continue
        pos = bad_utf8(sf.data)
        if pos is not None:
            status[i] = "bad"
            problems.append(Problem(str(target), pos[0], None, f"not UTF-8 (column {pos[1]})"))
            files.append(sf)
            continue
        files.append(sf)
        chunks.append(sf.data)
        owners.append(i)
    lines, file_index, line_number = split_lines(chunks)
    owners_arr = np.asarray(owners, dtype=np.int32)
    ref_idx = owners_arr[file_index] if len(owners) else np.zeros(0, np.int32)
    table = pa.table(
        {
            "pos": pa.array(np.arange(len(lines), dtype=np.int64)),
            "ref": pa.array(ref_idx),
            "idx": pa.array(line_number),
            "raw": lines,
        }
    )
    con.register("_lines", table)
    # One JSON parse per line; try() turns a malformed line into NULL instead of an error.
    # The raw text never goes through DuckDB: it is sliced from the Arrow array below.
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE _ev AS
        SELECT pos, ref, idx, e, coalesce({_VALID_EVENT}, false) AS valid
        FROM (SELECT pos, ref, idx, try(json_transform(raw, '{_EVENT_STRUCT}')) AS e FROM _lines)
        """
    )
    con.unregister("_lines")
    blank = pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(lines)), 0) if len(lines) else None
    last = dict(con.execute("SELECT ref, max(idx) FROM _ev GROUP BY ref").fetchall())
    for pos, ref_i, idx, ok, etype, ttype in con.execute(
        """SELECT pos, ref, idx, e IS NOT NULL, json_type(e.type), json_type(e.t) FROM _ev
           WHERE NOT valid ORDER BY ref, idx"""
    ).fetchall():
        if blank is not None and blank[pos].as_py():
            continue
        path = str(refs[ref_i].log_path.parent / refs[ref_i].rel)
        if not ok:
            truncated = idx == last[ref_i]
            why = (
                "truncated last line (kept the lines before it)"
                if truncated
                else "malformed JSON line"
            )
            problems.append(Problem(path, idx, None, why))
            status[ref_i] = "partial" if truncated and status.get(ref_i, "ok") == "ok" else "bad"
        elif etype is None:
            problems.append(Problem(path, idx, "type", "missing required field (expected string)"))
            status[ref_i] = "bad"
        else:
            fld, want = ("type", "string") if etype != "VARCHAR" else ("t", "integer")
            got = (etype if fld == "type" else ttype).lower()
            problems.append(Problem(path, idx, fld, f"expected {want}, got {got}"))
            status[ref_i] = "bad"
    typed = con.sql(
        """
        SELECT pos, idx,
               e.type->>'$' AS type, CAST(e.t AS BIGINT) AS t,
               e.reward AS reward, e.terminated AS terminated, e.truncated AS truncated,
               e.info.success AS success, e.latency_ms AS latency_ms,
               e.reason AS reason, e.status AS status, e.grader AS grader,
               e.name AS name, e.value AS value, e.explanation AS explanation
        FROM _ev
        WHERE valid
        """
    ).to_arrow_table()
    con.execute("DROP TABLE IF EXISTS _ev")
    pos = typed["pos"].combine_chunks()
    row_ref = pa.array(ref_idx).take(pos)
    events = typed.drop_columns(["pos"])
    per_ref = {
        "file_idx": pa.array([r.file_idx for r in refs], pa.int32()),
        "run_id": pa.array([r.run_id for r in refs], pa.string()),
        "key": pa.array([r.key for r in refs], pa.string()),
        "episode_id": pa.array([r.episode_id for r in refs], pa.string()),
    }
    for i, (col, values) in enumerate(per_ref.items()):
        events = events.add_column(i, col, values.take(row_ref))
    raw = pc.utf8_rtrim(lines, characters="\r\n") if len(lines) else pa.array([], pa.large_string())
    events = events.append_column("raw", raw.take(pos))
    for i in owners:
        status.setdefault(i, "ok")
    return ParsedTraces(events, problems, status, files)


# -- the reader: logs, then the traces they name ----------------------------------------


def parse(con: duckdb.DuckDBPyConnection, files: Sequence[SourceFile]) -> Parsed:
    """Parse EvalLogs, drop runs claimed twice, then read and parse their traces.

    Duplicates are dropped before the traces are read, so a rejected log's traces are never
    opened. Samples come back with ``trace_status`` and ``trace_path``.
    """
    parsed = parse_evallogs(con, files)
    paths = [str(f.path) for f in files]
    base, dup_problems = drop_duplicate_runs(
        Parsed(parsed.runs, parsed.samples, parsed.scores), paths
    )
    problems = [*parsed.problems, *dup_problems]
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
    traces = parse_traces(con, refs)
    problems.extend(traces.problems)
    status = np.full(samples.num_rows, "none", dtype=object)
    tpaths = np.full(samples.num_rows, None, dtype=object)
    positions = np.flatnonzero(has_trace.to_numpy(zero_copy_only=False))
    for j, ref in enumerate(refs):
        st = traces.trace_status.get(j, "ok")
        status[positions[j]] = st
        if st not in ("refused", "missing"):
            tpaths[positions[j]] = str(ref.log_path.parent / ref.rel)
    samples = samples.append_column("trace_status", pa.array(status, pa.string()))
    samples = samples.append_column("trace_path", pa.array(tpaths, pa.string()))
    samples = samples.drop_columns(["sample_idx", "trace"])
    partial = {refs[j].run_id for j, s in traces.trace_status.items() if s != "ok"}
    trace_run = {str(r.log_path.parent / r.rel): r.run_id for r in refs}
    side = [(sf, "trace", trace_run.get(str(sf.path)), TRACE_FORMAT) for sf in traces.files]
    return Parsed(base.runs, samples, base.scores, traces.events, problems, side, partial)


READER = Reader(FORMAT, sniff, parse)
