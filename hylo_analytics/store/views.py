"""The store's views: the metric registry as SQL, the friendly names, safe SQL literals.

Used by :mod:`~hylo_analytics.store.connection` to bind the ``sql/`` views on the files of the
published manifest.
"""

from __future__ import annotations

import re
from pathlib import Path

from hylo_analytics.errors import InputError
from hylo_analytics.metrics import default_registry

# The natural names are the current rows; raw history keeps its ``raw_`` prefix.
FRIENDLY_NAMES = (
    "runs", "samples", "events", "scores", "quarantine", "ingested_files", "policy_results",
    "comparisons", "resolved_scores", "trace_files",
)  # fmt: skip


def _metric_specs_sql() -> str:
    """The MetricSpec registry as rows, so SQL views share Python's metric directions.

    One row per name a metric answers to (its id and each alias), with the canonical id.
    """
    reg = default_registry()

    def lit(v: object) -> str:
        if v is None:
            return "NULL"
        if isinstance(v, bool):
            return "true" if v else "false"
        return "'" + str(v).replace("'", "''") + "'"

    rows = []
    for name, mid in sorted(reg.alias_map().items()):
        spec = reg.get(mid)
        cells = (name, mid, spec.display_name, spec.output_unit, spec.higher_is_better, spec.kind)
        rows.append("(" + ", ".join(lit(c) for c in cells) + ")")
    return (
        "SELECT * FROM (VALUES " + ", ".join(rows) + ") AS t(metric, metric_id, display_name, "
        "unit, higher_is_better, kind)"
    )


def _quote(text: str) -> str:
    return text.replace("'", "''")


def _path_literal(path: Path) -> str:
    """``path`` as a SQL string DuckDB reads as that one file, never as a glob pattern.

    DuckDB expands ``*``, ``?`` and ``[`` in every path it reads, even in a list of files: a
    store at ``a[1]`` would read its sibling ``a1``. Each becomes a one-character class.
    """
    return "'" + _quote(_GLOB_CHARS.sub(r"[\g<0>]", path.as_posix())) + "'"


_GLOB_CHARS = re.compile(r"[*?\[]")


def _ident(name: str) -> str:
    if not name.replace("_", "").isalnum():
        raise InputError(f"not a table or view name: {name!r}")
    return name
