"""The cached view catalog: opening binds no view, and every view answers as if bound here.

A store opened with the catalog (``hylo_analytics.store.catalog``) and one opened without it
(``HYLO_ANALYTICS_CACHE_DIR=off``: every view bound in the connection) must give the same
rows for every view; a broken, foreign or unwritable cache falls back, never answers wrong.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import hylo_analytics as ha
from hylo_analytics import _sql
from hylo_analytics.store import catalog
from hylo_analytics.store.connection import StoreConnection
from hylo_analytics.testing.older import strip_resolution


@pytest.fixture(scope="module")
def declared(tmp_path_factory: pytest.TempPathFactory, sample_dir: Path) -> Path:
    """The sample ingested and scored, every run declared a child of the first."""
    root = tmp_path_factory.mktemp("catalog") / "store"
    store = ha.open_store(root)
    store.ingest(sample_dir, progress=False)
    store.score()
    runs = store.sql("SELECT run_id FROM runs ORDER BY run_id")["run_id"].to_list()
    store.declare_parent(runs[1:], runs[0])
    return root


def _every_view(con: StoreConnection) -> dict[str, pl.DataFrame]:
    names = [*_sql.view_names(), *(f"raw_{t}" for t in ("runs", "scores")), "runs", "scores"]
    return {n: con.sql(f"SELECT * FROM {n} ORDER BY ALL") for n in names}


def _same(got: pl.DataFrame, want: pl.DataFrame) -> None:
    """Equal rows; floats to 1e-12 (DuckDB's parallel sums differ in the last bits per call)."""
    assert_frame_equal(got, want, check_exact=False, rel_tol=1e-12, abs_tol=1e-12)


def _local_views(con: StoreConnection) -> set[str]:
    got = con.sql(
        "SELECT view_name FROM duckdb_views() WHERE NOT internal AND database_name = 'memory'"
    )
    return set(got["view_name"].to_list())


def _open(root: Path, cache: str, monkeypatch: pytest.MonkeyPatch) -> StoreConnection:
    monkeypatch.setenv("HYLO_ANALYTICS_CACHE_DIR", cache)
    return StoreConnection(root, create=False)


@pytest.mark.slow
def test_every_view_answers_the_same_with_and_without_the_catalog(
    declared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cached = _open(declared, str(tmp_path / "cache"), monkeypatch)
    bound = _open(declared, "off", monkeypatch)
    assert _local_views(cached) == catalog.LOCAL_VIEWS  # no sql/ view bound at open
    assert set(_sql.view_names()) <= _local_views(bound)
    assert cached._statements == bound._statements  # views.sql is the same file either way
    want = _every_view(bound)
    got = _every_view(cached)
    assert want["mart_compare"].height > 0 and want["int_scores_preferred"].height > 0
    for name, frame in want.items():
        _same(got[name], frame)


@pytest.mark.slow
def test_a_store_not_resolved_yet_reads_the_rule_through_the_catalog(
    declared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    older = tmp_path / "older"
    shutil.copytree(declared, older)
    strip_resolution(older)
    cached = _open(older, str(tmp_path / "cache"), monkeypatch)
    assert not cached.manifest.resolved
    views = cached.sql("SELECT view_name, sql FROM duckdb_views()")
    body = views.filter(pl.col("view_name") == "int_scores_preferred")["sql"][0]
    assert "int_scores_resolution" in body
    bound = _open(older, "off", monkeypatch)
    for name in ("int_scores_preferred", "mart_compare", "mart_aggregate_run"):
        query = f"SELECT * FROM {name} ORDER BY ALL"
        _same(cached.sql(query), bound.sql(query))


def test_the_catalog_is_built_once_and_shared(
    declared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    _open(declared, str(cache), monkeypatch)
    files = list(cache.glob("views-*.duckdb"))
    assert len(files) == 1
    before = files[0].stat()
    others = [_open(declared, str(cache), monkeypatch) for _ in range(3)]  # held at once
    assert [c.sql("SELECT count(*) AS n FROM mart_runs")["n"][0] for c in others] == [3] * 3
    after = files[0].stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert sorted(p.name for p in cache.iterdir()) == [files[0].name]  # no temp file left


def test_a_broken_catalog_file_is_rebuilt(
    declared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    _open(declared, str(cache), monkeypatch)
    (path,) = cache.glob("views-*.duckdb")
    path.write_bytes(b"not a duckdb file" * 100)
    con = _open(declared, str(cache), monkeypatch)
    assert _local_views(con) == catalog.LOCAL_VIEWS
    assert con.sql("SELECT count(*) AS n FROM mart_runs")["n"][0] == 3
    assert path.read_bytes()[:17] != b"not a duckdb file"


def test_a_catalog_another_user_wrote_is_not_used(
    declared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    _open(declared, str(cache), monkeypatch)
    (path,) = cache.glob("views-*.duckdb")
    inode = path.stat().st_ino
    monkeypatch.setattr(os, "getuid", lambda: path.stat().st_uid + 1)
    con = _open(declared, str(cache), monkeypatch)
    assert path.stat().st_ino != inode  # rebuilt by this user, not attached
    assert con.sql("SELECT count(*) AS n FROM mart_runs")["n"][0] == 3


def test_no_cache_folder_binds_the_views_in_the_connection(
    declared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a file"
    blocker.write_text("not a folder")
    con = _open(declared, str(blocker / "cache"), monkeypatch)  # mkdir fails
    assert set(_sql.view_names()) <= _local_views(con)
    assert con.sql("SELECT count(*) AS n FROM mart_runs")["n"][0] == 3


def test_a_cache_folder_with_a_quote_in_its_name(
    declared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    con = _open(declared, str(tmp_path / "it's [a] cache*"), monkeypatch)
    assert _local_views(con) == catalog.LOCAL_VIEWS
    assert con.sql("SELECT count(*) AS n FROM mart_runs")["n"][0] == 3


def test_the_cache_folder_follows_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HYLO_ANALYTICS_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert catalog.cache_dir() == tmp_path / "hylo_analytics"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert catalog.cache_dir() == tmp_path / "home" / ".cache" / "hylo_analytics"
    monkeypatch.setenv("HYLO_ANALYTICS_CACHE_DIR", "OFF")
    assert catalog.cache_dir() is None


@pytest.mark.slow
def test_a_writer_and_a_reader_see_each_commit_through_the_catalog(
    sample_copy: Path, tmp_path: Path, new_run: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HYLO_ANALYTICS_CACHE_DIR", str(tmp_path / "cache"))
    writer = ha.open_store(tmp_path / "store")
    writer.ingest(sample_copy, progress=False)
    reader = StoreConnection(tmp_path / "store", create=False)
    assert reader.sql("SELECT count(*) AS n FROM mart_runs")["n"][0] == 3
    new_run(sample_copy, "zz-new-run")  # type: ignore[operator]
    writer.ingest(sample_copy, progress=False)
    assert reader.sql("SELECT count(*) AS n FROM mart_runs")["n"][0] == 4
    assert _local_views(reader) == catalog.LOCAL_VIEWS


def test_catalogs_of_other_sql_left_unused_for_a_month_are_removed(
    declared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    old, recent = cache / "views-0000old.duckdb", cache / "views-0000new.duckdb"
    for path in (old, recent):
        path.write_bytes(b"a catalog of another version")
    month = time.time() - (catalog.STALE_DAYS + 1) * 86400
    os.utime(old, (month, month))
    _open(declared, str(cache), monkeypatch)  # builds this version's file
    assert not old.exists() and recent.exists()
    assert len(list(cache.glob("views-*.duckdb"))) == 2
