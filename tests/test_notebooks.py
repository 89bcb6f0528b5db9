"""Every notebook in notebooks/ runs top to bottom, in under a minute, and is committed clean."""

from __future__ import annotations

import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks() -> None:
    names = [p.name for p in NOTEBOOKS]
    assert {"01_quickstart.ipynb", "03_sql_cookbook.ipynb"} <= set(names)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_is_committed_without_outputs(path: Path) -> None:
    book = nbformat.read(path, as_version=4)
    for cell in book.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, (
                f"{path.name}: cell {cell.get('id')} has outputs; strip them before committing"
            )


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path: Path, request: pytest.FixtureRequest) -> None:
    book = nbformat.read(path, as_version=4)
    if any("shared/data/real" in "".join(c.source) for c in book.cells):
        request.getfixturevalue("real_dir")  # skips, or fails under HYLO_REQUIRE_REAL_DATA=1
    client = NotebookClient(
        book,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},  # relative ../data paths resolve
    )
    start = time.perf_counter()
    client.execute()  # raises CellExecutionError naming the failing cell
    seconds = time.perf_counter() - start
    assert seconds < 60, f"{path.name} took {seconds:.0f}s; notebooks must run in under a minute"
    errors = [
        out
        for cell in book.cells
        if cell.cell_type == "code"
        for out in cell.outputs
        if out.output_type == "error"
    ]
    assert not errors
