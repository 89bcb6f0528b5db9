"""Field checks compiled to SQL, so a whole batch of documents is validated in one query.

A check names a field, the JSON types it may have, and whether it must be present. The
compiled expression yields a list of ``{field, error}`` structs for one document; an empty
list means the document passed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["JSON_TYPE_NAMES", "Check", "compile_checks"]

# DuckDB json_type() names, as a user would say them.
JSON_TYPE_NAMES = {
    "VARCHAR": "string",
    "BIGINT": "integer",
    "UBIGINT": "integer",
    "DOUBLE": "number",
    "BOOLEAN": "boolean",
    "OBJECT": "object",
    "ARRAY": "array",
    "NULL": "null",
}


@dataclass(frozen=True)
class Check:
    """``expr`` is a SQL expression of type JSON (NULL when absent)."""

    field: str
    expr: str
    types: tuple[str, ...]
    required: bool = True

    @property
    def expected(self) -> str:
        names = dict.fromkeys(JSON_TYPE_NAMES[t] for t in self.types)
        return " or ".join(names)


def _type_sql(expr: str) -> str:
    return f"json_type({expr})"


def _type_name_sql(t: str) -> str:
    whens = " ".join(f"WHEN '{k}' THEN '{v}'" for k, v in JSON_TYPE_NAMES.items())
    return f"(CASE {t} {whens} ELSE lower({t}) END)"


def compile_checks(checks: Sequence[Check], *, field_prefix: str = "''") -> str:
    """A SQL list expression of ``{'field': ..., 'error': ...}`` for every failed check.

    ``field_prefix`` is a SQL string expression put before each field name (such as
    ``'samples[' || i || '].'``).
    """
    items = []
    for c in checks:
        allowed = ", ".join(f"'{t}'" for t in c.types)
        t = _type_sql(c.expr)
        missing = (
            f"WHEN {c.expr} IS NULL THEN 'missing required field (expected {c.expected})'"
            if c.required
            else f"WHEN {c.expr} IS NULL THEN NULL"
        )
        if not c.required:
            allowed += ", 'NULL'"
        # an integer the column cannot hold (DuckDB types it UBIGINT or DOUBLE) is named as
        # such, never stored as a null
        too_big = (
            f"WHEN ({t} = 'UBIGINT' AND TRY_CAST({c.expr} AS BIGINT) IS NULL) "
            f"OR ({t} = 'DOUBLE' AND regexp_full_match(CAST({c.expr} AS VARCHAR), '-?[0-9]+')) "
            f"THEN 'integer ' || CAST({c.expr} AS VARCHAR) || ' does not fit in 64 bits "
            "(-2**63 to 2**63 - 1)' "
            if "BIGINT" in c.types
            else ""
        )
        items.append(
            f"CASE {missing} {too_big}WHEN {t} NOT IN ({allowed}) THEN 'expected {c.expected}, "
            f"got ' || {_type_name_sql(t)} END"
        )
        items[-1] = (
            f"CASE WHEN ({items[-1]}) IS NULL THEN NULL ELSE "
            f"{{'field': {field_prefix} || '{c.field}', 'error': ({items[-1]})}} END"
        )
    return "list_filter([" + ", ".join(items) + "], lambda x: x IS NOT NULL)"
