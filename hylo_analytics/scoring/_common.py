"""What every scorer declares, and the shape of the rows every scorer returns."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

import duckdb
import pyarrow as pa

from hylo_analytics.errors import InputError

__all__ = [
    "RESULT_COLUMNS",
    "ScorerDeclaration",
    "id_list",
    "sql_str",
]

Direction = Literal["maximize", "minimize"]
Role = Literal["objective", "constraint", "diagnostic"]

# The scores-table columns a scorer fills, plus ``is_error`` (dropped before the commit; it
# tells the report an error from an abstention).
RESULT_COLUMNS = (
    "run_id",
    "key",
    "task_id",
    "seed",
    "epoch",
    "episode_id",
    "metric",
    "value",
    "valid",
    "skip_reason",
    "explanation",
    "source",
    "source_kind",
    "scorer_version",
    "metadata",
    "is_error",
)


@dataclass(frozen=True)
class ScorerDeclaration:
    """The Autobench scoring contract: what a score means and how to read it.

    ``optional``: an optional scorer's errors are recorded without failing the run; a required
    scorer's error (a missing path, a wrong type, an exception) marks the run failed.
    """

    semantic: str = ""
    unit: str | None = None
    direction: Direction = "maximize"
    role: Role = "objective"
    optional: bool = False

    def __post_init__(self) -> None:
        if self.direction not in ("maximize", "minimize"):
            raise InputError(f"direction must be maximize or minimize, not {self.direction!r}")
        if self.role not in ("objective", "constraint", "diagnostic"):
            raise InputError(f"role must be objective, constraint or diagnostic, not {self.role!r}")

    def metadata_json(self) -> str:
        """The declaration as the JSON stored in every row's ``metadata``."""
        return json.dumps(
            {
                "semantic": self.semantic,
                "unit": self.unit,
                "direction": self.direction,
                "role": self.role,
                "optional": self.optional,
            },
            sort_keys=True,
        )


def sql_str(text: str) -> str:
    """``text`` as a SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def id_list(con: duckdb.DuckDBPyConnection, name: str, values: list[str]) -> None:
    """Register ``values`` as a one-column relation ``name(run_id)`` for joins."""
    con.register(name, pa.table({"run_id": pa.array(values, pa.string())}))
