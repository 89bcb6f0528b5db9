"""SQL views kept as ``.sql`` files, one view per file, file name = view name.

Layers follow dbt: ``stg_`` (one table, current rows, typed), ``int_`` (joins and per-episode
reductions), ``mart_`` (answers). Views are created in layer order; within a layer a view that
names another is retried after it, so files need no ordering convention of their own.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import duckdb

__all__ = ["load_views", "scores_overlay", "sql_dir", "view_names", "view_sql"]

_LAYERS = ("stg_", "int_", "mart_")


def sql_dir() -> Path:
    """Where the ``.sql`` files are: inside the wheel, or the repo's ``sql/`` when editable."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "sql", here.parent / "sql"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"no sql/ folder next to {here}")


@cache
def view_names() -> tuple[str, ...]:
    """Every view name, in layer order."""
    names = sorted(p.stem for p in sql_dir().glob("*.sql"))

    def layer(name: str) -> int:
        return next((i for i, p in enumerate(_LAYERS) if name.startswith(p)), len(_LAYERS))

    return tuple(sorted(names, key=lambda n: (layer(n), n)))


def view_sql(name: str) -> str:
    """The SELECT body of view ``name`` (its ``.sql`` file without a trailing semicolon)."""
    path = sql_dir() / f"{name}.sql"
    if not path.is_file():
        raise KeyError(f"no view {name!r}; known views: {', '.join(view_names())}")
    return path.read_text().strip().rstrip(";")


def load_views(con: duckdb.DuckDBPyConnection, prelude: list[str] | None = None) -> list[str]:
    """Create every view on ``con`` and return the statements in an order that works."""
    for stmt in prelude or []:
        con.execute(stmt)
    pending = list(view_names())
    done: list[str] = []
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


def scores_overlay(pending: str) -> str:
    """``stg_scores`` as it would read after committing the rows of relation ``pending``.

    A commit tombstones each (run, source) it writes, so the pending rows replace every stored
    row of their (run, source). Dry runs read through this instead of ``stg_scores``.
    """
    return (
        f"select * from stg_scores as s where not exists (select 1 from {pending} as p "
        "where p.run_id = s.run_id and p.source = s.source) "
        f"union all by name select * from {pending}"
    )
