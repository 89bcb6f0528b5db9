"""The wheel carries every view and the demo's sample; the core install needs no test tools.

CI also installs the built wheel into a clean venv and runs ``hylo-analytics demo`` from
there (``.ci/run``); these tests check the same promises from inside the test run.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

import hylo_analytics as ha
from hylo_analytics._sql import sql_dir

REPO = Path(__file__).resolve().parents[1]


# packages the tests, notebooks and benchmarks use and the package itself must not import
DEV_ONLY = ("statsmodels", "pandas", "inspect_ai", "pytest", "hypothesis", "nbformat", "PIL")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(out), str(REPO)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    (path,) = out.glob("hylo_analytics-*.whl")
    return path


@pytest.mark.slow
def test_wheel_contains_every_sql_file_and_the_sample(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for sql in sql_dir().glob("*.sql"):
        assert f"hylo_analytics/sql/{sql.name}" in names
    sample = REPO / "data" / "sample"
    files = [p for p in sample.rglob("*") if p.is_file()]
    assert files
    for path in files:
        assert f"hylo_analytics/data/sample/{path.relative_to(sample).as_posix()}" in names
    assert "hylo_analytics/py.typed" in names


@pytest.mark.slow
def test_installed_wheel_finds_its_own_files(wheel: Path, tmp_path: Path) -> None:
    """Unpacked (as pip installs it), the package finds sql/ and the sample inside itself."""
    zipfile.ZipFile(wheel).extractall(tmp_path)
    code = (
        "import hylo_analytics, hylo_analytics._resources as r, hylo_analytics._sql as s;"
        "print(hylo_analytics.__file__); print(s.sql_dir()); print(r.sample_data_dir())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True,
        env={"PYTHONPATH": str(tmp_path), "PATH": ""},
    ).stdout.split()  # fmt: skip
    package = tmp_path / "hylo_analytics"
    assert [Path(p) for p in out] == [
        package / "__init__.py",
        package / "sql",
        package / "data" / "sample",
    ]
    assert len(list((package / "data" / "sample").glob("*/evallog.json"))) == 3


def test_core_dependencies_are_light() -> None:
    """``pip install hylo_analytics`` brings what the demo needs; test tools come with [dev]."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    core = {
        dep.split(">")[0].split("<")[0].split("=")[0].strip().lower()
        for dep in project["dependencies"]
    }
    assert not core & {d.lower() for d in DEV_ONLY}
    assert {"statsmodels", "pytest", "inspect_ai"} <= {
        dep.split(">")[0].strip().lower() for dep in project["optional-dependencies"]["dev"]
    }


def test_package_never_imports_a_dev_only_package() -> None:
    for path in (REPO / "hylo_analytics").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            else:
                continue
            for name in names:
                assert name.split(".")[0] not in DEV_ONLY, f"{path} imports {name}"


def test_public_api_is_sorted_and_importable() -> None:
    assert list(ha.__all__) == sorted(ha.__all__)
    for name in ha.__all__:
        assert getattr(ha, name) is not None


@pytest.mark.slow
def test_progress_bar_only_when_asked(
    tmp_path: Path, sample_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ha.open_store(tmp_path / "quiet").ingest(sample_dir, progress=False)
    assert capsys.readouterr().err == ""
    ha.open_store(tmp_path / "loud").ingest(sample_dir, progress=True)
    assert "ingest" in capsys.readouterr().err
