"""Heavy modules are imported on first use, not at package import (the CLI starts quickly).

Each check runs in a fresh interpreter and reads ``sys.modules``: the guard that a new
top-level import of scipy, altair, pandas ... in some module does not slip back in. The time
it buys is measured by benchmarks/bench_import.py.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import hylo_analytics as ha
from hylo_analytics._lazy import LazyModule

# on first use only: statistics, charts, reports, schemas, the web app, progress bars
HEAVY = (
    "scipy", "statsmodels", "altair", "vl_convert", "pandas", "jsonschema", "yaml", "tqdm",
    "zstandard", "starlette", "uvicorn", "inspect_ai", "matplotlib", "IPython",
)  # fmt: skip
ENGINE = ("polars", "pyarrow", "duckdb", "numpy")  # what a store needs; nothing before it


def _loaded(code: str) -> set[str]:
    """Top-level packages (of HEAVY and ENGINE) imported after running ``code`` afresh."""
    probe = (
        f"{code}\nimport sys, json\n"
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY + ENGINE)!r})))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_importing_the_package_imports_no_engine_and_nothing_heavy() -> None:
    assert _loaded("import hylo_analytics") == set()


def test_every_public_name_but_charts_and_reports_loads_only_the_engine() -> None:
    code = (
        "import hylo_analytics as ha\n"
        "for n in ha.__all__:\n"
        "    if n not in ('charts', 'build_report'): getattr(ha, n)"
    )
    loaded = _loaded(code)
    assert loaded & set(HEAVY) == set()
    assert loaded >= {"polars", "pyarrow", "duckdb"}  # the probe can see what is imported


def test_opening_a_store_and_the_cli_parser_import_nothing_heavy() -> None:
    assert _loaded("import hylo_analytics as ha; ha.open_store") & set(HEAVY) == set()
    code = "import hylo_analytics.cli as c; c.build_parser()"
    assert _loaded(code) == set()  # --help is argparse only: no engine either


def test_charts_are_loaded_on_first_use() -> None:
    assert "altair" in _loaded("import hylo_analytics as ha; ha.charts.paired_forest")


def test_lazy_names_are_the_modules_objects() -> None:
    from hylo_analytics import api, charts, compare, contracts, stats

    assert ha.open_store is api.open_store and ha.Store is api.Store
    assert ha.StatisticalRule is compare.StatisticalRule
    assert ha.Score is contracts.Score
    assert ha.stats is stats and ha.charts is charts
    assert ha.token_cost.__name__ == "token_cost"  # the function, not its module
    assert set(ha.__all__) <= set(dir(ha))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = ha.nope


def test_lazy_module_behaves_like_the_module() -> None:
    lazy = LazyModule("math")
    assert lazy.sqrt(9.0) == 3.0
    assert lazy.pi == __import__("math").pi


def test_statistics_still_work_through_the_lazy_modules() -> None:
    from hylo_analytics.stats import mcnemar_exact

    assert mcnemar_exact(5, 0) == 1 / 32
