"""``docs/tables.md`` lists every view with the grain its ``.sql`` file declares.

The page is the user's table list; the files are the truth. A new view, a changed grain or a
natural name that is not a view fails here until the page says so.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import hylo_analytics as ha
from hylo_analytics._sql import view_names, view_sql
from hylo_analytics.store import FRIENDLY_NAMES

DOC = Path(__file__).resolve().parents[2] / "docs" / "tables.md"
_GRAIN = re.compile(r"-- Grain: (one row per \([^)]*\)(?:; null allowed in [\w, ]+)?)\.")


def _doc_rows() -> dict[str, list[str]]:
    rows = {}
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and re.fullmatch(r"`\w+`", cells[0]):
            rows[cells[0].strip("`")] = cells[1:]
    return rows


def test_every_view_is_listed_with_its_declared_grain() -> None:
    rows = _doc_rows()
    assert sorted(rows) == sorted(view_names())
    for name in view_names():
        m = _GRAIN.search(view_sql(name))
        assert m, name
        cells = rows[name]
        grain = cells[1] if name.startswith("stg_") else cells[0]
        assert grain == m.group(1), f"docs/tables.md: {name} grain {grain!r} != {m.group(1)!r}"


def test_natural_names_are_the_stg_views(sample_store: ha.Store) -> None:
    rows = _doc_rows()
    listed = {cells[0].strip("`") for name, cells in rows.items() if name.startswith("stg_")}
    assert listed == set(FRIENDLY_NAMES)
    for natural in FRIENDLY_NAMES:
        assert sample_store.sql(f"select count(*) from {natural}").item() == (
            sample_store.sql(f"select count(*) from stg_{natural}").item()
        )


@pytest.mark.parametrize("table", ["runs", "samples", "events", "scores", "quarantine"])
def test_raw_history_is_named_on_the_page(table: str) -> None:
    assert f"`raw_{table}`" in DOC.read_text()
