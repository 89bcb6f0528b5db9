"""Finding, stat-ing, reading and hashing source files, in a thread pool.

Reading bytes and hashing release the GIL, so two threads keep both cores busy; everything
that looks *inside* the bytes happens later, vectorized, in DuckDB.
"""

from __future__ import annotations

import hashlib
import os
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

__all__ = ["LOG_SUFFIXES", "SourceFile", "discover", "read_files", "split_lines"]

# Files a folder walk offers to the format detectors. Traces are reached through their logs.
LOG_SUFFIXES = (".json", ".eval", ".jsonl", ".ndjson")


@dataclass(frozen=True)
class SourceFile:
    """One file's bytes and identity. ``error`` is set when it could not be read."""

    path: Path
    size: int
    mtime_ns: int
    data: bytes
    sha256: str
    error: str | None = None
    refused: bool = False  # a symlink that leads out of the folder it must stay in


def discover(paths: Sequence[Path], *, traces_dirname: str = "episodes") -> list[Path]:
    """Files named directly, plus log-like files below folders, sorted, without duplicates.

    Files under a folder named ``traces_dirname`` are traces: reached through their logs.
    """
    found: set[Path] = set()
    for p in paths:
        if p.is_dir():
            for root, dirs, files in os.walk(p):
                dirs[:] = sorted(d for d in dirs if d != traces_dirname and not d.startswith("."))
                found.update(
                    Path(root, f).absolute()
                    for f in files
                    if f.endswith(LOG_SUFFIXES) and not f.startswith(".")
                )
        else:
            found.add(p.absolute())
    return sorted(found)


def _read_one(path: Path, root: Path | None = None) -> SourceFile:
    try:
        # O_NOFOLLOW: a symlink fails to open (ELOOP) and only then is looked at, so a plain
        # file costs open, fstat, read and close
        fd = os.open(path, os.O_RDONLY | (os.O_NOFOLLOW if root is not None else 0))
    except OSError as exc:
        if root is not None and os.path.islink(path):
            real = Path(os.path.realpath(path))
            if not real.is_relative_to(root):
                why = f"{str(path)!r} is a link to {str(real)!r}, outside {str(root)!r}"
                return SourceFile(path, 0, 0, b"", "", error=why, refused=True)
            return _read_one(path)  # a link that stays inside: follow it
        return SourceFile(path, 0, 0, b"", "", error=f"cannot read: {exc.strerror or exc}")
    try:
        st = os.fstat(fd)
        with open(fd, "rb", closefd=False) as fh:
            data = fh.read()
    except OSError as exc:
        return SourceFile(path, 0, 0, b"", "", error=f"cannot read: {exc.strerror or exc}")
    finally:
        os.close(fd)
    return SourceFile(path, st.st_size, st.st_mtime_ns, data, hashlib.sha256(data).hexdigest())


def _read_group(paths: Sequence[Path], roots: Sequence[Path | None]) -> list[SourceFile]:
    return [_read_one(p, r) for p, r in zip(paths, roots, strict=True)]


def read_files(
    paths: Sequence[Path],
    *,
    roots: Sequence[Path] | None = None,
    on_done: Callable[[int], object] | None = None,
    threads: int = 4,
    ahead: int = 256,
    group: int = 1,
) -> Iterator[SourceFile]:
    """Read and hash ``paths`` in a thread pool, yielding results in input order.

    At most about ``ahead`` files are read ahead of the consumer, so a slow consumer (a
    parser working batch by batch) holds a bounded number of files in memory. Small files
    go to the pool ``group`` at a time, so a task is worth its hand-off. With ``roots``, a
    path that is a symlink leading outside its root is refused unread.
    """
    all_roots: Sequence[Path | None] = roots if roots is not None else [None] * len(paths)
    with ThreadPoolExecutor(max_workers=threads) as pool:
        queue: deque[Future[list[SourceFile]]] = deque()
        for k in range(0, len(paths), group):
            queue.append(pool.submit(_read_group, paths[k : k + group], all_roots[k : k + group]))
            if len(queue) * group >= ahead:
                yield from _done(queue.popleft(), on_done)
        while queue:
            yield from _done(queue.popleft(), on_done)


def _done(
    fut: Future[list[SourceFile]], on_done: Callable[[int], object] | None
) -> list[SourceFile]:
    files = fut.result()
    if on_done is not None:
        on_done(len(files))
    return files


def split_lines(chunks: Sequence[bytes]) -> tuple[pa.LargeStringArray, np.ndarray, np.ndarray]:
    """Split many JSONL files into one Arrow string array of lines, without a Python loop.

    Returns ``(lines, file_index, line_number)``: line ``i`` came from ``chunks[file_index[i]]``
    at 1-based ``line_number[i]``. The array is a zero-copy view of the joined bytes, so each
    line keeps its line break (JSON parsers ignore it) and blank lines are present: the caller
    trims and filters them in SQL. A final line with no newline is kept; it may be a truncated
    write, which the parser reports.
    """
    padded = [c if c.endswith(b"\n") or not c else c + b"\n" for c in chunks]
    buf = b"".join(padded)
    arr = np.frombuffer(buf, dtype=np.uint8)
    ends = np.flatnonzero(arr == 10)
    starts = np.zeros(len(ends), dtype=np.int64)
    starts[1:] = ends[:-1] + 1
    sizes = np.fromiter((len(c) for c in padded), dtype=np.int64, count=len(padded))
    file_starts = np.concatenate(([0], np.cumsum(sizes)[:-1])) if len(padded) else sizes
    file_index = np.searchsorted(file_starts, starts, side="right") - 1
    first_line = np.searchsorted(starts, file_starts)
    line_number = np.arange(len(starts)) - first_line[file_index] + 1
    offsets = np.append(starts, len(buf)).astype(np.int64)
    lines = pa.LargeStringArray.from_buffers(len(starts), pa.py_buffer(offsets), pa.py_buffer(buf))
    return lines, file_index.astype(np.int32), line_number.astype(np.int64)


def bad_utf8(data: bytes) -> tuple[int, int] | None:
    """``(line, column)`` of the first byte that is not UTF-8, or ``None``."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        return line, col
    return None
