"""``hylo-analytics sequential``: one look now, the history kept in a log, settings fixed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import hylo_analytics as ha
from hylo_analytics.cli import main
from hylo_analytics.compare.sequential import sequential_compare

SPATIAL = "benchmark=libero_spatial"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, real_dir: Path) -> ha.Store:
    s = ha.open_store(tmp_path_factory.mktemp("seq") / "store")
    s.ingest(real_dir / "vla-eval-harness", progress=False)
    return s


@pytest.mark.slow
def test_a_look_with_its_log(
    store: ha.Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "looks.json"
    argv = ["sequential", "--store", str(store.root), "--candidate", f"agent=xvla,{SPATIAL}",
            "--parent", f"agent=pi05,{SPATIAL}", "--log", str(log)]  # fmt: skip
    assert main([*argv, "--format", "json"]) == 0
    looks = json.loads(capsys.readouterr().out)
    want = sequential_compare(store.parquet, f"agent=xvla,{SPATIAL}", f"agent=pi05,{SPATIAL}")
    assert looks[0]["e_value"] == pytest.approx(float(want.e_value[0]))
    # the harness's convention: pi05's timeouts are failures (500 pairs, 36 / 9)
    assert (looks[0]["n_pairs"], looks[0]["wins"], looks[0]["losses"]) == (500, 36, 9)
    kept = json.loads(log.read_text())
    assert (kept["n_pairs"], kept["wins"], kept["losses"]) == ([500], [36], [9])
    # the next look appends; the table says whether to stop
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "stop: the evidence reached 1/alpha = 20 at look 0" in out
    assert json.loads(log.read_text())["n_pairs"] == [500, 500]
    # a setting changed after peeking is refused, and the log is left as it was
    before = log.read_text()
    assert main([*argv, "--errors", "exclude"]) == 2
    err = capsys.readouterr().err
    assert "the settings changed since the first look" in err and "errors" in err
    assert log.read_text() == before


def test_a_broken_log_is_refused(
    store: ha.Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "looks.json"
    log.write_text("{not json")
    argv = ["sequential", "--store", str(store.root), "--candidate", f"agent=xvla,{SPATIAL}",
            "--parent", f"agent=pi05,{SPATIAL}", "--log", str(log)]  # fmt: skip
    assert main(argv) == 2
    assert "not a log of looks" in capsys.readouterr().err
