"""Reading and hashing source files in a thread pool, and bounding their JSON before any parser.

Reading bytes and hashing release the GIL, so two threads keep both cores busy; everything
that looks *inside* the bytes happens later, vectorized, in DuckDB.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import stat
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

__all__ = [
    "MAX_DOC_BYTES",
    "MAX_FILE_BYTES",
    "MAX_JSON_DEPTH",
    "SourceFile",
    "deep_json",
    "read_files",
    "split_lines",
    "too_deep",
]


def limit_from_env(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value else default


# Limits on untrusted input, read once at import (``HYLO_INGEST_*`` override them). The
# depth is far above any real log (the sample and real data nest at most about 10 levels)
# and far below what a recursive parser survives (pyarrow's JSON reader crashes the process
# near 100,000; Python's ``json`` raises RecursionError near 1,000).
MAX_JSON_DEPTH = limit_from_env("HYLO_INGEST_MAX_JSON_DEPTH", 512)
MAX_DOC_BYTES = limit_from_env("HYLO_INGEST_MAX_DOC_BYTES", 1 << 30)  # one JSON document, unpacked
MAX_FILE_BYTES = limit_from_env("HYLO_INGEST_MAX_FILE_BYTES", 4 << 30)  # a file read into memory


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


_KINDS = (
    (stat.S_ISFIFO, "fifo"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
    (stat.S_ISSOCK, "socket"),
    (stat.S_ISDIR, "directory"),
)


def _read_one(path: Path, root: Path | None = None) -> SourceFile:
    """A file's bytes and hash; any failure (of this file only) is its ``error``."""
    try:
        return _read_checked(path, root)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # MemoryError, a bad path (NUL byte), ...: this file only
        return SourceFile(path, 0, 0, b"", "", error=f"cannot read: {type(exc).__name__}: {exc}")


def _read_checked(path: Path, root: Path | None) -> SourceFile:
    try:
        # O_NOFOLLOW: a symlink fails to open (ELOOP) and only then is looked at, so a plain
        # file costs open, fstat, read and close. O_NONBLOCK: opening a FIFO does not wait
        # for a writer (it is refused below, as every file that is not a regular one).
        flags = os.O_RDONLY | os.O_NONBLOCK | (os.O_NOFOLLOW if root is not None else 0)
        fd = os.open(path, flags)
    except OSError as exc:
        if root is not None and os.path.islink(path):
            real = Path(os.path.realpath(path))
            if not real.is_relative_to(root):
                why = f"{str(path)!r} is a link to {str(real)!r}, outside {str(root)!r}"
                return SourceFile(path, 0, 0, b"", "", error=why, refused=True)
            # a link that stays inside: read its target, refused if it moved out meanwhile
            return dataclasses.replace(_read_one(real, root), path=path)
        return SourceFile(path, 0, 0, b"", "", error=f"cannot read: {exc.strerror or exc}")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = next((k for test, k in _KINDS if test(st.st_mode)), "unknown kind")
            return SourceFile(path, 0, 0, b"", "", error=f"not a regular file ({kind})")
        if st.st_size > MAX_FILE_BYTES:
            why = f"file is {st.st_size} bytes, over the limit of {MAX_FILE_BYTES} bytes"
            return SourceFile(path, st.st_size, st.st_mtime_ns, b"", "", error=why)
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
    roots: Sequence[Path | None] | None = None,
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


# the bytes the depth scan looks at: '"', '\\', '[', ']', '{', '}' (and '\n', to confirm)
_SCAN = np.zeros(256, dtype=bool)
_SCAN[[34, 92, 91, 93, 123, 125]] = True
_SCAN_NL = _SCAN.copy()
_SCAN_NL[10] = True
_DELTA = np.zeros(256, dtype=np.int8)
_DELTA[[91, 123]] = 1
_DELTA[[93, 125]] = -1


def deep_json(chunks: Sequence[bytes], limit: int | None = None) -> dict[int, tuple[int, int]]:
    """``{chunk index: (line, column)}`` of the first bracket nested deeper than ``limit``.

    Run before any parser sees the bytes: recursive parsers crash (pyarrow: SIGSEGV) or raise
    RecursionError on deep input. One numpy pass over the batch's joined bytes, then over the
    positions of quotes, backslashes and brackets only: a quote after an odd run of
    backslashes is escaped, and brackets between real quotes are text. A chunk found deep is
    scanned again alone with each newline ending any string (JSON has none raw), so a broken
    line of a JSONL file cannot make the lines after it look deep.
    """
    limit = MAX_JSON_DEPTH if limit is None else limit
    # the good path: a chunk with few opening brackets cannot be deep; the others get the
    # depth of their structure (C-speed byte operations, then numpy over brackets and quotes)
    found = [
        i
        for i, c in enumerate(chunks)
        if c.count(b"[") + c.count(b"{") > limit and _max_depth(c) > limit
    ]
    out: dict[int, tuple[int, int]] = {}
    for i in found:  # the failure path: locate, file by file, with strings cut at newlines
        one = _first_deep(chunks[i], np.zeros(1, dtype=np.int64), limit, _SCAN_NL)
        if one:
            at, data = one[0], chunks[i]
            line = data.count(b"\n", 0, at) + 1
            out[i] = (line, at - (data.rfind(b"\n", 0, at) + 1) + 1)
    return out


# every byte but '"', '[', ']', '{', '}' and '\n', for ``bytes.translate`` to delete
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'"[]{}\n')
_DEPTH_STEP = np.zeros(256, dtype=np.int32)
_DEPTH_STEP[[91, 123]] = 1
_DEPTH_STEP[[93, 125]] = -1


def _max_depth(data: bytes) -> int:
    """The deepest bracket nesting of ``data`` outside strings (a newline ends any string),
    as :func:`_first_deep` counts it with ``_SCAN_NL``.

    Escapes first (``\\`` pairs, then ``\"``), then every byte but quotes, brackets and
    newlines is deleted, all by C loops over the bytes; numpy then works on what is left.
    """
    bare = data.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_STRUCTURE)
    sym = np.frombuffer(bare, dtype=np.uint8)
    if not len(sym):
        return 0
    quotes = np.cumsum(sym == 34, dtype=np.int32)
    newline = sym == 10
    if newline.any():  # the quotes before each line's start do not count on that line
        at_line = np.where(newline, quotes, 0)
        quotes = quotes - np.maximum.accumulate(at_line)
    outside = (quotes & 1) == 0
    depth = np.cumsum(np.where(outside, _DEPTH_STEP[sym], 0), dtype=np.int32)
    return int(depth.max())


def _first_deep(data: bytes, starts: np.ndarray, limit: int, scan: np.ndarray) -> dict[int, int]:
    """``{chunk: offset}`` of the first too-deep bracket of each chunk starting at ``starts``."""
    buf = np.frombuffer(data, dtype=np.uint8)
    pos = np.flatnonzero(scan[buf])
    if len(pos) <= limit:  # not enough brackets to be that deep
        return {}
    byte = buf[pos]
    owner = np.searchsorted(starts, pos, side="right") - 1
    first = np.ones(len(pos), dtype=bool)  # a chunk's first position (strings restart there)
    first[1:] = owner[1:] != owner[:-1]
    if scan[10]:
        first |= byte == 10
    quote = byte == 34
    bs = np.flatnonzero(byte == 92)
    if len(bs):  # escapes: the length of the run of backslashes just before each position
        run = np.zeros(len(pos), dtype=np.int64)
        cont = np.zeros(len(bs), dtype=bool)
        cont[1:] = (bs[1:] == bs[:-1] + 1) & (pos[bs[1:]] == pos[bs[:-1]] + 1)
        begin = np.maximum.accumulate(np.where(cont, 0, np.arange(len(bs))))
        run[bs] = np.arange(len(bs)) - begin + 1
        prev = np.zeros(len(pos), dtype=np.int64)
        prev[1:] = np.where(pos[1:] == pos[:-1] + 1, run[:-1], 0)
        quote &= prev % 2 == 0
    q_before = np.cumsum(quote) - quote
    seg_start = np.flatnonzero(first)
    seg_len = np.diff(np.append(seg_start, len(pos)))
    outside = (q_before - np.repeat(q_before[seg_start], seg_len)) % 2 == 0
    delta = np.where(outside, _DELTA[byte], 0).astype(np.int32)
    depth = np.cumsum(delta, dtype=np.int64)
    chunk_start = np.flatnonzero(np.diff(owner, prepend=-1) != 0)
    base = (depth - delta)[chunk_start]
    depth -= np.repeat(base, np.diff(np.append(chunk_start, len(pos))))
    over = np.flatnonzero(depth > limit)
    if not len(over):
        return {}
    firsts = over[np.unique(owner[over], return_index=True)[1]]
    return {int(owner[k]): int(pos[k] - starts[owner[k]]) for k in firsts}


def too_deep(line: int, column: int) -> str:
    """The message for input :func:`deep_json` flags."""
    return f"JSON nested deeper than {MAX_JSON_DEPTH} levels (line {line}, column {column})"


def deep_lines(lines: pa.LargeStringArray, limit: int | None = None) -> dict[int, int]:
    """``{line index: column}`` of the lines (of :func:`split_lines`) nested too deep.

    Only a line of more than ``limit`` bytes can hold that many opening brackets, so the good
    path (short lines) costs one subtraction per line; long lines are counted, and the few
    with that many brackets are scanned exactly.
    """
    limit = MAX_JSON_DEPTH if limit is None else limit
    if not len(lines):
        return {}
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int64)[
        lines.offset : lines.offset + len(lines) + 1
    ]
    long = np.flatnonzero(np.diff(offsets) > limit)
    if not len(long):
        return {}
    some = lines.take(pa.array(long)) if len(long) < len(lines) else lines
    sub = np.frombuffer(some.buffers()[1], dtype=np.int64)[
        some.offset : some.offset + len(some) + 1
    ]
    buf = np.frombuffer(some.buffers()[2], dtype=np.uint8)[sub[0] : sub[-1]]
    opens = buf == 91
    opens |= buf == 123
    at = np.flatnonzero(opens)
    if len(at) <= limit:
        return {}
    per_line = np.bincount(np.searchsorted(sub - sub[0], at, side="right") - 1, minlength=len(some))
    out: dict[int, int] = {}
    for k in np.flatnonzero(per_line > limit):
        line = buf[sub[k] - sub[0] : sub[k + 1] - sub[0]].tobytes()
        found = deep_json([line], limit)
        if found:
            out[int(long[k])] = found[0][1]
    return out
