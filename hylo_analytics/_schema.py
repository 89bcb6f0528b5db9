"""Arrow schemas of the store's tables, declared once.

Every writer builds its tables through :func:`conform`, so a column's name and type are
decided here and nowhere else. ``batch_seq`` ties each row to the commit that wrote it; the
store uses it to decide which rows a later commit superseded (see ``store.py``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import pyarrow as pa

from hylo_analytics.errors import InputError

__all__ = ["SCHEMAS", "TABLES", "conform", "duckdb_columns", "empty"]

_str = pa.string()
_i64 = pa.int64()
_f64 = pa.float64()
_bool = pa.bool_()
_ts = pa.timestamp("us", tz="UTC")

RUNS = pa.schema(
    [
        ("run_id", _str),
        ("source_format", _str),  # hylo.evallog/v0.1, inspect.eval, vla-eval, ...
        ("source_path", _str),
        ("source_sha256", _str),
        ("benchmark_id", _str),
        ("benchmark_version", _str),
        ("benchmark_digest", _str),
        ("split", _str),
        ("requires_privileged", _bool),
        ("episodes_per_task", _i64),  # hylo v0.2 benchmark: episodes (epochs) per task and seed
        ("max_steps", _str),  # JSON: per-task step-limit overrides, {task_id: int}
        ("benchmark_upstream", _str),  # JSON: {repo, commit, assets: {name: hash}}
        ("agent_name", _str),
        ("agent_version", _str),
        ("agent_components", _str),  # JSON
        ("parent_run_id", _str),  # the run this one is compared with (int_comparisons)
        ("results", _str),  # JSON: the run's own summary, as written
        ("status", _str),
        ("created", _str),
        # the harness's errors convention (failure | exclude: hylo_analytics._harness), from
        # the log (an exported run keeps its harness's) or its source_format's at ingest
        ("errors_policy", _str),
        ("n_samples", _i64),
        ("extra", _str),  # JSON: top-level fields we do not model
        ("ingested_at", _ts),
        ("batch_seq", _i64),
    ]
)

SAMPLES = pa.schema(
    [
        ("run_id", _str),
        ("key", _str),  # "<task_id>#<seed>": the pairing key across runs
        ("task_id", _str),
        ("seed", _i64),
        ("epoch", _i64),
        ("episode_id", _str),
        ("status", _str),
        ("trace_path", _str),  # resolved path of the trace, null when none or refused
        ("trace_status", _str),  # ok | none | missing | refused | partial | bad
        ("extra", _str),  # JSON: sample fields we do not model
        ("batch_seq", _i64),
    ]
)

EVENTS = pa.schema(
    [
        ("run_id", _str),
        ("key", _str),
        ("episode_id", _str),
        ("idx", _i64),  # 1-based line number in the trace file
        ("type", _str),
        ("t", _i64),
        ("reward", _f64),
        ("terminated", _bool),
        ("truncated", _bool),
        ("success", _bool),  # step: info.success
        ("latency_ms", _f64),
        ("reason", _str),  # intervention / end
        ("status", _str),  # end
        ("grader", _str),  # grade
        ("name", _str),  # grade
        ("value", _f64),  # grade (null = abstain)
        ("explanation", _str),  # grade
        # the event line as written, for a grade event only (a trace's grade line, read by
        # the grades scorer in SQL; a grader's event, which no file holds); null for every
        # other line, which ``trace_files`` holds once with its file (an older store holds
        # every line here): read lines through ``hylo_analytics._traces``
        ("raw", _str),
        ("batch_seq", _i64),
    ]
)

# Each trace file read at ingest, its bytes kept once (one zstd frame per file, so a merge of
# batches moves compressed bytes): an event's line is line ``idx`` of the file of its sample's
# ``trace_path``, so every raw line is recoverable and an export writes the lines back byte for
# byte (``hylo_analytics._traces``).
TRACE_FILES = pa.schema(
    [
        ("run_id", _str),
        ("path", _str),  # the trace's resolved path: samples.trace_path of its samples
        ("sha256", _str),
        ("size", _i64),  # bytes (uncompressed)
        ("n_lines", _i64),
        ("data", pa.binary()),  # the file's bytes (UTF-8 text), one zstd frame
        ("batch_seq", _i64),
    ]
)

SCORES = pa.schema(
    [
        ("run_id", _str),
        ("key", _str),
        ("task_id", _str),
        ("seed", _i64),
        ("epoch", _i64),
        ("episode_id", _str),
        ("metric", _str),
        ("value", _f64),  # null = abstain
        ("valid", _bool),
        ("skip_reason", _str),
        ("explanation", _str),
        ("source", _str),  # evallog | scorer:<name> | grade:<grader> | derive:<name> | ...
        ("source_kind", _str),  # score | derived | observation | imported (precedence order)
        ("scorer_version", _str),
        ("metadata", _str),  # JSON
        # WorldFoundry MetricResult fields (null for every other writer): see scoring/metric.py
        ("raw_value", _str),  # JSON, as written (may be non-numeric; ``value`` is the number)
        ("normalized_value", _f64),
        ("coverage", _f64),
        ("components", _str),  # JSON object
        ("diagnostics", _str),  # JSON object
        ("artifact_refs", _str),  # JSON object: name -> ArtifactRef
        ("judge_trace", _str),  # JSON object
        ("batch_seq", _i64),
    ]
)

QUARANTINE = pa.schema(
    [
        ("path", _str),
        ("line", _i64),
        ("field", _str),
        ("error", _str),
        ("sha256", _str),
        ("ingested_at", _ts),
        ("batch_seq", _i64),
    ]
)

INGESTED_FILES = pa.schema(
    [
        ("path", _str),
        ("sha256", _str),
        ("size", _i64),
        ("mtime_ns", _i64),
        ("format", _str),
        ("role", _str),  # log | trace
        ("run_id", _str),
        (
            "outcome",
            _str,
        ),  # ingested | quarantined | partial | companion (rows of another file's run)
        ("ingested_at", _ts),
        ("batch_seq", _i64),
    ]
)

POLICY_RESULTS = pa.schema(
    [
        ("run_id", _str),
        ("key", _str),  # null for a run-level policy
        ("policy", _str),
        ("metric", _str),
        ("observed", _str),  # JSON
        ("requirement", _str),
        ("passed", _bool),  # null: not checked (the metric abstained or is missing)
        ("explanation", _str),
        ("role", _str),  # constraint (a failure changes the run's final status) | diagnostic
        ("batch_seq", _i64),
    ]
)

# The one score resolution (sql/int_scores_resolution.sql) materialized at publish: a commit
# that adds or supersedes a run's scores or samples writes that run's resolved rows again (with
# a run tombstone for the old ones), so readers scan one row per episode and metric instead of
# re-ranking every candidate score at every query. Columns are the view's, in its order.
RESOLVED_SCORES = pa.schema(
    [
        ("run_id", _str),
        ("key", _str),
        ("task_id", _str),
        ("seed", _i64),
        ("epoch", _i64),
        ("episode_id", _str),
        ("metric", _str),
        ("value", _f64),  # null unless valid
        ("valid", _bool),
        ("skip_reason", _str),  # set for every abstention
        ("errored", _bool),  # an abstention of an episode whose sample status is 'error'
        ("explanation", _str),
        ("source", _str),
        ("source_kind", _str),
        ("scorer_version", _str),
        ("metadata", _str),
        ("n_sources", _i64),
        ("n_abstained", _i64),
        ("ambiguous", _bool),
        ("n_key_epochs", _i64),  # epochs of the key with a score of the metric
        ("batch_seq", _i64),
    ]
)

# Comparisons a user declared (Store.declare_parent): run_id is compared with parent_run_id.
# With runs.parent_run_id they are the only pairs int_paired / mart_compare hold.
COMPARISONS = pa.schema(
    [
        ("run_id", _str),  # the candidate
        ("parent_run_id", _str),
        ("declared_at", _ts),
        ("batch_seq", _i64),
    ]
)

# A commit may supersede earlier rows of a table for one run (and, for scores, one source).
TOMBSTONES = pa.schema(
    [
        ("table_name", _str),
        ("run_id", _str),
        ("source", _str),  # null: every row of the run in that table
        ("batch_seq", _i64),
    ]
)

SCHEMAS: Mapping[str, pa.Schema] = {
    "runs": RUNS,
    "samples": SAMPLES,
    "events": EVENTS,
    "trace_files": TRACE_FILES,
    "scores": SCORES,
    "quarantine": QUARANTINE,
    "ingested_files": INGESTED_FILES,
    "policy_results": POLICY_RESULTS,
    "comparisons": COMPARISONS,
    "resolved_scores": RESOLVED_SCORES,
    "tombstones": TOMBSTONES,
}
TABLES: tuple[str, ...] = tuple(SCHEMAS)


def conform(table: pa.Table, name: str) -> pa.Table:
    """Return ``table`` with exactly the columns of schema ``name``, in order, cast to type.

    Missing columns are filled with nulls; extra columns are an error, since a silently
    dropped column is a lost field.
    """
    schema = SCHEMAS[name]
    extra = set(table.column_names) - set(schema.names)
    if extra:
        raise InputError(
            f"table {name!r} has columns not in its schema: {sorted(extra)}; drop them, or "
            f"add them to the {name!r} schema in hylo_analytics/_schema.py"
        )
    cols = [
        table.column(f.name).cast(f.type)
        if f.name in table.column_names
        else pa.nulls(table.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(cols, schema=schema)


def empty(name: str) -> pa.Table:
    """An empty table of schema ``name`` (``Schema.empty_table`` imports pandas when it is
    installed: 0.3 s in a fresh process that only opens a new store)."""
    return pa.Table.from_batches([], SCHEMAS[name])


_DUCKDB_TYPES = {
    _str: "VARCHAR",
    _i64: "BIGINT",
    _f64: "DOUBLE",
    _bool: "BOOLEAN",
    _ts: "TIMESTAMPTZ",
    pa.binary(): "BLOB",
}


def duckdb_columns(name: str, present: Collection[str] | None = None) -> str:
    """Table ``name``'s columns as a DuckDB select list, each cast to its declared type; a
    column not in ``present`` (a file of an older schema; ``set()``: none) is a typed NULL."""
    return ", ".join(
        f'CAST("{f.name}" AS {_DUCKDB_TYPES[f.type]}) AS "{f.name}"'
        if present is None or f.name in present
        else f'CAST(NULL AS {_DUCKDB_TYPES[f.type]}) AS "{f.name}"'
        for f in SCHEMAS[name]
    )
