"""The checked path of the hylo reader: EvalLogs parsed in DuckDB, every problem named.

Clean logs take the fast path (:mod:`._hylo_fast`); the rest come here, where each problem
gets its file, field and (for the few rejected files) line. The JSON is parsed twice at most:
the document into a map of top-level members, and ``samples`` into one row per sample.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

import duckdb
import pyarrow as pa

from hylo_analytics._sql import query_sql
from hylo_analytics.ingest._common import json_problem, loads_deep
from hylo_analytics.ingest._files import SourceFile, bad_utf8
from hylo_analytics.ingest._locate import field_line
from hylo_analytics.ingest._reader import json_strings
from hylo_analytics.ingest._report import Problem
from hylo_analytics.ingest.formats.hylo._spec import (
    _KNOWN_SAMPLE,
    _NUMERIC,
    _RUN_STRINGS,
    _SAMPLE_CHECKS,
    _SAMPLE_LEAVES,
    _TOP_CHECKS,
    _TOP_KEYS,
    _V02_RUN,
    FORMAT,
    FORMAT_V02,
    SUPPORTED_VERSIONS,
    ParsedLogs,
)
from hylo_analytics.ingest.traces import lone_surrogate

__all__ = ["MAYBE_NON_FINITE", "parse_checked"]


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


# the rows of the good logs, from ``_top`` and ``_ok``: sql/queries/ingest_hylo_*.sql
_RUNS_SQL = query_sql("ingest_hylo_runs", v02_run=_V02_RUN)

_SAMPLES_SQL = query_sql("ingest_hylo_samples")

_SCORES_SQL = query_sql("ingest_hylo_scores", numeric=_NUMERIC)


def parse_checked(
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
    _check_top(con, files, problems, bad, walk)
    _check_samples(con, files, problems, bad)
    _number_epochs(con, files, problems, bad)
    runs = con.sql(_RUNS_SQL).to_arrow_table()
    samples = con.sql(_SAMPLES_SQL).to_arrow_table()
    scores = con.sql(_SCORES_SQL).to_arrow_table()
    con.unregister("_bad")
    for t in ("_top", "_samp", "_ok"):
        con.execute(f"DROP TABLE IF EXISTS {t}")
    return ParsedLogs(runs, samples, scores, _with_lines(problems, files), bad)


def _check_top(
    con: duckdb.DuckDBPyConnection,
    files: Sequence[SourceFile],
    problems: list[Problem],
    bad: set[int],
    walk: set[int] | None,
) -> None:
    """Parse each log's top level into ``_top`` and check its members; a log not UTF-8, not
    an object, of an unknown version or with a bad member is ``bad``."""
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


def _check_samples(
    con: duckdb.DuckDBPyConnection,
    files: Sequence[SourceFile],
    problems: list[Problem],
    bad: set[int],
) -> None:
    """One row per sample of the logs not ``bad`` (``_samp``), each checked; every bad sample
    of every log is a problem (no cap: a log is stored only if all of it passed)."""
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


def _number_epochs(
    con: duckdb.DuckDBPyConnection,
    files: Sequence[SourceFile],
    problems: list[Problem],
    bad: set[int],
) -> None:
    """The samples of the good logs (``_ok``), numbered by epoch; a key repeated in one epoch
    makes its log ``bad``."""
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
MAYBE_NON_FINITE = re.compile(rb"NaN|Infinity|[eE]\+?0*[1-9][0-9]{2}|[0-9]{300}")

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
