"""Where the vla-eval merged-results reader lived: now :mod:`hylo_analytics.ingest.formats.vla_eval` (this name is it).

The old import path is the same module object, so ``from hylo_analytics.ingest import vla_eval`` and
a test's ``monkeypatch.setattr(vla_eval, ...)`` reach the module the ingest uses.
"""

import sys

from hylo_analytics.ingest.formats import vla_eval as _moved

sys.modules[__name__] = _moved
