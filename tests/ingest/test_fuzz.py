"""Fuzzing ingest: valid logs and traces mutated byte-wise and structurally (hypothesis).

Whatever the mutation, the invariants of the hostile corpus hold: no exception escapes the
ingest, the good run beside the mutant is stored whole, every problem names one of the input
files, every table still reads whole, and no non-finite score is stored. The examples are
derandomized so CI sees the same ones every run; ``HYLO_FUZZ_EXAMPLES=2000`` (and
``HYLO_FUZZ_RANDOM=1`` for fresh draws) runs a longer campaign on demand.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import hostile
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hylo_analytics as ha

EXAMPLES = int(os.environ.get("HYLO_FUZZ_EXAMPLES", "60"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=os.environ.get("HYLO_FUZZ_RANDOM", "") != "1",
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

# -- byte-wise mutations -----------------------------------------------------------------

_BYTES = st.binary(min_size=1, max_size=12) | st.sampled_from(
    [b"\xff", b"\xc3\x28", b"\x00", b"\\ud800", b"\\u0000", b"Infinity", b"NaN", b"1e999",
     b"[" * 3000, b"{" * 50, b'"', b"\\", b"\n", b"\r\n", b"99999999999999999999999"]
)  # fmt: skip


@st.composite
def byte_mutation(draw: st.DrawFn, data: bytes) -> bytes:
    """One of: flip, insert, delete, truncate, duplicate a slice, at a drawn position."""
    n = len(data)
    at = draw(st.integers(0, n - 1))
    op = draw(st.sampled_from(["flip", "insert", "delete", "truncate", "duplicate", "replace"]))
    if op == "flip":
        return data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1 :]
    if op == "insert":
        return data[:at] + draw(_BYTES) + data[at:]
    if op == "delete":
        return data[:at] + data[at + draw(st.integers(1, 64)) :]
    if op == "truncate":
        return data[:at]
    if op == "duplicate":
        k = draw(st.integers(1, 200))
        return data[: at + k] + data[at : at + k] + data[at + k :]
    return data[:at] + draw(_BYTES) + data[at + draw(st.integers(1, 16)) :]


# -- structural mutations ----------------------------------------------------------------

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**80), 2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)  # lone surrogates included: json.dumps escapes them
    | st.sampled_from(["", "\ud800", "a\x00b", "../../etc/passwd", "/etc/hostname", "t#1"])
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into ``doc`` (iteratively: the documents are ours, but keep to the rule)."""
    out: list[tuple[Any, ...]] = []
    stack: list[tuple[tuple[Any, ...], Any]] = [(prefix, doc)]
    while stack:
        path, node = stack.pop()
        out.append(path)
        if isinstance(node, dict):
            stack.extend(((*path, k), v) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend(((*path, i), v) for i, v in enumerate(node))
    return sorted(out, key=repr)


@st.composite
def structural_mutation(draw: st.DrawFn, doc: Any) -> bytes:
    """Replace, delete or deeply nest one value of ``doc``; returns the JSON text."""
    import copy

    doc = copy.deepcopy(doc)
    path = draw(st.sampled_from([p for p in _paths(doc) if p]))
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    op = draw(st.sampled_from(["replace", "delete", "nest", "duplicate"]))
    last = path[-1]
    if op == "replace":
        parent[last] = draw(_VALUES)
    elif op == "delete":
        del parent[last]
    elif op == "nest":
        depth = draw(st.sampled_from([10, 600, 3000, 100_000]))
        parent[last] = "@@NEST@@"
        return json.dumps(doc).replace('"@@NEST@@"', "[" * depth + "]" * depth, 1).encode()
    elif isinstance(parent, list):
        parent.insert(int(last), copy.deepcopy(parent[last]))
    else:
        return (
            json.dumps(doc)
            .replace(json.dumps(last) + ":", f"{json.dumps(last)}: null, {json.dumps(last)}:", 1)
            .encode()
        )
    return json.dumps(doc).encode()


# -- the property ------------------------------------------------------------------------

GOOD_LOG = hostile.good_log("bad-fuzz")
TRACE = sorted((hostile.SAMPLE / "episodes").iterdir())[0]
TRACE_LINES = [json.loads(line) for line in TRACE.read_text().splitlines()]


@st.composite
def mutant(draw: st.DrawFn) -> tuple[str, bytes]:
    """``(which file, its new bytes)``: the EvalLog or its first trace, mutated once or twice."""
    target = draw(st.sampled_from(["log", "trace"]))
    if target == "log":
        base, doc = json.dumps(GOOD_LOG).encode(), GOOD_LOG
    else:
        line = draw(st.integers(0, len(TRACE_LINES) - 1))
        base, doc = TRACE.read_bytes(), TRACE_LINES[line]
    if draw(st.booleans()):
        data = draw(byte_mutation(base))
    elif target == "log":
        data = draw(structural_mutation(doc))
    else:
        lines = TRACE.read_bytes().split(b"\n")
        lines[line] = draw(structural_mutation(doc))
        data = b"\n".join(lines)
    if draw(st.integers(0, 3)) == 0:
        data = draw(byte_mutation(data)) if data else data
    return target, data


@functools.cache
def _expected_events() -> int:
    """The good run's event count, ingested alone."""
    with tempfile.TemporaryDirectory() as tmp:
        store = ha.open_store(Path(tmp) / "store")
        hostile.write_run(Path(tmp) / "ref" / "good", hostile.good_log("good-fuzz"))
        store.ingest(Path(tmp) / "ref", progress=False)
        n: int = store.sql("SELECT count(*) FROM stg_events").item()
    return n


@pytest.mark.slow
@SETTINGS
@given(change=mutant())
def test_mutants_never_escape(tmp_path_factory: Any, change: tuple[str, bytes]) -> None:
    tmp = tmp_path_factory.mktemp("fuzz")
    want_events = _expected_events()
    folder = tmp / "in"
    hostile.write_run(folder / "good", hostile.good_log("good-fuzz"))
    log_path = hostile.write_run(folder / "bad", GOOD_LOG)
    target, data = change
    path = log_path if target == "log" else folder / "bad" / GOOD_LOG["samples"][0]["trace"]
    path.write_bytes(data)
    inputs = {str(p.absolute()) for p in folder.rglob("*") if p.is_file()}

    store = ha.open_store(tmp / "store")
    report = store.ingest(folder, progress=False)  # must not raise, whatever the bytes
    for p in report.problems:
        assert p.path in inputs, f"a problem names no input file: {p}"
        assert p.error, f"a problem without a message: {p}"
    fresh = ha.open_store(store.root)
    assert hostile.check_views(fresh, hostile.CORE_VIEWS) == []
    good = fresh.sql("SELECT count(*) FROM stg_samples WHERE run_id = 'good-fuzz'").item()
    assert good == hostile.N_GOOD
    events = fresh.sql("SELECT count(*) FROM stg_events WHERE run_id = 'good-fuzz'").item()
    assert events == want_events
    nonfinite = fresh.sql("SELECT count(*) FROM stg_scores WHERE isinf(value) OR isnan(value)")
    assert nonfinite.item() == 0
    shutil.rmtree(tmp, ignore_errors=True)
