"""scipy is imported on first use, not at package import (the CLI starts quickly)."""

from __future__ import annotations

import subprocess
import sys

from hylo_analytics._lazy import LazyModule


def test_importing_the_package_does_not_import_scipy_stats() -> None:
    code = "import sys, hylo_analytics, hylo_analytics.cli; print('scipy.stats' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_lazy_module_behaves_like_the_module() -> None:
    lazy = LazyModule("math")
    assert lazy.sqrt(9.0) == 3.0
    assert lazy.pi == __import__("math").pi


def test_statistics_still_work_through_the_lazy_modules() -> None:
    from hylo_analytics.stats import mcnemar_exact

    assert mcnemar_exact(5, 0) == 1 / 32
