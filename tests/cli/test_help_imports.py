"""``hylo-analytics --help`` builds every parser without the engine; its defaults stay true."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hylo_analytics.cli import _defaults


def test_the_parsers_defaults_are_the_engines() -> None:
    from hylo_analytics.aggregate import CI_METHODS, STATISTICS
    from hylo_analytics.scoring import BUILTIN_SCORERS
    from hylo_analytics.stats.bootstrap import DEFAULT_RESAMPLES
    from hylo_analytics.stats.closed_form import DEFAULT_LEVEL

    assert _defaults.CI_METHODS == CI_METHODS
    assert _defaults.STATISTICS == STATISTICS
    assert _defaults.BUILTIN_SCORERS == BUILTIN_SCORERS
    assert _defaults.DEFAULT_RESAMPLES == DEFAULT_RESAMPLES
    assert _defaults.DEFAULT_LEVEL == DEFAULT_LEVEL


@pytest.mark.parametrize("argv", [["--help"], ["compare", "--help"], ["plan", "--help"]])
def test_help_prints_without_importing_the_engine(argv: list[str]) -> None:
    code = (
        "import sys\nfrom hylo_analytics.cli import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'polars', 'pyarrow', 'duckdb', 'numpy', 'scipy', 'pandas'}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, check=True
    )
    assert "usage: hylo-analytics" in out.stdout
    assert out.stdout.strip().splitlines()[-1] == "[]"
