"""Peak memory of a benchmark's own process, read the one way every script reads it.

``VmHWM`` (``/proc/self/status``) starts afresh at ``exec`` and can be reset
(``/proc/self/clear_refs``); ``ru_maxrss`` would carry a forking parent's peak, so it is only
the fallback where there is no ``/proc``.
"""

from __future__ import annotations

import contextlib
import resource
from pathlib import Path


def status_mib(field: str) -> float:
    """A ``/proc/self/status`` size (``VmRSS``, ``VmHWM``) in MiB; ``ru_maxrss`` without one."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 2**10
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10


def peak_rss_mb() -> float:
    """This process's peak RSS in MiB (since its start or the last :func:`reset_peak`)."""
    return status_mib("VmHWM")


def reset_peak() -> None:
    """Restart the high-water mark (Linux), so the next peak is the work's own."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")
