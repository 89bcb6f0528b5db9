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

import dataclasses
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hylo_analytics.ingest._common import json_problem, loads_deep
from hylo_analytics.ingest._files import SourceFile, bad_utf8
from hylo_analytics.ingest._locate import field_line
from hylo_analytics.ingest._reader import Parsed, Reader, drop_duplicate_runs, json_strings
from hylo_analytics.ingest._report import Problem
from hylo_analytics.ingest._sqlcheck import JSON_TYPE_NAMES, Check, compile_checks
from hylo_analytics.ingest.traces import (
    TRACE_FORMAT,
    TraceRef,
    iter_traces,
    lone_surrogate,
    parse_traces,
)

__all__ = [
    "FORMAT",
    "READER",
    "TRACE_FORMAT",
    "ParsedLogs",
    "iter_traces",
    "parse",
    "parse_evallogs",
    "parse_traces",
    "sniff",
]

FORMAT = "hylo.evallog/v0.1"
FORMAT_V02 = "hylo.evallog/v0.2"
SUPPORTED_VERSIONS = (FORMAT, FORMAT_V02)
_V02_RUN = "hylo.v02"  # the top-level member of a rewritten v0.2 log holding its run fields

_TOP_KEYS = ("version", "run_id", "parent_run_id", "benchmark", "agent", "results", "samples")
# a run's status and creation time (v0.2: ``status`` and ``eval.created``) are read from a v0.1
# log's top level when they are strings (the exporter writes them there); else they stay extra
_RUN_STRINGS = ("status", "created", "errors_policy")
_SAMPLE_KEYS = ("key", "task_id", "seed", "epoch", "episode_id", "status", "scores", "trace")

_TOP_CHECKS = compile_checks(
    [
        Check("version", "d.version", ("VARCHAR",)),
        Check("run_id", "d.run_id", ("VARCHAR",)),
        Check("parent_run_id", "d.parent_run_id", ("VARCHAR",), False),
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
        Check(
            "benchmark.episodes_per_task",
            "json_extract(d.benchmark, '$.episodes_per_task')",
            ("BIGINT", "UBIGINT"),
            False,
        ),
        Check(
            "benchmark.max_steps", "json_extract(d.benchmark, '$.max_steps')", ("OBJECT",), False
        ),
        Check("benchmark.upstream", "json_extract(d.benchmark, '$.upstream')", ("OBJECT",), False),
        Check("agent", "d.agent", ("OBJECT",)),
        Check("agent.name", "json_extract(d.agent, '$.name')", ("VARCHAR",)),
        Check("agent.version", "json_extract(d.agent, '$.version')", ("VARCHAR",), False),
        Check("results", "d.results", ("OBJECT",), False),
        Check("samples", "d.samples", ("ARRAY",)),
    ]
)


def _entries(obj: str) -> str:
    """The ``{key, value}`` members of JSON object ``obj`` (empty when it is no object)."""
    return (
        f"CASE WHEN json_type({obj}) = 'OBJECT' "
        f"THEN map_entries(json_transform({obj}, '\"MAP(VARCHAR, JSON)\"')) ELSE [] END"
    )


def _kind(t: str) -> str:
    """A ``json_type`` as a user says it (``integer``, not ``UBIGINT``); absent: ``nothing``."""
    whens = " ".join(f"WHEN '{k}' THEN '{v}'" for k, v in JSON_TYPE_NAMES.items())
    return f"(CASE coalesce({t}, 'nothing') {whens} ELSE lower(coalesce({t}, 'nothing')) END)"


def _problem(field: str, error: str) -> str:
    return f"{{'field': {field}, 'error': {error}}}"


# The v0.2 benchmark members' values (their types are in _TOP_CHECKS): a step limit and an
# episode count are positive, upstream names a repository and commit, an asset maps to a hash.
_B = "json_extract(d.benchmark, '$')"
_UP = f"json_extract({_B}, '$.upstream')"
_REPO_T, _COMMIT_T, _ASSETS_T = (
    _kind(f"json_type({_UP}, '$.{m}')") for m in ("repo", "commit", "assets")
)
_BENCH_V02_CHECKS = f"""list_concat(
    [CASE WHEN TRY_CAST(json_extract({_B}, '$.episodes_per_task') AS BIGINT) < 1
          THEN {_problem("'benchmark.episodes_per_task'", f"'expected an integer >= 1, got ' || CAST(json_extract({_B}, '$.episodes_per_task') AS VARCHAR)")} END,
     CASE WHEN json_type({_UP}) = 'OBJECT' AND coalesce(json_type({_UP}, '$.repo'), 'NULL') <> 'VARCHAR'
          THEN {_problem("'benchmark.upstream.repo'", f"'expected a string (the repository URL), got ' || {_REPO_T}")} END,
     CASE WHEN json_type({_UP}) = 'OBJECT' AND coalesce(json_type({_UP}, '$.commit'), 'NULL') <> 'VARCHAR'
          THEN {_problem("'benchmark.upstream.commit'", f"'expected a string (the commit hash), got ' || {_COMMIT_T}")} END,
     CASE WHEN json_type({_UP}) = 'OBJECT' AND json_type({_UP}, '$.assets') NOT IN ('OBJECT', 'NULL')
          THEN {_problem("'benchmark.upstream.assets'", f"'expected an object (asset name -> hash), got ' || {_ASSETS_T}")} END],
    list_transform({_entries(f"json_extract({_B}, '$.max_steps')")}, lambda e:
        CASE WHEN json_type(e.value) NOT IN ('BIGINT', 'UBIGINT')
                  OR TRY_CAST(e.value AS BIGINT) IS NULL OR TRY_CAST(e.value AS BIGINT) < 1
             THEN {_problem("'benchmark.max_steps.' || e.key", "'expected a positive integer (a step limit), got ' || CAST(e.value AS VARCHAR)")} END),
    list_transform({_entries(f"json_extract({_UP}, '$.assets')")}, lambda e:
        CASE WHEN json_type(e.value) <> 'VARCHAR'
             THEN {_problem("'benchmark.upstream.assets.' || e.key", "'expected a string (a hash), got ' || CAST(e.value AS VARCHAR)")} END))"""
# the errors convention an exported run keeps (hylo_analytics._harness): one of its names
_POLICY_CHECK = (
    "CASE WHEN d.top_errors_policy IS NOT NULL AND NOT (json_type(d.top_errors_policy) = "
    "'VARCHAR' AND d.top_errors_policy->>'$' IN ('failure', 'exclude')) THEN ["
    + _problem(
        "'errors_policy'",
        "'expected \"failure\" or \"exclude\" (the harness''s errors convention), got ' "
        "|| CAST(d.top_errors_policy AS VARCHAR)",
    )
    + "] ELSE [] END"
)
_TOP_CHECKS = (
    f"list_concat(list_concat({_TOP_CHECKS}, {_POLICY_CHECK}), "
    f"CASE WHEN json_type(d.benchmark) = 'OBJECT' THEN list_filter({_BENCH_V02_CHECKS}, "
    "lambda x: x IS NOT NULL) ELSE [] END)"
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


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
    seen: dict[str, object] = {}
    for k, v in pairs:
        if k in seen:
            raise _DuplicateKey(k)
        seen[k] = v
    return seen


def _json_problem(sf: SourceFile) -> Problem:
    """Why a file that DuckDB could not read as a JSON object is bad (the rare, slow path).

    Python's parser accepts what DuckDB refuses (lone surrogate escapes, which decode to no
    valid UTF-8; repeated keys), so those are looked for first and named.
    """
    path = str(sf.path)
    surrogate = lone_surrogate(sf.data)
    if surrogate is not None:
        return Problem(path, surrogate[0], None, surrogate[1])
    try:
        loads_deep(sf.data, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        return Problem(path, exc.lineno, None, f"malformed JSON: {exc.msg} (column {exc.colno})")
    except _DuplicateKey as exc:
        key = str(exc)
        return Problem(
            path, None, key, f"duplicate key {key!r} in one object (which one counts is unclear)"
        )
    except RecursionError:
        return Problem(path, None, None, "JSON nested too deeply")
    return json_problem(sf)  # the generic reasons: too deep, not an object, ...


_KNOWN_SAMPLE = "{" + ", ".join(f'"{k}": null' for k in _SAMPLE_KEYS) + "}"
_SAMPLE_LEAVES = "{" + ",".join(f'"{k}":"JSON"' for k in _SAMPLE_KEYS) + "}"
_NUMERIC = "('BOOLEAN', 'BIGINT', 'UBIGINT', 'DOUBLE')"


def parse_evallogs(con: duckdb.DuckDBPyConnection, files: Sequence[SourceFile]) -> ParsedLogs:
    """Parse and validate EvalLogs; a file with any problem is rejected whole.

    Clean logs take the fast path (``_hylo_fast``: pyarrow's JSON reader, one pass per batch);
    the rest take the checked DuckDB path, which reports each problem's file, line and field.
    """
    from hylo_analytics.ingest._hylo_fast import parse_fast  # pyarrow.json, pandas: on use

    files = _v02_as_v01(con, files)
    fast = parse_fast(files, FORMAT)
    slow = list(fast.slow)
    if fast.runs.num_rows and not slow:
        return ParsedLogs(fast.runs, fast.samples, _fast_scores(fast.scores))
    # the tree walk for repeated keys and non-finite numbers: only where either can be
    walk = {
        j
        for j, i in enumerate(slow)
        if i in fast.unparsed or _MAYBE_NON_FINITE.search(files[i].data) is not None
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
_V02_HINT = re.compile(rb'"version"\s*:\s*"hylo\.evallog/v0\.2"')

_V02_SQL = f"""
WITH d AS (
    SELECT i, try(CAST(raw AS JSON)) AS j FROM _v02
), d2 AS (
    SELECT * FROM d WHERE j->>'$.version' = '{FORMAT_V02}' AND json_type(j) = 'OBJECT'
), smp AS (
    SELECT i, unnest(l) AS s, generate_subscripts(l, 1) AS si
    FROM (SELECT i, try(from_json(j->'$.samples', '["JSON"]')) AS l FROM d2)
), ep AS (
    -- a sample without epochs stays one row, so the checks still see it
    SELECT i, si, s, unnest(e) AS sc, generate_subscripts(e, 1) AS ei
    FROM (SELECT *, CASE WHEN json_type(s->'$.epochs') = 'ARRAY'
                         AND json_array_length(s->'$.epochs') > 0
                    THEN from_json(s->'$.epochs', '["JSON"]') ELSE [NULL::JSON] END AS e
          FROM smp)
), body AS (
    SELECT i, si, ei, json_extract(s, '$.episodes[' || CAST(ei - 1 AS VARCHAR) || ']') AS m, s, sc
    FROM ep
), v01 AS (
    SELECT i, si, ei, s, json_merge_patch(
        CASE WHEN json_type(m->'$.extra') = 'OBJECT' THEN m->'$.extra' ELSE '{{}}' END,
        json_object('key', s->'$.key', 'task_id', s->'$.task_id', 'seed', s->'$.seed',
                    'epoch', coalesce(m->'$.epoch', to_json(ei)), 'episode_id', m->'$.episode_id',
                    'status', coalesce(m->'$.status', s->'$.status'), 'trace', m->'$.trace'))
               AS b,
           CASE WHEN json_type(sc) = 'OBJECT' THEN to_json(map_from_entries(
                        list_transform(map_entries(json_transform(sc, '"MAP(VARCHAR, JSON)"')),
                        lambda e: {{'key': e.key, 'value': CASE
                            WHEN m->'$.explanation'->>e.key IS NOT NULL
                              OR m->'$.skip_reason'->>e.key IS NOT NULL
                            THEN json_object('value', e.value,
                                             'explanation', m->'$.explanation'->>e.key,
                                             'skip_reason', m->'$.skip_reason'->>e.key)
                            ELSE e.value END}})))
                WHEN sc IS NOT NULL THEN sc END AS scores
    FROM body
), arr AS (
    -- scores are appended, not patched in: a patch drops the null members (abstentions)
    SELECT i, CAST('[' || string_agg(CASE
        WHEN json_type(s) <> 'OBJECT' THEN CAST(s AS VARCHAR)
        WHEN scores IS NULL THEN CAST(b AS VARCHAR)
        ELSE substr(CAST(b AS VARCHAR), 1, length(CAST(b AS VARCHAR)) - 1) || CASE WHEN CAST(b AS VARCHAR) = '{{}}' THEN '' ELSE ',' END
             || '"scores":' || CAST(scores AS VARCHAR) || '}}' END,
        ',' ORDER BY si, ei) || ']' AS JSON) AS a
    FROM v01 GROUP BY i
)
SELECT d2.i, CAST(to_json(map_from_entries(list_concat(
    -- the run's unmodelled members, then its fields (a patch would drop their nested nulls)
    list_filter(map_entries(json_transform(CASE WHEN json_type(j->'$.eval.extra') = 'OBJECT'
                THEN j->'$.eval.extra' ELSE '{{}}' END, '"MAP(VARCHAR, JSON)"')),
                lambda e: e.key NOT IN ('version', 'run_id', 'parent_run_id', 'benchmark',
                                        'agent', 'results', '{_V02_RUN}', 'samples')),
    list_filter(map_entries(json_transform(json_object(
        'version', j->'$.version', 'run_id', j->'$.eval.run_id',
        'parent_run_id', j->'$.eval.parent_run_id',
        'benchmark', j->'$.eval.benchmark', 'agent', j->'$.eval.agent',
        'results', j->'$.eval.results',
        '{_V02_RUN}', json_object('status', j->'$.status', 'created', j->'$.eval.created'),
        'errors_policy', j->'$.eval.errors_policy',
        'samples', CASE WHEN json_type(j->'$.samples') = 'ARRAY'
                        THEN coalesce(arr.a, '[]'::JSON) ELSE j->'$.samples' END),
        '"MAP(VARCHAR, JSON)"')), lambda e: coalesce(json_type(e.value), 'NULL') <> 'NULL')
))) AS VARCHAR) AS doc
FROM d2 LEFT JOIN arr USING (i)
"""


def _v02_as_v01(con: duckdb.DuckDBPyConnection, files: Sequence[SourceFile]) -> list[SourceFile]:
    """``files`` with each v0.2 log replaced by the v0.1 document it stands for.

    Only files whose bytes name the v0.2 version are parsed here (a regex, C speed, on the
    rest); one that is not JSON, or not v0.2 at its top level, is left as it is for the
    checks to name.
    """
    out = list(files)
    idx = [i for i, f in enumerate(files) if f.error is None and _V02_HINT.search(f.data)]
    if not idx:
        return out
    raws = [files[i].data.decode("utf-8", "replace") for i in idx]
    con.register("_v02", pa.table({"i": pa.array(idx, pa.int32()), "raw": raws}))
    try:
        rows = con.execute(_V02_SQL).fetchall()
    except duckdb.Error:
        rows = []  # left as written: the checked path names what is wrong
    finally:
        con.unregister("_v02")
    for i, doc in rows:
        if doc is not None:
            out[i] = dataclasses.replace(files[i], data=doc.encode())
    return out


def _fast_scores(rows: pa.Table) -> pa.Table:
    """The fast path's score rows with the columns the checked path also writes."""
    n = rows.num_rows
    return (
        rows.append_column("explanation", pa.nulls(n, pa.string()))
        .append_column("source", pa.repeat(pa.scalar("evallog"), n))
        .append_column("source_kind", pa.repeat(pa.scalar("imported"), n))
    )


def _parse_checked(
    con: duckdb.DuckDBPyConnection,
    files: Sequence[SourceFile],
    *,
    walk: set[int] | None = None,
) -> ParsedLogs:
    """Parse and validate EvalLogs in DuckDB, naming every problem; see parse_evallogs.

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
                   {", ".join(f"map_extract_value(m, '{k}') AS top_{k}" for k in _RUN_STRINGS)},
                   to_json(map_from_entries(list_filter(
                       map_entries(m), lambda e: e.key NOT IN ({", ".join(f"'{k}'" for k in _TOP_KEYS)})
                           AND NOT (e.key IN ({", ".join(f"'{k}'" for k in _RUN_STRINGS)})
                                    AND json_type(e.value) = 'VARCHAR')
                   ))) AS extra
            FROM parsed
        )
        SELECT d.*, CASE WHEN ok THEN {_TOP_CHECKS} END AS problems FROM d
        """
    )
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
    problems += _document_problems(con, files, bad, walk)
    con.unregister("_logs")
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
    # every bad sample of every log (no cap: a log is stored only if all of it passed)
    for file_idx, sample_idx, s_type, probs, key, task_id, seed in con.execute(
        f"""SELECT file_idx, sample_idx, s_type, problems, key, task_id, seed FROM _samp
           WHERE s_type <> 'OBJECT' OR len(problems) > 0
              OR (key <> task_id || '#' || CAST(seed AS VARCHAR)
                  AND file_idx NOT IN (SELECT file_idx FROM _top
                                       WHERE version->>'$' = '{FORMAT_V02}'))
           ORDER BY file_idx, sample_idx"""
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
    # one sample per key and epoch: a second would make the key ambiguous in every join
    dups = con.execute(
        """SELECT file_idx, key, epoch, list(sample_idx ORDER BY sample_idx) FROM _ok
           GROUP BY ALL HAVING count(*) > 1 ORDER BY file_idx, key, epoch"""
    ).fetchall()
    for file_idx, key, ep, idx in dups:
        bad.add(file_idx)
        problems.append(
            Problem(
                str(files[file_idx].path),
                None,
                f"samples[{idx[1]}].key",
                f"duplicate sample key {key!r} in epoch {ep} (also samples[{idx[0]}]); "
                "give each repeat its own epoch",
            )
        )
    if dups:
        con.register("_bad", pa.table({"file_idx": pa.array(sorted(bad), pa.int32())}))
        con.execute("DELETE FROM _ok WHERE file_idx IN (SELECT file_idx FROM _bad)")
    runs = con.sql(
        f"""
        SELECT file_idx, run_id->>'$' AS run_id,
               version->>'$' AS source_format,
               benchmark->>'$.id' AS benchmark_id,
               benchmark->>'$.version' AS benchmark_version,
               benchmark->>'$.digest' AS benchmark_digest,
               benchmark->>'$.split' AS split,
               CAST(json_extract(benchmark, '$.requires_privileged') AS BOOLEAN) AS requires_privileged,
               CAST(json_extract(benchmark, '$.episodes_per_task') AS BIGINT) AS episodes_per_task,
               CASE WHEN json_type(benchmark, '$.max_steps') = 'OBJECT'
                    THEN CAST(json_extract(benchmark, '$.max_steps') AS VARCHAR) END AS max_steps,
               CASE WHEN json_type(benchmark, '$.upstream') = 'OBJECT'
                    THEN CAST(json_extract(benchmark, '$.upstream') AS VARCHAR) END
                   AS benchmark_upstream,
               agent->>'$.name' AS agent_name,
               agent->>'$.version' AS agent_version,
               CAST(json_extract(agent, '$.components') AS VARCHAR) AS agent_components,
               parent_run_id->>'$' AS parent_run_id,
               CAST(results AS VARCHAR) AS results,
               coalesce(extra->>'$."{_V02_RUN}".status',
                        CASE WHEN json_type(top_status) = 'VARCHAR' THEN top_status->>'$' END)
                   AS status,
               coalesce(extra->>'$."{_V02_RUN}".created',
                        CASE WHEN json_type(top_created) = 'VARCHAR' THEN top_created->>'$' END)
                   AS created,
               CASE WHEN json_type(top_errors_policy) = 'VARCHAR'
                    THEN top_errors_policy->>'$' END AS errors_policy,
               coalesce(n.n, 0) AS n_samples,
               CASE WHEN json_merge_patch(extra, '{{"{_V02_RUN}": null}}') <> '{{}}'
                    THEN json_merge_patch(extra, '{{"{_V02_RUN}": null}}') END AS extra
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
        WITH smp AS (
            SELECT file_idx, sample_idx, run_id, key, task_id, seed, epoch, scores, status,
                   coalesce(episode_id, key || CASE WHEN epoch > 1 THEN '@' || CAST(epoch AS VARCHAR) ELSE '' END) AS episode_id
            FROM _ok WHERE json_type(scores) = 'OBJECT'
        ), ent AS (
            SELECT * EXCLUDE (scores),
                   unnest(map_entries(json_transform(scores, '"MAP(VARCHAR, JSON)"'))) AS me
            FROM smp
        ), val AS (
            SELECT * EXCLUDE (me), me.key AS metric,
                   CASE WHEN json_type(me.value) = 'OBJECT' THEN json_extract(me.value, '$.value')
                        ELSE me.value END AS v,
                   CASE WHEN json_type(me.value) = 'OBJECT' THEN me.value->>'$.explanation' END AS explanation,
                   CASE WHEN json_type(me.value) = 'OBJECT' THEN me.value->>'$.skip_reason' END AS given_reason
            FROM ent
        ), unreported AS (
            -- a metric some sample of the log reports is an abstention where another omits it
            SELECT s.* EXCLUDE (scores), m.metric, NULL::JSON AS v, NULL AS explanation,
                   NULL AS given_reason
            FROM smp AS s
            JOIN (SELECT DISTINCT file_idx, metric FROM val) AS m USING (file_idx)
            ANTI JOIN val AS x
                ON x.file_idx = s.file_idx AND x.sample_idx = s.sample_idx AND x.metric = m.metric
        ), allv AS (
            SELECT * FROM val UNION ALL BY NAME SELECT * FROM unreported
        )
        SELECT file_idx, run_id, key, task_id, seed, epoch, episode_id, metric,
               CASE WHEN json_type(v) = 'BOOLEAN' THEN CASE WHEN CAST(v AS BOOLEAN) THEN 1.0 ELSE 0.0 END
                    WHEN json_type(v) IN {_NUMERIC} THEN CAST(v AS DOUBLE) END AS value,
               coalesce(json_type(v) IN {_NUMERIC}, false) AS valid,
               -- an abstention's reason as the log gives it ({{value, skip_reason}}: how the
               -- exporter keeps one), else the reader's: errored, abstained, non-numeric
               CASE WHEN json_type(v) IN {_NUMERIC} THEN NULL
                    WHEN given_reason IS NOT NULL THEN given_reason
                    WHEN (v IS NULL OR json_type(v) = 'NULL') AND status = 'error'
                    THEN 'episode errored'
                    WHEN v IS NULL OR json_type(v) = 'NULL' THEN 'abstained'
                    ELSE 'non-numeric value: ' || left(CAST(v AS VARCHAR), 80) END AS skip_reason,
               explanation,
               'evallog' AS source,
               'imported' AS source_kind
        FROM allv
        """
    ).to_arrow_table()
    con.unregister("_bad")
    for t in ("_top", "_samp", "_ok"):
        con.execute(f"DROP TABLE IF EXISTS {t}")
    return ParsedLogs(runs, samples, scores, _with_lines(problems, files), bad)


def _document_problems(
    con: duckdb.DuckDBPyConnection,
    files: Sequence[SourceFile],
    bad: set[int],
    walk: set[int] | None,
) -> list[Problem]:
    """Repeated keys and non-finite numbers anywhere in the parsed logs not yet bad.

    A repeated key would keep one value silently; ``NaN``, ``Infinity`` and ``1e999`` are no
    JSON numbers and would make every mean over them non-finite. Only the checked path gets
    here, and only for the files in ``walk`` (all when ``None``): those pyarrow could not
    parse, or whose text may hold a non-finite number, so a clean batch walks no tree. Adds
    the files to ``bad``.

    Python's parser with hooks, not DuckDB's ``json_tree`` (quadratic in a document's size:
    20 s for one log of 3,000 samples); the depth was bounded before any parser saw the bytes.
    """
    parsed = {r[0] for r in con.execute("SELECT file_idx FROM _top WHERE ok").fetchall()}
    todo = sorted(i for i in parsed if i not in bad and (walk is None or i in walk))
    out = []
    for i in todo:
        found = _tree_problems(files[i].data)
        if found:
            bad.add(i)
            out += [Problem(str(files[i].path), None, fld, error) for fld, error in found]
    return out


class _Pairs(list[tuple[str, object]]):
    """An object's members in order, repeats kept (``object_pairs_hook``)."""


class _NonFinite(str):
    """The text of a number that is no JSON number: ``NaN``, ``Infinity``, ``1e999``."""


def _finite_or_marked(text: str) -> object:
    value = float(text)
    return value if value - value == 0 else _NonFinite(text)


def _tree_problems(data: bytes) -> list[tuple[str, str]]:
    """``(field, error)`` of each repeated key and non-finite number, in document order."""
    try:
        doc = loads_deep(
            data, object_pairs_hook=_Pairs, parse_constant=_NonFinite, parse_float=_finite_or_marked
        )
    except ValueError:
        return []  # DuckDB parsed it: what Python refuses here is reported by the caller's checks
    found: list[tuple[str, str]] = []
    stack: list[tuple[str, object]] = [("", doc)]
    while stack:  # iterative: no recursion on input structure
        path, node = stack.pop()
        if isinstance(node, _Pairs):
            seen: set[str] = set()
            children = []
            for key, value in node:
                where = f"{path}.{key}" if path else key
                if key in seen:
                    found.append(
                        (
                            where,
                            f"duplicate key {key!r} in one object (which one counts is unclear)",
                        )
                    )
                seen.add(key)
                children.append((where, value))
            stack.extend(reversed(children))
        elif isinstance(node, list):
            stack.extend(reversed([(f"{path}[{i}]", v) for i, v in enumerate(node)]))
        elif isinstance(node, _NonFinite):
            found.append(
                (
                    path,
                    f"non-finite number {node}: JSON numbers are finite; "
                    "write null to abstain or a finite value",
                )
            )
    return found


# Text without these holds no non-finite number: NaN, Infinity, an exponent of 3 digits or a
# number of 300 digits (beyond a double's range: 1e999 reads as Infinity).
_MAYBE_NON_FINITE = re.compile(rb"NaN|Infinity|[eE]\+?0*[1-9][0-9]{2}|[0-9]{300}")

_LINES_PER_FILE = 20  # locating a field scans the file's text: bound the cost per bad file


def _with_lines(problems: list[Problem], files: Sequence[SourceFile]) -> list[Problem]:
    """Field problems get the line their field (or its closest parent) is on."""
    data = {str(f.path): f.data for f in files}
    done: dict[str, int] = {}
    out = []
    for p in problems:
        if p.line is None and p.field and p.path in data and done.get(p.path, 0) < _LINES_PER_FILE:
            done[p.path] = done.get(p.path, 0) + 1
            p = Problem(p.path, field_line(data[p.path], p.field), p.field, p.error)
        out.append(p)
    return out


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


def _version_of(head: bytes) -> str:
    """``hylo.evallog/v0.2`` when a file's first bytes name it, else v0.1."""
    return FORMAT_V02 if _V02_HINT.search(head) else FORMAT


READER = Reader(FORMAT, sniff, parse, _version_of)
