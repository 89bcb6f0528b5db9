"""Dotted paths into a sample's JSON record, and one comparison of parsed JSON values.

The declarative scorers and ``ExpectedActionScorer`` both read paths (``output.items.0``,
``factors.workload.size``) and compare JSON values; both import this module, so neither
imports the other for it.
"""

from __future__ import annotations

import re
from typing import Any

from hylo_analytics._sql import factor_sql
from hylo_analytics.errors import InputError
from hylo_analytics.scoring._common import sql_str

__all__ = ["canon", "extract_sql", "path_sql"]

_SEGMENT = re.compile(r"^[^.\[\]\"]+$")


def path_sql(path: str) -> str:
    """A dotted path as a DuckDB JSON path literal: ``a.b.0`` -> ``'$."a"."b"[0]'``."""
    if not isinstance(path, str) or not path:
        raise InputError(f"a path must be a non-empty dotted string, not {path!r}")
    if path == "factors":
        raise InputError("path 'factors' needs a factor name: factors.<name>")
    parts = []
    for seg in path.split("."):
        if not _SEGMENT.match(seg):
            raise InputError(f"path {path!r}: bad segment {seg!r} (expected a key or an index)")
        parts.append(f"[{seg}]" if seg.isdigit() else f'."{seg}"')
    return sql_str("$" + "".join(parts))


def extract_sql(path: str) -> str:
    """SQL for the JSON at ``path`` of a row of the records relation (``factors.`` included)."""
    if path.startswith("factors."):
        return factor_sql(path[len("factors.") :], as_json=True)
    return f"json_extract(record, {path_sql(path)})"


def canon(v: Any) -> Any:
    """A comparable form of parsed JSON: key order ignored, 1 == 1.0, but true != 1."""
    if isinstance(v, bool):
        return ("bool", v)
    if isinstance(v, int | float):
        return ("num", float(v))
    if isinstance(v, dict):
        return ("obj", tuple(sorted((k, canon(x)) for k, x in v.items())))
    if isinstance(v, list):
        return ("arr", tuple(canon(x) for x in v))
    return ("val", v)
