"""Every error a CLI user meets is one line on stderr, with the fix, and exit code 2;
``--verbose`` (or ``HYLO_ANALYTICS_VERBOSE=1``) prints it whole with its traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

import hylo_analytics as ha
from hylo_analytics.cli import ERROR_LIMIT, error_line, main


def _one_line(capsys: pytest.CaptureFixture[str], command: str) -> str:
    err = capsys.readouterr().err
    assert err.startswith(f"hylo-analytics {command}: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


def test_a_duckdb_error_is_one_line_without_the_quoted_query(
    sample_store: ha.Store, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["sql", "--store", str(sample_store.root), "select nope\nfrom runs"]
    assert main(argv) == 2
    err = _one_line(capsys, "sql")
    assert 'Referenced column "nope" not found' in err and "LINE 1" not in err


def test_a_long_message_is_cut_and_says_how_to_see_it_whole(
    sample_store: ha.Store, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    query = "select error(repeat('y', 5000))"
    argv = ["sql", "--store", str(sample_store.root), query]
    assert main(argv) == 2
    err = _one_line(capsys, "sql")
    assert len(err) < ERROR_LIMIT + 200 and "more characters: --verbose" in err
    for verbose in (["--verbose", *argv], [*argv, "--verbose"], argv):
        if verbose is argv:
            monkeypatch.setenv("HYLO_ANALYTICS_VERBOSE", "1")
        assert main(verbose) == 2
        err = capsys.readouterr().err
        assert "Traceback" in err and "y" * 5000 in err


def test_an_os_error_is_one_line(
    sample_store: ha.Store, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argv = ["runs", "--store", str(sample_store.root), "--format", "csv", "-o", str(tmp_path)]
    assert main(argv) == 2  # a folder as the output file
    assert "Is a directory" in _one_line(capsys, "runs")


def test_error_line() -> None:
    assert error_line(KeyError("no metric 'x'")) == "no metric 'x'"  # not repr's quotes
    assert error_line(ValueError("a\n\n  b\nLINE 1: select\n   ^")) == "a b"
    assert error_line(ValueError("")) == "ValueError"
    cut = error_line(ValueError("z" * 1000), limit=10)
    assert cut.startswith("z" * 10 + "... (990 more characters")


@pytest.mark.slow
def test_ingest_keeps_its_own_verbose(
    sample_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``ingest --verbose`` lists every file's format; errors in full need ``hylo-analytics
    --verbose ingest``."""
    store = str(tmp_path / "s")
    assert main(["ingest", str(sample_dir), "--store", store, "--quiet", "--verbose"]) == 0
    assert main(["--verbose", "ingest", str(tmp_path / "nope"), "--store", store]) == 2
    assert "Traceback" in capsys.readouterr().err
