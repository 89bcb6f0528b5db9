"""The fast path for well-formed hylo EvalLogs: pyarrow's JSON reader, then one pass per batch.

Each log is parsed straight into Arrow columns (pyarrow releases the GIL, so two files parse
at once). Python then looks at each file's *types* only; the checks on values, the flattening
of samples and the score rows run as a few vectorized kernels over all logs of the batch that
share one sample type (usually all of them), so the cost per file is a handful of scalar reads.
Anything unusual (a parse error, a type or field the fast path does not model, a null where a
value is required) sends the file to the checked DuckDB path in ``hylo.py``, which names the
file, line and field of each problem. Both paths produce the same tables.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from hylo_analytics._harness import ERRORS
from hylo_analytics.ingest._files import SourceFile

__all__ = ["FastLogs", "parse_fast"]

_STR = (pa.types.is_string, pa.types.is_large_string, pa.types.is_null)
_INT = (pa.types.is_int64, pa.types.is_null)
_BOOL = (pa.types.is_boolean, pa.types.is_null)
_NUM = (pa.types.is_floating, pa.types.is_integer, pa.types.is_boolean, pa.types.is_null)

_TOP = {"version", "run_id", "parent_run_id", "benchmark", "agent", "results", "samples"}
# run fields at the top, when strings (else: checked path); errors_policy also when valid
_RUN_STRINGS = ("status", "created", "errors_policy")
_TOP |= set(_RUN_STRINGS)


def _int_struct(t: pa.DataType) -> bool:
    """``{task_id: int, ...}``: per-task step limits as pyarrow reads them."""
    return pa.types.is_struct(t) and all(
        pa.types.is_int64(t.field(i).type) for i in range(t.num_fields)
    )


def _upstream_struct(t: pa.DataType) -> bool:
    """``{repo: str, commit: str, assets: {name: str}}`` with nothing missing or null-typed."""
    if not pa.types.is_struct(t):
        return False
    f = {t.field(i).name: t.field(i).type for i in range(t.num_fields)}
    if not all(pa.types.is_string(f.get(k, pa.null())) for k in ("repo", "commit")):
        return False
    assets = f.get("assets")
    return assets is None or (
        pa.types.is_struct(assets)
        and all(pa.types.is_string(assets.field(i).type) for i in range(assets.num_fields))
    )


_BENCH = {
    "id": _STR,
    "version": _STR,
    "digest": _STR,
    "split": _STR,
    "requires_privileged": _BOOL,
    # hylo v0.2 benchmark members; values are checked in _bench_v02 (else the checked path)
    "episodes_per_task": _INT,
    "max_steps": (_int_struct, pa.types.is_null),
    "upstream": (_upstream_struct, pa.types.is_null),
}
_AGENT = {"name": _STR, "version": _STR}
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
# a pretty-printed log is one JSON value over many lines: parse it as one row
_PARSE = pj.ParseOptions(newlines_in_values=True)

_RUNS = pa.schema(
    [
        ("file_idx", pa.int32()),
        ("run_id", pa.string()),
        ("source_format", pa.string()),
        ("benchmark_id", pa.string()),
        ("benchmark_version", pa.string()),
        ("benchmark_digest", pa.string()),
        ("split", pa.string()),
        ("requires_privileged", pa.bool_()),
        ("episodes_per_task", pa.int64()),
        ("max_steps", pa.string()),
        ("benchmark_upstream", pa.string()),
        ("agent_name", pa.string()),
        ("agent_version", pa.string()),
        ("agent_components", pa.string()),
        ("parent_run_id", pa.string()),
        ("results", pa.string()),
        ("status", pa.string()),
        ("created", pa.string()),
        ("errors_policy", pa.string()),
        ("n_samples", pa.int64()),
        ("extra", pa.string()),
    ]
)
_SAMPLES = pa.schema(
    [
        ("file_idx", pa.int32()),
        ("run_id", pa.string()),
        ("key", pa.string()),
        ("task_id", pa.string()),
        ("seed", pa.int64()),
        ("epoch", pa.int64()),
        ("episode_id", pa.string()),
        ("status", pa.string()),
        ("trace", pa.string()),
        ("sample_idx", pa.int64()),
        ("extra", pa.string()),
    ]
)
_SCORES = pa.schema(
    [
        ("file_idx", pa.int32()),
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
)
_SAMPLE_COLS = ["file_idx", "key", "task_id", "seed", "epoch", "episode_id"]


@dataclass(frozen=True)
class FastLogs:
    """What the fast path read from a batch: tables with ``file_idx``, and the files it left.

    ``slow`` are the positions (in the batch) of files the checked path must read;
    ``unparsed`` those of them pyarrow could not parse (the only ones that can hold a key
    repeated in one object: pyarrow refuses those).
    """

    runs: pa.Table
    samples: pa.Table
    scores: pa.Table
    slow: tuple[int, ...]
    unparsed: frozenset[int] = frozenset()


@dataclass(frozen=True)
class _Log:
    """One log that passed the per-file checks: its run's values and its ``samples`` list."""

    idx: int
    run: dict[str, Any]
    samples: pa.ListArray


def _is(t: pa.DataType, kinds: tuple[object, ...]) -> bool:
    return any(k(t) for k in kinds)  # type: ignore[operator]


def _struct_ok(t: pa.DataType, fields: Mapping[str, tuple[object, ...]], required: str) -> bool:
    if not pa.types.is_struct(t):
        return False
    names = {t.field(i).name for i in range(t.num_fields)}
    if required not in names:
        return False
    return all(n not in fields or _is(t.field(n).type, fields[n]) for n in names)


def _scalar(struct: pa.StructArray, name: str) -> Any:
    return struct.field(name)[0].as_py() if struct.type.get_field_index(name) >= 0 else None


def _json(value: Any) -> str | None:
    """A nested object back to JSON text (one per run: agent components, run results).

    ``NaN`` and ``Infinity`` (which pyarrow reads) raise ``ValueError``: the checked path
    names them.
    """
    return None if value is None else json.dumps(value, separators=(",", ":"), allow_nan=False)


def _read(sf: SourceFile) -> pa.Table | None:
    """One log as a one-row table, or ``None`` if pyarrow cannot read it (runs in a thread)."""
    try:
        return pj.read_json(
            pa.BufferReader(sf.data),
            read_options=pj.ReadOptions(use_threads=False, block_size=max(1 << 20, len(sf.data))),
            parse_options=_PARSE,
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None


def _bench_v02(bench: pa.StructArray) -> dict[str, Any] | None:
    """The v0.2 benchmark members as run fields; ``None`` if a value is out of range or null
    inside (the checked path names it)."""
    n = _scalar(bench, "episodes_per_task")
    if n is not None and n < 1:
        return None
    limits, upstream = _scalar(bench, "max_steps"), _scalar(bench, "upstream")
    if limits is not None and any(v is None or v < 1 for v in limits.values()):
        return None
    if upstream is not None and (
        upstream["repo"] is None
        or upstream["commit"] is None
        or any(v is None for v in (upstream.get("assets") or {}).values())
    ):
        return None
    dump = {"separators": (",", ":"), "ensure_ascii": False}
    return {
        "episodes_per_task": n,
        "max_steps": None if limits is None else json.dumps(limits, **dump),  # type: ignore[arg-type]
        "benchmark_upstream": None if upstream is None else json.dumps(upstream, **dump),  # type: ignore[arg-type]
    }


def _log(idx: int, doc: pa.Table | None, fmt: str) -> _Log | None:
    """The per-file checks: top-level types and required values; ``None`` sends it slow."""
    if doc is None or doc.num_rows != 1:
        return None
    names = set(doc.column_names)
    if not names <= _TOP or not {"version", "run_id", "samples"} <= names:
        return None
    top = {n: doc.column(n).chunk(0) for n in names}
    if top["version"].type != pa.string() or top["version"][0].as_py() != fmt:
        return None
    if not _is(top["run_id"].type, _STR[:2]) or top["run_id"].null_count:
        return None
    bench, agent = top.get("benchmark"), top.get("agent")
    if bench is None or not _struct_ok(bench.type, _BENCH, "id") or bench.field("id").null_count:
        return None
    if agent is None or not _struct_ok(agent.type, _AGENT, "name"):
        return None
    if agent.field("name").null_count or not pa.types.is_string(agent.field("name").type):
        return None
    parent = top.get("parent_run_id")
    if parent is not None and not _is(parent.type, _STR):
        return None
    results = top.get("results")
    if results is not None and not _is(results.type, (pa.types.is_struct, pa.types.is_null)):
        return None
    strings = {k: top.get(k) for k in _RUN_STRINGS}
    if any(v is not None and not pa.types.is_string(v.type) for v in strings.values()):
        return None  # not a string: kept in the run's extra by the checked path
    policy = strings["errors_policy"]
    if policy is not None and policy[0].as_py() not in ERRORS:
        return None  # the checked path names the field and what it holds
    samples = top["samples"]
    if not pa.types.is_list(samples.type) or samples.null_count:
        return None
    try:
        components = _json(_scalar(agent, "components"))
        results_text = None if results is None else _json(results[0].as_py())
    except ValueError:  # a non-finite number
        return None
    v02 = _bench_v02(bench)
    if v02 is None:
        return None
    run = {
        "run_id": top["run_id"][0].as_py(),
        "source_format": fmt,
        "benchmark_id": _scalar(bench, "id"),
        "benchmark_version": _scalar(bench, "version"),
        "benchmark_digest": _scalar(bench, "digest"),
        "split": _scalar(bench, "split"),
        "requires_privileged": _scalar(bench, "requires_privileged"),
        **v02,
        "agent_name": _scalar(agent, "name"),
        "agent_version": _scalar(agent, "version"),
        "agent_components": components,
        "parent_run_id": None if parent is None else parent[0].as_py(),
        "results": results_text,
        **{k: None if v is None else v[0].as_py() for k, v in strings.items()},
    }
    return _Log(idx, run, samples)


def _sample_type_ok(t: pa.DataType) -> bool:
    """Whether a sample struct type is one the fast path models (fields, types, metrics)."""
    if not pa.types.is_struct(t):
        return False
    fields = {t.field(i).name for i in range(t.num_fields)}
    if not fields <= {*_SAMPLE, "scores"} or not set(_REQUIRED_SAMPLE) <= fields:
        return False
    if any(not _is(t.field(f).type, _SAMPLE[f]) for f in fields if f in _SAMPLE):
        return False
    if "scores" in fields:
        st = t.field("scores").type
        if pa.types.is_struct(st):
            return all(_is(st.field(i).type, _NUM) for i in range(st.num_fields))
        return bool(pa.types.is_null(st))
    return True


def _col(struct: pa.StructArray, name: str, typ: pa.DataType) -> pa.Array:
    if struct.type.get_field_index(name) < 0:
        return pa.nulls(len(struct), typ)
    return struct.field(name).cast(typ)


def _epochs(file_of: np.ndarray, key: pa.Array, epoch: pa.Array) -> pa.Array:
    """Epochs as the checked path numbers them: a key repeated in a log, in file order."""
    if not epoch.null_count:
        return epoch
    codes = pc.dictionary_encode(key).indices.to_numpy(zero_copy_only=False).astype(np.int64)
    codes += file_of.astype(np.int64) * (int(codes.max(initial=0)) + 1)
    n = len(codes)
    fill = np.ones(n, np.int64)
    order = np.argsort(codes, kind="stable")
    new_key = np.r_[True, np.diff(codes[order]) != 0]
    if not new_key.all():  # some key repeats in its log
        starts = np.flatnonzero(new_key)
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


def _bad_files(flat: pa.StructArray, file_of: np.ndarray) -> np.ndarray:
    """Batch positions of files with a sample the fast path must not take (vectorized)."""
    bad = pc.is_null(flat)
    for f in _REQUIRED_SAMPLE:
        bad = pc.or_(bad, pc.is_null(flat.field(f)))
    key = pc.binary_join_element_wise(
        flat.field("task_id").cast(pa.string()), pc.cast(flat.field("seed"), pa.string()), "#"
    )
    bad = pc.or_(bad, pc.invert(pc.equal(flat.field("key").cast(pa.string()), key)))
    if flat.type.get_field_index("scores") >= 0 and pa.types.is_struct(flat.field("scores").type):
        scores = flat.field("scores")
        for i in range(scores.type.num_fields):
            v = scores.field(i)
            if pa.types.is_floating(v.type):  # NaN / Infinity: the checked path names them
                bad = pc.or_(bad, pc.invert(pc.is_finite(v)).fill_null(False))
    mask = bad.fill_null(True).to_numpy(zero_copy_only=False)
    return np.unique(file_of[mask])


def _repeated_keys(file_of: np.ndarray, key: pa.Array, epoch: pa.Array) -> np.ndarray:
    """Batch positions of files naming one (key, epoch) twice (the checked path says which)."""
    t = pa.table({"f": pa.array(file_of), "k": key, "e": epoch})
    n = t.group_by(["f", "k", "e"]).aggregate([([], "count_all")])
    if n.num_rows == t.num_rows:
        return np.zeros(0, np.int32)
    many = n.filter(pc.greater(n["count_all"], 1))
    return np.unique(many["f"].to_numpy())


def _group(
    logs: list[_Log], lists: list[pa.ListArray], slow: set[int]
) -> tuple[list[_Log], pa.Table, pa.Table]:
    """Samples and score rows of logs whose samples share one type, in one pass.

    Files with a bad sample are added to ``slow`` and left out; the logs kept are returned.
    """
    item = lists[0].type.value_type
    flats = [x.flatten() for x in lists]
    sizes = np.array([len(f) for f in flats], np.int64)
    if not _sample_type_ok(item):
        if sizes.any():  # only empty sample lists come through with an unmodelled item type
            slow.update(lg.idx for lg, n in zip(logs, sizes, strict=True) if n)
            logs = [lg for lg, n in zip(logs, sizes, strict=True) if not n]
        return logs, _SAMPLES.empty_table(), _SCORES.empty_table()
    flat = pa.concat_arrays(flats) if len(flats) > 1 else flats[0]
    del flats
    batch_idx = np.array([lg.idx for lg in logs], np.int32)
    file_of = np.repeat(batch_idx, sizes)
    bad = _bad_files(flat, file_of)
    if len(bad):
        slow.update(bad.tolist())
        keep = ~np.isin(batch_idx, bad)
        flat = flat.filter(pa.array(np.repeat(keep, sizes)))
        logs = [lg for lg, k in zip(logs, keep, strict=True) if k]
        batch_idx, sizes = batch_idx[keep], sizes[keep]
        file_of = np.repeat(batch_idx, sizes)
    key = flat.field("key").cast(pa.string())
    epoch = _epochs(file_of, key, _col(flat, "epoch", pa.int64()))
    repeated = _repeated_keys(file_of, key, epoch)
    if len(repeated):
        slow.update(repeated.tolist())
        keep = ~np.isin(batch_idx, repeated)
        sel = pa.array(np.repeat(keep, sizes))
        flat, key, epoch = flat.filter(sel), key.filter(sel), epoch.filter(sel)
        logs = [lg for lg, k in zip(logs, keep, strict=True) if k]
        batch_idx, sizes = batch_idx[keep], sizes[keep]
        file_of = np.repeat(batch_idx, sizes)
    n = len(flat)
    ordinal = np.repeat(np.arange(len(logs)), sizes)  # the log of each sample, 0..len(logs)
    starts = np.cumsum(sizes) - sizes
    run_ids = pa.array([lg.run["run_id"] for lg in logs], pa.string())
    samples = pa.table(
        {
            "file_idx": pa.array(file_of, pa.int32()),
            "run_id": _repeat(run_ids, ordinal),
            "key": key,
            "task_id": flat.field("task_id").cast(pa.string()),
            "seed": flat.field("seed").cast(pa.int64()),
            "epoch": epoch,
            "episode_id": _episode_ids(key, epoch, _col(flat, "episode_id", pa.string())),
            "status": _col(flat, "status", pa.string()),
            "trace": _col(flat, "trace", pa.string()),
            "sample_idx": pa.array(np.arange(n, dtype=np.int64) - np.repeat(starts, sizes)),
            "extra": pa.nulls(n, pa.string()),
        },
        schema=_SAMPLES,
    )
    return logs, samples, _score_rows(flat, samples, ordinal, run_ids)


def _repeat(values: pa.Array, index: np.ndarray) -> pa.Array:
    """``values[index]`` for a few values repeated many times: decode a dictionary."""
    return pa.DictionaryArray.from_arrays(pa.array(index.astype(np.int32)), values).cast(
        values.type
    )


def _score_rows(
    flat: pa.StructArray, samples: pa.Table, ordinal: np.ndarray, run_ids: pa.Array
) -> pa.Table:
    """One row per (sample with a ``scores`` object, metric the log reports).

    Rows come per log, then metric (in the log's order), then sample, as the checked path
    orders them. Logs grouped together share the sample type, so they report the same metrics.
    """
    if flat.type.get_field_index("scores") < 0 or not pa.types.is_struct(flat.field("scores").type):
        return _SCORES.empty_table()
    scores = flat.field("scores")
    metrics = [scores.type.field(i).name for i in range(scores.type.num_fields)]
    n_metrics = len(metrics)
    has = np.flatnonzero(scores.is_valid().to_numpy(zero_copy_only=False))
    p = len(has)
    if not n_metrics or not p:
        return _SCORES.empty_table()
    # output position of (metric m, scored sample j): per log, m-major, then j
    log_of = ordinal[has]
    count = np.bincount(log_of, minlength=len(run_ids))
    first = np.cumsum(count) - count
    j = np.arange(p)
    m = np.arange(n_metrics)[:, None]
    pos = first[log_of] * n_metrics + m * count[log_of] + (j - first[log_of])
    src = np.empty(p * n_metrics, np.int64)
    src[pos.ravel()] = np.arange(p * n_metrics)
    metric_of, row_of = np.divmod(src, p)
    take_has = pa.array(has)
    values = pa.concat_arrays(
        [scores.field(i).take(take_has).cast(pa.float64()) for i in range(n_metrics)]
    ).take(pa.array(src))
    rows = has[row_of]
    sample_rows = pa.array(rows)
    scored = samples.select(_SAMPLE_COLS).take(sample_rows)
    scored = scored.add_column(1, "run_id", _repeat(run_ids, ordinal[rows]))
    valid = pc.is_valid(values)
    # an abstention of an errored episode says so, as the checked path and scorers do
    reason = pc.if_else(
        pc.equal(samples.column("status").take(sample_rows), "error"),
        pa.scalar("episode errored"),
        pa.scalar("abstained"),
    ).fill_null("abstained")
    return (
        scored.append_column("metric", _repeat(pa.array(metrics, pa.string()), metric_of))
        .append_column("value", values)
        .append_column("valid", valid)
        .append_column("skip_reason", pc.if_else(valid, pa.scalar(None, pa.string()), reason))
    )


def parse_fast(files: Sequence[SourceFile], fmt: str, *, threads: int = 2) -> FastLogs:
    """Read every file the fast path can take; the others are listed in ``slow``.

    The batch is cut into ``threads`` runs of consecutive files, each read and flattened in its
    own thread: pyarrow's parser and kernels release the GIL, so the parts run at once.
    """
    cuts = np.linspace(0, len(files), max(1, min(threads, len(files))) + 1).astype(int)
    spans = [(int(a), int(b)) for a, b in pairwise(cuts)]
    if len(spans) > 1:
        with ThreadPoolExecutor(max_workers=len(spans)) as pool:
            parts = list(pool.map(lambda ab: _part(files, ab[0], ab[1], fmt), spans))
    else:
        parts = [_part(files, spans[0][0], spans[0][1], fmt)]
    if len(parts) == 1:
        return parts[0]
    return FastLogs(
        pa.concat_tables([p.runs for p in parts]),
        pa.concat_tables([p.samples for p in parts]),
        pa.concat_tables([p.scores for p in parts]),
        tuple(i for p in parts for i in p.slow),
        frozenset().union(*(p.unparsed for p in parts)),
    )


def _utf8(data: bytes) -> bool:
    """Whether a file is UTF-8 (pyarrow's JSON parser does not check): a zero-copy view of
    its bytes as one Arrow string, validated; the checked path names line and column."""
    offsets = pa.py_buffer(np.array([0, len(data)], np.int64))
    text = pa.LargeStringArray.from_buffers(1, offsets, pa.py_buffer(data))
    try:
        text.validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


def _part(files: Sequence[SourceFile], start: int, stop: int, fmt: str) -> FastLogs:
    """The fast path over ``files[start:stop]`` (file indices stay those of the batch)."""
    slow: set[int] = set()
    unparsed: set[int] = set()
    by_type: dict[pa.DataType, list[_Log]] = {}
    for i in range(start, stop):
        doc = _read(files[i]) if _utf8(files[i].data) else None
        if doc is None:
            unparsed.add(i)
        lg = _log(i, doc, fmt)
        if lg is None:
            slow.add(i)
        else:
            by_type.setdefault(lg.samples.type, []).append(lg)
    kept: list[_Log] = []
    samples, scores = [], []
    for group in by_type.values():
        ok, s, sc = _group(group, [lg.samples for lg in group], slow)
        kept += ok
        samples.append(s)
        scores.append(sc)
    del by_type
    kept.sort(key=lambda lg: lg.idx)
    counts = np.bincount(
        np.concatenate([s["file_idx"].to_numpy() - start for s in samples] or [[]]).astype(int),
        minlength=stop - start,
    )
    runs = pa.table(
        {
            "file_idx": [lg.idx for lg in kept],
            **{c: [lg.run[c] for lg in kept] for c in _RUNS.names[1:-2]},
            "n_samples": [int(counts[lg.idx - start]) for lg in kept],
            "extra": [None] * len(kept),
        },
        schema=_RUNS,
    )
    return FastLogs(
        runs,
        _in_file_order(samples, _SAMPLES),
        _in_file_order(scores, _SCORES),
        tuple(sorted(slow)),
        frozenset(unparsed),
    )


def _in_file_order(parts: list[pa.Table], schema: pa.Schema) -> pa.Table:
    """Stack the groups' tables back into file order (groups interleave only if types differ)."""
    if not parts:
        return schema.empty_table()
    if len(parts) == 1:
        return parts[0]
    table = pa.concat_tables(parts)
    order = np.argsort(table["file_idx"].to_numpy(), kind="stable")
    return table.take(pa.array(order))
