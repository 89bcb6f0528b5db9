"""The analysis spec's ``post_derive`` section: a paired baseline over the store's scores.

A **variant is a run**. ``baseline_variant`` names the baseline run: its ``run_id``, or, when
no run has that id, the agent as ``<agent_name>@<agent_version>``, its ``agent_version`` or its
``agent_name``, which must then pick exactly one stored run. The candidates are the selected
runs (default: every run of the baseline's ``benchmark_id``); the baseline itself is a
candidate when ``include_baseline`` is true.

``match_on`` entries: ``{kind: case_id}`` matches the same sample key *and* epoch;
``{kind: factor, name: X}`` matches a sample column (``task_id``, ``seed``) or, for any other
name, the string at ``X`` in ``samples.extra`` (flat key ``"X"`` first, then the dotted path).
With factors only, each candidate sample is still its own case: it is matched with the
baseline's one sample of the same factors (several are ``ambiguous_match``) and its row keeps
the candidate's key, task, seed and epoch, so aggregates count every derived value.

Values come from the one score resolution (``int_scores_preferred``, one score per episode and
metric; :mod:`hylo_analytics.resolution`). Every
case of every candidate run yields one score row: the derived value, or an abstention whose
``skip_reason`` is ``<diagnostic kind>: <detail>`` (``missing_match``, ``absent_metric``, ...).
Rows carry ``source = "post_derive:<output name>"`` and ``source_kind = "derived"``; a re-run
tombstones that source for every candidate run, so it replaces rather than duplicates.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import polars as pl
import pyarrow as pa

from hylo_analytics import _schema
from hylo_analytics._config import (
    ConfigError,
    check_keys,
    expect_bool,
    expect_list,
    expect_mapping,
    expect_str,
)
from hylo_analytics._html import text
from hylo_analytics._sql import factor_sql, query_sql
from hylo_analytics.contracts import DerivedMetricOutput, canonical_json
from hylo_analytics.derive.baseline import FORMULAS, BaselineResult, PairedBaseline
from hylo_analytics.resolution import preferred_query, registered
from hylo_analytics.store import ParquetStore, Tombstone

__all__ = [
    "BaselineStep",
    "StoreBaselineResult",
    "commit_baseline",
    "parse_post_derive",
    "run_paired_baseline",
]

_CASE = ("key", "epoch")
_KEYS = ("kind", "baseline_variant", "match_on", "metric", "formula", "include_baseline", "output")


@dataclass(frozen=True)
class BaselineStep:
    """One validated ``post_derive`` entry: the baseline spec plus its factor names."""

    spec: PairedBaseline
    case_id: bool
    factors: tuple[str, ...]
    key_path: str = ""

    @property
    def source(self) -> str:
        return f"post_derive:{self.spec.output.name}"

    @property
    def version(self) -> str:
        """``post_derive/<hash>``: changes whenever the step's definition does."""
        body = canonical_json([asdict(self.spec), self.case_id, self.factors])
        return "post_derive/" + hashlib.sha256(body.encode()).hexdigest()[:12]


def parse_post_derive(entry: object, path: str) -> BaselineStep:
    """Validate one ``post_derive`` entry (Autobench's ``paired_baseline`` shape)."""
    m = expect_mapping(entry, path)
    check_keys(m, _KEYS, path)
    kind = expect_str(m.get("kind"), f"{path}.kind")
    if kind != "paired_baseline":
        raise ConfigError(f"{path}.kind", f"expected 'paired_baseline', got {kind!r}")
    baseline = expect_str(m.get("baseline_variant"), f"{path}.baseline_variant")
    metric = expect_str(m.get("metric"), f"{path}.metric")
    formula = m.get("formula", "baseline_over_candidate")
    if formula not in FORMULAS:
        raise ConfigError(f"{path}.formula", f"expected one of {list(FORMULAS)}, got {formula!r}")
    case_id, factors = False, []
    matches = expect_list(m.get("match_on", [{"kind": "case_id"}]), f"{path}.match_on")
    if not matches:
        raise ConfigError(f"{path}.match_on", "expected at least one entry")
    for i, match in enumerate(matches):
        mp = f"{path}.match_on[{i}]"
        mm = expect_mapping(match, mp)
        check_keys(mm, ["kind", "name"], mp)
        mk = mm.get("kind")
        if mk == "case_id":
            case_id = True
        elif mk == "factor":
            name = expect_str(mm.get("name"), f"{mp}.name")
            if name in (*_CASE, "run_id", "variant", "metric", "value"):
                raise ConfigError(f"{mp}.name", f"{name!r} is reserved; use kind: case_id")
            factors.append(name)
        else:
            raise ConfigError(f"{mp}.kind", f"expected 'case_id' or 'factor', got {mk!r}")
    include = expect_bool(m.get("include_baseline", True), f"{path}.include_baseline")
    op = f"{path}.output"
    out = expect_mapping(m.get("output"), op)
    check_keys(out, list(DerivedMetricOutput.__dataclass_fields__), op)
    expect_str(out.get("name"), f"{op}.name")
    for k in ("semantic_type", "unit"):
        if out.get(k) is not None:
            expect_str(out[k], f"{op}.{k}")
    if out.get("direction", "maximize") not in ("maximize", "minimize"):
        raise ConfigError(f"{op}.direction", "expected one of ['maximize', 'minimize']")
    if out.get("role", "objective") not in ("objective", "constraint", "diagnostic"):
        raise ConfigError(f"{op}.role", "expected one of ['objective', 'constraint', 'diagnostic']")
    spec = PairedBaseline(
        baseline_variant=baseline,
        metric=metric,
        output=DerivedMetricOutput(**out),
        formula=formula,
        match_on=(*(_CASE if case_id else ()), *factors),
        # factor-only: every candidate sample is derived on its own and keeps its key and epoch
        identity=() if case_id else _CASE,
        include_baseline=include,
    )
    return BaselineStep(spec, case_id, tuple(factors), path)


@dataclass(frozen=True, eq=False)
class StoreBaselineResult:
    """A paired baseline run on the store: the frame-level result and the score rows."""

    step: BaselineStep
    baseline_run: str
    runs: tuple[str, ...]  # the candidate runs: the ones whose rows of the source are replaced
    result: BaselineResult
    scores: pa.Table

    @property
    def values(self) -> pl.DataFrame:
        return self.result.values

    @property
    def diagnostics(self) -> pl.DataFrame:
        return self.result.diagnostics

    def __repr__(self) -> str:
        kinds = ", ".join(
            f"{k} {n}" for k, n in self.diagnostics["kind"].value_counts(sort=True).rows()
        )
        return (
            f"PairedBaseline({self.step.spec.output.name!r} vs {self.baseline_run}: "
            f"{self.values.height} derived, {self.diagnostics.height} not derived"
            + (f" ({kinds})" if kinds else "")
            + ")"
        )

    def _repr_html_(self) -> str:
        diag = self.diagnostics._repr_html_() if self.diagnostics.height else ""
        return f"<p>{text(repr(self))}</p>{self.values._repr_html_()}{diag}"


def run_paired_baseline(
    store: ParquetStore,
    step: BaselineStep,
    *,
    runs: Sequence[str] | None = None,
    pending: pa.Table | None = None,
) -> StoreBaselineResult:
    """Derive ``step`` from the store's preferred scores; nothing is written.

    ``pending``: score rows not committed yet (a dry run); they supersede the stored rows of
    their (run, source), exactly as committing them would.
    """
    spec = step.spec
    baseline = _resolve_baseline(store, spec.baseline_variant, step.key_path)
    candidates = _candidates(store, baseline, runs, step.key_path)
    read = sorted({*candidates, baseline})
    frame = _frame(store, step, read, pending)
    result = replace(spec, baseline_variant=baseline).derive(frame)
    keep = pl.col("variant").is_in(candidates)
    result = BaselineResult(result.values.filter(keep), result.diagnostics.filter(keep), {})
    scores = _to_scores(step, baseline, frame, result)
    return StoreBaselineResult(step, baseline, tuple(candidates), result, scores)


def _resolve_baseline(store: ParquetStore, variant: str, key_path: str) -> str:
    runs = store.sql("select run_id, agent_name, agent_version from stg_runs order by run_id")
    if variant in runs["run_id"].to_list():
        return variant
    agent = pl.format("{}@{}", pl.col("agent_name"), pl.col("agent_version"))
    for expr in (agent, pl.col("agent_version"), pl.col("agent_name")):
        hit = runs.filter(expr == variant)["run_id"].to_list()
        if len(hit) == 1:
            return str(hit[0])
        if len(hit) > 1:
            raise ConfigError(
                f"{key_path}.baseline_variant",
                f"{variant!r} names {len(hit)} runs {hit}; give a run_id",
            )
    raise ConfigError(
        f"{key_path}.baseline_variant",
        f"no run has run_id, agent name@version, version or name {variant!r}; "
        f"runs: {runs['run_id'].to_list()}",
    )


def _candidates(
    store: ParquetStore, baseline: str, runs: Sequence[str] | None, key_path: str
) -> list[str]:
    if runs is not None:
        chosen = store.resolve_runs(runs)
    else:
        chosen = store.sql(
            "select run_id from stg_runs where benchmark_id is not distinct from "
            "(select benchmark_id from stg_runs where run_id = $b) order by run_id",
            {"b": baseline},
        )["run_id"].to_list()
    return chosen


def _frame(
    store: ParquetStore, step: BaselineStep, runs: list[str], pending: pa.Table | None
) -> pl.DataFrame:
    """One row per sample of ``runs`` with the preferred value of the metric and the factors."""
    factors = [factor_sql(f, "s") for f in step.factors]
    params: dict[str, Any] = {
        "runs": runs,
        "metric": step.spec.metric,
        "metrics": [step.spec.metric],
    }
    cols = "".join(f", {expr} as f{i}" for i, expr in enumerate(factors))
    with registered(store, pending) as rel:
        preferred = preferred_query(runs=True, metrics=True, pending=rel)
        frame = store.sql(query_sql("post_derive_frame", preferred=preferred, cols=cols), params)
    return frame.rename({f"f{i}": f for i, f in enumerate(step.factors)})


def _to_scores(
    step: BaselineStep, baseline: str, frame: pl.DataFrame, result: BaselineResult
) -> pa.Table:
    """Derived values and diagnostics as rows of the scores table."""
    spec, out = step.spec, step.spec.output
    match = [*spec.match_on, *(c for c in spec.identity if c not in spec.match_on)]
    common = {
        "semantic_type": out.semantic_type,
        "unit": out.unit,
        "direction": out.direction,
        "role": out.role,
        "baseline_variant": spec.baseline_variant,
        "baseline_run": baseline,
        "formula": spec.formula,
        "source_metric": spec.metric,
    }
    values = result.values.select(
        "variant",
        *match,
        value=pl.col("value"),
        skip_reason=pl.lit(None, pl.String),
        candidate_value=pl.col("candidate_value"),
        baseline_value=pl.col("baseline_value"),
        diagnostic=pl.lit(None, pl.String),
    )
    diags = result.diagnostics.select(
        "variant",
        *match,
        value=pl.lit(None, pl.Float64),
        skip_reason=pl.format("{}: {}", "kind", "detail"),
        candidate_value=pl.lit(None, pl.Float64),
        baseline_value=pl.lit(None, pl.Float64),
        diagnostic=pl.col("kind"),
    )
    rows = pl.concat([values, diags], how="vertical_relaxed")
    ids = ["_task_id", "_seed", "_episode_id"]  # prefixed: a factor may be named task_id
    # every row names its candidate sample (matched on it, or carried as its identity)
    rows = rows.join(
        frame.select("variant", *_CASE, *ids).unique(["variant", *_CASE]),
        on=["variant", *_CASE],
        how="left",
        nulls_equal=True,
    )
    meta = pl.struct(
        *[pl.lit(v, pl.String).alias(k) for k, v in common.items()],
        "candidate_value",
        "baseline_value",
        "diagnostic",
        pl.struct([pl.col(f).cast(pl.String) for f in step.factors]).alias("factors")
        if step.factors
        else pl.lit(None, pl.String).alias("factors"),
    ).struct.json_encode()
    table = rows.select(
        pl.col("variant").alias("run_id"),
        pl.col("key").cast(pl.String),
        pl.col("_task_id").cast(pl.String).alias("task_id"),
        pl.col("_seed").cast(pl.Int64).alias("seed"),
        pl.col("epoch").cast(pl.Int64),
        pl.col("_episode_id").cast(pl.String).alias("episode_id"),
        metric=pl.lit(out.name),
        value=pl.col("value"),
        valid=pl.col("value").is_not_null(),
        skip_reason=pl.col("skip_reason"),
        explanation=pl.lit(None, pl.String),
        source=pl.lit(step.source),
        source_kind=pl.lit("derived"),
        scorer_version=pl.lit(step.version),
        metadata=meta,
    ).sort("run_id", "key", "epoch", nulls_last=True)
    return _schema.conform(table.to_arrow(), "scores")


def commit_baseline(store: ParquetStore, result: StoreBaselineResult) -> int:
    """Commit the rows, superseding the step's earlier rows for every candidate run."""
    stones = [Tombstone("scores", r, result.step.source) for r in result.runs]
    with store.lock():
        return store.commit({"scores": result.scores}, tombstones=stones)
