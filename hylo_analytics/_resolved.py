"""Where the score resolution lived: now :mod:`hylo_analytics.store.resolved` (this name is it).

The old import path stays the same module object, so ``from hylo_analytics import _resolved``
and a test's ``monkeypatch.setattr(_resolved, ...)`` reach the module the store uses.
"""

import sys

from hylo_analytics.store import resolved
from hylo_analytics.store.resolved import (
    TABLE,
    connection,
    every_run,
    touched_runs,
    write_resolved,
)

__all__ = ["TABLE", "connection", "every_run", "touched_runs", "write_resolved"]

sys.modules[__name__] = resolved
