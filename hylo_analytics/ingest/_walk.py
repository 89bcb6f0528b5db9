"""The file walk: the files an ingest is given, found in folders and cut into chunks.

A folder is walked for log-like files only (traces are reached through their logs); symlinks
are followed only where they stay inside the folder walked. What is skipped is recorded, not
silent. The walk looks at names and links only: reading is :mod:`._files`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from hylo_analytics.ingest._report import Problem

__all__ = ["LOG_SUFFIXES", "chunks", "discover"]

# Files a folder walk offers to the format detectors. Traces are reached through their logs.
LOG_SUFFIXES = (".json", ".eval", ".jsonl", ".ndjson")


def discover(
    paths: Sequence[Path],
    *,
    traces_dirname: str = "episodes",
    skipped: list[Problem] | None = None,
    roots: dict[Path, Path] | None = None,
    suffixes: tuple[str, ...] = LOG_SUFFIXES,
) -> list[Path]:
    """Files named directly, plus log-like files below folders, sorted, without duplicates.

    Files under a folder named ``traces_dirname`` are traces: reached through their logs. A
    symlinked folder is followed when it leads inside the folder being walked to a place the
    walk would not reach itself (a hidden or traces folder); one whose target the walk reaches
    anyway is left to the walk (no file twice); one leading outside is refused and, like a
    cycle, recorded in ``skipped``. So is a symlinked *file* leading outside (a link to
    ``/proc/self/environ`` or a private file is never read). ``roots`` receives, for each
    file found in a folder, that folder's real path, for :func:`._files.read_files` to check again
    when it opens the file (the link may change in between). ``suffixes`` are the file name
    endings offered (the readers' own: :func:`._registry.log_suffixes`).
    """
    found: set[Path] = set()
    for p in paths:
        if not p.is_dir():
            found.add(p.absolute())  # named by the user: read wherever it leads
            continue
        top = os.path.realpath(p)
        visited: set[str] = set()
        walks = [Path(p)]
        while walks:
            start = walks.pop()
            for root, dirs, files in os.walk(start):
                real_root = os.path.realpath(root)
                if real_root in visited:  # a second way into a folder already walked
                    dirs[:] = []
                    continue
                visited.add(real_root)
                keep = []
                for d in sorted(dirs):
                    if d == traces_dirname or d.startswith("."):
                        continue
                    if not os.path.islink(os.path.join(root, d)):
                        keep.append(d)
                        continue
                    link = Path(root, d).absolute()
                    why = _link_verdict(link, top, traces_dirname, visited)
                    if why == "follow":
                        walks.append(link)
                    elif why and skipped is not None:
                        skipped.append(Problem(str(link), None, None, why))
                dirs[:] = keep
                for f in files:
                    if not f.endswith(suffixes) or f.startswith("."):
                        continue
                    file = Path(root, f).absolute()
                    if os.path.islink(file) and (why := _leaves(file, top, "file")):
                        if skipped is not None:
                            skipped.append(Problem(str(file), None, None, why))
                        continue
                    found.add(file)
                    if roots is not None:
                        roots[file] = Path(top)
    return sorted(found)


def _leaves(link: Path, top: str, kind: str) -> str | None:
    """Why ``link`` (a symlinked file or folder) is not followed: its target is outside
    ``top``; ``None`` when it stays inside."""
    real = os.path.realpath(link)
    if real == top or real.startswith(top.rstrip("/") + "/"):
        return None
    return f"symlinked {kind} leads to {real!r}, outside {top!r}: skipped"


def _link_verdict(link: Path, top: str, traces_dirname: str, visited: set[str]) -> str | None:
    """``"follow"``, ``None`` (the walk reaches its target itself) or why it is skipped."""
    if why := _leaves(link, top, "folder"):
        return why
    real = os.path.realpath(link)
    if real in visited:
        return None
    parts = Path(os.path.relpath(real, top)).parts
    if any(x == traces_dirname or x.startswith(".") for x in parts if x != "."):
        return "follow"  # the walk prunes its target: this link is the only way in
    return None


def chunks(paths: list[Path], limit: int) -> list[list[Path]]:
    """``paths`` in order, cut into runs of about ``limit`` bytes (each at least one file)."""
    out: list[list[Path]] = [[]]
    size = 0
    for p in paths:
        try:
            n = p.stat().st_size
        except OSError:
            n = 0
        if out[-1] and size + n > limit:
            out.append([])
            size = 0
        out[-1].append(p)
        size += n
    return [c for c in out if c]
