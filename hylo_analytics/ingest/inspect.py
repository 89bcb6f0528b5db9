"""Where the Inspect AI reader lived: now :mod:`hylo_analytics.ingest.formats.inspect` (this name is it).

The old import path is the same module object, so ``from hylo_analytics.ingest import inspect`` and
a test's ``monkeypatch.setattr(inspect, ...)`` reach the module the ingest uses.
"""

import sys

from hylo_analytics.ingest.formats import inspect as _moved

sys.modules[__name__] = _moved
