"""WorldFoundry's metric protocol: ``MetricResult`` and user metrics scored over the store.

``MetricResult`` is the spec's per-sample record, field for field (frozen; ``to_dict`` /
``from_dict`` validate types). Ingested MetricResult JSONL and the rows a :class:`Metric`
returns are stored the same way (:func:`hylo_analytics.ingest.formats.metric_results.resolved_sql`):
every field in its ``scores`` column, so :meth:`MetricResult.from_score_row` gives the record
back.

A user metric is any object with ``metric_id`` (or the spec's ``name``) and
``compute_sample(request, result) -> MetricResult``; ``Store.score([metric])`` runs it like the
Python scorers, under ``source = "scorer:<metric_id>"``. What it is passed, per stored sample:

* ``request`` (:class:`MetricRequest`): ``sample_id`` (the sample's ``key``), ``run_id``,
  ``task_id``, ``seed``, ``epoch``, ``case`` (the sample's ``case`` field, else null) and
  ``sample`` (its columns plus unmodelled fields);
* ``result`` (:class:`MetricSubject`): ``sample_id``, ``output`` (the sample's ``output``
  field), ``artifacts`` (its ``artifacts`` field when a mapping, else ``{}``), ``events`` (the
  trace lines as parsed JSON, in file order) and ``trace`` (its ``int_episode_stats`` row).

A metric with ``compute_batch(episodes: pl.DataFrame)`` is called once instead, with the
``int_episode_stats`` frame (one row per sample); it returns a float Series (the
``normalized_value``; null abstains) or a DataFrame of the columns ``normalized_value``,
``raw_value`` (numbers or booleans), ``valid``, ``coverage``, ``skip_reason``. An exception, a
wrong type or length, a NaN, or a MetricResult for another sample or metric is an error row
(``skip_reason`` "error: ... (sample <key>)"), never a crash and never a silent null.

:func:`hylo_analytics.aggregate.metric.aggregate_metric` gives one ``AggregateResult`` per
run: the metric's own ``aggregate`` over the stored MetricResults when it has one, else the
standard :func:`aggregate_scores`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

import duckdb
import polars as pl
import pyarrow as pa

from hylo_analytics.errors import InputError, InputTypeError
from hylo_analytics.ingest.formats.metric_results import resolved_sql
from hylo_analytics.scoring._common import ScorerDeclaration, sql_str
from hylo_analytics.scoring._python import _ID_COLS, events_sql

__all__ = [
    "METRIC_RESULT_COLUMNS",
    "METRIC_RESULT_SCHEMA_VERSION",
    "Metric",
    "MetricRequest",
    "MetricResult",
    "MetricScorer",
    "MetricSubject",
    "as_metric_scorer",
    "is_metric",
    "metric_rows",
]

METRIC_RESULT_SCHEMA_VERSION = "worldfoundry.metric_result/v1"

# the scores columns that hold MetricResult fields (null for every other writer)
METRIC_RESULT_COLUMNS = (
    "raw_value",
    "normalized_value",
    "coverage",
    "components",
    "diagnostics",
    "artifact_refs",
    "judge_trace",
)
_MAPPINGS = ("components", "diagnostics", "artifact_refs", "judge_trace")
_EXTENSIONS = frozenset({"run_id"})  # written by some pipelines; the store keeps it as the run


def _number(name: str, x: Any, *, optional: bool) -> float | None:
    if x is None and optional:
        return None
    if isinstance(x, bool) or not isinstance(x, int | float):
        want = "a number or null" if optional else "a number"
        raise InputTypeError(f"MetricResult.{name}: expected {want}, got {type(x).__name__}")
    if not math.isfinite(x):
        raise InputError(f"MetricResult.{name}: non-finite number {x}")
    return float(x)


@dataclass(frozen=True)
class MetricResult:
    """One metric's result for one sample: WorldFoundry's fields, types checked on creation.

    ``valid=False`` with ``skip_reason`` when the metric cannot score the sample; ``coverage``
    says how much of it was evaluated. The mappings are read-only.
    """

    sample_id: str
    metric_id: str
    raw_value: Any = None
    normalized_value: float | None = None
    components: Mapping[str, Any] = field(default_factory=dict)
    valid: bool = True
    coverage: float = 1.0
    skip_reason: str | None = None
    diagnostics: Mapping[str, Any] = field(default_factory=dict)
    artifact_refs: Mapping[str, Any] = field(default_factory=dict)
    judge_trace: Mapping[str, Any] = field(default_factory=dict)
    schema_version: str = METRIC_RESULT_SCHEMA_VERSION

    def __post_init__(self) -> None:
        for name in ("sample_id", "metric_id", "schema_version"):
            if not isinstance(getattr(self, name), str):
                got = type(getattr(self, name)).__name__
                raise InputTypeError(f"MetricResult.{name}: expected a string, got {got}")
        if not isinstance(self.valid, bool):
            raise InputTypeError(
                f"MetricResult.valid: expected a boolean, got {type(self.valid).__name__}"
            )
        if self.skip_reason is not None and not isinstance(self.skip_reason, str):
            got = type(self.skip_reason).__name__
            raise InputTypeError(f"MetricResult.skip_reason: expected a string or null, got {got}")
        norm = _number("normalized_value", self.normalized_value, optional=True)
        object.__setattr__(self, "normalized_value", norm)
        object.__setattr__(self, "coverage", _number("coverage", self.coverage, optional=False))
        if isinstance(self.raw_value, float) and not math.isfinite(self.raw_value):
            raise InputError(f"MetricResult.raw_value: non-finite number {self.raw_value}")
        try:
            json.dumps(self.raw_value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InputTypeError(f"MetricResult.raw_value: not JSON-serializable ({exc})") from None
        for name in _MAPPINGS:
            v = getattr(self, name)
            if not isinstance(v, Mapping):
                raise InputTypeError(
                    f"MetricResult.{name}: expected a mapping, got {type(v).__name__}"
                )
            object.__setattr__(self, name, MappingProxyType(dict(v)))

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON-ready plain data (the JSONL line WorldFoundry writes)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        for name in _MAPPINGS:
            out[name] = dict(out[name])
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MetricResult:
        """Build from a record; a null field takes its default, an unknown key is an error."""
        if not isinstance(data, Mapping):
            raise InputTypeError(f"MetricResult: expected a mapping, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known - _EXTENSIONS)
        if unknown:
            raise InputError(f"MetricResult: unknown fields {unknown}")
        for name in ("sample_id", "metric_id"):
            if data.get(name) is None:
                raise InputError(f"MetricResult.{name}: missing")
        kw = {k: v for k, v in data.items() if k in known and v is not None}
        if "raw_value" in data:  # null is a value here (the default too)
            kw["raw_value"] = data["raw_value"]
        return cls(**kw)

    @classmethod
    def from_score_row(cls, row: Mapping[str, Any]) -> MetricResult:
        """The MetricResult a ``scores`` row holds (ingested or written by a Metric)."""
        meta = json.loads(row["metadata"]) if row.get("metadata") else {}

        def obj(name: str) -> Any:
            text = row.get(name)
            return json.loads(text) if text is not None else None

        return cls.from_dict(
            {
                "sample_id": row["key"],
                "metric_id": row["metric"],
                "raw_value": obj("raw_value"),
                "normalized_value": row.get("normalized_value"),
                "valid": meta.get("valid"),
                "skip_reason": meta.get("skip_reason"),
                "coverage": row.get("coverage"),
                "schema_version": meta.get("schema_version", row.get("scorer_version")),
                **{name: obj(name) for name in _MAPPINGS},
            }
        )


@dataclass(frozen=True)
class MetricRequest:
    """What was asked of the model for one sample (the spec's ``GenerationRequest`` role)."""

    sample_id: str
    run_id: str
    task_id: str | None
    seed: int | None
    epoch: int | None
    case: Any
    sample: Mapping[str, Any]


@dataclass(frozen=True)
class MetricSubject:
    """What the model produced for one sample (the spec's ``GenerationResult`` role)."""

    sample_id: str
    output: Any
    artifacts: Mapping[str, Any]
    events: tuple[Mapping[str, Any], ...]
    trace: Mapping[str, Any]


@runtime_checkable
class Metric(Protocol):
    """A user metric. Optional: ``aggregate(results) -> AggregateResult``, ``compute_batch``,
    ``version`` and ``higher_is_better``; the spec's ``name`` may stand for ``metric_id``."""

    metric_id: str

    def compute_sample(self, request: MetricRequest, result: MetricSubject) -> MetricResult: ...


def is_metric(obj: object) -> bool:
    """Whether ``obj`` satisfies the protocol (``metric_id`` or ``name``, and compute_sample
    or compute_batch)."""
    named = isinstance(getattr(obj, "metric_id", None) or getattr(obj, "name", None), str)
    runs = callable(getattr(obj, "compute_sample", None)) or callable(
        getattr(obj, "compute_batch", None)
    )
    return named and runs and not isinstance(obj, str)


@dataclass(frozen=True)
class MetricScorer:
    """A :class:`Metric` as the scoring engine runs it."""

    metric: Any
    name: str
    version: str = "0"
    declaration: ScorerDeclaration = field(default_factory=ScorerDeclaration)

    @property
    def source(self) -> str:
        return f"scorer:{self.name}"


def as_metric_scorer(metric: Any) -> MetricScorer:
    """Wrap a metric; its ``higher_is_better`` (when False) sets the declared direction."""
    name = getattr(metric, "metric_id", None) or metric.name
    hib = getattr(metric, "higher_is_better", None)
    decl = ScorerDeclaration(direction="minimize" if hib is False else "maximize")
    return MetricScorer(metric, str(name), str(getattr(metric, "version", "0")), decl)


# per-sample MetricResult fields, as columns (raw_value and the mappings as JSON text)
_COLS_SCHEMA = pa.schema(
    [
        ("i", pa.int64()),
        ("raw_value", pa.string()),
        ("normalized_value", pa.float64()),
        ("valid", pa.bool_()),
        ("coverage", pa.float64()),
        ("skip_reason", pa.string()),
        *((n, pa.string()) for n in _MAPPINGS),
        ("schema_version", pa.string()),
        ("error", pa.string()),
    ]
)


def _row_of(i: int, res: MetricResult) -> dict[str, Any]:
    d = res.to_dict()
    return {
        "i": i,
        "raw_value": json.dumps(d["raw_value"]),
        "normalized_value": d["normalized_value"],
        "valid": d["valid"],
        "coverage": d["coverage"],
        "skip_reason": d["skip_reason"],
        **{n: json.dumps(d[n]) if d[n] else None for n in _MAPPINGS},
        "schema_version": d["schema_version"],
        "error": None,
    }


def _error_row(i: int, why: str, key: Any) -> dict[str, Any]:
    return {"i": i, "valid": False, "error": f"error: {why} (sample {key})"[:300]}


def _check(res: Any, key: str, name: str) -> str | None:
    if not isinstance(res, MetricResult):
        return f"returned {type(res).__name__}, expected MetricResult"
    if res.sample_id != key:
        return f"returned a MetricResult for sample {res.sample_id!r}"
    if res.metric_id != name:
        return f"returned a MetricResult of metric {res.metric_id!r}, expected {name!r}"
    return None


def _per_sample(
    con: duckdb.DuckDBPyConnection, s: MetricScorer, episodes: pl.DataFrame, runs: str
) -> list[dict[str, Any]]:
    """Call ``compute_sample`` once per sample (the one row loop, by design)."""
    extra = con.sql(
        f"select run_id, episode_id, extra, status from stg_samples "
        f"where run_id in (select run_id from {runs})"
    ).pl()
    events = con.sql(events_sql(runs)).pl()
    frame = episodes.join(extra, on=["run_id", "episode_id"], how="left").join(
        events, on=["run_id", "episode_id"], how="left"
    )
    out: list[dict[str, Any]] = []
    fn: Callable[[MetricRequest, MetricSubject], Any] = s.metric.compute_sample
    for i, row in enumerate(frame.iter_rows(named=True)):
        sample_extra = json.loads(row["extra"]) if row["extra"] else {}
        sample = {**sample_extra, **{k: row[k] for k in (*_ID_COLS, "status", "trace_status")}}
        arts = sample_extra.get("artifacts")
        key = row["key"]
        request = MetricRequest(
            key, row["run_id"], row["task_id"], row["seed"], row["epoch"],
            sample_extra.get("case"), MappingProxyType(sample),
        )  # fmt: skip
        subject = MetricSubject(
            key,
            sample_extra.get("output"),
            MappingProxyType(dict(arts) if isinstance(arts, Mapping) else {}),
            tuple(MappingProxyType(json.loads(r)) for r in row["raws"] or ()),
            MappingProxyType({k: row[k] for k in episodes.columns}),
        )
        try:
            res = fn(request, subject)
            why = _check(res, key, s.name)
        except Exception as exc:  # recorded per sample; the others are still scored
            res, why = None, f"{type(exc).__name__}: {exc}"
        out.append(_error_row(i, why, key) if why is not None else _row_of(i, res))
    return out


_BATCH_COLS = {
    "normalized_value": pl.Float64,
    "raw_value": None,
    "valid": pl.Boolean,
    "coverage": pl.Float64,
    "skip_reason": pl.String,
}


def _batch(s: MetricScorer, episodes: pl.DataFrame) -> pa.Table:
    """Call ``compute_batch`` once and validate its frame (vectorized; errors per sample)."""
    n = episodes.height
    keys = episodes["key"]
    err: str | None = None
    frame: pl.DataFrame | None = None
    try:
        got = s.metric.compute_batch(episodes)
        if isinstance(got, pl.Series):
            got = got.to_frame("normalized_value")
        if not isinstance(got, pl.DataFrame):
            err = f"compute_batch returned {type(got).__name__}, expected a polars Series or DataFrame"
        elif got.height != n:
            err = f"compute_batch returned {got.height} rows for {n} samples"
        elif set(got.columns) - set(_BATCH_COLS):
            err = f"compute_batch returned unknown columns {sorted(set(got.columns) - set(_BATCH_COLS))}"
        else:
            for c in got.columns:
                dt = got[c].dtype
                ok = (
                    (dt.is_numeric() or dt in (pl.Boolean, pl.Null))
                    if c != "skip_reason"
                    else (dt in (pl.String, pl.Null))
                )
                if c == "valid":
                    ok = dt in (pl.Boolean, pl.Null)
                if not ok:
                    err = f"compute_batch column {c!r} has dtype {dt}"
                    break
            frame = got if err is None else None
    except Exception as exc:  # the metric's bug is an error row per sample, not a crash
        err = f"{type(exc).__name__}: {exc}"
    ids = pl.DataFrame({"i": pl.int_range(n, eager=True, dtype=pl.Int64)})
    if frame is None:
        return ids.with_columns(
            pl.lit(False).alias("valid"),
            pl.format("error: {} (sample {})", pl.lit(err or ""), keys)
            .str.slice(0, 300)
            .alias("error"),
        ).to_arrow()
    cols = [pl.col(c) for c in frame.columns]
    frame = ids.hstack(frame.select(cols))
    nan = pl.lit(False)
    for c in ("normalized_value", "raw_value", "coverage"):
        if c in frame.columns and frame[c].dtype.is_float():
            nan = (
                nan | pl.col(c).is_nan().fill_null(False) | pl.col(c).is_infinite().fill_null(False)
            )
    out = frame.with_columns(
        *(
            [pl.col("raw_value").cast(pl.Float64 if frame["raw_value"].dtype.is_numeric() else pl.Boolean)
             .cast(pl.String).str.to_lowercase().alias("raw_value")]
            if "raw_value" in frame.columns else []
        ),
        pl.when(nan)
        .then(pl.format("error: compute_batch returned a non-finite number (sample {})", keys))
        .alias("error"),
        pl.lit(METRIC_RESULT_SCHEMA_VERSION).alias("schema_version"),
    )  # fmt: skip
    if "normalized_value" in frame.columns and "raw_value" not in frame.columns:
        # a plain Series: a null is an abstention, not a valid sample with no number
        out = out.with_columns(
            pl.col("normalized_value").is_not_null().alias("valid")
            if "valid" not in frame.columns
            else pl.col("valid"),
            pl.when(pl.col("normalized_value").is_null())
            .then(pl.lit("abstained"))
            .alias("skip_reason")
            if "skip_reason" not in frame.columns
            else pl.col("skip_reason"),
        )
    return out.to_arrow()


def metric_rows(
    con: duckdb.DuckDBPyConnection, s: MetricScorer, episodes: pl.DataFrame, runs: str
) -> pa.Table:
    """Score rows (with ``is_error``) of one metric over ``episodes`` (``int_episode_stats``)."""
    if callable(getattr(s.metric, "compute_batch", None)):
        cols = _batch(s, episodes)
    else:
        rows = _per_sample(con, s, episodes, runs)
        cols = pa.Table.from_pylist(rows, schema=_COLS_SCHEMA)
    for f in _COLS_SCHEMA:
        if f.name not in cols.column_names:
            cols = cols.append_column(f.name, pa.nulls(cols.num_rows, f.type))
    cols = cols.select(_COLS_SCHEMA.names).cast(_COLS_SCHEMA)
    con.register("_metric_ids", episodes.select(_ID_COLS).with_row_index("i").to_arrow())
    con.register("_metric_cols", cols)
    try:
        rel = (
            "(SELECT d.*, c.* EXCLUDE (i, raw_value, components, diagnostics, artifact_refs, "
            "judge_trace), CAST(c.raw_value AS JSON) AS raw_value, "
            "CAST(c.components AS JSON) AS components, CAST(c.diagnostics AS JSON) AS diagnostics, "
            "CAST(c.artifact_refs AS JSON) AS artifact_refs, "
            "CAST(c.judge_trace AS JSON) AS judge_trace, "
            f"{sql_str(s.name)} AS metric_id "
            "FROM _metric_ids AS d JOIN _metric_cols AS c ON c.i = d.i)"
        )
        sql = resolved_sql(
            rel,
            source=sql_str(s.source),
            source_kind="'score'",
            scorer_version=sql_str(s.version),
            order="i",
            extra_cols="i, error,",
            metadata=sql_str(s.declaration.metadata_json()),
        )
        # schema_version: the metric's, kept beside the as-written valid / skip_reason
        table = con.sql(
            "SELECT * EXCLUDE (metadata, valid, value, skip_reason, i, error, normalized_value), "
            "CASE WHEN error IS NULL THEN value END AS value, "
            "error IS NULL AND valid AS valid, coalesce(error, skip_reason) AS skip_reason, "
            "CASE WHEN error IS NULL THEN CAST(json_merge_patch(CAST(metadata AS JSON), "
            "json_object('schema_version', sv)) AS VARCHAR) "
            "ELSE CAST(json_merge_patch(CAST(metadata AS JSON), json_object('skip_reason', error)) "
            "AS VARCHAR) END AS metadata, "
            "CASE WHEN error IS NULL THEN normalized_value END AS normalized_value, "
            "NULL::VARCHAR AS explanation, error IS NOT NULL AS is_error "
            f"FROM ({sql}) AS r JOIN (SELECT i AS j, schema_version AS sv FROM _metric_cols) "
            "ON j = r.i ORDER BY r.i"
        ).to_arrow_table()
    finally:
        con.unregister("_metric_ids")
        con.unregister("_metric_cols")
    return table.drop_columns(["j", "sv"]) if "j" in table.column_names else table
