"""SQL views kept as ``.sql`` files, one view per file, file name = view name; their macros.

Layers follow dbt: ``stg_`` (one table, current rows, typed), ``int_`` (joins and per-episode
reductions), ``mart_`` (answers). Views are created in layer order; within a layer a view that
names another is retried after it, so files need no ordering convention of their own.

Expressions several views share are DuckDB macros created before the views (and written into
``views.sql`` for the shell), so each is defined once: the score precedence rank, the validity
of a score, and the Wilson bounds, whose ``z`` comes from :mod:`hylo_analytics.stats`.

:func:`view_query` reads any view as if some relation it depends on held other rows (a dry run's
pending scores, a policy evaluation not committed yet): the views between are inlined as CTEs,
so the answer comes from the same SQL, not from a copy of it.

:func:`factor_sql` is the one rule reading a sample's factor (``workload.size``), shared by
``post_derive``'s ``match_on`` and the declarative scorers' ``factors.`` paths.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path

import duckdb

from hylo_analytics._resources import resource_dir
from hylo_analytics.errors import ConfigError
from hylo_analytics.stats.closed_form import DEFAULT_LEVEL, z_value

__all__ = [
    "MATERIALIZED",
    "PREFERRED_VIEW",
    "RULE_VIEW",
    "SAMPLE_FACTORS",
    "connect",
    "duckdb_memory_limit",
    "duckdb_temp_directory",
    "duckdb_threads",
    "factor_sql",
    "inline_table_macros",
    "load_views",
    "macro_definitions",
    "macro_sql",
    "query_sql",
    "scores_overlay",
    "sql_dir",
    "table_macro_sql",
    "view_names",
    "view_query",
    "view_references",
    "view_sql",
]

_LAYERS = ("stg_", "int_", "mart_")


def sql_dir() -> Path:
    """Where the ``.sql`` files are: inside the wheel, or the repo's ``sql/`` when editable."""
    return resource_dir("sql")


def query_sql(name: str, **fields: str) -> str:
    """The text of query ``name``: the file ``sql/queries/<name>.sql``, named after the module
    that runs it (``serve_runs``: :mod:`hylo_analytics.serve`).

    The SQL a module runs lives beside the views, as SQL a reader can lint, diff and try in the
    shell. Values reach it as DuckDB parameters (``$run``); the few parts that are SQL text (a
    column list, a view name) are ``{fields}`` its header names, filled from ``fields``
    (``str.format``: a literal brace, in the SQL or its comments, is written twice).
    """
    return _sql_text("queries", name).format(**fields)


@cache
def _sql_text(folder: str, name: str) -> str:
    path = sql_dir() / folder / f"{name}.sql"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in path.parent.glob("*.sql")))
        raise KeyError(f"no {name!r} in {path.parent}; known: {known}")
    return path.read_text().strip().rstrip(";")


@cache
def view_names() -> tuple[str, ...]:
    """Every view name, in layer order."""
    names = sorted(p.stem for p in sql_dir().glob("*.sql"))

    def layer(name: str) -> int:
        return next((i for i, p in enumerate(_LAYERS) if name.startswith(p)), len(_LAYERS))

    return tuple(sorted(names, key=lambda n: (layer(n), n)))


@cache
def view_order() -> tuple[str, ...]:
    """Every view name, each after the views it reads (layer order within that), so creating
    them in this order binds each once: a view created before one it reads fails to bind
    and is retried, and a failed bind costs as much as a good one (opening a store: 0.26 s,
    three quarters of it in those retries)."""
    names = view_names()
    # what each view reads, comments left out (a comment naming a later view made a cycle)
    reads = {n: view_references(n) & set(names) for n in names}
    done: list[str] = []
    placed: set[str] = set()

    def place(name: str, seen: tuple[str, ...] = ()) -> None:
        if name in placed or name in seen:  # a cycle: left to the retries to report
            return
        for dep in sorted(reads[name], key=names.index):
            place(dep, (*seen, name))
        placed.add(name)
        done.append(name)

    for name in names:
        place(name)
    return tuple(done)


@cache
def view_sql(name: str) -> str:
    """The SELECT body of view ``name`` (its ``.sql`` file without a trailing semicolon)."""
    path = sql_dir() / f"{name}.sql"
    if not path.is_file():
        raise KeyError(f"no view {name!r}; known views: {', '.join(view_names())}")
    return path.read_text().strip().rstrip(";")


def macro_definitions() -> dict[str, tuple[tuple[str, ...], str]]:
    """The shared macros as ``name -> (parameters, DuckDB body)``: the one source of each.

    DuckDB gets them as ``CREATE MACRO`` (:func:`macro_sql`); engines without macros (Spark,
    :mod:`hylo_analytics.spark`) inline the same bodies into each view when they transpile it.
    """
    z = z_value(DEFAULT_LEVEL)
    from hylo_analytics._harness import errors_sql, success_fallback_sql
    from hylo_analytics.metrics import BUILTIN_METRICS  # the registry: the one source of kinds

    kinds = " ".join(
        f"WHEN {_literal(name)} THEN {_literal(spec.kind)}"
        for spec in BUILTIN_METRICS
        for name in (spec.id, *spec.aliases)
    )
    return {
        "ci_level": ((), f"CAST({DEFAULT_LEVEL!r} AS DOUBLE)"),
        # a built-in metric's declared kind (binary, count, continuous); null for the others,
        # whose kind their values tell (aggregate's rule: a group is binary when its metric is
        # declared binary or undeclared, and every valid value of the group is 0 or 1)
        "declared_kind": (("metric",), f"CASE metric {kinds} END"),
        "ci_z": ((), f"CAST({z!r} AS DOUBLE)"),
        # the errors policy of a run's harness (hylo_analytics._harness: vla-eval counts an
        # errored episode as a failure, the other formats leave it out), as stored at ingest
        "run_errors": (
            ("errors_policy", "source_format"),
            errors_sql("errors_policy", "source_format"),
        ),
        # the metric a run's harness names its success by when it has no 'success'
        # (hylo_analytics._harness.SUCCESS_FALLBACK: inspect-robots' success_at_end)
        "success_fallback": (("source_format",), success_fallback_sql("source_format")),
        # a score counts when it is a real number not flagged invalid (NaN is an abstention)
        "score_is_valid": (
            ("value", "valid"),
            "coalesce(value IS NOT NULL AND NOT isnan(value) AND coalesce(valid, true), false)",
        ),
        # the precedence of a score source (lower wins): values and abstentions rank apart
        "score_rank": (
            ("is_valid", "source_kind"),
            "CASE WHEN is_valid THEN "
            "CASE source_kind WHEN 'score' THEN 1 WHEN 'derived' THEN 2 WHEN 'observation' THEN 3 "
            "WHEN 'imported' THEN 4 ELSE 5 END ELSE "
            "CASE source_kind WHEN 'imported' THEN 11 WHEN 'observation' THEN 12 "
            "WHEN 'derived' THEN 13 WHEN 'score' THEN 14 ELSE 15 END END",
        ),
        # Wilson score bounds, exactly 0 / 1 at the boundaries and clipped to [0, 1]: the
        # exact bounds are written out, so no engine's rounding of the formula shows there
        "wilson_low": (
            ("k", "n", "z"),
            "CASE WHEN n > 0 THEN "
            "CASE WHEN k <= 0 THEN 0.0 ELSE greatest(0.0, least(1.0, "
            "(k / n + z * z / (2 * n) - z * sqrt((k / n) * (1 - k / n) / n + z * z / (4.0 * n * n)))"
            " / (1 + z * z / n))) END END",
        ),
        "wilson_high": (
            ("k", "n", "z"),
            "CASE WHEN n > 0 THEN "
            "CASE WHEN k >= n THEN 1.0 ELSE greatest(0.0, least(1.0, "
            "(k / n + z * z / (2 * n) + z * sqrt((k / n) * (1 - k / n) / n + z * z / (4.0 * n * n)))"
            " / (1 + z * z / n))) END END",
        ),
    }


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _current_rows(rows: str, table: str) -> str:
    """The body of ``sql/macros/current_rows.sql`` on one line, without its comments (inlined
    into a view, it leaves the view's line numbers as they are)."""
    lines = _sql_text("macros", "current_rows").splitlines()
    body = " ".join(line.strip() for line in lines if not line.lstrip().startswith("--"))
    return body.format(rows=rows, table=table)


_CURRENT_CALL = re.compile(r"\bcurrent_rows\(\s*'([a-z_]+)'\s*\)")


def table_macro_sql() -> list[str]:
    """``CREATE MACRO ... AS TABLE`` statements: ``current_rows('<table>')``, the rows of
    ``raw_<table>`` no run-wide tombstone superseded (the ``stg_`` views' one filter)."""
    body = _current_rows(rows="query_table('raw_' || tbl)", table="tbl")
    return [f"CREATE OR REPLACE MACRO current_rows(tbl) AS TABLE {body}"]


def inline_table_macros(sql: str) -> str:
    """``sql`` with each ``current_rows('<table>')`` replaced by its body as a subquery, for
    engines without table macros (Spark): the same text DuckDB's macro runs."""

    def expand(m: re.Match[str]) -> str:
        return "(" + _current_rows(rows=f"raw_{m[1]}", table=_literal(m[1])) + ")"

    return _CURRENT_CALL.sub(expand, sql)


def macro_sql() -> list[str]:
    """``CREATE MACRO`` statements for the expressions and the tombstone filter views share."""
    return [
        f"CREATE OR REPLACE MACRO {name}({', '.join(params)}) AS {body}"
        for name, (params, body) in macro_definitions().items()
    ] + table_macro_sql()


def duckdb_threads() -> int:
    """DuckDB's thread count: ``HYLO_ANALYTICS_THREADS`` when set, else every core."""
    env = os.environ.get("HYLO_ANALYTICS_THREADS", "").strip()
    if env:
        if not env.isdigit() or int(env) < 1:
            raise ConfigError("", f"HYLO_ANALYTICS_THREADS must be a positive integer, got {env!r}")
        return int(env)
    return os.cpu_count() or 1


def duckdb_memory_limit() -> str:
    """DuckDB's memory limit: ``HYLO_ANALYTICS_MEMORY_LIMIT`` (``4GB``, ``512MB``) when set,
    else half the machine's memory, so no query of a large store exhausts the machine (DuckDB's
    own default is 80 %); past it DuckDB spills to :func:`duckdb_temp_directory`."""
    env = os.environ.get("HYLO_ANALYTICS_MEMORY_LIMIT", "").strip()
    if env:
        if not re.fullmatch(r"\d+(\.\d+)?\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)", env, re.IGNORECASE):
            raise ConfigError(
                "", f"HYLO_ANALYTICS_MEMORY_LIMIT must be a size such as 4GB or 512MB, got {env!r}"
            )
        return env
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return "4GB"
    return f"{max(total // 2 // 2**20, 256)}MB"


def duckdb_temp_directory() -> str:
    """Where a connection spills past its memory limit: a folder of this process in the
    system's temp folder (DuckDB makes it when it first spills and removes it at close)."""
    import tempfile

    return os.path.join(tempfile.gettempdir(), f"hylo-analytics-duckdb-{os.getpid()}")


def connect(threads: int | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the shared macros (and ``threads`` threads)."""
    con = duckdb.connect(":memory:")
    con.execute(f"SET threads TO {threads or duckdb_threads()}")
    for stmt in macro_sql():
        con.execute(stmt)
    return con


def load_views(con: duckdb.DuckDBPyConnection, prelude: list[str] | None = None) -> list[str]:
    """Create the macros and every view on ``con``; return the statements in a working order."""
    done = list(macro_sql())
    for stmt in [*done, *(prelude or [])]:
        con.execute(stmt)
    pending = list(view_order())
    while pending:
        failed: list[str] = []
        errors: dict[str, str] = {}
        for name in pending:
            stmt = f"CREATE OR REPLACE VIEW {name} AS\n{view_sql(name)}"
            try:
                con.execute(stmt)
            except duckdb.CatalogException as exc:
                failed.append(name)
                errors[name] = str(exc)
            else:
                done.append(stmt)
        if len(failed) == len(pending):
            detail = "; ".join(f"{n}: {e}" for n, e in errors.items())
            raise RuntimeError(f"views that cannot be created: {detail}")
        pending = failed
    return done


@cache
def view_references(name: str) -> frozenset[str]:
    """The views and ``raw_*``/``metric_specs`` relations that view ``name`` names."""
    body = re.sub(r"--[^\n]*", "", view_sql(name))
    words = set(re.findall(r"\b[a-z_][a-z0-9_]*\b", body))
    return frozenset(w for w in words if w in view_names() and w != name)


# The one score resolution: the view every reader reads, and the rule it is materialized from
PREFERRED_VIEW = "int_scores_preferred"
RULE_VIEW = "int_scores_resolution"
# Views that read a table the store materializes from another view at publish: over other rows
# (a dry run, one source) the materialization cannot hold them, so the view reads its rule.
MATERIALIZED: Mapping[str, str] = {PREFERRED_VIEW: RULE_VIEW}


def view_query(name: str, overrides: Mapping[str, str] | None = None) -> str:
    """A query for view ``name`` in which each relation of ``overrides`` reads other rows.

    ``overrides`` maps a relation a view reads (``stg_scores``, ``stg_policy_results``, ...)
    to the SQL that replaces it. Every view between it and ``name`` is inlined as a CTE of the
    same name, so the result is the view's own SQL over the new rows. A view of
    :data:`MATERIALIZED` whose rule reads an overridden relation is inlined as its rule (the
    stored resolution is of the committed rows, not of these).
    """
    overrides = dict(overrides or {})
    if not overrides:
        return f"SELECT * FROM {name}"
    affected: dict[str, bool] = {}

    def depends(view: str) -> bool:
        if view not in affected:
            affected[view] = any(r in overrides or depends(r) for r in refs(view))
        return affected[view]

    def refs(view: str) -> frozenset[str]:
        return frozenset([rules[view]]) if view in rules else view_references(view)

    rules: dict[str, str] = {}
    rules.update({v: r for v, r in MATERIALIZED.items() if v not in overrides and depends(r)})
    affected.clear()
    if not depends(name) and name not in overrides:
        return f"SELECT * FROM {name}"
    # a CTE can only name the CTEs before it: inline the views in dependency order
    order: list[str] = []

    def visit(view: str) -> None:
        if view in order or not (view in overrides or depends(view) or view == name):
            return
        if view not in overrides:
            for ref in sorted(refs(view)):
                visit(ref)
        order.append(view)

    visit(name)

    def body(view: str) -> str:
        return f"SELECT * FROM {rules[view]}" if view in rules else view_sql(view)

    ctes = [
        f"{v} AS ({overrides[v]})" if v in overrides else f"{v} AS (\n{body(v)}\n)" for v in order
    ]
    ctes += [f"{v} AS ({sql})" for v, sql in overrides.items() if v not in order]
    return "WITH " + ",\n".join(ctes) + f"\nSELECT * FROM {name}"


def scores_overlay(pending: str) -> str:
    """``stg_scores`` as it would read after committing the rows of relation ``pending``.

    A commit tombstones each (run, source) it writes, so the pending rows replace every stored
    row of their (run, source). Dry runs pass this to :func:`view_query` for ``stg_scores``.
    """
    return query_sql("scores_overlay", pending=pending)


SAMPLE_FACTORS = ("task_id", "seed")


def factor_sql(name: str, samples: str = "", *, as_json: bool = False) -> str:
    """SQL for factor ``name`` of a sample row (the one factor rule).

    ``task_id`` and ``seed`` are the sample's columns; any other name is read from its ``extra``
    JSON: the flat key ``"workload.size"`` first, then the dotted path ``workload`` -> ``size``.
    As a string (what ``match_on`` compares), or with ``as_json`` as JSON (what a scorer reads:
    numbers stay numbers; a flat key holding null falls through to the path, as in the string
    form). ``samples`` is the row's alias (``s``) or empty for bare column names.
    """
    q = f"{samples}." if samples else ""
    if name in SAMPLE_FACTORS:
        return f"to_json({q}{name})" if as_json else f"cast({q}{name} as varchar)"
    esc = name.replace("'", "''")
    flat = "'$.\"" + esc + "\"'"
    path = "'$." + ".".join(f'"{p}"' for p in esc.split(".")) + "'"
    if not as_json:
        return (
            f"coalesce(json_extract_string({q}extra, {flat}), "
            f"json_extract_string({q}extra, {path}))"
        )
    f = f"json_extract({q}extra, {flat})"
    return (
        f"coalesce(case when json_type({f}) <> 'NULL' then {f} end, "
        f"json_extract({q}extra, {path}), {f})"
    )
