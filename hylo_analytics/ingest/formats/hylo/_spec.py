"""The hylo EvalLog as its reader sees it: versions, members, field checks and parsed rows.

The checks are SQL (:mod:`._sqlcheck`) run over a whole batch of documents at once, so a valid
batch costs no Python per sample; each names the field and what was expected.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from hylo_analytics.ingest._report import Problem
from hylo_analytics.ingest._sqlcheck import JSON_TYPE_NAMES, Check, compile_checks

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

_KNOWN_SAMPLE = "{" + ", ".join(f'"{k}": null' for k in _SAMPLE_KEYS) + "}"
_SAMPLE_LEAVES = "{" + ",".join(f'"{k}":"JSON"' for k in _SAMPLE_KEYS) + "}"
_NUMERIC = "('BOOLEAN', 'BIGINT', 'UBIGINT', 'DOUBLE')"


@dataclass
class ParsedLogs:
    """The rows read from a batch of EvalLogs, and what was rejected."""

    runs: pa.Table
    samples: pa.Table  # includes ``file_idx`` and ``trace`` (relative) for the trace step
    scores: pa.Table
    problems: list[Problem] = field(default_factory=list)
    bad_files: set[int] = field(default_factory=set)
