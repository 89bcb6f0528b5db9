"""A store as a version before the materialized resolution left it, for tests of readers.

:func:`strip_resolution` removes what the publish-time resolution wrote (the
``resolved_scores`` files, their tombstones, the manifest's ``resolved`` flag), so a test can
check that readers of such a store read the rule and that its next writer resolves it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

__all__ = ["strip_resolution"]


def strip_resolution(root: str | os.PathLike[str]) -> None:
    """Make the store at ``root`` read as one written before ``resolved_scores`` existed."""
    root = Path(root)
    for path in (root / "batches").glob("*/resolved_scores.parquet"):
        path.unlink()
    for path in (root / "batches").glob("*/tombstones.parquet"):
        table = pq.read_table(path)
        pq.write_table(table.filter(pc.not_equal(table["table_name"], "resolved_scores")), path)
    manifest = root / "manifest.json"
    data = json.loads(manifest.read_text())
    data.pop("resolved", None)
    manifest.write_text(json.dumps(data))
