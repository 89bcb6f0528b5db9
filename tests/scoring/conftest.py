"""Fixtures of the scoring tests: stores ingested from real files."""

from __future__ import annotations

from pathlib import Path

import pytest
from span_data import open_ingested, span, write_span_run

import hylo_analytics as ha


@pytest.fixture()
def many_store(tmp_path: Path) -> ha.Store:
    """Two runs of 25 traced samples each (50 episodes)."""
    for run in ("run-many-1", "run-many-2"):
        traces = {f"k{i:02d}#0": [span("search", q=i)] for i in range(25)}
        scores = {k: {"imported": float(i)} for i, k in enumerate(traces)}
        write_span_run(tmp_path / "data", run, traces, scores=scores)
    return open_ingested(tmp_path)
