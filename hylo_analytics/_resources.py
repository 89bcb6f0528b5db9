"""Files the package ships: found inside the wheel or, in an editable install, in the repo.

A wheel carries ``sql/`` and ``data/sample`` inside ``hylo_analytics/`` (hatch
``force-include``); a checkout keeps them at the repo's top level. One lookup serves both so
``pip install hylo_analytics`` and ``pip install -e .`` find the same files.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["resource_dir", "sample_data_dir"]

_PACKAGE = Path(__file__).resolve().parent


def resource_dir(*parts: str) -> Path:
    """The shipped folder ``parts`` (e.g. ``("sql",)``), wheel location first."""
    tried = [_PACKAGE.joinpath(*parts), _PACKAGE.parent.joinpath(*parts)]
    for candidate in tried:
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        f"the package's {'/'.join(parts)}/ folder is missing (looked in "
        f"{', '.join(str(p) for p in tried)}): reinstall hylo_analytics"
    )


def sample_data_dir() -> Path:
    """The bundled sample EvalLogs (three runs of one agent, with traces) the demo ingests."""
    return resource_dir("data", "sample")
