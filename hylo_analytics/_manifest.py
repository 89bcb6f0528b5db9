"""Where the store's manifest lived: now :mod:`hylo_analytics.store.manifest` (this name is it).

The old import path stays the same module object, so ``from hylo_analytics import _manifest``
and a test's ``monkeypatch.setattr(_manifest, ...)`` reach the module the store uses.
"""

import sys

from hylo_analytics.store import manifest
from hylo_analytics.store.manifest import (
    FILE,
    RETIRE_SECONDS,
    SCHEMA_FINGERPRINT,
    Batch,
    Manifest,
    ManifestError,
    StoreError,
    read_manifest,
    stamp,
    write_manifest,
)

__all__ = [
    "FILE",
    "RETIRE_SECONDS",
    "SCHEMA_FINGERPRINT",
    "Batch",
    "Manifest",
    "ManifestError",
    "StoreError",
    "read_manifest",
    "stamp",
    "write_manifest",
]

sys.modules[__name__] = manifest
