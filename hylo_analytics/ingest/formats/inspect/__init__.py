"""Inspect AI logs: ``.eval`` (a zip) and ``.json``, read without ``inspect_ai``.

An ``.eval`` file is a zip of JSON members (``header.json``, ``summaries.json``,
``samples/<id>_epoch_<n>.json``, ``reductions.json``, ``_journal/start.json``,
``_journal/summaries/<n>.json``) compressed with zstd (zip method 93), which :mod:`zipfile`
cannot inflate: we find each member's data through its local header and decompress it with
``zstandard`` (other methods go through :mod:`zipfile`). We read the header and the sample
*summaries* (ids, epochs, scores, token usage, errors), not the full sample transcripts. A
log still being written or left by a crash has no ``header.json``/``summaries.json``: the
journal's ``start.json`` and summaries stand in, and the run's status is ``started``.

Both formats become one JSON document per file (header fields + ``samples``), parsed for the
whole batch by DuckDB.

Mapping, decided here:

* ``run_id`` = ``eval.eval_id`` (unique per task log); ``key`` = ``"<task>#<sample id>"``,
  ``task_id`` = the task name, ``epoch`` = the sample's epoch, ``seed`` null; the raw sample id
  is kept in ``samples.extra.sample_id``. ``agent_name`` = the model (``eval.model``);
  ``runs.extra`` holds ``llm.model.name`` and ``llm.provider`` (the part before ``/``).
* Scores: one row per scorer (``source='evallog'``, ``source_kind='imported'``); a dict value
  gives one row per key, metric ``"<scorer>.<key>"``. Values map to numbers as Inspect's
  ``value_to_float`` does (see :data:`VALUE_TABLE`), except that what it cannot convert (it
  warns and returns 0) abstains here with a ``skip_reason``. A sample with no score for a
  scorer of the run abstains (``"unscored"``, or ``"sample error: ..."``).
* Token usage (summed over the sample's models) → score rows ``llm.tokens.input``,
  ``llm.tokens.output``, ``llm.tokens.cache_read``, ``llm.tokens.cache_write``,
  ``llm.tokens.reasoning`` (only the kinds reported); ``metadata.models`` lists the models.
"""

from __future__ import annotations

import io
import re
import struct
import zipfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb

from hylo_analytics.errors import ArchiveError
from hylo_analytics.ingest._files import (
    SourceFile,
    deep_json,
    limit_from_env,
    too_deep,
)
from hylo_analytics.ingest._reader import Parsed, Reader
from hylo_analytics.ingest._report import Problem
from hylo_analytics.ingest.formats.inspect._rows import (
    _NUM_MACRO as _NUM_MACRO,  # kept importable here
)
from hylo_analytics.ingest.formats.inspect._rows import EVAL_FORMAT, JSON_FORMAT, document_rows

__all__ = [
    "EVAL_FORMAT",
    "EVAL_READER",
    "JSON_FORMAT",
    "JSON_READER",
    "VALUE_TABLE",
    "eval_document",
    "parse",
    "read_zip_member",
    "sniff_eval",
    "sniff_json",
]

#: Limits on an ``.eval`` archive (``HYLO_INGEST_*`` override them): the bytes the members we
#: read may decompress to, together, and how many members a zip read entry by entry may hold.
#: Far above real logs: their header and sample summaries are small.
MAX_EVAL_BYTES = limit_from_env("HYLO_INGEST_MAX_EVAL_BYTES", 256 << 20)
MAX_MEMBERS = limit_from_env("HYLO_INGEST_MAX_MEMBERS", 200_000)

ZIP_ZSTD = 93

#: How a score value becomes a number (Inspect's ``value_to_float`` with default sentinels).
VALUE_TABLE: dict[str, str] = {
    '"C"': "1.0 (correct)",
    '"P"': "0.5 (partial)",
    '"I"': "0.0 (incorrect)",
    '"N"': "0.0 (no answer)",
    '"yes"/"true" (any case)': "1.0",
    '"no"/"false" (any case)': "0.0",
    "string of a finite number": "that number",
    "true / false": "1.0 / 0.0",
    "number": "itself",
    "dict": "one metric per key, '<scorer>.<key>', each mapped by this table",
    "null / missing": "abstain: 'unscored' (or 'sample error: ...')",
    "other string, list": "abstain: 'non-numeric value: ...' (Inspect: 0.0 with a warning)",
}


def sniff_eval(head: bytes, path: Path | None = None) -> bool:
    """A zip whose first member is one of an Inspect log's."""
    return head.startswith(b"PK\x03\x04") and any(
        m in head for m in (b"_journal/start.json", b"header.json", b"summaries.json", b"samples/")
    )


def sniff_json(head: bytes, path: Path | None = None) -> bool:
    """A JSON object with an ``eval`` holding an ``eval_id``."""
    h = head.lstrip()
    return h.startswith(b"{") and b'"eval"' in h and b'"eval_id"' in h


def _limits() -> tuple[int, int]:
    """(bytes an archive may decompress to, members): read at each call, so settable."""
    return MAX_EVAL_BYTES, MAX_MEMBERS


def read_zip_member(
    data: bytes, zf: zipfile.ZipFile, info: zipfile.ZipInfo, budget: list[int] | None = None
) -> bytes:
    """One member's bytes; zstd members (method 93) are decompressed from the local header.

    Memory is bounded whatever the headers claim: a member is decompressed as a stream and
    refused once it passes :data:`MAX_EVAL_BYTES`, or what is left of the archive's ``budget``
    (a one-item list of the bytes all its members may still decompress to, decreased here).
    """
    if info.flag_bits & 0x1:
        raise ArchiveError(f"member {info.filename!r} is encrypted")
    cap = _cap(budget)
    if info.compress_type == ZIP_ZSTD:
        out = _zstd_member(
            data, info.filename, info.header_offset, info.compress_size, info.file_size, cap
        )
    elif info.compress_type not in _ZIP_METHODS:
        raise ArchiveError(
            f"member {info.filename!r}: unsupported compression method {info.compress_type}"
        )
    else:
        if info.file_size > cap:
            raise _too_big(info.filename, cap)
        with zf.open(info) as fh:
            out = fh.read(cap + 1)
        if len(out) > cap:
            raise _too_big(info.filename, cap)
    if budget is not None:
        budget[0] -= len(out)
    return out


# the methods :mod:`zipfile` decompresses itself (stored, deflate, bzip2, lzma)
_ZIP_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA)


def _cap(budget: list[int] | None) -> int:
    return _limits()[0] if budget is None else max(0, budget[0])


def _too_big(name: str, cap: int) -> ArchiveError:
    total = _limits()[0]
    return ArchiveError(
        f"member {name!r} decompresses past the limit of {total} bytes"
        + (f" (the members read before it took {total - cap})" if cap < total else "")
    )


def _zstd_member(data: bytes, name: str, off: int, csize: int, size: int, cap: int) -> bytes:
    import zstandard  # on first use: plain .json logs never need it

    if data[off : off + 4] != b"PK\x03\x04":
        raise ArchiveError(f"member {name!r}: no local file header at offset {off}")
    if size > cap:  # the header says so: refused unread
        raise _too_big(name, cap)
    name_len, extra_len = struct.unpack_from("<HH", data, off + 26)
    start = off + 30 + name_len + extra_len
    # a stream read of at most cap + 1 bytes: a header that lies about the size costs nothing
    reader = zstandard.ZstdDecompressor().stream_reader(memoryview(data)[start : start + csize])
    try:
        with reader:
            out = reader.read(cap + 1)
    except zstandard.ZstdError as exc:
        raise ArchiveError(f"member {name!r}: corrupt zstd data ({exc})") from exc
    if len(out) > cap:
        raise _too_big(name, cap)
    if len(out) != size:
        raise ArchiveError(f"member {name!r}: decompressed {len(out)} bytes, expected {size}")
    return out


def _zstd_members(data: bytes, names: Sequence[str]) -> list[bytes] | None:
    """The named zstd members, found in the central directory without reading all its entries.

    A finished ``.eval`` holds one entry per sample: :class:`zipfile.ZipFile` builds them all
    (~1.3 ms a log of 400 samples) to read two. ``None`` (use :mod:`zipfile`) when a member is
    missing or not zstd, or the zip has a comment or zip64 records.
    """
    end = len(data) - 22
    if end < 0 or data[end : end + 4] != b"PK\x05\x06":
        return None
    n_entries, cd_size, cd_off = struct.unpack_from("<HII", data, end + 10)
    if n_entries == 0xFFFF or 0xFFFFFFFF in (cd_size, cd_off):
        return None
    cd = data[cd_off : cd_off + cd_size]
    if b".." in cd or _ROOTED.search(cd):  # a name that may climb out: checked entry by entry
        return None
    out: list[bytes] = []
    budget = _limits()[0]  # the members together: each is read as a stream within it
    for name in names:
        raw = name.encode()
        pos = cd.find(raw)
        while pos >= 0:  # a name at the start of an entry, of exactly this length
            h = pos - 46
            if (
                h >= 0
                and cd[h : h + 4] == b"PK\x01\x02"
                and struct.unpack_from("<H", cd, h + 28)[0] == len(raw)
            ):
                break
            pos = cd.find(raw, pos + 1)
        if pos < 0:
            return None
        flags, method = struct.unpack_from("<HH", cd, h + 8)
        csize, size = struct.unpack_from("<II", cd, h + 20)
        (off,) = struct.unpack_from("<I", cd, h + 42)
        if method != ZIP_ZSTD or flags & 0x1 or 0xFFFFFFFF in (csize, size, off):
            return None
        out.append(_zstd_member(data, name, off, csize, size, budget))
        budget -= len(out[-1])
    return out


# a central directory entry whose name starts with a slash, a backslash or a drive letter
_ROOTED = re.compile(rb"PK\x01\x02.{42}(?:[/\\]|[A-Za-z]:)", re.DOTALL)


def _bad_name(name: str) -> str | None:
    """Why a member name is refused: absolute, or with a ``..`` component."""
    if name.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", name):
        return f"member name {name!r} is an absolute path"
    if ".." in re.split(r"[/\\]", name):
        return f"member name {name!r} climbs out of the archive (..)"
    return None


def _json_array_concat(arrays: Sequence[bytes]) -> bytes:
    inner = [a.strip()[1:-1].strip() for a in arrays]
    return b"[" + b",".join(i for i in inner if i) + b"]"


def eval_document(data: bytes) -> bytes:
    """An ``.eval`` zip as one JSON document: the header's fields plus ``samples`` (summaries)."""
    fast = _zstd_members(data, ("header.json", "summaries.json"))
    if fast is not None:  # a finished log: the usual case
        return _document(fast[0].strip(), fast[1])
    total, max_members = _limits()
    end = data.rfind(b"PK\x05\x06", max(0, len(data) - 22 - 0xFFFF))
    if end >= 0 and end + 22 <= len(data):  # count the entries before zipfile builds them
        (n_entries,) = struct.unpack_from("<H", data, end + 10)
        if n_entries != 0xFFFF and n_entries > max_members:
            raise ArchiveError(f"{n_entries} members, over the limit of {max_members}")
    zf = zipfile.ZipFile(io.BytesIO(data))
    if len(zf.infolist()) > max_members:
        raise ArchiveError(f"{len(zf.infolist())} members, over the limit of {max_members}")
    infos = {i.filename: i for i in zf.infolist()}
    for info in zf.infolist():
        why = _bad_name(info.filename)
        if why is not None:
            raise ArchiveError(why)
    budget = [total]  # what every member read may decompress to, together

    def member(name: str) -> bytes:
        return read_zip_member(data, zf, infos[name], budget)

    if "header.json" in infos:
        header = member("header.json").strip()
    elif "_journal/start.json" in infos:
        start = member("_journal/start.json").strip()
        header = (
            b'{"status":"started",' + start[1:] if start[1:-1].strip() else b'{"status":"started"}'
        )
    else:
        raise ArchiveError("neither header.json nor _journal/start.json in the zip")
    if "summaries.json" in infos:
        samples = member("summaries.json")
    else:
        journal = sorted(
            (n for n in infos if n.startswith("_journal/summaries/") and n.endswith(".json")),
            key=lambda n: int(Path(n).stem) if Path(n).stem.isdigit() else 0,
        )
        parts = [member(n) for n in journal]
        if not parts:  # no summaries at all: the sample files themselves
            parts = [
                b"[" + member(n) + b"]"
                for n in sorted(infos)
                if n.startswith("samples/") and n.endswith(".json")
            ]
        samples = _json_array_concat(parts)
    return _document(header, samples)


def _document(header: bytes, samples: bytes) -> bytes:
    body = header[1:-1].strip()
    return b'{"samples":' + samples + (b"," + body if body else b"") + b"}"


def _decode(sf: SourceFile) -> tuple[bytes | None, str | None]:
    if not sf.data.startswith(b"PK"):
        return sf.data, None
    try:
        return eval_document(sf.data), None
    except MemoryError:
        return None, "cannot read the .eval zip: out of memory"
    except Exception as exc:  # any failure of a hostile archive is this file's problem only
        kind = (
            "" if isinstance(exc, (ArchiveError, zipfile.BadZipFile)) else f"{type(exc).__name__}: "
        )
        return None, f"cannot read the .eval zip: {kind}{exc}"


def parse(
    con: duckdb.DuckDBPyConnection, files: Sequence[SourceFile], *, threads: int = 2
) -> Parsed:
    """Runs, samples and scores of many Inspect logs; zips are unpacked in a thread pool."""
    with ThreadPoolExecutor(max_workers=threads) as pool:
        decoded = list(pool.map(_decode, files))
    problems: list[Problem] = []
    keep: list[int] = []
    # an .eval's members reach the parser only bounded (plain .json: checked by the caller)
    zips = [i for i, f in enumerate(files) if f.data.startswith(b"PK") and decoded[i][0]]
    for j, (line, col) in deep_json([decoded[i][0] or b"" for i in zips]).items():
        why = f"{too_deep(line, col)} of the header and sample summaries"
        decoded[zips[j]] = (None, f"cannot read the .eval zip: {why}")
    for i, (doc, err) in enumerate(decoded):
        if doc is None:
            problems.append(Problem(str(files[i].path), None, None, err or "unreadable"))
        else:
            keep.append(i)
    return document_rows(con, files, keep, [decoded[i][0] or b"" for i in keep], problems)


EVAL_READER = Reader(EVAL_FORMAT, sniff_eval, parse)
JSON_READER = Reader(JSON_FORMAT, sniff_json, parse)
