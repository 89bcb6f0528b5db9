"""The reader registry: every source format's reader, and the one a file's content picks.

The built-in readers (:data:`READERS`) come first, in the order they are asked; then the
readers other packages install under the entry point group :data:`ENTRY_POINT_GROUP`
(``hylo_analytics.readers``), in entry point name order, so a plug-in can add a format but
never take a file a built-in reader claims. An entry point names a
:class:`~hylo_analytics.ingest._reader.Reader`, a sequence of them, or a function of no
arguments returning either; the group is read when an ingest starts (:func:`readers`). A
plug-in that fails to load, is not a reader or reuses a known format name is left out with a
logged warning: one broken package must not stop every ingest.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

from hylo_analytics.errors import InputTypeError
from hylo_analytics.ingest._reader import Reader
from hylo_analytics.ingest._walk import LOG_SUFFIXES
from hylo_analytics.ingest.formats import (
    every_eval_ever,
    hylo,
    inspect,
    inspect_robots,
    lerobot,
    lm_eval,
    metric_results,
    vla_eval,
)

__all__ = ["ENTRY_POINT_GROUP", "READERS", "detect", "log_suffixes", "plugin_readers", "readers"]

ENTRY_POINT_GROUP = "hylo_analytics.readers"
log = logging.getLogger("hylo_analytics.ingest")

# Asked in order; the first whose ``sniff`` accepts a file's first bytes reads it.
READERS: tuple[Reader, ...] = (
    hylo.READER,
    inspect.EVAL_READER,
    inspect.JSON_READER,
    inspect_robots.READER,
    vla_eval.AGGREGATE_READER,  # before the merged results: both name harness_version, tasks
    vla_eval.READER,
    metric_results.READER,
    lerobot.READER,
    *lm_eval.READERS,
    *every_eval_ever.READERS,
)


def _loaded(ep: EntryPoint) -> list[Reader]:
    """The readers one entry point names (raises on anything else)."""
    obj = ep.load()
    if callable(obj) and not isinstance(obj, Reader):
        obj = obj()
    found = [obj] if isinstance(obj, Reader) else list(obj) if isinstance(obj, Iterable) else []
    if not found or not all(isinstance(r, Reader) for r in found):
        raise InputTypeError(
            f"{ep.value} is not a Reader, a sequence of Readers or a function of them"
        )
    return found


def plugin_readers(known: Sequence[Reader] = READERS) -> tuple[Reader, ...]:
    """The readers installed under :data:`ENTRY_POINT_GROUP`, in entry point name order;
    one that fails to load or repeats a format of ``known`` (or of another plug-in) is left
    out with a warning."""
    taken = {r.format for r in known}
    out: list[Reader] = []
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: (e.name, e.value)):
        try:
            found = _loaded(ep)
        except Exception as exc:  # a broken plug-in is its package's problem, not the ingest's
            log.warning("reader plug-in %r (%s) left out: %s: %s", ep.name, ep.value,
                        type(exc).__name__, exc)  # fmt: skip
            continue
        for reader in found:
            if reader.format in taken:
                log.warning("reader plug-in %r left out: format %r is already read by another "
                            "reader", ep.name, reader.format)  # fmt: skip
                continue
            taken.add(reader.format)
            out.append(reader)
    return tuple(out)


def readers() -> tuple[Reader, ...]:
    """Every reader an ingest asks, in order: the built-in ones, then the plug-ins."""
    return READERS + plugin_readers()


def log_suffixes(chosen: Sequence[Reader]) -> tuple[str, ...]:
    """The file name endings a folder walk offers: the built-in ones and the readers' own."""
    extra = [s for r in chosen for s in r.suffixes if s not in LOG_SUFFIXES]
    return LOG_SUFFIXES + tuple(dict.fromkeys(extra))


def detect(head: bytes, path: Path, chosen: Sequence[Reader] | None = None) -> Reader | None:
    """The reader for a file whose content starts with ``head`` (asking ``chosen``, by
    default the built-in readers), or ``None``."""
    for reader in READERS if chosen is None else chosen:
        if reader.sniff(head, path):
            return reader
    return None
