"""The wheel carries every view, and the package answers to its public names."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import hylo_analytics as ha
from hylo_analytics._sql import sql_dir

REPO = Path(__file__).resolve().parents[1]


def test_wheel_contains_every_sql_file(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(REPO)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("hylo_analytics-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for sql in sql_dir().glob("*.sql"):
        assert f"hylo_analytics/sql/{sql.name}" in names
    assert "hylo_analytics/py.typed" in names


def test_public_api_is_sorted_and_importable() -> None:
    assert list(ha.__all__) == sorted(ha.__all__)
    for name in ha.__all__:
        assert getattr(ha, name) is not None


def test_progress_bar_only_when_asked(
    tmp_path: Path, sample_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ha.open_store(tmp_path / "quiet").ingest(sample_dir, progress=False)
    assert capsys.readouterr().err == ""
    ha.open_store(tmp_path / "loud").ingest(sample_dir, progress=True)
    assert "ingest" in capsys.readouterr().err
