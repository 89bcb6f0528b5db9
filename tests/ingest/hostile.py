"""The hostile-input corpus: every kind of bad input an attacker or an unlucky user makes.

Each :class:`Kind` writes one input folder: a good run (three samples with traces) beside one
hostile file or folder, the *culprit*. :func:`run_kind` ingests the folder into a new store and
records what happened; ``test_hostile.py`` checks the invariants on that record. The runner
works in a child process (see :func:`main`), so a kind that crashes the interpreter or hangs
is a recorded outcome of that kind, not the end of the test session.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import struct
import sys
import time
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample" / "run-octo-ft-1.0.0-0000"
N_GOOD = 3  # samples of the good run beside each culprit


@dataclass(frozen=True)
class Ctx:
    """Inputs the builders start from: real files, never modified in place."""

    inspect_eval: Path  # a real .eval log written by inspect_ai
    inspect_json: Path  # the same run as a .json log
    robots: Path  # a real inspect-robots log
    vla: Path  # a real vla-eval results file
    lerobot: Path  # a real LeRobot eval_info.json (per_task)
    lm_results: Path  # a real lm-eval results file ...
    lm_samples: Path  # ... and its samples file
    eee_aggregate: Path  # a real Every Eval Ever aggregate (without instances)
    eee_instances: Path  # a real Every Eval Ever instance file


@dataclass(frozen=True)
class Kind:
    """One kind of hostile input.

    ``build(folder, ctx)`` writes the culprit into ``folder`` (beside ``folder/good``) and
    returns its path. ``message`` is a regex the culprit's problem must match; ``None`` means
    the input is acceptable and must be stored whole (``kept`` samples of the culprit's run).
    ``later``: the culprit is ingested by a second ingest, after the good run is stored.
    """

    name: str
    reader: str
    build: Callable[[Path, Ctx], Path]
    message: str | None
    kept: int | None = 0
    later: bool = False
    heavy: bool = False  # runs alone, so its peak memory is its own
    abstains: str | None = None  # stored, with a null score whose skip_reason matches this


# -- the good run and helpers ------------------------------------------------------------


def good_log(run_id: str) -> dict[str, Any]:
    """The first sample run cut to :data:`N_GOOD` samples, under ``run_id``."""
    log = json.loads((SAMPLE / "evallog.json").read_text())
    log["run_id"] = run_id
    log["samples"] = log["samples"][:N_GOOD]
    return log


def write_run(folder: Path, log: dict[str, Any] | bytes, *, traces: bool = True) -> Path:
    """An EvalLog (a dict, or raw bytes) and the sample traces its samples name."""
    folder.mkdir(parents=True, exist_ok=True)
    if traces:
        (folder / "episodes").mkdir(exist_ok=True)
        for src in sorted((SAMPLE / "episodes").iterdir())[:N_GOOD]:
            shutil.copyfile(src, folder / "episodes" / src.name)
    path = folder / "evallog.json"
    path.write_bytes(log if isinstance(log, bytes) else json.dumps(log).encode())
    return path


def _bad_run(folder: Path, mutate: Callable[[dict[str, Any]], None]) -> Path:
    log = good_log(f"bad-{folder.name}")
    mutate(log)
    return write_run(folder / "bad", log)


def _bad_text(folder: Path, edit: Callable[[str], str | bytes]) -> Path:
    """A culprit made by editing the EvalLog's JSON text (for what json.dumps cannot write)."""
    text = json.dumps(good_log(f"bad-{folder.name}"))
    out = edit(text)
    return write_run(folder / "bad", out if isinstance(out, bytes) else out.encode())


def _first_trace(folder: Path, edit: Callable[[bytes], bytes]) -> Path:
    """The good-looking run whose first trace file is edited; returns that trace."""
    log = good_log(f"bad-{folder.name}")
    write_run(folder / "bad", log)
    trace = folder / "bad" / log["samples"][0]["trace"]
    trace.write_bytes(edit(trace.read_bytes()))
    return trace


def _deep(n: int) -> str:
    return "[" * n + "]" * n


def _token(folder: Path, token: str) -> Path:
    return _bad_text(
        folder,
        lambda t: t.replace('"success": 0.0', f'"success": {token}', 1).replace(
            '"success": 1.0', f'"success": {token}', 1
        ),
    )


# -- the EvalLog kinds -------------------------------------------------------------------


def _truncated(folder: Path, ctx: Ctx) -> Path:
    return _bad_text(folder, lambda t: t[: len(t) // 2])


def _empty(folder: Path, ctx: Ctx) -> Path:
    return write_run(folder / "bad", b"")


def _top_array(folder: Path, ctx: Ctx) -> Path:
    return write_run(folder / "bad", b'[{"version": "hylo.evallog/v0.1"}]')


def _binary(folder: Path, ctx: Ctx) -> Path:
    import random

    rng = random.Random(7)
    return write_run(folder / "bad", bytes(rng.randrange(256) for _ in range(5000)))


def _invalid_utf8(folder: Path, ctx: Ctx) -> Path:
    return _bad_text(folder, lambda t: t.replace('"octo-ft"', '"octo-\xff\xfe"').encode("latin-1"))


def _invalid_utf8_key(folder: Path, ctx: Ctx) -> Path:
    def edit(t: str) -> bytes:
        raw = t.encode()
        return raw.replace(b'"tabletop/pick_cube#1000"', b'"tabletop/pick_\xc3\x28#1000"', 1)

    return _bad_text(folder, edit)


def _surrogate(folder: Path, ctx: Ctx) -> Path:
    return _bad_text(folder, lambda t: t.replace('"octo-ft"', '"octo-\\ud800"', 1))


def _surrogate_task(folder: Path, ctx: Ctx) -> Path:
    return _bad_text(
        folder, lambda t: t.replace('"task_id": "tabletop/pick_cube"', '"task_id": "\\udfff"', 1)
    )


def _surrogate_extra(folder: Path, ctx: Ctx) -> Path:
    return _bad_text(
        folder, lambda t: t.replace('"n_scored"', '"note": "x\\udc80y", "n_scored"', 1)
    )


def _nul_in_string(folder: Path, ctx: Ctx) -> Path:
    return _bad_run(folder, lambda log: log["agent"].update(name="octo\x00ft"))


def _deep_2000(folder: Path, ctx: Ctx) -> Path:
    return _bad_text(folder, lambda t: t.replace('"planner": "none"', f'"planner": {_deep(2000)}'))


def _deep_100k(folder: Path, ctx: Ctx) -> Path:
    return _bad_text(
        folder, lambda t: t.replace('"planner": "none"', f'"planner": {_deep(100_000)}')
    )


def _deep_sample(folder: Path, ctx: Ctx) -> Path:
    return _bad_text(
        folder,
        lambda t: t.replace('"status": "failure"', f'"status": "failure", "x": {_deep(5000)}', 1),
    )


def _samples_string(folder: Path, ctx: Ctx) -> Path:
    return _bad_run(folder, lambda log: log.update(samples="oops"))


def _missing_agent(folder: Path, ctx: Ctx) -> Path:
    return _bad_run(folder, lambda log: log.pop("agent"))


def _unknown_version(folder: Path, ctx: Ctx) -> Path:
    return _bad_run(folder, lambda log: log.update(version="hylo.evallog/v9.9"))


def _duplicate_keys(folder: Path, ctx: Ctx) -> Path:
    return _bad_text(folder, lambda t: t.replace('"run_id": ', '"run_id": "shadow", "run_id": ', 1))


def _infinity(folder: Path, ctx: Ctx) -> Path:
    return _token(folder, "Infinity")


def _minus_infinity(folder: Path, ctx: Ctx) -> Path:
    return _token(folder, "-Infinity")


def _nan(folder: Path, ctx: Ctx) -> Path:
    return _token(folder, "NaN")


def _overflow_float(folder: Path, ctx: Ctx) -> Path:
    return _token(folder, "1e999")


def _seed_overflow(folder: Path, ctx: Ctx) -> Path:
    def mutate(log: dict[str, Any]) -> None:
        s = log["samples"][0]
        s["seed"] = 2**70
        s["key"] = f"{s['task_id']}#{2**70}"

    return _bad_run(folder, mutate)


def _steps_overflow(folder: Path, ctx: Ctx) -> Path:
    return _bad_run(folder, lambda log: log["results"].update(n_episodes=-(2**80)))


def _duplicate_sample(folder: Path, ctx: Ctx) -> Path:
    def mutate(log: dict[str, Any]) -> None:
        log["samples"][0]["epoch"] = 1  # a repeated key without an epoch is the next epoch
        log["samples"].append(copy.deepcopy(log["samples"][0]))

    return _bad_run(folder, mutate)


def _many_problems(folder: Path, ctx: Ctx) -> Path:
    def mutate(log: dict[str, Any]) -> None:
        base = log["samples"][0]
        log["samples"] = [
            {**base, "key": f"t#{i}", "seed": i, "status": 17, "trace": None} for i in range(3000)
        ]

    return _bad_run(folder, mutate)


def _huge_string(folder: Path, ctx: Ctx) -> Path:
    return _bad_run(folder, lambda log: log["agent"]["components"].update(blob="x" * 20_000_000))


def _bom(folder: Path, ctx: Ctx) -> Path:
    return _bad_text(folder, lambda t: b"\xef\xbb\xbf" + t.encode())


def _crlf(folder: Path, ctx: Ctx) -> Path:
    return write_run(
        folder / "bad",
        json.dumps(good_log(f"bad-{folder.name}"), indent=1).replace("\n", "\r\n").encode(),
    )


def _raw_nul_bytes(folder: Path, ctx: Ctx) -> Path:
    return _bad_text(folder, lambda t: t.replace(", ", ",\x00 ", 3).encode())


def _status_object(folder: Path, ctx: Ctx) -> Path:
    return _bad_run(folder, lambda log: log["samples"][1].update(status={"ok": True}))


def _score_string(folder: Path, ctx: Ctx) -> Path:
    return _bad_run(folder, lambda log: log["samples"][1]["scores"].update(success="yes"))


def _trace_dotdot(folder: Path, ctx: Ctx) -> Path:
    def mutate(log: dict[str, Any]) -> None:
        log["samples"][0]["trace"] = "../../../../../../etc/passwd"

    return _bad_run(folder, mutate)


def _trace_absolute(folder: Path, ctx: Ctx) -> Path:
    return _bad_run(folder, lambda log: log["samples"][0].update(trace="/etc/hostname"))


def _trace_nul(folder: Path, ctx: Ctx) -> Path:
    return _bad_run(folder, lambda log: log["samples"][0].update(trace="episodes/ep\x00.jsonl"))


def _trace_missing(folder: Path, ctx: Ctx) -> Path:
    return _bad_run(folder, lambda log: log["samples"][0].update(trace="episodes/gone.jsonl"))


def _trace_link_out(folder: Path, ctx: Ctx) -> Path:
    log = good_log(f"bad-{folder.name}")
    write_run(folder / "bad", log)
    trace = folder / "bad" / log["samples"][0]["trace"]
    trace.unlink()
    outside = folder.parent / f"{folder.name}-outside.jsonl"
    shutil.copyfile(SAMPLE / log["samples"][0]["trace"], outside)
    trace.symlink_to(outside)
    return trace


def _fifo_log(folder: Path, ctx: Ctx) -> Path:
    (folder / "bad").mkdir(parents=True)
    path = folder / "bad" / "evallog.json"
    os.mkfifo(path)
    return path


def _fifo_trace(folder: Path, ctx: Ctx) -> Path:
    log = good_log(f"bad-{folder.name}")
    write_run(folder / "bad", log)
    trace = folder / "bad" / log["samples"][0]["trace"]
    trace.unlink()
    os.mkfifo(trace)
    return trace


def _linked_run_folder(folder: Path, ctx: Ctx) -> Path:
    outside = folder.parent / f"{folder.name}-elsewhere"
    write_run(outside, good_log(f"bad-{folder.name}"))
    link = folder / "linked-run"
    link.symlink_to(outside, target_is_directory=True)
    return link


def _run_id_reuse(folder: Path, ctx: Ctx) -> Path:
    log = good_log(f"good-{folder.name}")  # the good run's id, another file, other content
    log["samples"] = log["samples"][:1]
    log["samples"][0].pop("trace")
    log["agent"]["version"] = "evil"
    return write_run(folder / "later" / "impostor", log, traces=False)


# -- the trace kinds ---------------------------------------------------------------------


def _t_truncated(folder: Path, ctx: Ctx) -> Path:
    return _first_trace(folder, lambda b: b[: len(b) - 25])


def _t_malformed_line(folder: Path, ctx: Ctx) -> Path:
    def edit(b: bytes) -> bytes:
        lines = b.split(b"\n")
        lines[2] = lines[2][:-7]
        return b"\n".join(lines)

    return _first_trace(folder, edit)


def _t_invalid_utf8(folder: Path, ctx: Ctx) -> Path:
    return _first_trace(folder, lambda b: b.replace(b"pick cube", b"pick \xff\xfe", 1))


def _t_surrogate(folder: Path, ctx: Ctx) -> Path:
    return _first_trace(folder, lambda b: b.replace(b"pick cube", b"pick \\ud800", 1))


def _t_deep(folder: Path, ctx: Ctx) -> Path:
    deep = _deep(100_000).encode()
    return _first_trace(
        folder, lambda b: b.replace(b'"info": {', b'"deep": ' + deep + b', "info": {', 1)
    )


def _t_infinity(folder: Path, ctx: Ctx) -> Path:
    return _first_trace(
        folder, lambda b: re.sub(rb'"reward": [-0-9.]+', b'"reward": Infinity', b, count=1)
    )


def _t_wrong_type(folder: Path, ctx: Ctx) -> Path:
    return _first_trace(folder, lambda b: re.sub(rb'"t": 2,', b'"t": "two",', b, count=1))


def _t_empty(folder: Path, ctx: Ctx) -> Path:
    return _first_trace(folder, lambda b: b"")


def _t_binary(folder: Path, ctx: Ctx) -> Path:
    return _first_trace(folder, lambda b: bytes(range(256)) * 40)


def _t_not_object_lines(folder: Path, ctx: Ctx) -> Path:
    return _first_trace(folder, lambda b: b'[1, 2]\n3\n"x"\n' + b)


def _t_seed_overflow(folder: Path, ctx: Ctx) -> Path:
    return _first_trace(
        folder, lambda b: re.sub(rb'"seed": \d+', b'"seed": 99999999999999999999999', b, count=1)
    )


# -- Inspect .eval archives --------------------------------------------------------------


def _eval_copy(folder: Path, ctx: Ctx) -> Path:
    (folder / "bad").mkdir(parents=True)
    return folder / "bad" / "log.eval"


def _rewrite_eval(
    src: Path, dst: Path, edit: Callable[[zipfile.ZipInfo, bytes], tuple[str, bytes] | None]
) -> None:
    """Copy an .eval member by member (deflated), ``edit`` returning a new name and data or None
    to drop the member."""
    from hylo_analytics.ingest.inspect import read_zip_member

    data = src.read_bytes()
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            got = edit(info, read_zip_member(data, zin, info))
            if got is not None:
                zout.writestr(got[0], got[1])


def _bomb_member(size: int) -> tuple[bytes, int]:
    """A raw-deflate stream of ``size`` zero bytes (a few MB for GBs) and their CRC-32.

    One 16 MiB block of zeros is compressed once and ended with a full flush, which resets
    the compressor: the same bytes then stand for every further block (compressing 3 GiB
    took 20 s; this 1.5 s, the CRC most of it). A final empty block ends the stream.
    """
    block = b"\0" * (1 << 24)
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    one = comp.compress(block) + comp.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(size >> 24):
        crc = zlib.crc32(block, crc)
    end = zlib.compressobj(9, zlib.DEFLATED, -15).flush()  # an empty final block
    return one * (size >> 24) + end, crc


def _zip_with_member(path: Path, name: str, deflated: bytes, *, declared: int, crc: int) -> None:
    """A one-member zip written by hand, so declared sizes can lie."""
    name_b = name.encode()
    local = struct.pack(
        "<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0, crc, len(deflated), declared, len(name_b), 0
    )
    central = struct.pack(
        "<IHHHHHHIIIHHHHHII",
        0x02014B50, 20, 20, 0, 8, 0, 0, crc, len(deflated), declared, len(name_b), 0, 0, 0, 0, 0, 0,
    )  # fmt: skip
    cd_offset = len(local) + len(name_b) + len(deflated)
    cd = central + name_b
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, len(cd), cd_offset, 0)
    path.write_bytes(local + name_b + deflated + cd + end)


def _e_bomb(lying: bool) -> Callable[[Path, Ctx], Path]:
    def build(folder: Path, ctx: Ctx) -> Path:
        out = _eval_copy(folder, ctx)
        size = 3 << 30  # 3 GiB of zeros (in 3 MB)
        deflated, crc = _bomb_member(size)
        declared = 1000 if lying else size & 0xFFFFFFFF  # honest: as far as 32 bits can say
        _zip_with_member(out, "header.json", deflated, declared=declared, crc=crc)
        return out

    return build


def _e_truncated(folder: Path, ctx: Ctx) -> Path:
    out = _eval_copy(folder, ctx)
    data = ctx.inspect_eval.read_bytes()
    out.write_bytes(data[: len(data) * 2 // 3])
    return out


def _e_corrupt_zstd(folder: Path, ctx: Ctx) -> Path:
    out = _eval_copy(folder, ctx)
    data = bytearray(ctx.inspect_eval.read_bytes())
    with zipfile.ZipFile(ctx.inspect_eval) as z:
        info = z.getinfo("header.json")
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    for i in range(start + 8, start + min(info.compress_size, 200) - 4):
        data[i] ^= 0x5A  # inside the frame, past its magic number
    out.write_bytes(bytes(data))
    return out


def _e_member_name(name: str) -> Callable[[Path, Ctx], Path]:
    def build(folder: Path, ctx: Ctx) -> Path:
        out = _eval_copy(folder, ctx)
        _rewrite_eval(
            ctx.inspect_eval,
            out,
            lambda info, b: (name if info.filename.startswith("samples/") else info.filename, b),
        )
        return out

    return build


def _e_many_members(folder: Path, ctx: Ctx) -> Path:
    out = _eval_copy(folder, ctx)
    _rewrite_eval(ctx.inspect_eval, out, lambda info, b: (info.filename, b))
    _append_stored(out, [(f"samples/junk_{i}.json", b"{}") for i in range(250_000)])
    return out


def _append_stored(path: Path, members: list[tuple[str, bytes]]) -> None:
    """Append stored members to the zip at ``path``, as ``ZipFile(path, "a").writestr`` does
    (zip64 end records past 65,535 members), packed at once: 250,000 members in about 1 s
    instead of 7 s."""
    data = path.read_bytes()
    end = data.rindex(b"PK\x05\x06")  # the old end record (a zip of a few members, no comment)
    n_old, cd_size, cd_off = struct.unpack_from("<HII", data, end + 10)
    stamp = (0, 0x21)  # 00:00:00, 1980-01-01
    local, central, offset = [], [], cd_off
    for name, body in members:
        raw, crc = name.encode(), zlib.crc32(body)
        head = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, *stamp, crc, len(body),
                           len(body), len(raw), 0)  # fmt: skip
        local.append(head + raw + body)
        central.append(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 0, *stamp, crc,
                                   len(body), len(body), len(raw), 0, 0, 0, 0, 0, offset) + raw)  # fmt: skip
        offset += len(head) + len(raw) + len(body)
    cd = data[cd_off : cd_off + cd_size] + b"".join(central)
    total = n_old + len(members)
    z64 = struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, total, total, len(cd), offset)
    locator = struct.pack("<IIQI", 0x07064B50, 0, offset + len(cd), 1)
    eocd = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, len(cd), 0xFFFFFFFF, 0)
    path.write_bytes(data[:cd_off] + b"".join(local) + cd + z64 + locator + eocd)


def _e_patch_central(edit: Callable[[bytearray, int], None]) -> Callable[[Path, Ctx], Path]:
    """Edit the header.json entries (local and central) of a copy of the real .eval."""

    def build(folder: Path, ctx: Ctx) -> Path:
        out = _eval_copy(folder, ctx)
        data = bytearray(ctx.inspect_eval.read_bytes())
        with zipfile.ZipFile(ctx.inspect_eval) as z:
            info = z.getinfo("header.json")
        edit(data, info.header_offset)  # local header
        pos = 0
        while True:
            pos = data.find(b"PK\x01\x02", pos)
            if pos < 0:
                break
            name_len = struct.unpack_from("<H", data, pos + 28)[0]
            if bytes(data[pos + 46 : pos + 46 + name_len]) == b"header.json":
                edit(data, pos + 2)  # the central entry is shifted by the "version made by"
            pos += 4
        out.write_bytes(bytes(data))
        return out

    return build


def _method_99(data: bytearray, at: int) -> None:
    struct.pack_into("<H", data, at + 8, 99)  # compression method


def _encrypted(data: bytearray, at: int) -> None:
    flags = struct.unpack_from("<H", data, at + 6)[0]
    struct.pack_into("<H", data, at + 6, flags | 1)  # general purpose flag bit 0


def _e_not_zip(folder: Path, ctx: Ctx) -> Path:
    out = _eval_copy(folder, ctx)
    out.write_bytes(b"PK\x03\x04 this is not really a zip archive" * 10)
    return out


def _e_deep_member(folder: Path, ctx: Ctx) -> Path:
    out = _eval_copy(folder, ctx)
    deep = _deep(100_000).encode()

    def edit(info: zipfile.ZipInfo, b: bytes) -> tuple[str, bytes]:
        if info.filename == "header.json":
            return info.filename, b[:-1] + b', "deep": ' + deep + b"}"
        return info.filename, b

    _rewrite_eval(ctx.inspect_eval, out, edit)
    return out


def _e_surrogate_member(folder: Path, ctx: Ctx) -> Path:
    out = _eval_copy(folder, ctx)

    def edit(info: zipfile.ZipInfo, b: bytes) -> tuple[str, bytes]:
        if info.filename == "header.json":
            return info.filename, b.replace(b'"hylotest/det-1"', b'"hylo\\ud800"', 1)
        return info.filename, b

    _rewrite_eval(ctx.inspect_eval, out, edit)
    return out


# -- Inspect .json, inspect-robots, vla-eval, MetricResult -------------------------------


def _json_doc(src: Path, folder: Path, name: str, mutate: Callable[[dict[str, Any]], None]) -> Path:
    doc = json.loads(src.read_text())
    mutate(doc)
    (folder / "bad").mkdir(parents=True, exist_ok=True)
    out = folder / "bad" / name
    out.write_text(json.dumps(doc))
    return out


def _j_samples_object(folder: Path, ctx: Ctx) -> Path:
    return _json_doc(
        ctx.inspect_json, folder, "log.json", lambda d: d.update(samples={"a": d["samples"][0]})
    )


def _j_truncated(folder: Path, ctx: Ctx) -> Path:
    (folder / "bad").mkdir(parents=True)
    out = folder / "bad" / "log.json"
    text = ctx.inspect_json.read_bytes()
    out.write_bytes(text[: len(text) // 2])
    return out


def _j_surrogate(folder: Path, ctx: Ctx) -> Path:
    out = _json_doc(ctx.inspect_json, folder, "log.json", lambda d: None)
    out.write_text(out.read_text().replace('"hylotest/det-1"', '"hylo\\udbff"', 1))
    return out


def _raw_token(src: Path, folder: Path, name: str, path: tuple[Any, ...], token: str) -> Path:
    """``src`` with the value at ``path`` replaced by a raw token json.dumps cannot write."""

    def mutate(d: dict[str, Any]) -> None:
        node: Any = d
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = "@@TOKEN@@"

    out = _json_doc(src, folder, name, mutate)
    out.write_text(out.read_text().replace('"@@TOKEN@@"', token, 1))
    return out


def _j_infinity(folder: Path, ctx: Ctx) -> Path:
    at = ("samples", 0, "scores", "grade_dict", "value", "len")
    return _raw_token(ctx.inspect_json, folder, "log.json", at, "Infinity")


def _j_results_nan(folder: Path, ctx: Ctx) -> Path:
    """Inspect writes NaN for a metric it cannot compute (the stderr of one sample): kept."""
    out = _json_doc(ctx.inspect_json, folder, "log.json", lambda d: None)
    out.write_text(re.sub(r'("stderr", "value": )[-0-9.]+', r"\1NaN", out.read_text(), count=1))
    return out


def _r_samples_string(folder: Path, ctx: Ctx) -> Path:
    return _json_doc(ctx.robots, folder, "robots.json", lambda d: d.update(samples="none"))


def _r_surrogate(folder: Path, ctx: Ctx) -> Path:
    out = _json_doc(ctx.robots, folder, "robots.json", lambda d: None)
    out.write_text(out.read_text().replace('"scene-0"', '"scene-\\ud800"', 1))
    return out


def _r_epoch_infinity(folder: Path, ctx: Ctx) -> Path:
    at = ("samples", 0, "epochs", 0, "success_at_end")
    return _raw_token(ctx.robots, folder, "robots.json", at, "-Infinity")


def _v_tasks_string(folder: Path, ctx: Ctx) -> Path:
    return _json_doc(ctx.vla, folder, "pol_libero_goal.json", lambda d: d.update(tasks="oops"))


def _v_steps_overflow(folder: Path, ctx: Ctx) -> Path:
    def mutate(d: dict[str, Any]) -> None:
        d["tasks"][0]["episodes"][0]["steps"] = 2**70

    return _json_doc(ctx.vla, folder, "pol_libero_goal.json", mutate)


def _v_surrogate(folder: Path, ctx: Ctx) -> Path:
    out = _json_doc(ctx.vla, folder, "pol_libero_goal.json", lambda d: None)
    text = out.read_text()
    first_task = json.loads(text)["tasks"][0]["task"]
    out.write_text(text.replace(json.dumps(first_task), '"task \\ud800"', 1))
    return out


_METRIC = {"sample_id": "walk#1", "metric_id": "fvd", "raw_value": 2.5, "valid": True}


def _metric_lines(folder: Path, lines: list[bytes]) -> Path:
    (folder / "bad").mkdir(parents=True)
    out = folder / "bad" / "cosmos.jsonl"
    out.write_bytes(b"".join(line + b"\n" for line in lines))
    return out


def _m_line(i: int) -> bytes:
    return json.dumps({**_METRIC, "sample_id": f"walk#{i}"}).encode()


def _m_infinity(folder: Path, ctx: Ctx) -> Path:
    return _metric_lines(folder, [_m_line(1), _m_line(2).replace(b"2.5", b"Infinity")])


def _m_invalid_utf8(folder: Path, ctx: Ctx) -> Path:
    return _metric_lines(folder, [_m_line(1), _m_line(2).replace(b"walk#2", b"walk\xff#2")])


def _m_surrogate(folder: Path, ctx: Ctx) -> Path:
    return _metric_lines(folder, [_m_line(1), _m_line(2).replace(b"walk#2", b"walk\\udc00#2")])


def _m_wrong_type(folder: Path, ctx: Ctx) -> Path:
    return _metric_lines(folder, [_m_line(1), _m_line(2).replace(b"true", b'"yes"')])


def _m_deep(folder: Path, ctx: Ctx) -> Path:
    deep = _deep(100_000).encode()
    return _metric_lines(folder, [_m_line(1), _m_line(2)[:-1] + b', "components": ' + deep + b"}"])


def _m_many_bad(folder: Path, ctx: Ctx) -> Path:
    lines = [_m_line(i).replace(b"true", b'"no"') for i in range(1500)]
    return _metric_lines(folder, [*lines, _m_line(99_999)])


# -- LeRobot, lm-eval, vla-eval's export, Every Eval Ever ---------------------------------


def _l_successes_string(folder: Path, ctx: Ctx) -> Path:
    def mutate(d: dict[str, Any]) -> None:
        d["per_task"][3]["metrics"]["successes"][4] = "yes"

    return _json_doc(ctx.lerobot, folder, "eval_info.json", mutate)


def _l_nan_reward(folder: Path, ctx: Ctx) -> Path:
    return _raw_token(ctx.lerobot, folder, "eval_info.json",
                      ("per_task", 0, "metrics", "sum_rewards", 2), "NaN")  # fmt: skip


def _l_surrogate(folder: Path, ctx: Ctx) -> Path:
    out = _json_doc(ctx.lerobot, folder, "eval_info.json", lambda d: None)
    out.write_text(out.read_text().replace('"libero_spatial"', '"libero_\\ud800"', 1))
    return out


def _lm_pair(folder: Path, ctx: Ctx, edit: Callable[[bytes], bytes]) -> Path:
    """The real lm-eval run (results and samples) with its samples file edited."""
    (folder / "bad").mkdir(parents=True)
    shutil.copyfile(ctx.lm_results, folder / "bad" / ctx.lm_results.name)
    out = folder / "bad" / ctx.lm_samples.name
    out.write_bytes(edit(ctx.lm_samples.read_bytes()))
    return out


def _lm_results_string(folder: Path, ctx: Ctx) -> Path:
    return _json_doc(ctx.lm_results, folder, "results_2026-07-08T16-04-34.json",
                     lambda d: d.update(results="none,none"))  # fmt: skip


def _lm_malformed_line(folder: Path, ctx: Ctx) -> Path:
    return _lm_pair(folder, ctx, lambda b: b.replace(b"\n", b"\n{oops\n", 1))


def _lm_doc_id_string(folder: Path, ctx: Ctx) -> Path:
    return _lm_pair(folder, ctx, lambda b: b.replace(b'"doc_id": 3,', b'"doc_id": "3",', 1))


def _va_export(folder: Path, ctx: Ctx, success: object) -> Path:
    """A vla-eval export (``<benchmark>_aggregate.json``) of one task and two episodes."""
    episodes = [{"sid": "s", "eid": f"e{i}", "episode_id": i, "metrics": {"success": ok},
                 "steps": 10, "elapsed_sec": 1.5} for i, ok in enumerate([True, success])]  # fmt: skip
    doc = {"benchmark": "libero_goal", "mode": "sync", "harness_version": "0.1.2",
           "tasks": [{"task": "open the drawer", "episodes": episodes, "num_episodes": 2}],
           "config": {}, "server_info": {"model_server": "Pi0ModelServer"}}  # fmt: skip
    (folder / "bad").mkdir(parents=True)
    out = folder / "bad" / "libero_goal_aggregate.json"
    out.write_text(json.dumps(doc))
    return out


def _e_instance_nan(folder: Path, ctx: Ctx) -> Path:
    (folder / "bad").mkdir(parents=True)
    out = folder / "bad" / ctx.eee_instances.name
    out.write_bytes(ctx.eee_instances.read_bytes().replace(b'"score": 0.0', b'"score": NaN', 1))
    return out


def _e_instance_surrogate(folder: Path, ctx: Ctx) -> Path:
    (folder / "bad").mkdir(parents=True)
    out = folder / "bad" / ctx.eee_instances.name
    out.write_bytes(
        ctx.eee_instances.read_bytes().replace(b'"model_id": "', b'"model_id": "\\udc00', 1)
    )
    return out


def _e_results_string(folder: Path, ctx: Ctx) -> Path:
    return _json_doc(ctx.eee_aggregate, folder, "aggregate.json",
                     lambda d: d.update(evaluation_results="none"))  # fmt: skip


KINDS: tuple[Kind, ...] = (
    Kind("evallog truncated", "hylo", _truncated, r"malformed JSON"),
    Kind("evallog empty file", "hylo", _empty, r"empty|unknown format"),
    Kind("evallog top-level array", "hylo", _top_array, r"unknown format|JSON object"),
    Kind("evallog binary garbage", "hylo", _binary, r"unknown format|UTF-8"),
    Kind("evallog invalid UTF-8 in a string", "hylo", _invalid_utf8, r"UTF-8"),
    Kind("evallog invalid UTF-8 in a sample key", "hylo", _invalid_utf8_key, r"UTF-8"),
    Kind("evallog lone surrogate in agent name", "hylo", _surrogate, r"surrogate|UTF-8"),
    Kind("evallog lone surrogate in task_id", "hylo", _surrogate_task, r"surrogate|UTF-8"),
    Kind("evallog lone surrogate in results", "hylo", _surrogate_extra, r"surrogate|UTF-8"),
    Kind("evallog NUL character in a name", "hylo", _nul_in_string, None, kept=N_GOOD),
    Kind("evallog nested 2,000 deep", "hylo", _deep_2000, r"nested|depth"),
    Kind("evallog nested 100,000 deep", "hylo", _deep_100k, r"nested|depth"),
    Kind("evallog sample nested 5,000 deep", "hylo", _deep_sample, r"nested|depth"),
    Kind("evallog samples is a string", "hylo", _samples_string, r"samples"),
    Kind("evallog missing agent", "hylo", _missing_agent, r"missing"),
    Kind("evallog unknown version", "hylo", _unknown_version, r"version"),
    Kind("evallog duplicate JSON keys", "hylo", _duplicate_keys, r"duplicate"),
    Kind("evallog Infinity score", "hylo", _infinity, r"finite|Infinity"),
    Kind("evallog -Infinity score", "hylo", _minus_infinity, r"finite|Infinity"),
    Kind("evallog NaN score", "hylo", _nan, r"finite|NaN"),
    Kind("evallog 1e999 score", "hylo", _overflow_float, r"finite|range|1e999"),
    Kind("evallog seed beyond int64", "hylo", _seed_overflow, r"seed"),
    Kind("evallog integer beyond int64 in results", "hylo", _steps_overflow, None, kept=N_GOOD),
    Kind("evallog duplicate sample key", "hylo", _duplicate_sample, r"duplicate"),
    Kind("evallog 3,000 bad samples", "hylo", _many_problems, r"status"),
    Kind("evallog 20 MB string", "hylo", _huge_string, None, kept=N_GOOD),
    Kind("evallog UTF-8 byte-order mark", "hylo", _bom, None, kept=N_GOOD),
    Kind("evallog CRLF line ends", "hylo", _crlf, None, kept=N_GOOD),
    Kind("evallog NUL bytes between tokens", "hylo", _raw_nul_bytes, r"malformed|NUL"),
    Kind("evallog sample status an object", "hylo", _status_object, r"status"),
    Kind("evallog score a string", "hylo", _score_string, None, N_GOOD, abstains="non-numeric"),
    Kind("evallog trace path with ..", "hylo", _trace_dotdot, r"outside|escape", kept=N_GOOD),
    Kind("evallog absolute trace path", "hylo", _trace_absolute, r"absolute|outside", kept=N_GOOD),
    Kind("evallog NUL byte in a trace path", "hylo", _trace_nul, r"NUL|null", kept=N_GOOD),
    Kind("evallog trace missing", "hylo", _trace_missing, r"missing|no such|cannot", kept=N_GOOD),
    Kind("trace symlink leading outside", "trace", _trace_link_out, r"outside|link", kept=N_GOOD),
    Kind("evallog that is a FIFO", "files", _fifo_log, r"regular file|fifo"),
    Kind("trace that is a FIFO", "files", _fifo_trace, r"regular file|fifo", kept=N_GOOD),
    Kind("run folder symlinked from outside", "files", _linked_run_folder, r"link|outside"),
    Kind(
        "run_id reused by another file",
        "hylo",
        _run_id_reuse,
        r"already stored|replace",
        later=True,
    ),
    Kind("trace truncated last line", "trace", _t_truncated, r"truncated|malformed", kept=N_GOOD),
    Kind("trace malformed middle line", "trace", _t_malformed_line, r"malformed", kept=N_GOOD),
    Kind("trace invalid UTF-8", "trace", _t_invalid_utf8, r"UTF-8", kept=N_GOOD),
    Kind("trace lone surrogate", "trace", _t_surrogate, r"surrogate|UTF-8", kept=N_GOOD),
    Kind("trace line nested 100,000 deep", "trace", _t_deep, r"nested|depth", kept=N_GOOD),
    Kind("trace Infinity reward", "trace", _t_infinity, r"finite|Infinity|malformed", kept=N_GOOD),
    Kind("trace step time a string", "trace", _t_wrong_type, r"\bt\b|type", kept=N_GOOD),
    Kind("trace empty file", "trace", _t_empty, None, kept=N_GOOD),
    Kind("trace binary garbage", "trace", _t_binary, r"UTF-8|malformed", kept=N_GOOD),
    Kind("trace lines not objects", "trace", _t_not_object_lines, r"object", kept=N_GOOD),
    Kind("trace start seed beyond int64", "trace", _t_seed_overflow, None, kept=N_GOOD),
    Kind(
        "eval zip bomb, honest sizes",
        "inspect-eval",
        _e_bomb(False),
        r"limit|large|bomb|exceed",
        heavy=True,
    ),
    Kind(
        "eval zip bomb, lying sizes",
        "inspect-eval",
        _e_bomb(True),
        r"limit|large|bomb|exceed|CRC",
        heavy=True,
    ),
    Kind("eval truncated archive", "inspect-eval", _e_truncated, r"zip|truncated|corrupt"),
    Kind("eval corrupt zstd frame", "inspect-eval", _e_corrupt_zstd, r"zstd|corrupt|decompress"),
    Kind(
        "eval member name with ..",
        "inspect-eval",
        _e_member_name("../../evil.json"),
        r"member|name|\.\.",
    ),
    Kind(
        "eval absolute member name",
        "inspect-eval",
        _e_member_name("/etc/evil.json"),
        r"member|name|absolute",
    ),
    Kind("eval 250,000 members", "inspect-eval", _e_many_members, r"members", heavy=True),
    Kind(
        "eval unsupported compression",
        "inspect-eval",
        _e_patch_central(_method_99),
        r"compression|method",
    ),
    Kind("eval encrypted member", "inspect-eval", _e_patch_central(_encrypted), r"encrypt"),
    Kind("eval not a zip", "inspect-eval", _e_not_zip, r"zip|unknown format"),
    Kind("eval member nested 100,000 deep", "inspect-eval", _e_deep_member, r"nested|depth"),
    Kind("eval lone surrogate in header", "inspect-eval", _e_surrogate_member, r"surrogate|UTF-8"),
    Kind("inspect json samples an object", "inspect-json", _j_samples_object, r"samples"),
    Kind("inspect json truncated", "inspect-json", _j_truncated, r"malformed|unknown format"),
    Kind("inspect json lone surrogate", "inspect-json", _j_surrogate, r"surrogate|UTF-8"),
    Kind(
        "inspect json Infinity score",
        "inspect-json",
        _j_infinity,
        None,
        None,
        abstains=r"non-finite",
    ),
    Kind("inspect json NaN metric in results", "inspect-json", _j_results_nan, None, None),
    Kind(
        "inspect-robots samples a string",
        "inspect-robots",
        _r_samples_string,
        r"samples: expected an array, got a string",
    ),
    Kind("inspect-robots lone surrogate", "inspect-robots", _r_surrogate, r"surrogate|UTF-8"),
    Kind(
        "inspect-robots -Infinity",
        "inspect-robots",
        _r_epoch_infinity,
        None,
        None,
        abstains=r"non-finite",
    ),
    Kind("vla-eval tasks a string", "vla-eval", _v_tasks_string, r"tasks: expected an array, got"),
    Kind("vla-eval steps beyond int64", "vla-eval", _v_steps_overflow, None, None),
    Kind("vla-eval lone surrogate", "vla-eval", _v_surrogate, r"surrogate|UTF-8"),
    Kind("metric results Infinity", "metric-results", _m_infinity, r"finite|Infinity"),
    Kind("metric results invalid UTF-8", "metric-results", _m_invalid_utf8, r"UTF-8"),
    Kind("metric results lone surrogate", "metric-results", _m_surrogate, r"surrogate|UTF-8"),
    Kind("metric results wrong type", "metric-results", _m_wrong_type, r"valid"),
    Kind("metric results nested 100,000 deep", "metric-results", _m_deep, r"nested|depth"),
    Kind("metric results 1,500 bad lines", "metric-results", _m_many_bad, r"valid"),
    Kind("lerobot successes a string", "lerobot", _l_successes_string, r"successes\[4\].*true or false"),
    Kind("lerobot NaN reward", "lerobot", _l_nan_reward, r"sum_rewards\[2\].*finite"),
    Kind("lerobot lone surrogate", "lerobot", _l_surrogate, r"surrogate|UTF-8"),
    Kind("lm-eval results a string", "lm-eval", _lm_results_string, r"results.*object of tasks"),
    # the results beside the bad samples file are stored from their figures (partial)
    Kind("lm-eval samples malformed line", "lm-eval", _lm_malformed_line, r"malformed", None),
    Kind("lm-eval samples doc_id a string", "lm-eval", _lm_doc_id_string, r"doc_id", None),
    Kind("vla-eval export metric a string", "vla-eval-export",
         lambda f, c: _va_export(f, c, "yes"), r"metrics\.success.*number or a boolean"),
    Kind("vla-eval export Infinity", "vla-eval-export",
         lambda f, c: _va_export(f, c, float("inf")), r"finite"),
    Kind("every eval ever NaN score", "every-eval-ever", _e_instance_nan, r"evaluation\.score.*finite"),
    Kind("every eval ever lone surrogate", "every-eval-ever", _e_instance_surrogate, r"surrogate|UTF-8"),
    Kind("every eval ever results a string", "every-eval-ever", _e_results_string, r"evaluation_results"),
)  # fmt: skip


# -- the runner (in a child process) -----------------------------------------------------


def build(kind: Kind, folder: Path, ctx: Ctx) -> Path:
    """Write the kind's input folder: the good run and the culprit. Returns the culprit."""
    folder.mkdir(parents=True)
    write_run(folder / "good", good_log(f"good-{folder.name}"))
    return kind.build(folder, ctx)


def check_views(store: Any, names: list[str] | None = None) -> list[str]:
    """Every view read whole (every string decoded); returns the views that failed."""
    con = getattr(store, "parquet", store).con  # a Store holds its ParquetStore
    if names is None:
        names = [
            r[0]
            for r in con.execute(
                "SELECT view_name FROM duckdb_views() WHERE NOT internal ORDER BY 1"
            ).fetchall()
        ]
    bad = []
    for name in names:
        try:
            con.sql(f'SELECT * FROM "{name}"').to_arrow_table()
        except Exception as exc:
            bad.append(f"{name}: {type(exc).__name__}: {str(exc)[:200]}")
    return bad


CORE_VIEWS = ["stg_runs", "stg_samples", "stg_scores", "stg_events", "stg_quarantine"]


def _state(store: Any) -> tuple[int, int, int]:
    """(runs, samples, quarantine rows): what a second ingest of unchanged files must keep."""
    row = (
        getattr(store, "parquet", store)
        .con.execute(
            "SELECT (SELECT count(*) FROM stg_runs), (SELECT count(*) FROM stg_samples), "
            "(SELECT count(*) FROM stg_quarantine)"
        )
        .fetchone()
    )
    return (int(row[0]), int(row[1]), int(row[2]))


def run_kind(kind: Kind, folder: Path, ctx: Ctx) -> dict[str, Any]:
    """Build, ingest, re-ingest and inspect one kind; every outcome is a field of the record."""
    import hylo_analytics as ha

    culprit = build(kind, folder, ctx)
    store = ha.open_store(folder.parent / f"{folder.name}-store")
    record: dict[str, Any] = {"kind": kind.name, "culprit": str(culprit.absolute())}
    t0 = time.perf_counter()
    try:
        if kind.later:
            store.ingest(folder / "good", progress=False)
            report = store.ingest(folder / "later", progress=False)
        else:
            report = store.ingest(folder, progress=False)
        record["problems"] = [[p.path, p.line, p.field, p.error] for p in report.problems]
        before = _state(store)
        store.ingest(folder if not kind.later else folder / "later", progress=False)
        record["again"] = [before, _state(store)]
    except BaseException as exc:
        record["raised"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    record["seconds"] = round(time.perf_counter() - t0, 3)
    fresh = ha.open_store(store.root)
    record["bad_views"] = check_views(fresh, CORE_VIEWS)
    if record["bad_views"]:
        return record
    con = fresh.parquet.con

    def one(sql: str, params: list[Any] | None = None) -> Any:
        return con.execute(sql, params or []).fetchone()[0]  # type: ignore[index]

    good = f"good-{folder.name}"
    record["good_samples"] = one("SELECT count(*) FROM stg_samples WHERE run_id = ?", [good])
    record["good_events"] = one("SELECT count(*) FROM stg_events WHERE run_id = ?", [good])
    # the culprit's runs: those read from its folder (or from the culprit, a linked folder)
    culprit_runs = (
        "SELECT run_id FROM stg_runs WHERE starts_with(source_path, ?) "
        "OR starts_with(source_path, ?)"
    )
    where = [f"{folder.absolute()}/bad/", str(culprit.absolute())]
    record["culprit_samples"] = one(
        f"SELECT count(*) FROM stg_samples WHERE run_id IN ({culprit_runs})", where
    )
    record["culprit_skip_reasons"] = [
        r[0]
        for r in con.execute(
            f"SELECT DISTINCT skip_reason FROM stg_scores WHERE run_id IN ({culprit_runs}) "
            "AND value IS NULL AND skip_reason IS NOT NULL ORDER BY 1",
            where,
        ).fetchall()
    ]
    record["nonfinite"] = one("SELECT count(*) FROM stg_scores WHERE isinf(value) OR isnan(value)")
    return record


def peak_rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def main() -> None:
    """``python hostile.py WORKDIR CTX_JSON NAME...``: one JSON line per kind on stdout.

    A ``{"start": name}`` line precedes each kind, so the parent knows which kind a crash or
    a hang belongs to.
    """
    work, ctx_json, *names = sys.argv[1:]
    ctx = Ctx(**{k: Path(v) for k, v in json.loads(ctx_json).items()})
    by_name = {k.name: k for k in KINDS}
    for i, name in enumerate(names):
        print(json.dumps({"start": name}), flush=True)
        folder = Path(work) / f"k{[k.name for k in KINDS].index(name):02d}"
        record = run_kind(by_name[name], folder, ctx)
        record["peak_rss"] = peak_rss()
        print(json.dumps(record), flush=True)
        del i


if __name__ == "__main__":
    main()
