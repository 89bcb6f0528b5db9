"""Where the WorldFoundry MetricResult reader lived: now :mod:`hylo_analytics.ingest.formats.metric_results` (this name is it).

The old import path is the same module object, so ``from hylo_analytics.ingest import metric_results`` and
a test's ``monkeypatch.setattr(metric_results, ...)`` reach the module the ingest uses.
"""

import sys

from hylo_analytics.ingest.formats import metric_results as _moved

sys.modules[__name__] = _moved
