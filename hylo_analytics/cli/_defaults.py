"""The engine's constants that the parsers show, as plain values.

``hylo-analytics --help`` builds every subcommand's parser; reading these from the engine
would import numpy, polars, pyarrow and DuckDB (0.5 s) to print text. The copies are pinned
to the engine's own by tests/cli/test_help_imports.py.
"""

from __future__ import annotations

__all__ = ["BUILTIN_SCORERS", "CI_METHODS", "DEFAULT_LEVEL", "DEFAULT_RESAMPLES", "STATISTICS"]

DEFAULT_LEVEL = 0.95  # stats.closed_form.DEFAULT_LEVEL
DEFAULT_RESAMPLES = 10_000  # stats.bootstrap.DEFAULT_RESAMPLES
CI_METHODS: tuple[str, ...] = (  # aggregate.CI_METHODS
    "auto", "wilson", "clopper_pearson", "normal", "hall", "percentile", "bca", "studentized",
    "cr2", "none",
)  # fmt: skip
STATISTICS: tuple[str, ...] = (  # aggregate.STATISTICS
    "mean", "std", "stderr", "median", "p95", "min", "max", "iqm", "optimality_gap",
    "normalized_mean",
)  # fmt: skip
BUILTIN_SCORERS: tuple[str, ...] = (  # scoring.BUILTIN_SCORERS
    "success", "success_once", "success_at_end", "steps", "safety_interventions", "return",
    "latency_p95", "grades",
)  # fmt: skip
