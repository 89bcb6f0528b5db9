"""Policies: explicit requirements on metrics, evaluated as column expressions.

A policy names a metric and exactly one requirement (``must_equal``, ``must_not_equal``,
``must_greater``, ``must_greater_equal``, ``must_less``, ``must_less_equal``, ``must_in``,
``must_not_in``, ``must_between{min, max, inclusive}``). It applies per sample (each row of the
metric) or per run (the run-level row when one exists, otherwise an aggregate of the run's
sample values, nulls left out and counted).

Evaluating appends ``policy_results`` evidence rows and decides each run's ``final_status``:
``failed_policy`` when any *constraint* failed, ``unverified`` when none failed but one could
not be checked (its metric abstained or is missing: never read as a pass or a fail), ``passed``
otherwise. Scores, samples and the run's own status are left as they are: the status change is
derived from the evidence, so the evidence that explains it stays next to it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import polars as pl
import pyarrow as pa

from hylo_analytics import _schema
from hylo_analytics._config import (
    ConfigError,
    check_keys,
    expect_bool,
    expect_list,
    expect_mapping,
    expect_number,
    expect_str,
)
from hylo_analytics._sql import connect, view_query
from hylo_analytics.errors import InputError
from hylo_analytics.resolution import preferred_scores
from hylo_analytics.store import ParquetStore, Tombstone

__all__ = [
    "OPERATORS",
    "Between",
    "Policy",
    "PolicyEvaluation",
    "commit_policy_results",
    "evaluate_policies",
    "metrics_from_store",
    "parse_policies",
]

OPERATORS: tuple[str, ...] = (
    "must_equal",
    "must_not_equal",
    "must_greater",
    "must_greater_equal",
    "must_less",
    "must_less_equal",
    "must_in",
    "must_not_in",
    "must_between",
)
_ORDERED = ("must_greater", "must_greater_equal", "must_less", "must_less_equal")
_AGGREGATES = ("mean", "sum", "min", "max")


@dataclass(frozen=True)
class Between:
    """``min <= x <= max`` when inclusive, ``min < x < max`` when not."""

    min: float
    max: float
    inclusive: bool = True


@dataclass(frozen=True)
class Policy:
    """One requirement on one metric; set exactly one ``must_*`` field.

    ``per`` is ``"sample"`` or ``"run"``; ``aggregate`` reduces sample values for a run policy
    when the run has no run-level value; a ``diagnostic`` policy records evidence without
    changing the run's status.
    """

    name: str
    metric: str
    must_equal: Any = None
    must_not_equal: Any = None
    must_greater: float | None = None
    must_greater_equal: float | None = None
    must_less: float | None = None
    must_less_equal: float | None = None
    must_in: tuple[Any, ...] | None = None
    must_not_in: tuple[Any, ...] | None = None
    must_between: Between | None = None
    per: Literal["sample", "run"] = "sample"
    aggregate: Literal["mean", "sum", "min", "max"] = "mean"
    role: Literal["constraint", "diagnostic"] = "constraint"
    key_path: str = field(default="", repr=False, compare=False)

    def __post_init__(self) -> None:
        where = self.key_path or f"policy {self.name!r}"
        set_ops = [op for op in OPERATORS if getattr(self, op) is not None]
        if len(set_ops) != 1:
            found = ", ".join(set_ops) if set_ops else "none"
            raise ConfigError(
                where, f"expected exactly one requirement among {list(OPERATORS)}, found {found}"
            )
        if self.per not in ("sample", "run"):
            raise ConfigError(f"{where}.per", f"expected 'sample' or 'run', got {self.per!r}")
        if self.aggregate not in _AGGREGATES:
            raise ConfigError(
                f"{where}.aggregate", f"expected one of {list(_AGGREGATES)}, got {self.aggregate!r}"
            )
        if self.role not in ("constraint", "diagnostic"):
            raise ConfigError(
                f"{where}.role", f"expected 'constraint' or 'diagnostic', got {self.role!r}"
            )
        op, value = self.requirement
        if op in _ORDERED:
            expect_number(value, f"{where}.{op}")
        if op == "must_between":
            b = value
            if not isinstance(b, Between) or b.min > b.max:
                raise ConfigError(f"{where}.must_between", "expected min <= max")

    @property
    def requirement(self) -> tuple[str, Any]:
        """The one requirement as ``(operator, value)``."""
        return next((op, getattr(self, op)) for op in OPERATORS if getattr(self, op) is not None)

    def describe(self) -> str:
        """The requirement in words, as stored in ``policy_results.requirement``."""
        op, v = self.requirement
        if isinstance(v, Between):
            lo, hi = ("[", "]") if v.inclusive else ("(", ")")
            return f"must_between {lo}{_lit(v.min)}, {_lit(v.max)}{hi}"
        if isinstance(v, tuple):
            return f"{op} [{', '.join(_lit(x) for x in v)}]"
        return f"{op} {_lit(v)}"

    @classmethod
    def from_mapping(cls, data: object, path: str = "policy") -> Policy:
        """Build a policy from its YAML/dict form; errors name the key path."""
        m = expect_mapping(data, path)
        check_keys(m, ["name", "metric", "per", "aggregate", "role", *OPERATORS], path)
        kwargs: dict[str, Any] = {
            "name": expect_str(m.get("name"), f"{path}.name"),
            "metric": expect_str(m.get("metric"), f"{path}.metric"),
            "key_path": path,
        }
        for opt in ("per", "aggregate", "role"):
            if opt in m:
                kwargs[opt] = expect_str(m[opt], f"{path}.{opt}")
        for op in OPERATORS:
            if op not in m:
                continue
            value, where = m[op], f"{path}.{op}"
            if value is None:
                raise ConfigError(where, "expected a value, got null")
            if op in _ORDERED:
                value = expect_number(value, where)
            elif op in ("must_in", "must_not_in"):
                items = expect_list(value, where)
                value = tuple(_scalar(x, f"{where}[{i}]") for i, x in enumerate(items))
            elif op == "must_between":
                value = _between(value, where)
            else:
                value = _scalar(value, where)
            kwargs[op] = value
        return cls(**kwargs)


def parse_policies(data: object, path: str = "policies") -> tuple[Policy, ...]:
    """Parse the ``policies:`` list of an analysis spec."""
    items = expect_list(data, path)
    out = tuple(Policy.from_mapping(p, f"{path}[{i}]") for i, p in enumerate(items))
    seen: dict[str, int] = {}
    for i, p in enumerate(out):
        if p.name in seen:
            raise ConfigError(f"{path}[{i}].name", f"duplicate policy name {p.name!r}")
        seen[p.name] = i
    return out


def _scalar(value: object, path: str) -> Any:
    if isinstance(value, bool | int | float | str):
        return value
    raise ConfigError(path, f"expected a number, boolean or string, got {type(value).__name__}")


def _between(value: object, path: str) -> Between:
    m = expect_mapping(value, path)
    check_keys(m, ["min", "max", "inclusive"], path)
    lo = expect_number(m.get("min"), f"{path}.min")
    hi = expect_number(m.get("max"), f"{path}.max")
    if lo > hi:
        raise ConfigError(path, f"expected min <= max, got min={lo}, max={hi}")
    inclusive = expect_bool(m.get("inclusive", True), f"{path}.inclusive")
    return Between(lo, hi, inclusive)


def _lit(value: object) -> str:
    return json.dumps(value)


@dataclass(frozen=True, eq=False)
class PolicyEvaluation:
    """``results``: one row per (policy, run or sample); ``run_status``: one row per run."""

    results: pl.DataFrame
    run_status: pl.DataFrame

    def to_policy_results(self) -> pa.Table:
        """The rows of the store's ``policy_results`` table."""
        cols = [c for c in _schema.POLICY_RESULTS.names if c in self.results.columns]
        return _schema.conform(self.results.select(cols).to_arrow(), "policy_results")

    def __repr__(self) -> str:
        counts = dict(self.run_status.group_by("final_status").len().rows())
        by = ", ".join(f"{k}={counts[k]}" for k in sorted(counts))
        failed = int(self.results["passed"].not_().sum())
        return (
            f"PolicyEvaluation({self.results.height} checks, {failed} failed; runs: {by or 'none'})"
        )

    def _repr_html_(self) -> str:
        return f"<p>{self!r}</p>" + self.run_status._repr_html_()


def metrics_from_store(
    store: ParquetStore, *, runs: Sequence[str] | None = None, pending: pa.Table | None = None
) -> pl.DataFrame:
    """Current metric values (run_id, key, metric, value), one per key and metric.

    The one score resolution picks each episode's value and the epochs of a key are reduced
    by their mean (``int_key_scores``: the key is the unit a sample policy checks). A row whose
    metadata names a ``semantic_type`` is also visible under that name, so a policy can say
    ``metric: money.cost`` of a derived ``request_cost``. ``pending``: score rows not
    committed yet (a dry run), read as if they were.
    """
    frame = preferred_scores(store, runs=runs, pending=pending, semantic_names=True, level="key")
    return frame.select("run_id", "key", "metric", "value").sort(
        "run_id", "key", "metric", nulls_last=True
    )


def evaluate_policies(
    metrics: pl.DataFrame | ParquetStore,
    policies: Sequence[Policy],
    *,
    runs: Sequence[str] | None = None,
) -> PolicyEvaluation:
    """Evaluate every policy over a long metrics frame (run_id, key, metric, value) or a store."""
    from hylo_analytics.store import unwrap_store

    metrics = unwrap_store(metrics)  # a Store (the facade) holds its ParquetStore
    frame = metrics_from_store(metrics, runs=runs) if isinstance(metrics, ParquetStore) else metrics
    missing = {"run_id", "key", "metric", "value"} - set(frame.columns)
    if missing:
        raise InputError(
            f"metrics frame lacks columns {sorted(missing)}: give a long frame of run_id, key, "
            "metric, value (as Store.metrics returns), or a store"
        )
    dup = frame.filter(pl.struct("run_id", "key", "metric").is_duplicated())
    if dup.height:
        ex = dup.row(0, named=True)
        raise InputError(
            f"metrics frame has several rows for run {ex['run_id']!r} key {ex['key']!r} metric "
            f"{ex['metric']!r} (epochs or sources?): give one value per (run_id, key, metric)"
        )
    if runs is not None:
        frame = frame.filter(pl.col("run_id").is_in(list(runs)))
    # A loop over the handful of policies; each is one vectorized pass over its metric's rows.
    parts = [_evaluate_one(frame, p) for p in policies]
    results = pl.concat(parts, how="vertical") if parts else _empty_results()
    return PolicyEvaluation(results, _run_status(frame, results))


def commit_policy_results(store: ParquetStore, evaluation: PolicyEvaluation) -> int:
    """Write the evidence rows; they supersede the evaluated runs' earlier policy results."""
    table = evaluation.to_policy_results()
    run_ids = evaluation.run_status["run_id"].to_list()
    stones = [Tombstone("policy_results", r) for r in run_ids]
    with store.lock():
        return store.commit({"policy_results": table}, tombstones=stones)


def _observed(policy: Policy, frame: pl.DataFrame) -> pl.DataFrame:
    rows = frame.filter(pl.col("metric") == policy.metric)
    if policy.per == "sample":
        universe = frame.filter(pl.col("key").is_not_null()).select("run_id", "key").unique()
        vals = rows.filter(pl.col("key").is_not_null()).select("run_id", "key", "value")
        out = universe.join(vals, on=["run_id", "key"], how="left")
        return out.with_columns(
            observed=pl.struct(value=pl.col("value")).struct.json_encode(),
            _missing=pl.col("value").is_null(),
        )
    run_level = rows.filter(pl.col("key").is_null()).group_by("run_id").agg(pl.col("value").first())
    agg = getattr(pl.col("value").drop_nulls(), policy.aggregate)()
    from_samples = (
        rows.filter(pl.col("key").is_not_null())
        .group_by("run_id")
        .agg(
            value=pl.when(pl.col("value").is_not_null().any()).then(agg),
            n=pl.len(),
            n_null=pl.col("value").is_null().sum(),
        )
        .join(run_level, on="run_id", how="anti")
    )
    universe = frame.select("run_id").unique()
    out = universe.join(
        pl.concat([run_level, from_samples], how="diagonal_relaxed"), on="run_id", how="left"
    )
    return out.with_columns(
        key=pl.lit(None, pl.String),
        observed=pl.struct("value", "n", "n_null").struct.json_encode()
        if "n" in out.columns
        else pl.struct(value=pl.col("value")).struct.json_encode(),
        _missing=pl.col("value").is_null(),
    )


def _check(policy: Policy, value: pl.Expr, dtype: pl.DataType) -> pl.Expr:
    op, req = policy.requirement
    numeric = dtype.is_numeric() or dtype == pl.Boolean
    where = policy.key_path or f"policy {policy.name!r}"

    def lit(x: Any, path: str) -> Any:
        if numeric and isinstance(x, str):
            raise ConfigError(
                path,
                f"expected a number or boolean (metric {policy.metric!r} is numeric), got {x!r}",
            )
        return float(x) if numeric else x

    if op == "must_between":
        lo, hi = pl.lit(req.min), pl.lit(req.max)
        return (value >= lo) & (value <= hi) if req.inclusive else (value > lo) & (value < hi)
    if op in ("must_in", "must_not_in"):
        items = [lit(x, f"{where}.{op}[{i}]") for i, x in enumerate(req)]
        inside = value.is_in(pl.lit(pl.Series(items)).implode())
        return inside if op == "must_in" else ~inside
    r = pl.lit(lit(req, f"{where}.{op}"))
    return {
        "must_equal": value == r,
        "must_not_equal": value != r,
        "must_greater": value > r,
        "must_greater_equal": value >= r,
        "must_less": value < r,
        "must_less_equal": value <= r,
    }[op]


def _evaluate_one(frame: pl.DataFrame, policy: Policy) -> pl.DataFrame:
    obs = _observed(policy, frame)
    value = (
        pl.col("value").cast(pl.Float64) if frame["value"].dtype == pl.Boolean else pl.col("value")
    )
    passed = (
        pl.when(pl.col("_missing"))
        .then(pl.lit(None, pl.Boolean))
        .otherwise(_check(policy, value, frame["value"].dtype))
    )
    text = policy.describe()
    shown = pl.col("value").cast(pl.String)
    return (
        obs.with_columns(passed=passed)
        .select(
            "run_id",
            "key",
            policy=pl.lit(policy.name),
            metric=pl.lit(policy.metric),
            observed=pl.col("observed"),
            requirement=pl.lit(text),
            passed=pl.col("passed"),
            explanation=pl.when(pl.col("passed"))
            .then(pl.format("{} = {} satisfies {}", pl.lit(policy.metric), shown, pl.lit(text)))
            .when(~pl.col("passed"))
            .then(pl.format("{} = {} violates {}", pl.lit(policy.metric), shown, pl.lit(text)))
            .otherwise(pl.lit(f"{policy.metric} has no value (abstained or missing): not checked")),
            role=pl.lit(policy.role),
        )
        .sort("run_id", "key", nulls_last=True)
    )


def _empty_results() -> pl.DataFrame:
    return pl.DataFrame(
        schema={
            "run_id": pl.String,
            "key": pl.String,
            "policy": pl.String,
            "metric": pl.String,
            "observed": pl.String,
            "requirement": pl.String,
            "passed": pl.Boolean,
            "explanation": pl.String,
            "role": pl.String,
        }
    )


def _run_status(frame: pl.DataFrame, results: pl.DataFrame) -> pl.DataFrame:
    """One row per evaluated run: the view ``mart_run_policy_status`` over these results.

    The rule (failed_policy > unverified > passed) lives in that view's SQL only; a dry run
    or a plain frame reads it over relations holding the evaluation's rows.
    """
    con = connect(threads=1)
    runs = frame.select("run_id").unique().with_columns(status=pl.lit(None, pl.String))
    con.register("_eval_runs", runs.to_arrow())
    con.register("_eval_results", results.to_arrow())
    query = view_query(
        "mart_run_policy_status",
        {
            "stg_runs": "select * from _eval_runs",
            "stg_policy_results": "select * from _eval_results",
        },
    )
    try:
        out: pl.DataFrame = con.sql(query).pl()
    finally:
        con.close()
    return out.drop("status").sort("run_id")
