"""A computation of the server in a thread of its own, for a page too slow to wait for."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["Job"]


class Job:
    """A computation in a thread of its own (:meth:`StoreReader.background`)."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self._value: Any = None
        self._error: BaseException | None = None
        self.started = time.monotonic()

    def run(self, make: Callable[[], Any]) -> None:
        try:
            self._value = make()
        except BaseException as exc:  # kept for the page that asks: it says why
            self._error = exc
        finally:
            self._done.set()

    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for the end; whether it ended."""
        return self._done.wait(timeout)

    def result(self, timeout: float | None = None) -> Any:
        """The value (waiting up to ``timeout`` s, None: as long as it takes); the
        computation's exception is raised here."""
        if not self._done.wait(timeout):
            raise TimeoutError("still computing")
        if self._error is not None:
            raise self._error
        return self._value
