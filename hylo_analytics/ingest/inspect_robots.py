"""Where the inspect-robots reader lived: now :mod:`hylo_analytics.ingest.formats.inspect_robots` (this name is it).

The old import path is the same module object, so ``from hylo_analytics.ingest import inspect_robots`` and
a test's ``monkeypatch.setattr(inspect_robots, ...)`` reach the module the ingest uses.
"""

import sys

from hylo_analytics.ingest.formats import inspect_robots as _moved

sys.modules[__name__] = _moved
