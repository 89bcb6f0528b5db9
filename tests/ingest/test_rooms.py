"""The ingest package in rooms: small modules that say what they are, one front door.

The package import cycles are checked for every module by ``tests/test_layout.py``.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "hylo_analytics" / "ingest"
MODULES = sorted(PACKAGE.rglob("*.py"))

# every name ``hylo_analytics.ingest`` offered before it was split into rooms
FRONT_DOOR = (
    "MAX_DOC_BYTES", "READERS", "SNIFF_BYTES", "TRACE_FORMAT", "IngestError", "IngestReport",
    "Parsed", "Problem", "Reader", "SourceFile", "TraceBatch", "TraceRef", "Tombstone", "log", "claim_files",
    "deep_json", "detect", "discover", "drop_duplicate_runs", "hylo", "ingest_paths", "inspect",
    "inspect_robots", "iter_traces", "lease_seconds", "metric_results", "read_files",
    "release_memory", "remap_file_idx", "too_deep", "vla_eval", "_rows_of", "_work",
)  # fmt: skip


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_module_is_under_600_lines(path: Path) -> None:
    assert len(path.read_text().splitlines()) <= 600


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_module_says_what_it_is_on_its_first_line(path: Path) -> None:
    doc = ast.get_docstring(ast.parse(path.read_text()))
    assert doc, f"{path.name} has no docstring"
    assert doc.splitlines()[0].rstrip().endswith((".", ")")), doc.splitlines()[0]


@pytest.mark.parametrize("name", FRONT_DOOR)
def test_the_front_door_keeps_every_name(name: str) -> None:
    ingest = importlib.import_module("hylo_analytics.ingest")
    assert getattr(ingest, name) is not None


def test_a_worker_process_runs_the_worker_module() -> None:
    """``_worker`` is imported by no module: run as ``__main__`` it is never loaded twice."""
    for path in MODULES:
        tree = ast.parse(path.read_text())
        names = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module} | {
            a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
        }
        assert "hylo_analytics.ingest._worker" not in names, path.name
