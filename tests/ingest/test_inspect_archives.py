"""Hostile Inspect ``.eval`` archives, made from real logs (written by ``inspect_ai``): each is
one quarantine row with a clear message, memory stays bounded, and the good log beside lands."""

from __future__ import annotations

import io
import json
import struct
import subprocess
import sys
import textwrap
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
import zstandard
from _inspect_logs import shared_logs

import hylo_analytics as ha
from hylo_analytics.ingest import inspect

pytest.importorskip("inspect_ai")


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return shared_logs(tmp_path_factory)


Members = list[tuple[str, bytes]]


def _members(src: Path) -> Members:
    data = src.read_bytes()
    with zipfile.ZipFile(src) as zf:
        return [(i.filename, inspect.read_zip_member(data, zf, i)) for i in zf.infolist()]


def _write_zip(
    out: Path,
    members: Members,
    *,
    method: int = inspect.ZIP_ZSTD,
    flags: int = 0,
    sizes: dict[str, int] | None = None,
) -> Path:
    """A zip written entry by entry as Inspect writes it (zstd, method 93), which
    :mod:`zipfile` cannot do; ``sizes`` overrides the uncompressed sizes the headers claim."""
    buf, cd = io.BytesIO(), b""
    for name, raw in members:
        comp = zstandard.ZstdCompressor(level=3).compress(raw) if method == 93 else raw
        size = (sizes or {}).get(name, len(raw))
        off, nb = buf.tell(), name.encode()
        head = (63, flags, method, 0, 0, 0, len(comp), size, len(nb), 0)
        buf.write(struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", *head) + nb + comp)
        cd += struct.pack("<4sH", b"PK\x01\x02", 63) + struct.pack("<HHHHHIIIHH", *head)
        cd += struct.pack("<HHHII", 0, 0, 0, 0, off) + nb
    cd_off = buf.tell()
    buf.write(cd)
    buf.write(
        struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, *[len(members)] * 2, len(cd), cd_off, 0)
    )
    out.write_bytes(buf.getvalue())
    return out


def _ingest_beside_good(tmp_path: Path, logs: dict[str, Path], bad: Path) -> ha.IngestReport:
    store = ha.open_store(tmp_path / "s")
    rep = store.ingest([logs["crash_eval"], bad], progress=False)
    good = store.sql("SELECT count(*) AS n FROM stg_samples")["n"][0]
    assert rep.runs_added == 1 and good == 7  # the crashed run's finished samples
    return rep


def _only_problem(rep: ha.IngestReport, bad: Path) -> str:
    [p] = rep.problems
    assert p.path == str(bad.absolute())
    return p.error


@pytest.mark.slow
def test_rewritten_archive_reads_like_the_original(tmp_path: Path, logs: dict[str, Path]) -> None:
    """The helper's zips are sound: the same log, rewritten, ingests with no problem."""
    copy = _write_zip(tmp_path / "copy.eval", _members(logs["ok_eval"]))
    store = ha.open_store(tmp_path / "s")
    rep = store.ingest(copy, progress=False)
    assert rep.runs_added == 1 and rep.samples_added == 24 and not rep.problems


def _replace(members: Members, name: str, raw: bytes) -> Members:
    return [(n, raw if n == name else b) for n, b in members]


_BOMB = 300 << 20  # over the default limit of 256 MiB


@pytest.mark.slow
@pytest.mark.parametrize("lie", [False, True], ids=["honest-size", "lying-size"])
def test_zip_bomb_is_refused_with_bounded_memory(
    tmp_path: Path, logs: dict[str, Path], lie: bool
) -> None:
    """Measured in a child process (peak RSS): the bomb is never inflated whole."""
    members = _replace(_members(logs["ok_eval"]), "summaries.json", b" " * _BOMB)
    sizes = {"summaries.json": 15_000} if lie else None
    bad = _write_zip(tmp_path / "bomb.eval", members, sizes=sizes)
    del members
    code = textwrap.dedent(
        """
        import json, sys
        import hylo_analytics as ha
        rep = ha.open_store(sys.argv[1]).ingest(sys.argv[2:], progress=False)
        # this process's peak (ru_maxrss would carry the forking parent's over)
        hwm = [ln for ln in open("/proc/self/status") if ln.startswith("VmHWM:")][0]
        rss = int(hwm.split()[1]) * 1024
        print(json.dumps({"runs": rep.runs_added, "rss": rss,
                          "problems": [[p.path, p.error] for p in rep.problems]}))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "s"), str(logs["crash_eval"]), str(bad)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    res = json.loads(out.stdout.splitlines()[-1])
    assert res["runs"] == 1
    [[path, error]] = res["problems"]
    assert path == str(bad) and error.startswith(
        "cannot read the .eval zip: member 'summaries.json' decompresses past the limit of "
        f"{inspect.MAX_EVAL_BYTES} bytes (the members read before it took "  # header.json
    )
    print(f"peak RSS {res['rss'] >> 20} MiB")
    assert res["rss"] < inspect.MAX_EVAL_BYTES + (400 << 20)  # not the 300 MiB twice over


def test_many_journal_members_share_one_budget(
    tmp_path: Path, logs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inspect, "MAX_EVAL_BYTES", 1 << 20)
    keep = [(n, b) for n, b in _members(logs["ok_eval"]) if n.startswith("_journal/start")]
    parts = [(f"_journal/summaries/{k}.json", b"[" + b" " * 200_000 + b"]") for k in range(10)]
    bad = _write_zip(tmp_path / "journal.eval", keep + parts)
    error = _only_problem(_ingest_beside_good(tmp_path, logs, bad), bad)
    assert error.startswith(
        "cannot read the .eval zip: member '_journal/summaries/5.json' decompresses past the "
        f"limit of {1 << 20} bytes (the members read before it took "
    )


def test_thousands_of_members(
    tmp_path: Path, logs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    base = [(n, b) for n, b in _members(logs["ok_eval"]) if n != "summaries.json"]
    extra = [(f"samples/x{k}_epoch_1.json", b"{}") for k in range(5_000)]
    bad = _write_zip(tmp_path / "many.eval", base + extra)
    monkeypatch.setattr(inspect, "MAX_MEMBERS", 2_000)
    error = _only_problem(_ingest_beside_good(tmp_path, logs, bad), bad)
    assert (
        error == f"cannot read the .eval zip: {len(base) + 5_000} members, over the limit of 2000"
    )


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("../../etc/evil.json", "member name '../../etc/evil.json' climbs out of the archive (..)"),
        (
            "samples/../../x.json",
            "member name 'samples/../../x.json' climbs out of the archive (..)",
        ),
        ("/etc/evil.json", "member name '/etc/evil.json' is an absolute path"),
    ],
)
def test_member_names_that_escape(
    tmp_path: Path, logs: dict[str, Path], name: str, why: str
) -> None:
    bad = _write_zip(tmp_path / "names.eval", [*_members(logs["ok_eval"]), (name, b"{}")])
    error = _only_problem(_ingest_beside_good(tmp_path, logs, bad), bad)
    assert error == f"cannot read the .eval zip: {why}"


def _corrupt_header_frame(src: Path, out: Path) -> Path:
    data = bytearray(src.read_bytes())
    with zipfile.ZipFile(src) as zf:
        info = zf.getinfo("header.json")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra) + 12
    data[start : start + 40] = b"\xff" * 40
    out.write_bytes(bytes(data))
    return out


_CASES: dict[str, tuple[Callable[[Path, Path], Path], str]] = {
    "corrupt zstd frame": (
        _corrupt_header_frame,
        "cannot read the .eval zip: member 'header.json': corrupt zstd data (",
    ),
    "unsupported method": (
        lambda src, out: _write_zip(out, _members(src), method=98),
        "cannot read the .eval zip: member 'header.json': unsupported compression method 98",
    ),
    "encrypted member": (
        lambda src, out: _write_zip(out, _members(src), flags=0x1),
        "cannot read the .eval zip: member 'header.json' is encrypted",
    ),
    "truncated zip": (
        lambda src, out: out.write_bytes(src.read_bytes()[:-100]) and out,
        "cannot read the .eval zip: File is not a zip file",
    ),
    "deep member": (
        lambda src, out: _write_zip(
            out,
            _replace(
                _members(src),
                "header.json",
                dict(_members(src))["header.json"].rstrip()[:-1]
                + b',"x":'
                + b"[" * 100_000
                + b"]" * 100_000
                + b"}",
            ),
        ),
        "cannot read the .eval zip: JSON nested deeper than 512 levels (line 1, column ",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(_CASES))
def test_broken_archive_is_one_problem(tmp_path: Path, logs: dict[str, Path], case: str) -> None:
    make, message = _CASES[case]
    bad = make(logs["ok_eval"], tmp_path / "bad.eval")
    error = _only_problem(_ingest_beside_good(tmp_path, logs, bad), bad)
    assert error.startswith(message)


def test_samples_object_names_the_field(tmp_path: Path, logs: dict[str, Path]) -> None:
    doc = json.loads(logs["ok_json"].read_text())
    doc["samples"] = {"q0": doc["samples"][0]}
    bad = tmp_path / "obj.json"
    bad.write_text(json.dumps(doc))
    store = ha.open_store(tmp_path / "s")
    rep = store.ingest([logs["crash_json"], bad], progress=False)
    assert rep.runs_added == 1
    [p] = rep.problems
    assert (p.path, p.field, p.error) == (str(bad), "samples", "expected an array, got object")
