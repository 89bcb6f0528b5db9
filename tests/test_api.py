"""The Store facade: only the user's verbs, explicit keywords, the persistence layer held."""

from __future__ import annotations

import inspect
from pathlib import Path

import polars as pl
import pytest

import hylo_analytics as ha
from hylo_analytics import api
from hylo_analytics.errors import InputError, InputTypeError
from hylo_analytics.store import ParquetStore, as_parquet, pinned, unwrap_store


def test_the_facade_holds_a_parquet_store_and_hides_its_machinery(tmp_path: Path) -> None:
    store = ha.open_store(tmp_path / "s")
    assert isinstance(store.parquet, ParquetStore) and not isinstance(store, ParquetStore)
    assert store.root == store.parquet.root and not store.exists
    for name in ("commit", "publish", "lock", "con", "discard", "manifest"):
        assert not hasattr(store, name), name
    with pytest.raises(AttributeError, match=r"use store\.parquet\.commit"):
        store.commit  # noqa: B018


def test_no_verb_takes_options_it_does_not_name() -> None:
    for name, fn in inspect.getmembers(api.Store, inspect.isfunction):
        kinds = {p.kind for p in inspect.signature(fn).parameters.values()}
        assert inspect.Parameter.VAR_KEYWORD not in kinds, name


def test_the_facades_defaults_are_the_engines() -> None:
    from hylo_analytics.aggregate.summaries import TASK_COLUMNS
    from hylo_analytics.stats.bootstrap import DEFAULT_RESAMPLES
    from hylo_analytics.stats.bradley_terry import DEFAULT_PENALTY
    from hylo_analytics.stats.closed_form import DEFAULT_LEVEL

    assert api.DEFAULT_LEVEL == DEFAULT_LEVEL
    assert api.DEFAULT_RESAMPLES == DEFAULT_RESAMPLES
    assert api.DEFAULT_PENALTY == DEFAULT_PENALTY
    assert api.TASK_COLUMNS == TASK_COLUMNS


def test_a_registered_frame_joins_the_views(sample_store: ha.Store) -> None:
    runs = sample_store.runs()["run_id"].head(2).to_list()
    sample_store.register("mine", pl.DataFrame({"run_id": runs, "label": ["a", "b"]}))
    try:
        got = sample_store.sql(
            "select label, r.run_id from mine join stg_runs r using (run_id) order by label"
        )
        assert got["run_id"].to_list() == runs
        sample_store.register("mine", pl.DataFrame({"run_id": runs[:1]}).lazy())  # replaced
        assert sample_store.sql("select count(*) as n from mine")["n"].item() == 1
    finally:
        sample_store.unregister("mine")
    with pytest.raises(InputError, match="is a view of the store"):
        sample_store.register("runs", pl.DataFrame({"run_id": runs}))


def test_stage_functions_accept_the_facade(tmp_path: Path) -> None:
    store = ha.open_store(tmp_path / "s")
    assert as_parquet(store) is store.parquet and as_parquet(store.parquet) is store.parquet
    assert unwrap_store(store) is store.parquet and unwrap_store("frame") == "frame"
    with pytest.raises(InputTypeError, match="expected a store"):
        as_parquet("not a store")

    @pinned
    def first(s: ParquetStore) -> ParquetStore:
        return s

    assert first(store) is store.parquet  # type: ignore[arg-type]
