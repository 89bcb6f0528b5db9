"""Shared fixtures (the bundled sample data, a store holding it, the real files) and markers.

Markers (registered in pyproject.toml): ``spark`` for everything in tests/spark, ``browser``
for tests driving Chromium, and ``slow`` for both and for the tests decorated with it, so that
``pytest -m "not slow"`` is the fast suite to run while working.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import hylo_analytics as ha

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "sample"
REAL = REPO.parent / "shared" / "data" / "real"
SPARK_TESTS = REPO / "tests" / "spark"
BROWSER_TESTS = {REPO / "tests" / "serve" / "test_browser.py"}


def pytest_configure(config: pytest.Config) -> None:
    """The package compiled to bytecode once, by the controller, before the workers start.

    Where ``PYTHONDONTWRITEBYTECODE`` is set (these machines set it) and the checkout is
    fresh, every process the suite starts (CLI children, ingest workers, notebook kernels,
    the kill -9 zygote: hundreds) would compile each module it imports from source again.
    """
    if hasattr(config, "workerinput"):  # an xdist worker: the controller did it
        return
    import compileall

    compileall.compile_dir(REPO / "hylo_analytics", quiet=1, workers=1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks by folder: tests/spark is ``spark``, the Playwright file ``browser``; both ``slow``."""
    for item in items:
        path = Path(item.path)
        if SPARK_TESTS in path.parents:
            item.add_marker(pytest.mark.spark)
        if path in BROWSER_TESTS:
            item.add_marker(pytest.mark.browser)
        if item.get_closest_marker("spark") or item.get_closest_marker("browser"):
            item.add_marker(pytest.mark.slow)


# The longest units first (measured: `--junitxml`, 2 cores), so the run does not end on one
# of them while the other worker idles; every other file follows by its number of tests.
LONGEST_FIRST = (
    "tests/spark",
    "tests/test_crash.py",
    "tests/ingest/test_hostile.py",
    "tests/ingest/test_sharded.py",
    "tests/ingest/test_validation.py",
    "tests/test_readme.py",
    "tests/test_notebooks.py",
    "tests/test_store.py",
    "tests/ingest/test_fuzz.py",
    "tests/test_compact.py",
    "tests/test_concurrency.py",
    "tests/serve/test_browser.py",
    "tests/test_export.py",
    "tests/cli/test_cli_sql.py",
    "tests/test_real_data.py",
)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``-n`` (``--dist load``, the default), each test file is one unit, handed to one
    worker (tests/spark, the whole folder, is one): a module's fixtures (a store, a hostile
    corpus, one Spark session: 20-80 s to start) are built once per run, not once per worker,
    and the longest units go first. ``--dist loadgroup`` with ``xdist_group`` marks cannot
    do this here: xdist 3.8 renames ``item._nodeid``, which pytest 9 no longer reads."""
    if config.getvalue("dist") not in ("load", "loadgroup"):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FilesLongestFirst(LoadScopeScheduling):
        ordered = False

        def _split_scope(self, nodeid: str) -> str:
            return "tests/spark" if nodeid.startswith("tests/spark/") else nodeid.split("::")[0]

        def _assign_work_unit(self, node: Any) -> None:
            if not self.ordered:  # the queue as xdist built it (by number of tests), reordered
                rank = {scope: i for i, scope in enumerate(LONGEST_FIRST)}
                units = sorted(self.workqueue.items(), key=lambda u: rank.get(u[0], len(rank)))
                self.workqueue.clear()
                self.workqueue.update(units)
                self.ordered = True
            super()._assign_work_unit(node)

    return FilesLongestFirst(config, log)


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


# CI sets this, so that the tests on real files can never be skipped there unnoticed.
REQUIRE_REAL = os.environ.get("HYLO_REQUIRE_REAL_DATA", "") == "1"


def require_real_data() -> Path:
    """``../shared/data/real``, or skip (fail when ``HYLO_REQUIRE_REAL_DATA=1``) without it."""
    if REAL.is_dir():
        return REAL
    why = f"the real data files are expected at {REAL} (next to the repository)"
    if REQUIRE_REAL:
        pytest.fail(f"{why}; HYLO_REQUIRE_REAL_DATA=1 makes their absence a failure")
    pytest.skip(f"{why}; not found here (CI sets HYLO_REQUIRE_REAL_DATA=1 and fails instead)")


@pytest.fixture(scope="session")
def real_dir() -> Path:
    """``../shared/data/real``: real harness files, never copied into the repo."""
    return require_real_data()


@pytest.fixture(scope="session")
def many_runs_store(tmp_path_factory: pytest.TempPathFactory) -> ha.Store:
    """2,000 runs of one agent (versions 1.0.0, 1.1.0, 1.2.0-rc1, 2.3.0 ... 2.1999.0) of 6
    keys each (2 tasks x 3 seeds, no traces): the report and the pages at N = 2,000 (about
    3 s to write and ingest; treat as read-only)."""
    from hylo_analytics.testing import SynthConfig, write_dataset

    root = tmp_path_factory.mktemp("many-runs")
    write_dataset(root / "logs", SynthConfig(runs=2000, tasks=2, seeds=3, traces_per_run=0))
    store = ha.open_store(root / "store")
    store.ingest(root / "logs", progress=False)
    return store


@pytest.fixture(scope="module")
def served_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private store folder (ingested and scored once per module) for a server to read
    (tests/serve)."""
    root = tmp_path_factory.mktemp("serve") / "store"
    store = ha.open_store(root)
    store.ingest(SAMPLE, progress=False)
    store.score()
    return root


@pytest.fixture()
def new_run() -> Callable[[Path, str], Path]:
    """Writes a new run's EvalLog into a folder (for ingesting while a server runs)."""
    return _write_new_run


def _write_new_run(folder: Path, run_id: str) -> Path:
    """A copy of one sample EvalLog under a new run id, traces left out, in ``folder``."""
    log = json.loads((SAMPLE / "run-octo-ft-1.0.0-0000" / "evallog.json").read_text())
    log["run_id"] = run_id
    log["agent"]["version"] = "9.9.9-live"
    for sample in log["samples"]:
        sample.pop("trace", None)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "evallog.json").write_text(json.dumps(log))
    return folder
