"""Where the Inspect transcript reader (the web app's) lived: now :mod:`hylo_analytics.ingest.formats.inspect.transcript` (this name is it).

The old import path is the same module object, so ``from hylo_analytics.ingest import inspect_transcript`` and
a test's ``monkeypatch.setattr(inspect_transcript, ...)`` reach the module the ingest uses.
"""

import sys

from hylo_analytics.ingest.formats.inspect import transcript as _moved

sys.modules[__name__] = _moved
