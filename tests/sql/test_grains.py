"""Every view states its grain (``-- Grain: one row per (...)``); the grain holds on real data.

One generic test per view, on the sample store after ``score()`` (imported scores, re-scored
values, grades, abstentions), one quarantined file and one policy evaluation: the declared key
is unique and its columns are not null, except those the declaration allows to be null.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

import hylo_analytics as ha
from hylo_analytics._sql import view_names, view_sql
from hylo_analytics.derive import commit_policy_results, parse_policies

_GRAIN = re.compile(r"-- Grain: one row per \(([^)]*)\)(?:; null allowed in ([\w, ]+))?\.")


def _grain(name: str) -> tuple[list[str], list[str]]:
    m = _GRAIN.search(view_sql(name))
    assert m, f"{name}.sql does not declare its grain ('-- Grain: one row per (...)')"
    key = [c.strip() for c in m.group(1).split(",")]
    nullable = [c.strip() for c in (m.group(2) or "").split(",") if c.strip()]
    assert set(nullable) <= set(key), name
    return key, nullable


@pytest.fixture(scope="module")
def scored_store(tmp_path_factory: pytest.TempPathFactory, sample_dir: Path) -> ha.Store:
    root = tmp_path_factory.mktemp("grains")
    data = root / "data"
    shutil.copytree(sample_dir, data)
    (data / "broken.json").write_text('{"version": "hylo.evallog/v0.1", "run_id": ')
    # a parent named by a log and declared again, and a pair declared twice (int_comparisons)
    runs = sorted(p.name for p in sample_dir.iterdir() if p.is_dir())
    log = data / runs[1] / "evallog.json"
    log.write_text(json.dumps({**json.loads(log.read_text()), "parent_run_id": runs[0]}))
    store = ha.open_store(root / "store")
    store.ingest(data, progress=False)
    store.score()
    store.declare_parent(runs[1:], runs[0])
    store.declare_parent(runs[2], runs[0])
    policies = parse_policies(
        [
            {"name": "ok", "metric": "success", "must_equal": 1},
            {"name": "short", "metric": "steps", "per": "run", "must_less_equal": 40},
        ]
    )
    commit_policy_results(store.parquet, ha.evaluate_policies(store, policies))
    return store


@pytest.mark.slow
@pytest.mark.parametrize("name", view_names())
def test_declared_grain_is_unique_and_not_null(scored_store: ha.Store, name: str) -> None:
    key, nullable = _grain(name)
    cols = ", ".join(key)
    n, n_keys = scored_store.sql(
        f"select count(*), count(distinct ({cols})) from {name}"  # row(...) counts nulls too
    ).row(0)
    assert n > 0, f"{name} is empty on the scored sample store: the test would prove nothing"
    assert n == n_keys, f"{name}: {n} rows but {n_keys} distinct ({cols})"
    for col in key:
        if col in nullable:
            continue
        nulls = scored_store.sql(f"select count(*) from {name} where {col} is null").item()
        assert nulls == 0, f"{name}.{col} has {nulls} null(s)"
