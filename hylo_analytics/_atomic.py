"""Whole-or-nothing file writes: a reader sees the old file or the new one, never half of one."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

__all__ = ["write_text"]


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to a temp file beside ``path``, then rename it over ``path``."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
