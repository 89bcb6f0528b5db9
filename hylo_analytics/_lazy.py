"""Modules imported on first use, so ``import hylo_analytics`` and the CLI start quickly.

scipy.stats alone takes about half a second to import; most commands never touch it.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

__all__ = ["LazyModule"]


class LazyModule(ModuleType):
    """A stand-in that imports the named module at the first attribute access."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._target: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        if attr == "_target":
            raise AttributeError(attr)
        if self._target is None:
            self._target = importlib.import_module(self.__name__)
        return getattr(self._target, attr)
