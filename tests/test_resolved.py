"""The score resolution materialized at publish equals the rule after every kind of commit.

``int_scores_preferred`` reads the rows the store wrote at publish (``resolved_scores``);
``int_scores_resolution`` is the rule evaluated over every candidate score now. They must hold
the same rows after an ingest, a re-ingest, a replaced run, a re-score, grades, derived and
observed scores, a compaction and a sharded ingest, and a store an older version wrote
(no resolution yet) reads the rule until its next writer resolves every run.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pytest

import hylo_analytics as ha
from hylo_analytics import _manifest
from hylo_analytics.scoring import graders
from hylo_analytics.store import Tombstone, commit_scores
from hylo_analytics.testing import SynthConfig, write_dataset
from hylo_analytics.testing.older import strip_resolution


def _same(store: ha.Store) -> pl.DataFrame:
    """Assert table == rule (every column, every row) and return the table's rows."""
    table = store.sql("select * from int_scores_preferred order by all")
    rule = store.sql("select * from int_scores_resolution order by all")
    assert table.columns == rule.columns
    assert table.height == rule.height
    assert table.equals(rule, null_equal=True)
    assert store.parquet.manifest.resolved
    return table


def _resolved_batches(store: ha.Store) -> dict[int, set[str]]:
    """Runs resolved by each published batch: ``batch_seq -> {run_id}``."""
    got = store.sql("select batch_seq, run_id from raw_resolved_scores group by all")
    out: dict[int, set[str]] = {}
    for seq, run in got.rows():
        out.setdefault(seq, set()).add(run)
    return out


@dataclass(frozen=True)
class Judge:
    """A grader: approves episodes with more than 5 steps, abstains on the first seed."""

    name: str = "judge"

    def grade(self, trace: graders.EpisodeTrace, task: graders.EpisodeTask) -> Any:
        if task.key.endswith("#1000"):
            return ha.GradeEvent(None, name="judge_ok", explanation="no view")
        n_steps = sum(e.get("type") == "step" for e in trace.events)
        return ha.GradeEvent(n_steps > 5, name="judge_ok")


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("logs")
    write_dataset(out, SynthConfig(runs=4, tasks=3, seeds=4, mean_steps=8, seed=3))
    return out


def _derived(store: ha.Store, run: str, source: str, kind: str, value: float | None) -> None:
    keys = store.sql(
        "select key, task_id, seed, epoch, episode_id from samples where run_id = $r",
        {"r": run},
    )
    rows = [
        {
            "run_id": run,
            **k,
            "metric": "success",
            "value": value,
            "valid": value is not None,
            "skip_reason": None if value is not None else "judge abstained",
            "source": source,
            "source_kind": kind,
        }
        for k in keys.to_dicts()
    ]
    commit_scores(store, pa.Table.from_pylist(rows))  # takes the lock itself


@pytest.mark.slow
def test_table_equals_rule_after_every_kind_of_commit(
    tmp_path: Path, logs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HYLO_ANALYTICS_COMPACT_AT", "0")  # every batch stays: history to read
    runs = sorted(p.name for p in logs.iterdir())
    store = ha.open_store(tmp_path / "s")
    store.ingest(logs / runs[0], progress=False)
    store.ingest(logs / runs[1], progress=False)
    first = _same(store)
    assert set(first["run_id"]) == set(runs[:2])

    store.score()  # re-scores every run: values beat the log's, abstentions rank below
    _same(store)
    store.grade(Judge(), rescore=True)  # grade events, then their scores (observation)
    assert store.sql("select count(*) from scores where source_kind = 'observation'").item()
    _same(store)
    _derived(store, runs[0], "derive:fix", "derived", 1.0)  # a derived value beats the rest
    _derived(store, runs[1], "derive:fix", "derived", None)  # a derived abstention does not
    table = _same(store)
    assert "derive:fix" in set(table["source"])  # it won where the re-scorer abstained

    # a changed log of run 0: its rows superseded by tombstones, the new ones resolved
    path = logs / runs[0] / "evallog.json"
    changed = tmp_path / "changed" / runs[0]
    shutil.copytree(logs / runs[0], changed)
    log = json.loads(path.read_text())
    log["samples"] = log["samples"][:5]
    (changed / "evallog.json").write_text(json.dumps(log))
    store.ingest(changed, progress=False, replace=True)
    table = _same(store)
    assert table.filter(pl.col("run_id") == runs[0])["key"].n_unique() == 5

    # a run deleted by a tombstone alone: no rows left, its resolution gone with it
    with store.parquet.lock():
        store.parquet.commit({}, [Tombstone(t, runs[1]) for t in ("runs", "samples", "scores")])
    table = _same(store)
    assert runs[1] not in set(table["run_id"])

    with store.parquet.lock():
        store.parquet.compact()
    _same(store)
    assert len(store.parquet.manifest.batches) == 2  # the empty batch and the merged one

    store.ingest(logs, progress=False, workers=2)  # sharded: workers commit, publish locked
    table = _same(store)
    assert set(table["run_id"]) == set(runs) - {runs[1]}  # run 1's file is stored unchanged
    # every reader agrees: the key view and an aggregate read the same rows
    agg = store.aggregate(metrics=["success"], ci="none")
    n = table.filter(pl.col("metric") == "success").group_by("run_id").agg(pl.col("key").n_unique())
    assert dict(agg.select("run_id", "n_total").rows()) == dict(n.rows())


def test_rescoring_one_run_resolves_that_run_alone(tmp_path: Path, logs: Path) -> None:
    store = ha.open_store(tmp_path / "s")
    store.ingest(logs, progress=False)
    runs = sorted(store.runs()["run_id"])
    before = _resolved_batches(store)
    assert set().union(*before.values()) == set(runs)
    store.score(runs=[runs[2]])
    after = _resolved_batches(store)
    new = {seq: rs for seq, rs in after.items() if seq not in before}
    assert list(new.values()) == [{runs[2]}]
    _same(store)


@pytest.mark.slow
def test_a_store_without_resolution_reads_the_rule_and_its_next_writer_resolves_it(
    tmp_path: Path, logs: Path
) -> None:
    """A store an older version wrote: no resolved rows, no flag in the manifest."""
    store = ha.open_store(tmp_path / "s")
    store.ingest(logs, progress=False)
    root = store.root
    expected = store.sql("select * from int_scores_preferred order by all")
    strip_resolution(root)  # as an older version leaves it: no rows, no flag

    old = ha.open_store(root, create=False)
    assert not old.parquet.manifest.resolved
    assert old.sql("select count(*) from resolved_scores").item() == 0
    got = old.sql("select * from int_scores_preferred order by all")  # the rule, same rows
    assert got.equals(expected, null_equal=True)
    assert old.aggregate(metrics=["success"], ci="none")["n_total"].sum() == (
        expected.filter(pl.col("metric") == "success").height
    )

    # the next writer (any commit, even one touching no scores) resolves every run
    with old.parquet.lock():
        old.parquet.commit({"comparisons": pa.table({"run_id": ["x"], "parent_run_id": ["y"]})})
    assert old.parquet.manifest.resolved
    assert _manifest.read_manifest(root, root / "batches").resolved
    table = _same(old)
    assert table.equals(expected, null_equal=True)
    reader = ha.open_store(root, create=False)  # opened after: reads the table
    assert (
        "stg_resolved_scores"
        in reader.sql(
            "select sql from duckdb_views() where view_name = 'int_scores_preferred'"
        ).item()
    )


@pytest.mark.slow
def test_a_run_filter_reaches_the_scan_of_the_resolved_rows(tmp_path: Path) -> None:
    """A question about one run reads that run's row groups, not the store's."""
    logs = tmp_path / "logs"
    write_dataset(logs, SynthConfig(runs=40, tasks=10, seeds=50, traces_per_run=0, seed=9))
    store = ha.open_store(tmp_path / "s")
    store.ingest(logs, progress=False)
    runs = sorted(store.runs()["run_id"])
    plan = store.parquet.con.sql(
        "explain analyze select count(*) from int_key_scores where run_id = $r",
        params={"r": runs[7]},
    ).fetchall()
    text = "\n".join(str(c) for row in plan for c in row)
    scanned = [int(n.replace(",", "")) for n in _scan_rows(text)]
    total = store.sql("select count(*) from raw_resolved_scores").item()
    assert scanned and max(scanned) < total / 4, text


def _scan_rows(plan: str) -> list[str]:
    """The row counts the plan's table scans report."""
    import re

    out = []
    for block in re.split(r"┌", plan):
        if "TABLE_SCAN" in block or "READ_PARQUET" in block:
            out += re.findall(r"(\d[\d,]*) [Rr]ows", block)
    return out


@pytest.mark.slow
def test_a_run_filter_of_every_run_is_no_filter(tmp_path: Path) -> None:
    """``run_filter``: every run of the store (a long list costs more than the scan) reads
    the store unfiltered; fewer runs stay a filter; the answers are the same either way."""
    from hylo_analytics.resolution import run_filter

    logs = tmp_path / "logs"
    write_dataset(logs, SynthConfig(runs=70, tasks=2, seeds=3, traces_per_run=0, seed=4))
    store = ha.open_store(tmp_path / "s")
    store.ingest(logs, progress=False)
    every = sorted(store.sql("select run_id from runs")["run_id"].to_list())
    assert run_filter(store.parquet, every) is None
    assert run_filter(store.parquet, every[1:]) == every[1:]
    assert run_filter(store.parquet, every[:3]) == every[:3]
    assert run_filter(store.parquet, None) is None
    closed = {"success": "wilson", "steps": "normal"}
    assert store.aggregate(runs=every, ci=closed).equals(store.aggregate(ci=closed))
    whole = store.compare(every[1:], every[0], metrics=["success"])
    assert whole.height == len(every) - 1


def test_a_resolution_over_its_first_memory_budget_is_retried_with_more(
    tmp_path: Path, logs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first budget keeps one huge log's ingest under 1 GB (benchmarks/
    bench_huge_line.py); a run that needs more gets it: DuckDB's out-of-memory error at
    1 MB is retried at 2 MB, then at the store's limit, and the table equals the rule."""
    from hylo_analytics import _resolved

    tried: list[str] = []
    monkeypatch.setattr(_resolved, "_FIRST_LIMIT_MB", 1)

    def spy(con: Any, sql: str, *args: Any) -> Any:
        if sql.startswith("SET memory_limit"):
            tried.append(sql)
        return con.execute(sql, *args)

    class Recording:
        """The resolver's connection, recording the memory limits it is given."""

        def __init__(self, con: Any) -> None:
            self.con = con

        def execute(self, sql: str, *args: Any) -> Any:
            return spy(self.con, sql, *args)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.con, name)

    real = _resolved.connection
    monkeypatch.setattr(_resolved, "connection", lambda *a: Recording(real(*a)))
    store = ha.open_store(tmp_path / "s")
    store.ingest(logs, progress=False)
    _same(store)
    budgets = [t for t in tried if "MB'" in t]
    assert budgets[:2] == ["SET memory_limit = '1MB'", "SET memory_limit = '2MB'"]
    assert len(budgets) >= 3  # 1 MB and 2 MB were not enough: the store's limit did it
