"""Where the hylo EvalLog reader lived: now :mod:`hylo_analytics.ingest.formats.hylo` (this name is it).

The old import path is the same module object, so ``from hylo_analytics.ingest import hylo`` and
a test's ``monkeypatch.setattr(hylo, ...)`` reach the module the ingest uses.
"""

import sys

from hylo_analytics.ingest.formats import hylo as _moved

sys.modules[__name__] = _moved
