"""The macros the views share equal the Python they stand for; threads are configurable."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hylo_analytics as ha
from hylo_analytics._sql import connect, duckdb_threads, inline_table_macros, view_query
from hylo_analytics.stats import wilson, z_value


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.integers(0, 5000), st.integers(0, 5000))
def test_sql_wilson_equals_python(k: int, extra: int) -> None:
    n = k + extra
    con = connect(threads=1)
    low, high = con.execute("select wilson_low($k, $n, ci_z()), wilson_high($k, $n, ci_z())",
                            {"k": k, "n": n}).fetchone()  # fmt: skip
    if n == 0:
        assert low is None and high is None
        return
    lo, hi = wilson([k], [n])
    assert low == pytest.approx(lo[0], rel=1e-12, abs=1e-15)
    assert high == pytest.approx(hi[0], rel=1e-12, abs=1e-15)
    assert 0.0 <= low <= k / n <= high <= 1.0
    if k == 0:
        assert low == 0.0  # exact at the boundary (not 4.9e-17)
    if k == n:
        assert high == 1.0


def test_sql_constants_come_from_the_stats_engine() -> None:
    con = connect(threads=1)
    z, level = con.execute("select ci_z(), ci_level()").fetchone()
    assert level == 0.95 and z == z_value(0.95)


def test_score_validity_macro() -> None:
    con = connect(threads=1)
    rows = con.execute(
        "select score_is_valid(v, ok) from (values (1.0, true), (1.0, null), (1.0, false), "
        "(null, true), ('nan'::double, true)) as t(v, ok)"
    ).fetchall()
    assert [r[0] for r in rows] == [True, True, False, False, False]


def test_view_query_reads_a_view_over_other_rows(sample_store: ha.Store) -> None:
    query = view_query(
        "mart_success_rates",
        {"stg_scores": "select * from main.stg_scores where key like 'tabletop/pick_cube#%'"},
    )
    got = sample_store.sql(query)
    assert set(got["n_total"]) == {20}  # one task of 20 seeds per run
    assert set(sample_store.sql("select n_total from mart_success_rates")["n_total"]) == {200}


def test_duckdb_threads(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("HYLO_ANALYTICS_THREADS", "1")
    assert duckdb_threads() == 1
    store = ha.open_store(tmp_path / "s")
    assert store.sql("select current_setting('threads') as t")["t"].item() == 1
    assert ha.open_store(tmp_path / "s", threads=2).parquet.threads == 2
    monkeypatch.setenv("HYLO_ANALYTICS_THREADS", "many")
    with pytest.raises(ValueError, match="HYLO_ANALYTICS_THREADS"):
        duckdb_threads()
    monkeypatch.delenv("HYLO_ANALYTICS_THREADS")
    import os

    assert duckdb_threads() == (os.cpu_count() or 1)


def test_current_rows_drops_rows_older_than_their_runs_newest_run_wide_tombstone() -> None:
    con = connect(threads=1)
    con.execute(
        "create table raw_runs as select * from (values ('a', 1), ('a', 3), ('a', 4), "
        "('b', 2), ('c', 1)) as t(run_id, batch_seq)"
    )
    con.execute(
        "create table raw_tombstones as select * from (values ('runs', 'a', 2, null), "
        "('runs', 'a', 4, null), ('runs', 'b', 9, 'scorer:x'), ('samples', 'c', 5, null)) "
        "as t(table_name, run_id, batch_seq, source)"
    )
    got = con.execute("select * from current_rows('runs') order by all").fetchall()
    # a: the newest tombstone (4) keeps batch 4 only; b's tombstone has a source (not
    # run-wide); c's is of another table
    assert got == [("a", 4), ("b", 2), ("c", 1)]
    # what Spark runs: the same body inlined as a subquery
    inlined = inline_table_macros("select * from current_rows('runs') order by all")
    assert "current_rows" not in inlined and con.execute(inlined).fetchall() == got


def test_the_tombstone_filter_is_written_once() -> None:
    """Every view reading raw_tombstones takes the run-wide filter from ``current_rows``."""
    from hylo_analytics._sql import view_names, view_sql

    readers = [n for n in view_names() if "raw_tombstones" in view_sql(n)]
    callers = [n for n in view_names() if "current_rows(" in view_sql(n)]
    assert len(callers) == 7
    for name in readers:
        assert name in callers and "source is null" not in view_sql(name), name


def test_success_fallback_comes_from_the_harness_conventions() -> None:
    from hylo_analytics._harness import SUCCESS_FALLBACK
    from hylo_analytics._sql import view_sql

    con = connect(threads=1)
    got = con.execute(
        "select success_fallback('inspect-robots/v1'), success_fallback('vla-eval'), "
        "success_fallback(null)"
    ).fetchone()
    assert got == (SUCCESS_FALLBACK["inspect-robots/"], None, None)
    # no view names a harness: a new harness's success metric is an entry of SUCCESS_FALLBACK
    body = re.sub(r"--[^\n]*", "", view_sql("int_success_metric"))
    assert "inspect-robots" not in body and "success_at_end" not in body
