"""Compaction merges batches without losing a row or moving an answer; readers see it whole."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import hylo_analytics as ha
from hylo_analytics import _manifest, _schema
from hylo_analytics.cli import main as cli_main
from hylo_analytics.testing import SynthConfig, write_dataset
from hylo_analytics.testing.checksums import store_checksums


def _raw_counts(store: ha.Store) -> dict[str, int]:
    return {t: store.sql(f"SELECT count(*) FROM raw_{t}").item() for t in _schema.TABLES}


def _listed(store: ha.Store) -> list[str]:
    return [b.name for b in store.parquet.manifest.batches]


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("runs")
    write_dataset(out, SynthConfig(runs=6, tasks=4, seeds=6, mean_steps=8, seed=5))
    return out


def _many_batches(root: Path, runs_dir: Path, monkeypatch: pytest.MonkeyPatch) -> ha.Store:
    """One ingest per run, then a re-score: batches with tombstones and superseded rows."""
    monkeypatch.setenv("HYLO_ANALYTICS_COMPACT_AT", "0")
    store = ha.open_store(root)
    for run in sorted(runs_dir.iterdir()):
        store.ingest(run, progress=False)
    store.score()
    store.score(["success"])  # supersedes one source's rows: history to keep
    return store


@pytest.mark.slow
def test_compaction_keeps_every_row_and_every_answer(
    tmp_path: Path, runs_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _many_batches(tmp_path / "s", runs_dir, monkeypatch)
    assert (
        len(store.parquet.manifest.batches) == 9
    )  # the empty batch, 6 ingests, 2 scorings (no merging)
    raw, answers = _raw_counts(store), store_checksums(store.parquet)
    reader = ha.open_store(store.root, create=False)  # another reader, opened before
    assert store_checksums(reader.parquet) == answers

    with store.parquet.lock():
        report = store.parquet.compact()
    assert (report.batches_before, report.batches_after) == (9, 2)
    assert sum(report.rows.values()) == sum(raw.values())
    assert "9 batches into 2" in str(report)
    assert _raw_counts(store) == raw  # superseded rows are history, and history is kept
    assert store_checksums(store.parquet) == answers
    assert store_checksums(reader.parquet) == answers  # the reader re-reads the new manifest
    assert reader.parquet.manifest.batches == store.parquet.manifest.batches
    assert store.parquet.manifest.current_schemas
    # the merged batches stay on disk, retired, until no query can be reading them
    on_disk = {p.name for p in (store.root / "batches").iterdir()}
    assert len(on_disk) == 9 + 1
    monkeypatch.setattr(_manifest, "RETIRE_SECONDS", 0.0)
    with store.parquet.lock():
        store.parquet.clean_staging()
    assert sorted(p.name for p in (store.root / "batches").iterdir()) == _listed(store)
    assert not store.parquet.manifest.retired
    # one file per table, runs in order, in row groups readers can skip
    merged = store.root / "batches" / _listed(store)[1] / "scores.parquet"
    assert pq.read_schema(merged).remove_metadata().equals(_schema.SCORES)
    # and the store goes on: a new ingest and a compare after the compaction
    with store.parquet.lock():
        assert store.parquet.compact().batches_after == 2  # nothing to merge
    ids = store.sql("SELECT run_id FROM runs ORDER BY run_id")["run_id"].to_list()
    assert store.compare(ids[1], ids[0]).height == 1


@pytest.mark.slow
def test_commits_compact_past_the_threshold(
    tmp_path: Path, runs_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Leveled: more than 2 batches of a level merge into one of the next."""
    monkeypatch.setenv("HYLO_ANALYTICS_COMPACT_AT", "2")
    store = ha.open_store(tmp_path / "s")
    expected = ha.open_store(tmp_path / "one")
    expected.ingest(runs_dir, progress=False)
    levels = []
    for run in sorted(runs_dir.iterdir()):
        store.ingest(run, progress=False)
        levels.append(sorted(b.level for b in store.parquet.manifest.batches if b.seq))
    # commits 3, 6: level 0 merges; commit 6's second level-1 batch stays (2 is not > 2)
    assert levels == [[0], [0, 0], [1], [0, 1], [0, 0, 1], [1, 1]]
    store.score()
    assert [b.level for b in store.parquet.manifest.batches if b.seq] == [1, 1, 0]
    expected.score()
    assert store_checksums(store.parquet) == store_checksums(expected.parquet)
    assert _raw_counts(store) == _raw_counts(expected)


@pytest.mark.slow
def test_a_store_without_a_manifest_reads_and_compacts(tmp_path: Path, runs_dir: Path) -> None:
    """Stores written before the manifest: folders are the list; older schemas reconcile."""
    store = ha.open_store(tmp_path / "s")
    store.ingest(sorted(runs_dir.iterdir())[0], progress=False)
    answers = store_checksums(store.parquet)
    (store.root / "manifest.json").unlink()
    # a batch written before scores had a metadata column
    old = pq.read_table(store.root / "batches" / f"{1:020d}" / "scores.parquet")
    pq.write_table(
        old.drop_columns("metadata"), store.root / "batches" / f"{1:020d}" / "scores.parquet"
    )
    legacy = ha.open_store(store.root, create=False)
    assert not legacy.parquet.manifest.current_schemas
    assert store_checksums(legacy.parquet) == answers
    with legacy.parquet.lock():
        legacy.parquet.compact()  # nothing to merge: one batch besides the empty one
        legacy.parquet.commit({"samples": pa.table({"run_id": ["x"], "key": ["t#1"]})})
        legacy.parquet.compact()
    assert legacy.parquet.manifest.current_schemas
    assert json.loads((legacy.root / "manifest.json").read_text())["next_seq"] == 3
    assert legacy.sql("SELECT count(*) FROM scores WHERE metadata IS NULL").item() > 0


@pytest.mark.slow
def test_cli_compact(
    tmp_path: Path,
    runs_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = _many_batches(tmp_path / "s", runs_dir, monkeypatch)
    assert cli_main(["compact", "--store", str(store.root)]) == 0
    assert "compacted 9 batches into 2" in capsys.readouterr().out
    assert len(ha.open_store(store.root, create=False).parquet.manifest.batches) == 2


_CHILD = """
import sys
import hylo_analytics as ha
store = ha.open_store(sys.argv[1], create=False)
with store.parquet.lock():
    print("start", flush=True)
    store.parquet.compact()
"""


@pytest.fixture(scope="module")
def batched_store(tmp_path_factory: pytest.TempPathFactory, runs_dir: Path) -> Path:
    with pytest.MonkeyPatch.context() as mp:
        return _many_batches(tmp_path_factory.mktemp("batched") / "s", runs_dir, mp).root


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.0, 0.05, 0.15, 0.4])
def test_sigkill_mid_compaction_loses_nothing(
    tmp_path: Path, batched_store: Path, delay: float
) -> None:
    root = tmp_path / "s"
    shutil.copytree(batched_store, root)
    store = ha.open_store(root, create=False)
    raw, answers = _raw_counts(store), store_checksums(store.parquet)
    with subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(root)], stdout=subprocess.PIPE, text=True
    ) as child:
        assert child.stdout is not None and child.stdout.readline().strip() == "start"
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
        child.wait()
    after = ha.open_store(root, create=False)
    assert _raw_counts(after) == raw
    assert store_checksums(after.parquet) == answers
    with after.parquet.lock():
        after.parquet.clean_staging()
        after.parquet.compact()
    assert store_checksums(after.parquet) == answers
    assert len(after.parquet.manifest.batches) == 2


def _merged_tables(store: ha.Store) -> dict[str, pa.Table]:
    """Every table of the store's one merged batch, rows in stored order."""
    (merged,) = [b for b in store.parquet.manifest.batches if b.level > 0]
    folder = store.root / "batches" / merged.name
    return {p.stem: pq.read_table(p) for p in sorted(folder.glob("*.parquet"))}


@pytest.mark.slow
def test_a_merge_of_commits_of_other_runs_streams_in_the_order_a_sort_gives(
    tmp_path: Path, runs_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Commits of distinct runs are merged without a sort (``_in_run_order``): the merged
    files hold the same rows in the same order as the sorting merge writes them; a run in
    two batches (re-scored) makes the scores merge sort."""
    from hylo_analytics.store import compaction

    decided: dict[str, bool] = {}
    real = compaction._in_run_order

    def spy(files: list[Path]) -> list[Path] | None:
        got = real(files)
        decided[files[0].stem] = got is not None
        return got

    # One set of batches, copied: two scorings may write a batch's rows in another order.
    _many_batches(tmp_path / "a", runs_dir, monkeypatch)
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    monkeypatch.setattr(compaction, "_in_run_order", spy)
    streamed = ha.open_store(tmp_path / "a", create=False)
    with streamed.parquet.lock():
        streamed.parquet.compact()
    assert decided["events"] and decided["samples"] and decided["runs"]
    assert not decided["scores"]  # every run re-scored in a later batch: sorted
    monkeypatch.setattr(compaction, "_in_run_order", lambda files: None)
    sorted_ = ha.open_store(tmp_path / "b", create=False)
    with sorted_.parquet.lock():
        sorted_.parquet.compact()
    want, got = _merged_tables(sorted_), _merged_tables(streamed)
    assert want.keys() == got.keys()
    for name, table in want.items():  # the same rows in the same order (times aside)
        drop = [c for c in ("ingested_at", "source_path") if c in table.column_names]
        assert got[name].drop_columns(drop).equals(table.drop_columns(drop)), name


def test_run_order_refuses_a_run_in_two_files_and_unsorted_files(tmp_path: Path) -> None:
    from hylo_analytics.store.compaction import _in_run_order

    def write(name: str, runs: list[str | None]) -> Path:
        path = tmp_path / f"{name}.parquet"
        pq.write_table(pa.table({"run_id": runs, "x": list(range(len(runs)))}), path)
        return path

    a, b = write("a", ["r1", "r1", "r2"]), write("b", ["r3", "r4"])
    assert _in_run_order([b, a]) == [a, b]
    assert _in_run_order([a, write("c", ["r2", "r5"])]) is None  # r2 in two files
    assert _in_run_order([write("d", ["r2", "r1"])]) is None  # not sorted
    assert _in_run_order([write("e", ["r1", "r2", "r1"])]) is None  # a run in two segments
    assert _in_run_order([write("f", ["r1", None])]) is None  # null runs sort last in SQL
