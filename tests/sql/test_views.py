"""Every view in sql/ loads by name, and the store opens from a plain DuckDB connection."""

from __future__ import annotations

import duckdb
import pytest

import hylo_analytics as ha
from hylo_analytics._sql import sql_dir, view_names, view_references, view_sql


def test_every_sql_file_is_a_view_named_after_it() -> None:
    files = sorted(p.stem for p in sql_dir().glob("*.sql"))
    assert sorted(view_names()) == files and files
    for name in files:
        body = view_sql(name)
        assert body.lower().lstrip().startswith(("with", "select", "--")), name


@pytest.mark.parametrize("name", view_names())
def test_view_is_queryable(sample_store: ha.Store, name: str) -> None:
    frame = sample_store.sql(f"SELECT * FROM {name} LIMIT 5")
    assert frame.width > 0


def test_unknown_view_lists_the_known_ones() -> None:
    with pytest.raises(KeyError, match="stg_runs"):
        view_sql("no_such_view")


def test_views_sql_opens_the_store_from_a_plain_connection(sample_store: ha.Store) -> None:
    """What `duckdb -cmd ".read <store>/views.sql"` does in the shell."""
    con = duckdb.connect()
    con.execute((sample_store.root / "views.sql").read_text())
    got = con.execute("SELECT count(*) FROM stg_samples").fetchone()
    assert got == (600,)
    assert con.execute("SELECT count(*) FROM mart_runs").fetchone() == (3,)


def test_layers_only_read_lower_layers() -> None:
    """stg_ views read raw tables only; int_ never reads mart_."""
    for name in view_names():
        refs = view_references(name)
        if name.startswith("stg_"):
            assert not any(r.startswith(("int_", "mart_")) for r in refs), name
        if name.startswith("int_"):
            assert not any(r.startswith("mart_") for r in refs), name


def test_mart_task_success_matches_python(sample_store: ha.Store) -> None:
    from scipy.stats import binomtest

    rows = sample_store.sql("SELECT * FROM mart_task_success ORDER BY run_id, task_id").to_dicts()
    scores = sample_store.sql(
        "SELECT run_id, task_id, value FROM stg_scores WHERE metric = 'success'"
    )
    for r in rows[:6]:
        vals = scores.filter(
            (scores["run_id"] == r["run_id"]) & (scores["task_id"] == r["task_id"])
        )["value"]
        valid = vals.drop_nulls()
        assert r["n_total"] == len(vals) and r["n_valid"] == len(valid)
        assert r["n_skipped"] == vals.null_count()
        ci = binomtest(int(valid.sum()), len(valid)).proportion_ci(method="wilson")
        assert r["ci_low"] == pytest.approx(ci.low, abs=1e-9)
        assert r["ci_high"] == pytest.approx(ci.high, abs=1e-9)
