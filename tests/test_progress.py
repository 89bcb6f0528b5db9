"""Progress bars: shown to a person (a terminal, Jupyter), never into a pipe or a log."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hylo_analytics import _progress


def test_a_bar_shows_when_enabled_and_not_when_disabled(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with _progress.progress(3, "rank", enabled=True, delay=0) as bar:
        bar.update()
        bar.set_postfix_str("counting pairs")
    assert "rank" in capsys.readouterr().err
    with _progress.progress(3, "rank", enabled=False, delay=0) as bar:
        bar.update()
    assert capsys.readouterr().err == ""


def test_piped_stderr_is_nobody_watching() -> None:
    code = "from hylo_analytics._progress import interactive; print(interactive())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_jupyter_kernel_is_somebody_watching(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ipykernel", object())  # type: ignore[arg-type]
    assert _progress.interactive()


def test_a_long_rank_from_a_pipe_prints_no_bar(tmp_path: Path) -> None:
    """The CLI piped: stderr holds the summary lines only, no carriage-return bar."""
    import hylo_analytics as ha
    from hylo_analytics.testing import SynthConfig, write_dataset

    write_dataset(tmp_path / "logs", SynthConfig(runs=4, tasks=2, seeds=5, traces_per_run=0))
    ha.open_store(tmp_path / "s").ingest(tmp_path / "logs", progress=False)
    out = subprocess.run(
        [str(Path(sys.executable).with_name("hylo-analytics")), "rank", "--store", str(tmp_path / "s"),
         "--policy", "run_id", "--strata", ""],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "\r" not in out.stderr and "tie group" in out.stderr
