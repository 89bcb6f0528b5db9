"""``ParquetStore.select_runs``: a selector names every run it matches (issue 39, item 7), in
natural run order, in one read of the runs table; the comparison verbs take it."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import hylo_analytics as ha
from hylo_analytics.errors import InputError, RunSelectionError
from hylo_analytics.store import FEW_RUNS, ParquetStore
from hylo_analytics.testing import SynthConfig, write_dataset

N_RUNS = 2000


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> ha.Store:
    """2,000 runs of octo-ft (1.0.0, 1.1.0, 1.2.0-rc1, 2.3.0 ... 2.1999.0), 1 task x 2 seeds."""
    root = tmp_path_factory.mktemp("many")
    write_dataset(root / "logs", SynthConfig(runs=N_RUNS, tasks=1, seeds=2, traces_per_run=0))
    store = ha.open_store(root / "store")
    store.ingest(root / "logs", progress=False)
    return store


@pytest.fixture(scope="module")
def few(tmp_path_factory: pytest.TempPathFactory) -> ha.Store:
    """Five runs: 1.0.0, 1.1.0, 1.2.0-rc1, 2.10.0, 2.9.0 of octo-ft, then a 1.2.0 and a second
    1.1.0 (a re-run, ingested later) of octo-ft, and a 0.1.0 of another agent."""
    root = tmp_path_factory.mktemp("few")
    write_dataset(root / "logs", SynthConfig(runs=5, tasks=1, seeds=2, traces_per_run=0))
    renamed = {"run-octo-ft-2.3.0-0003": "2.10.0", "run-octo-ft-2.4.0-0004": "2.9.0"}
    for run, version in renamed.items():
        _relabel(root / "logs" / run, version=version)
    store = ha.open_store(root / "store")
    store.ingest(root / "logs", progress=False)
    src = root / "logs" / "run-octo-ft-1.1.0-0001"
    later = [("rerun-1.1.0", "octo-ft", "1.1.0"), ("final-1.2.0", "octo-ft", "1.2.0"),
             ("other-0.1.0", "aaa-agent", "0.1.0")]  # fmt: skip
    for run_id, agent, version in later:
        dst = root / "later" / run_id
        shutil.copytree(src, dst)
        _relabel(dst, version=version, run_id=run_id, agent=agent)
    store.ingest(root / "later", progress=False)
    return store


def _relabel(folder: Path, **fields: str) -> None:
    path = folder / "evallog.json"
    log = json.loads(path.read_text())
    if "version" in fields:
        log["agent"]["version"] = fields["version"]
    if "agent" in fields:
        log["agent"]["name"] = fields["agent"]
    if "run_id" in fields:
        log["run_id"] = fields["run_id"]
    path.write_text(json.dumps(log))


@pytest.fixture
def queries(many: ha.Store, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The queries the store runs, as they run."""
    seen: list[str] = []
    real = ParquetStore.sql

    def counted(self: ParquetStore, query: str, params: Any = None) -> pl.DataFrame:
        seen.append(query)
        return real(self, query, params)

    monkeypatch.setattr(ParquetStore, "sql", counted)
    yield seen


def test_runs_in_natural_run_order(few: ha.Store) -> None:
    runs = few.runs()
    got = runs.select("agent_name", "agent_version", "run_id").rows()
    assert got == [
        ("aaa-agent", "0.1.0", "other-0.1.0"),
        ("octo-ft", "1.0.0", "run-octo-ft-1.0.0-0000"),
        ("octo-ft", "1.1.0", "rerun-1.1.0"),  # one version on one suite: newest ingest first
        ("octo-ft", "1.1.0", "run-octo-ft-1.1.0-0001"),
        ("octo-ft", "1.2.0-rc1", "run-octo-ft-1.2.0-rc1-0002"),
        ("octo-ft", "1.2.0", "final-1.2.0"),
        ("octo-ft", "2.9.0", "run-octo-ft-2.4.0-0004"),
        ("octo-ft", "2.10.0", "run-octo-ft-2.3.0-0003"),
    ]
    first, second = runs.filter(pl.col("agent_version") == "1.1.0")["ingested_at"]
    assert first > second
    # a selection comes in the same order, whatever the order it was asked in
    assert few.select_runs(["version=2.10.0", "agent=aaa-agent", "version=2.9.0"]) == [
        "other-0.1.0", "run-octo-ft-2.4.0-0004", "run-octo-ft-2.3.0-0003",
    ]  # fmt: skip
    assert few.select_runs(["run-octo-ft-2.3", "rerun-1.1.0", "rerun-1.1.0"]) == [
        "rerun-1.1.0", "run-octo-ft-2.3.0-0003",
    ]  # fmt: skip


def test_ids_and_prefixes_behave_as_before(few: ha.Store) -> None:
    assert few.select_runs("run-octo-ft-1.0") == ["run-octo-ft-1.0.0-0000"]
    with pytest.raises(RunSelectionError, match="'run-octo-ft-1' matches 3 runs, add a field"):
        few.select_runs(["run-octo-ft-1"])  # a prefix still names one run
    with pytest.raises(
        RunSelectionError, match=r"no run matches 'agent=octo'.*hylo-analytics runs"
    ):
        few.select_runs(["version=1.0.0", "agent=octo"])
    with pytest.raises(RunSelectionError, match=r"did you mean rerun-1\.1\.0"):
        few.select_runs(["rerun-1.1.9"])
    with pytest.raises(InputError, match="fields run, agent, version"):
        few.select_runs(["colour=red"])


def test_a_selector_leaves_out_the_parent(few: ha.Store) -> None:
    parent = "run-octo-ft-1.0.0-0000"
    got = few.select_runs("agent=octo-ft", exclude=parent)
    assert got == [
        "rerun-1.1.0", "run-octo-ft-1.1.0-0001", "run-octo-ft-1.2.0-rc1-0002", "final-1.2.0",
        "run-octo-ft-2.4.0-0004", "run-octo-ft-2.3.0-0003",
    ]  # fmt: skip
    assert few.select_runs([parent], exclude=parent) == [parent]  # an id is kept: compare refuses
    with pytest.raises(
        RunSelectionError, match=f"'version=1.0.0' matches only the parent run '{parent}'"
    ):
        few.select_runs(["agent=aaa-agent", "version=1.0.0"], exclude=parent)


def test_compare_and_flips_take_a_candidate_selector(few: ha.Store) -> None:
    out = few.compare("agent=octo-ft,version=1.1.0", "version=1.0.0", ci="none")
    assert out["candidate"].to_list() == ["rerun-1.1.0", "run-octo-ft-1.1.0-0001"]
    # rows by candidate in run order (2.9.0 before 2.10.0), not in the text order of ids
    out = few.compare(["run-octo-ft-2.3.0-0003", "version=2.9.0"], "version=1.0.0", ci="none")
    assert out["candidate"].to_list() == ["run-octo-ft-2.4.0-0004", "run-octo-ft-2.3.0-0003"]
    flips = few.flips("agent=octo-ft", "version=1.0.0")
    order = few.select_runs("agent=octo-ft", exclude="run-octo-ft-1.0.0-0000")
    assert flips["candidate"].unique(maintain_order=True).to_list() == [
        r for r in order if r in set(flips["candidate"])
    ]
    with pytest.raises(RunSelectionError, match="'agent=octo-ft' matches 7 runs, add a field"):
        few.compare(["version=1.1.0"], "agent=octo-ft")  # the parent is one run
    with pytest.raises(InputError, match=r"parent 'run-octo-ft-1\.0\.0-0000' is also listed"):
        few.compare(["agent=octo-ft", "run-octo-ft-1.0.0-0000"], "version=1.0.0")
    with pytest.raises(RunSelectionError, match="matches only the parent run"):
        few.flips(["agent=octo-ft,version=1.0.0"], "version=1.0.0")


def test_declare_parent_and_verdict_blocks_take_a_selector(few: ha.Store, tmp_path: Path) -> None:
    spec = ha.load_analysis_spec(
        {
            "verdict": {
                "metric": "success",
                "parent": "version=1.0.0",
                "candidates": ["agent=octo-ft,version=1.1.0"],
            }
        }
    )
    (got,) = ha.run_analysis(few.parquet, spec, write=False).verdicts
    assert got["candidate"].unique(maintain_order=True).to_list() == [
        "rerun-1.1.0", "run-octo-ft-1.1.0-0001",
    ]  # fmt: skip
    copy = tmp_path / "store"
    shutil.copytree(few.root, copy)
    store = ha.open_store(copy)
    store.declare_parent(["agent=octo-ft"], "version=1.0.0")
    pairs = store.sql("select run_id, parent_run_id from stg_comparisons order by run_id")
    assert set(pairs["parent_run_id"]) == {"run-octo-ft-1.0.0-0000"}
    assert sorted(pairs["run_id"]) == sorted(store.select_runs("agent=octo-ft")[1:])


@pytest.mark.slow
def test_a_selector_compares_1999_runs_as_the_id_list(many: ha.Store) -> None:
    ids = many.runs()["run_id"].to_list()
    parent = many.resolve_run("version=1.0.0")
    assert ids[0] == parent and len(ids) == N_RUNS
    versions = many.runs()["agent_version"].to_list()
    assert versions.index("2.3.0") < versions.index("2.294.0") < versions.index("2.1999.0")
    assert versions.index("1.2.0-rc1") < versions.index("2.3.0")
    by_selector = many.compare(["agent=octo-ft"], "version=1.0.0", by=["task_id"])
    by_ids = many.compare(ids[1:], ids[0], by=["task_id"])
    assert by_selector.height == 2 * (N_RUNS - 1)  # overall and one task, per candidate
    assert by_selector.filter(level="overall")["candidate"].to_list() == ids[1:]
    assert_frame_equal(by_selector, by_ids)
    assert_frame_equal(many.compare(list(reversed(ids[1:])), ids[0], by=["task_id"]), by_ids)
    with pytest.raises(RunSelectionError, match=r"'agent=octo-ft' matches 2000 runs, add a field"):
        many.compare(["version=2.3.0"], "agent=octo-ft")


@pytest.mark.slow
def test_flips_of_many_runs_link_as_the_per_run_queries(many: ha.Store) -> None:
    """Past FEW_RUNS runs the links are one query; they equal the per-run queries' links."""
    flips = many.flips(["agent=octo-ft"], "version=1.0.0")
    flipped = flips["candidate"].unique(maintain_order=True).to_list()
    assert len(flipped) > 10 * FEW_RUNS
    some = flipped[:: len(flipped) // 5][:5]  # a few runs: the links are a query a run
    parent = many.resolve_run("version=1.0.0")
    few = many.flips(some, parent)
    assert few["candidate"].n_unique() == len(some) == 5
    assert_frame_equal(few, flips.filter(pl.col("candidate").is_in(some)))
    assert flips["candidate_episode_ids"].null_count() == 0
    assert flips["parent_path"].null_count() == 0


@pytest.mark.slow
def test_the_expansion_is_one_query(many: ha.Store, queries: list[str]) -> None:
    ids = many.runs()["run_id"].to_list()
    queries.clear()
    assert many.select_runs(["agent=octo-ft"], exclude=ids[0]) == ids[1:]
    assert len(queries) == 1
    queries.clear()
    assert many.select_runs(list(reversed(ids))) == ids
    assert len(queries) == 1
    queries.clear()
    assert many.select_runs(ids[:3]) == ids[:3]  # a few ids: their rows, not the table
    assert len(queries) == 1 and "list_contains" in queries[0]
