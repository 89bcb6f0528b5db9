"""Shared fixtures: the bundled sample data, a store holding it, and the real files."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import hylo_analytics as ha

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "sample"
REAL = REPO.parent / "shared" / "data" / "real"


@pytest.fixture(scope="session")
def sample_dir() -> Path:
    """The committed sample EvalLogs (read-only: copy before changing anything)."""
    return SAMPLE


@pytest.fixture()
def sample_copy(tmp_path: Path) -> Path:
    """A private, writable copy of the sample data."""
    dst = tmp_path / "data"
    shutil.copytree(SAMPLE, dst)
    return dst


@pytest.fixture(scope="session")
def sample_store(tmp_path_factory: pytest.TempPathFactory) -> ha.Store:
    """A store with the sample ingested once per session (treat as read-only)."""
    store = ha.open_store(tmp_path_factory.mktemp("store") / "store")
    store.ingest(SAMPLE, progress=False)
    return store


@pytest.fixture(scope="session")
def real_dir() -> Path:
    """``../shared/data/real``: real harness files, never copied into the repo."""
    assert REAL.is_dir(), f"the real data files are expected at {REAL}"
    return REAL
