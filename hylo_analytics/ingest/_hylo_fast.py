"""The fast path for well-formed hylo EvalLogs: pyarrow's JSON reader, one file per thread.

A clean log is parsed straight into Arrow columns (pyarrow releases the GIL, so two files parse
at once), checked with vectorized Arrow kernels, and flattened without a Python loop over its
samples. Anything unusual (a parse error, a type or field the fast path does not model, a null
where a value is required) sends the file to the checked DuckDB path in ``hylo.py``, which
names the file, line and field of each problem. Both paths produce the same tables.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from hylo_analytics.ingest._files import SourceFile

__all__ = ["FastLogs", "parse_fast"]

_STR = (pa.types.is_string, pa.types.is_large_string, pa.types.is_null)
_INT = (pa.types.is_int64, pa.types.is_null)
_BOOL = (pa.types.is_boolean, pa.types.is_null)
_NUM = (pa.types.is_floating, pa.types.is_integer, pa.types.is_boolean, pa.types.is_null)

_TOP = {"version", "run_id", "benchmark", "agent", "results", "samples"}
_BENCH = {"id": _STR, "version": _STR, "digest": _STR, "split": _STR, "requires_privileged": _BOOL}
_SAMPLE = {
    "key": _STR,
    "task_id": _STR,
    "seed": _INT,
    "epoch": _INT,
    "episode_id": _STR,
    "status": _STR,
    "trace": _STR,
}
_REQUIRED_SAMPLE = ("key", "task_id", "seed", "status")


@dataclass
class FastLogs:
    """Per-file results of the fast path; ``None`` where a file needs the checked path."""

    runs: list[pa.Table | None]
    samples: list[pa.Table | None]
    scores: list[pa.Table | None]


def _is(t: pa.DataType, kinds: tuple[object, ...]) -> bool:
    return any(k(t) for k in kinds)  # type: ignore[operator]


def _struct_ok(t: pa.DataType, fields: Mapping[str, tuple[object, ...]], required: str) -> bool:
    if not pa.types.is_struct(t):
        return False
    names = {t.field(i).name for i in range(t.num_fields)}
    if required not in names:
        return False
    return all(n not in fields or _is(t.field(n).type, fields[n]) for n in names)


def _col(struct: pa.StructArray, name: str, n: int, typ: pa.DataType) -> pa.Array:
    t = struct.type
    if t.get_field_index(name) < 0:
        return pa.nulls(n, typ)
    return struct.field(name).cast(typ)


def _json(values: pa.Array) -> pa.Array:
    """Objects back to JSON text (rare, small: agent components, run results)."""
    import json

    return pa.array(
        [None if v is None else json.dumps(v, separators=(",", ":")) for v in values.to_pylist()],
        pa.string(),
    )


def _one(idx: int, sf: SourceFile, fmt: str) -> tuple[pa.Table, pa.Table, pa.Table] | None:
    try:
        doc = pj.read_json(
            io.BytesIO(sf.data.replace(b"\n", b" ").replace(b"\r", b" ")),
            read_options=pj.ReadOptions(block_size=max(1 << 20, 2 * len(sf.data))),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    names = set(doc.column_names)
    if doc.num_rows != 1 or not names <= _TOP or not {"version", "run_id", "samples"} <= names:
        return None
    top = {n: doc.column(n).chunk(0) for n in names}
    if top["version"].type != pa.string() or top["version"][0].as_py() != fmt:
        return None
    if not _is(top["run_id"].type, _STR[:2]) or top["run_id"].null_count:
        return None
    bench, agent = top.get("benchmark"), top.get("agent")
    if bench is None or not _struct_ok(bench.type, _BENCH, "id") or bench.field("id").null_count:
        return None
    agent_fields = {"name": _STR, "version": _STR}
    if agent is None or not _struct_ok(agent.type, agent_fields, "name"):
        return None
    if agent.field("name").null_count or not pa.types.is_string(agent.field("name").type):
        return None
    if "results" in top and not _is(top["results"].type, (pa.types.is_struct, pa.types.is_null)):
        return None
    lst = top["samples"]
    if not pa.types.is_list(lst.type) or lst.null_count:
        return None
    flat = lst.flatten()
    n = len(flat)
    if n and not pa.types.is_struct(flat.type):
        return None
    if n:
        t = flat.type
        fields = {t.field(i).name for i in range(t.num_fields)}
        if not fields <= {*_SAMPLE, "scores"} or not set(_REQUIRED_SAMPLE) <= fields:
            return None
        if any(not _is(t.field(f).type, _SAMPLE[f]) for f in fields if f in _SAMPLE):
            return None
        if flat.null_count or any(flat.field(f).null_count for f in _REQUIRED_SAMPLE):
            return None
    key = _col(flat, "key", n, pa.string())
    task = _col(flat, "task_id", n, pa.string())
    seed = _col(flat, "seed", n, pa.int64())
    if (
        n
        and not pc.all(
            pc.equal(key, pc.binary_join_element_wise(task, pc.cast(seed, pa.string()), "#"))
        ).as_py()
    ):
        return None
    scores = flat.field("scores") if n and flat.type.get_field_index("scores") >= 0 else None
    if scores is not None and not _is(scores.type, (pa.types.is_struct, pa.types.is_null)):
        return None
    if scores is not None and pa.types.is_struct(scores.type):
        st = scores.type
        if any(not _is(st.field(i).type, _NUM) for i in range(st.num_fields)):
            return None

    file_idx = pa.array(np.full(n, idx, np.int32))
    run_id = top["run_id"][0].as_py()
    samples = pa.table(
        {
            "file_idx": file_idx,
            "run_id": pa.array([run_id] * n, pa.string()) if n else pa.array([], pa.string()),
            "key": key,
            "task_id": task,
            "seed": seed,
            "epoch": (epoch := _epochs(key, _col(flat, "epoch", n, pa.int64()))),
            "episode_id": _episode_ids(key, epoch, _col(flat, "episode_id", n, pa.string())),
            "status": _col(flat, "status", n, pa.string()),
            "trace": _col(flat, "trace", n, pa.string()),
            "sample_idx": pa.array(np.arange(n, dtype=np.int64)),
            "extra": pa.nulls(n, pa.string()),
        }
    )
    runs = pa.table(
        {
            "file_idx": pa.array([idx], pa.int32()),
            "run_id": pa.array([run_id], pa.string()),
            "source_format": pa.array([fmt], pa.string()),
            "benchmark_id": bench.field("id").cast(pa.string()),
            "benchmark_version": _col(bench, "version", 1, pa.string()),
            "benchmark_digest": _col(bench, "digest", 1, pa.string()),
            "split": _col(bench, "split", 1, pa.string()),
            "requires_privileged": _col(bench, "requires_privileged", 1, pa.bool_()),
            "agent_name": agent.field("name").cast(pa.string()),
            "agent_version": _col(agent, "version", 1, pa.string()),
            "agent_components": _json(agent.field("components"))
            if agent.type.get_field_index("components") >= 0
            else pa.nulls(1, pa.string()),
            "results": _json(top["results"]) if "results" in top else pa.nulls(1, pa.string()),
            "n_samples": pa.array([n], pa.int64()),
            "extra": pa.nulls(1, pa.string()),
        }
    )
    parts = []
    if scores is not None and pa.types.is_struct(scores.type):
        has = pa.array(np.flatnonzero(scores.is_valid().to_numpy(zero_copy_only=False)))
        cols = ["run_id", "key", "task_id", "seed", "epoch", "episode_id"]
        scored = samples.select(cols).take(has)  # in this thread: the copy runs in parallel
        m = scored.num_rows
        # an abstention of an errored episode says so, as the checked path and scorers do
        reason = pc.if_else(
            pc.equal(samples.column("status").take(has), "error"),
            pa.scalar("episode errored"),
            pa.scalar("abstained"),
        ).fill_null("abstained")
        for i in range(scores.type.num_fields):
            value = scores.field(i).take(has).cast(pa.float64())
            valid = pc.is_valid(value)
            parts.append(
                scored.append_column("metric", pa.repeat(pa.scalar(scores.type.field(i).name), m))
                .append_column("value", value)
                .append_column("valid", valid)
                .append_column(
                    "skip_reason",
                    pc.if_else(valid, pa.scalar(None, pa.string()), reason),
                )
            )
    score_rows = pa.concat_tables(parts) if parts else _NO_SCORES
    score_rows = score_rows.add_column(
        0, "file_idx", pa.array(np.full(score_rows.num_rows, idx, np.int32))
    )
    return runs, samples, score_rows


_NO_SCORES = pa.schema(
    [
        ("run_id", pa.string()),
        ("key", pa.string()),
        ("task_id", pa.string()),
        ("seed", pa.int64()),
        ("epoch", pa.int64()),
        ("episode_id", pa.string()),
        ("metric", pa.string()),
        ("value", pa.float64()),
        ("valid", pa.bool_()),
        ("skip_reason", pa.string()),
    ]
).empty_table()


def _epochs(key: pa.Array, epoch: pa.Array) -> pa.Array:
    """Epochs as the checked path numbers them: a repeated key's samples in file order."""
    if not epoch.null_count:
        return epoch
    codes = pc.dictionary_encode(key).indices.to_numpy(zero_copy_only=False)
    n = len(codes)
    fill = np.ones(n, np.int64)
    if len(np.unique(codes)) < n:
        order = np.argsort(codes, kind="stable")
        starts = np.flatnonzero(np.r_[True, np.diff(codes[order]) != 0])
        sizes = np.diff(np.r_[starts, n])
        fill[order] = np.arange(n) - np.repeat(starts, sizes) + 1
    return pc.coalesce(epoch, pa.array(fill))


def _episode_ids(key: pa.Array, epoch: pa.Array, episode_id: pa.Array) -> pa.Array:
    """An unnamed episode is ``<key>`` (epoch 1) or ``<key>@<epoch>``."""
    if not episode_id.null_count:
        return episode_id
    named = pc.if_else(
        pc.greater(epoch, 1),
        pc.binary_join_element_wise(key, pc.cast(epoch, pa.string()), "@"),
        key,
    )
    return pc.coalesce(episode_id, named)


def parse_fast(files: Sequence[SourceFile], fmt: str, *, threads: int = 2) -> FastLogs:
    """Try the fast path on every file; a ``None`` entry marks a file for the checked path."""
    with ThreadPoolExecutor(max_workers=threads) as pool:
        out = list(pool.map(lambda a: _one(a[0], a[1], fmt), enumerate(files)))
    return FastLogs(
        runs=[o[0] if o else None for o in out],
        samples=[o[1] if o else None for o in out],
        scores=[o[2] if o else None for o in out],
    )
