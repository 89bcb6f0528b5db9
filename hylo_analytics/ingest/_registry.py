"""The reader registry: every source format's reader, and the one a file's content picks."""

from __future__ import annotations

from pathlib import Path

from hylo_analytics.ingest._reader import Reader
from hylo_analytics.ingest.formats import hylo, inspect, inspect_robots, metric_results, vla_eval

__all__ = ["READERS", "detect"]

# Asked in order; the first whose ``sniff`` accepts a file's first bytes reads it.
READERS: tuple[Reader, ...] = (
    hylo.READER,
    inspect.EVAL_READER,
    inspect.JSON_READER,
    inspect_robots.READER,
    vla_eval.READER,
    metric_results.READER,
)


def detect(head: bytes, path: Path) -> Reader | None:
    """The reader for a file whose content starts with ``head``, or ``None``."""
    for reader in READERS:
        if reader.sniff(head, path):
            return reader
    return None
