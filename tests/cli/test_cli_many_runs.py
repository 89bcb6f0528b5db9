"""The CLI at hundreds of runs (issue 39, item 7): a candidate selector names every run it
matches, runs list in natural version order, and a cut table says what it hides and how to
see it (``cli/_common.emit``, which every command prints through)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import polars as pl
import pytest

import hylo_analytics as ha
from hylo_analytics.cli import main
from hylo_analytics.cli._common import ALL_ROWS_HINT, TABLE_ROWS

N_RUNS = 300  # past TABLE_ROWS: 1.0.0, 1.1.0, 1.2.0-rc1, 2.3.0 ... 2.299.0
HINT = ALL_ROWS_HINT


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> ha.Store:
    from hylo_analytics.testing import SynthConfig, write_dataset

    root = tmp_path_factory.mktemp("many_cli")
    cfg = SynthConfig(runs=N_RUNS, tasks=1, seeds=8, traces_per_run=0, error_rate=0.2)
    write_dataset(root / "logs", cfg)
    store = ha.open_store(root / "store")
    store.ingest(root / "logs", progress=False)
    return store


def _out(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 0
    return capsys.readouterr().out


def _rows(table: str) -> list[str]:
    return [line for line in table.splitlines() if line.startswith("│")]


def test_runs_in_natural_version_order_cut_with_a_count_and_a_hint(
    store: ha.Store, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _out(["runs", "--store", str(store.root)], capsys)
    rows = _rows(out)
    assert len(rows) == 1 + TABLE_ROWS + 1  # the header, the rows shown, the row of "…"
    assert out.splitlines()[-1] == (
        f"* {N_RUNS - TABLE_ROWS} of {N_RUNS} rows hidden (the first and last 100 shown): {HINT}"
    )
    ids = [line.split("┆")[0].strip("│ ") for line in rows[1:]]
    assert ids[:4] == ["run-octo-ft-1.0.0-0000", "run-octo-ft-1.1.0-0001",
                       "run-octo-ft-1.2.0-rc1-0002", "run-octo-ft-2.3.0-0003"]  # fmt: skip
    assert ids.index("run-octo-ft-2.9.0-0009") < ids.index("run-octo-ft-2.10.0-0010")
    assert ids.index("run-octo-ft-2.99.0-0099") == 99 and ids[100] == "…"
    assert ids[101] == "run-octo-ft-2.200.0-0200" and ids[-1] == "run-octo-ft-2.299.0-0299"
    every = _out(["runs", "--store", str(store.root), "--all"], capsys)
    assert len(_rows(every)) == 1 + N_RUNS and "hidden" not in every
    assert _rows(every)[1 : TABLE_ROWS // 2 + 1] == rows[1 : TABLE_ROWS // 2 + 1]
    again = _out(["runs", "--store", str(store.root)], capsys)
    assert again == out  # --all held for its command only


def test_runs_written_whole_in_natural_order(
    store: ha.Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = tmp_path / "runs.txt"
    _out(["runs", "--store", str(store.root), "-o", str(table)], capsys)
    assert len(_rows(table.read_text())) == 1 + N_RUNS and "hidden" not in table.read_text()
    text = _out(["runs", "--store", str(store.root), "--format", "csv"], capsys)
    ids = [r["run_id"] for r in csv.DictReader(io.StringIO(text))]
    assert ids == store.runs()["run_id"].to_list()
    expected = ["run-octo-ft-1.0.0-0000", "run-octo-ft-1.1.0-0001", "run-octo-ft-1.2.0-rc1-0002"]
    expected += [f"run-octo-ft-2.{i}.0-{i:04d}" for i in range(3, N_RUNS)]
    assert ids == expected


def test_compare_a_candidate_selector_as_the_id_list(
    store: ha.Store, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["compare", "--store", str(store.root), "--parent", "version=1.0.0"]
    ids = store.runs()["run_id"].to_list()
    text = _out([*base, "--candidate", "agent=octo-ft", "--format", "csv"], capsys)
    by_selector = pl.read_csv(io.StringIO(text))
    by_ids = store.compare(ids[1:], ids[0])
    assert by_selector["candidate"].to_list() == ids[1:]
    assert by_selector.select("candidate", "n_pairs", "candidate_wins", "parent_wins", "ties",
                              "p_value").rows() == by_ids.select(
        "candidate", "n_pairs", "candidate_wins", "parent_wins", "ties", "p_value"
    ).rows()  # fmt: skip
    table = _out([*base, "--candidate", "agent=octo-ft"], capsys)
    lines = table.splitlines()
    assert (
        f"* {N_RUNS - 1 - TABLE_ROWS} of {N_RUNS - 1} rows hidden (the first and last 100 shown): "
        f"{HINT}"
    ) in lines
    noted = by_ids.filter(
        pl.col("drop_note").is_not_null() | pl.col("errors_note").is_not_null()
    ).height
    assert noted > 20  # the seeded data drops pairs of most candidates: the notes are cut too
    assert sum(line.startswith("* run-octo-ft-") for line in lines) == 20
    assert lines[-1] == (
        f"* {noted - 20} more overall rows dropped pairs or hold errored keys (their "
        f"drop_note, drop_reasons and errors_note columns): {HINT}"
    )


def test_the_parent_is_one_run(store: ha.Store, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["compare", "--store", str(store.root)]
    assert main([*base, "--candidate", "version=1.1.0", "--parent", "agent=octo-ft"]) == 2
    err = capsys.readouterr().err
    assert f"'agent=octo-ft' matches {N_RUNS} runs, add a field to pick one: the first 5: " in err
    assert "run-octo-ft-1.0.0-0000 (agent octo-ft, version 1.0.0" in err
    assert main([*base, "--candidate", "agent=octo-ft,version=1.0.0", "--parent",
                 "version=1.0.0"]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert "matches only the parent run 'run-octo-ft-1.0.0-0000': no candidate" in err


def test_flips_of_many_candidates_print_the_first_groups(
    store: ha.Store, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["compare", "--store", str(store.root), "--candidate", "agent=octo-ft",
            "--parent", "version=1.0.0", "--flips"]  # fmt: skip
    out = _out(argv, capsys)
    flips = store.flips("agent=octo-ft", "version=1.0.0")
    groups = flips.select("candidate", "metric", "task_id").unique()
    assert groups.height > 50
    heads = [line for line in out.splitlines() if line.startswith("run-octo-ft-")]
    assert len(heads) == 50
    shown = flips.filter(pl.col("candidate").is_in([h.split(" vs ")[0] for h in heads])).height
    assert (
        f"* {groups.height - 50:,} more (candidate, metric, task) groups of "
        f"{flips.height - shown:,} flipped keys hidden: {HINT}"
    ) in out.splitlines()
    every = _out([*argv, "--all"], capsys)
    assert sum(line.startswith("run-octo-ft-") for line in every.splitlines()) == groups.height
