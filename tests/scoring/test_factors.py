"""``factors.`` paths in declarative scorers: the factor rule post_derive's match_on uses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from span_data import open_ingested, write_span_run

import hylo_analytics as ha
from hylo_analytics._sql import factor_sql
from hylo_analytics.scoring import load_scorers

EXTRA: dict[str, dict[str, Any]] = {
    "a#1": {"workload": {"size": 8}, "output": {"size": 8}},
    # the flat key wins over the dotted path, as in post_derive's match_on
    "b#2": {"workload.size": 4, "workload": {"size": 99}, "output": {"size": 5}},
    # a flat key holding null falls through to the path
    "c#3": {"workload.size": None, "workload": {"size": 2}, "output": {"size": 2}},
    "d#4": {"output": {"size": 1}},
}


@pytest.fixture()
def store(tmp_path: Path) -> ha.Store:
    write_span_run(tmp_path / "data", "run-f-1", dict.fromkeys(EXTRA), extra=EXTRA)
    return open_ingested(tmp_path)


def _rows(store: ha.Store, source: str) -> dict[str, tuple[Any, Any, Any]]:
    df = store.sql(
        "select key, value, skip_reason, explanation from stg_scores where source = ?", [source]
    )
    return {r[0]: r[1:] for r in df.rows()}


def test_factor_paths(store: ha.Store) -> None:
    store.score(
        {
            "size": {"value": "factors.workload.size", "optional": True},
            "seed": {"value": "factors.seed"},
            "size_right": {
                "exact": {"actual": "output.size", "expected": "factors.workload.size"},
                "optional": True,
            },
        }
    )
    assert _rows(store, "scorer:size") == {
        "a#1": (8.0, None, None),
        "b#2": (4.0, None, None),
        "c#3": (2.0, None, None),
        "d#4": (None, "missing path: factors.workload.size", None),
    }
    assert {k: v[0] for k, v in _rows(store, "scorer:seed").items()} == {
        "a#1": 1.0,
        "b#2": 2.0,
        "c#3": 3.0,
        "d#4": 4.0,
    }
    size_right = _rows(store, "scorer:size_right")
    assert size_right["a#1"] == (1.0, None, None)
    assert size_right["b#2"] == (0.0, None, "actual 5 != expected 4")
    assert size_right["d#4"][1] == "missing path: factors.workload.size"


def test_one_factor_rule_for_match_on_and_scorers(store: ha.Store) -> None:
    """The string form (match_on) and the JSON form (scorers) pick the same value."""
    got = store.sql(
        f"select key, {factor_sql('workload.size', 's')} as m, "
        f"{factor_sql('workload.size', 's', as_json=True)} as j "
        "from stg_samples as s order by key"
    ).rows()
    assert got == [("a#1", "8", "8"), ("b#2", "4", "4"), ("c#3", "2", "2"), ("d#4", None, None)]


def test_bare_factors_path_is_refused() -> None:
    with pytest.raises(ha.ConfigError, match=r"^score\.x\.value: path 'factors' needs a factor"):
        load_scorers({"x": {"value": "factors"}})
