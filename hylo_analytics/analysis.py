"""One analysis spec run end to end (Autobench's shape).

Its sections: ``score``, ``derive``, ``post_derive``, ``verdict``, ``policies``.

::

    score:                                       # declarative scorers (hylo_analytics.scoring)
      episode_steps: {value: trace.steps, goal: minimize, unit: steps}
    derive:
      - kind: token_cost
        pricing: file://pricing/models.yaml      # relative to the spec file, or inline
        inputs: {model: llm.model.name}          # optional remapping (TokenCostInputs)
        output: {name: request_cost, semantic_type: money.cost, unit: usd,
                 direction: minimize, role: constraint}
    post_derive:                                 # cross-run (hylo_analytics.post_derive)
      - {kind: paired_baseline, baseline_variant: octo-ft@1.0.0, metric: episode_steps,
         formula: baseline_over_candidate, output: {name: step_speedup}}
    verdict:                                     # ComparisonVerdictSpec (compare.verdicts)
      {metric: episode_steps, parent: octo-ft, direction: minimize,
       rule: {kind: relative_noise, noise: 0.05}}
    policies: [{name: cost-cap, metric: money.cost, must_less_equal: 0.001}]

Sections run in that order against stored runs, each seeing what the earlier ones wrote (a
dry run overlays the rows it would write instead). Every section is validated when the spec is
loaded, by the same parser its module uses, so a typo fails before anything is written, with
the key path (``score.coverage.value: ...``, ``policies[2].must_between.min: ...``).

``verdict`` compares runs on what the earlier sections wrote (a dry run's pending rows
included) through the comparability gate of :func:`~hylo_analytics.compare.compare_runs`, and
returns the verdict tables in the report; verdicts are not stored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa

from hylo_analytics import _schema
from hylo_analytics._config import (
    ConfigError,
    check_keys,
    expect_list,
    expect_mapping,
    expect_str,
)
from hylo_analytics._html import text
from hylo_analytics._lazy import LazyModule
from hylo_analytics.compare.verdicts import ComparisonVerdictSpec, parse_verdicts
from hylo_analytics.contracts import DerivedMetricOutput
from hylo_analytics.derive.policies import (
    Policy,
    PolicyEvaluation,
    commit_policy_results,
    evaluate_policies,
    metrics_from_store,
    parse_policies,
)
from hylo_analytics.derive.post_derive import (
    BaselineStep,
    StoreBaselineResult,
    commit_baseline,
    parse_post_derive,
    run_paired_baseline,
)
from hylo_analytics.derive.pricing import PricingTable, load_pricing
from hylo_analytics.derive.token_cost import (
    TOKEN_COST_OUTPUT,
    TokenCostInputs,
    TokenCostResult,
    token_cost,
)
from hylo_analytics.errors import InputNotFoundError
from hylo_analytics.scoring import (
    DeclarativeScorer,
    ExpectedActionScorer,
    ScoringReport,
    parse_scorers,
    score_store,
)
from hylo_analytics.store import ParquetStore, commit_scores

if TYPE_CHECKING:
    import yaml
else:  # imported on first use (a spec or pricing file is read)
    yaml = LazyModule("yaml")

__all__ = [
    "AnalysisReport",
    "AnalysisSpec",
    "DeriveStep",
    "load_analysis_spec",
    "run_analysis",
]

SECTIONS = ("score", "derive", "post_derive", "verdict", "policies")
_DIRECTIONS = ("maximize", "minimize")
_ROLES = ("objective", "constraint", "diagnostic")


@dataclass(frozen=True)
class DeriveStep:
    """One ``derive:`` entry, validated, with its pricing table loaded."""

    kind: str
    pricing: PricingTable
    inputs: TokenCostInputs
    output: DerivedMetricOutput


@dataclass(frozen=True)
class AnalysisSpec:
    """A validated analysis spec."""

    score: tuple[DeclarativeScorer | ExpectedActionScorer, ...] = ()
    derive: tuple[DeriveStep, ...] = ()
    post_derive: tuple[BaselineStep, ...] = ()
    policies: tuple[Policy, ...] = ()
    source: str | None = None
    verdict: tuple[ComparisonVerdictSpec, ...] = ()


@dataclass(frozen=True, eq=False)
class AnalysisReport:
    """What a run of the spec did, section by section (``written`` false for a dry run)."""

    scoring: ScoringReport | None = None
    derived: tuple[TokenCostResult, ...] = ()
    post_derived: tuple[StoreBaselineResult, ...] = ()
    policies: PolicyEvaluation | None = None
    written: bool = True
    # one comparison frame per verdict block (candidate, metric, verdict, p_verdict, note...)
    verdicts: tuple[pl.DataFrame, ...] = ()

    def run_status(self) -> pl.DataFrame:
        """One row per run with its final status (empty when the spec has no policies)."""
        if self.policies is None:
            return pl.DataFrame(schema={"run_id": pl.String, "final_status": pl.String})
        return self.policies.run_status

    def __repr__(self) -> str:
        parts = []
        if self.scoring is not None:
            sc = self.scoring
            n = sc.rows_written if self.written or sc.rows is None else sc.rows.num_rows
            verb = "scored" if self.written else "would score"
            parts.append(
                f"{verb} {n} row(s) from {len(sc.scorers)} source(s)"
                + ("" if sc.ok else f" (required scorer errors in {len(sc.failed_runs)} run(s))")
            )
        parts += [repr(d) for d in self.derived]
        parts += [repr(d) for d in self.post_derived]
        for v in self.verdicts:
            counts = dict(v.group_by("verdict").len().rows())
            shown = ", ".join(f"{k}={counts[k]}" for k in sorted(counts))
            parts.append(f"verdicts on {v['metric'][0] if v.height else '?'}: {shown or 'none'}")
        if self.policies is not None:
            parts.append(repr(self.policies))
        if not self.written:
            parts.append("dry run: nothing written")
        return "AnalysisReport(" + "; ".join(parts or ["nothing run"]) + ")"

    def _repr_html_(self) -> str:
        return f"<p>{text(repr(self))}</p>" + self.run_status()._repr_html_()


def load_analysis_spec(source: str | Path | Mapping[str, Any]) -> AnalysisSpec:
    """Load and validate a spec from a YAML file or a mapping (pricing paths: relative to the file)."""
    if isinstance(source, Mapping):
        return _parse(source, base_dir=Path.cwd(), origin=None)
    path = Path(source)
    if not path.is_file():
        raise InputNotFoundError(f"analysis spec not found: {path}; check the path")
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(str(path), f"not valid YAML: {exc}") from exc
    return _parse(doc, base_dir=path.parent, origin=str(path))


def _parse(doc: object, *, base_dir: Path, origin: str | None) -> AnalysisSpec:
    top = expect_mapping(doc, "")
    check_keys(top, SECTIONS, "")
    if not any(s in top for s in SECTIONS):
        raise ConfigError("", f"expected at least one of {list(SECTIONS)}")
    score = tuple(parse_scorers(top["score"], "score")) if "score" in top else ()
    derive = tuple(
        _parse_derive(d, f"derive[{i}]", base_dir)
        for i, d in enumerate(expect_list(top.get("derive", []), "derive"))
    )
    seen: dict[str, int] = {}
    for i, step in enumerate(derive):
        name = step.output.name
        if name in seen:
            raise ConfigError(
                f"derive[{i}].output.name", f"duplicate output {name!r} (also derive[{seen[name]}])"
            )
        seen[name] = i
    post = tuple(
        parse_post_derive(d, f"post_derive[{i}]")
        for i, d in enumerate(expect_list(top.get("post_derive", []), "post_derive"))
    )
    seen = {}
    for i, p in enumerate(post):
        name = p.spec.output.name
        if name in seen:
            raise ConfigError(
                f"post_derive[{i}].output.name",
                f"duplicate output {name!r} (also post_derive[{seen[name]}])",
            )
        seen[name] = i
    policies = parse_policies(top.get("policies", []), "policies")
    verdict = parse_verdicts(top["verdict"], "verdict") if "verdict" in top else ()
    return AnalysisSpec(score, derive, post, policies, origin, verdict)


def _parse_derive(entry: object, path: str, base_dir: Path) -> DeriveStep:
    m = expect_mapping(entry, path)
    check_keys(m, ["kind", "pricing", "inputs", "output"], path)
    kind = expect_str(m.get("kind"), f"{path}.kind")
    if kind != "token_cost":
        raise ConfigError(f"{path}.kind", f"expected 'token_cost', got {kind!r}")
    pricing = _load_step_pricing(m.get("pricing"), f"{path}.pricing", base_dir)
    inputs = _dataclass_from(TokenCostInputs, m.get("inputs", {}), f"{path}.inputs")
    given = expect_mapping(m.get("output", {}), f"{path}.output")
    check_keys(given, list(DerivedMetricOutput.__dataclass_fields__), f"{path}.output")
    if given.get("direction", "minimize") not in _DIRECTIONS:
        raise ConfigError(f"{path}.output.direction", f"expected one of {list(_DIRECTIONS)}")
    if given.get("role", "constraint") not in _ROLES:
        raise ConfigError(f"{path}.output.role", f"expected one of {list(_ROLES)}")
    output = _dataclass_from(
        DerivedMetricOutput, {**asdict(TOKEN_COST_OUTPUT), **given}, f"{path}.output"
    )
    if output.direction not in _DIRECTIONS:
        raise ConfigError(f"{path}.output.direction", f"expected one of {list(_DIRECTIONS)}")
    if output.role not in _ROLES:
        raise ConfigError(f"{path}.output.role", f"expected one of {list(_ROLES)}")
    return DeriveStep(kind, pricing, inputs, output)


def _load_step_pricing(value: object, path: str, base_dir: Path) -> PricingTable:
    if isinstance(value, Mapping):
        try:
            return load_pricing({"pricing": value})
        except ConfigError as exc:
            # exc.path starts with "pricing": re-root it under this step
            raise ConfigError(f"{path}{exc.path.removeprefix('pricing')}", exc.message) from exc
    ref = expect_str(value, path)
    try:
        return load_pricing(ref, base_dir=base_dir)
    except ConfigError as exc:
        raise ConfigError(f"{path} ({ref}): {exc.path}", exc.message) from exc
    except FileNotFoundError as exc:
        raise ConfigError(path, str(exc)) from exc


def _dataclass_from(cls: Callable[..., Any], value: object, path: str) -> Any:
    m = expect_mapping(value, path)
    allowed = list(cls.__dataclass_fields__)  # type: ignore[attr-defined]
    check_keys(m, allowed, path)
    return cls(**{k: expect_str(v, f"{path}.{k}") for k, v in m.items()})


def run_analysis(
    store: ParquetStore,
    spec: AnalysisSpec,
    *,
    runs: Sequence[str] | None = None,
    write: bool = True,
) -> AnalysisReport:
    """Run the spec's sections in order against ``store``; ``write=False`` commits nothing.

    A dry run computes every section as a real run would: the rows it would write are kept as
    ``pending`` score rows that later sections read in place of the stored rows they replace.
    """
    from hylo_analytics.store import as_parquet

    store = as_parquet(store)  # a Store (the facade) holds its ParquetStore
    if runs is not None:
        runs = store.resolve_runs(runs)  # ids, unique prefixes or selectors, once for all
    pending: list[pa.Table] = []
    scoring = None
    if spec.score:
        scoring = score_store(store, list(spec.score), runs, write=write)
        if not write:
            pending.append(scoring.rows)
    derived = tuple(
        token_cost(store, s.pricing, inputs=s.inputs, output=s.output, runs=runs)
        for s in spec.derive
    )
    if derived:
        # one commit: steps share the source "derive:token_cost", and a commit's tombstones only
        # supersede earlier batches, so a second commit would erase the first step's rows
        rows = pa.concat_tables([d.to_scores() for d in derived])
        if write:
            commit_scores(store, rows)
        else:
            pending.append(rows)
    post: list[StoreBaselineResult] = []
    for step in spec.post_derive:
        result = run_paired_baseline(store, step, runs=runs, pending=_concat(pending))
        if write:
            commit_baseline(store, result)
        else:
            pending.append(result.scores)
        post.append(result)
    verdicts = tuple(
        _verdict(store, v, runs, None if write else _concat(pending)) for v in spec.verdict
    )
    evaluation = None
    if spec.policies:
        metrics = metrics_from_store(store, runs=runs, pending=None if write else _concat(pending))
        evaluation = evaluate_policies(metrics, spec.policies, runs=runs)
        if write:
            commit_policy_results(store, evaluation)
    return AnalysisReport(scoring, derived, tuple(post), evaluation, write, verdicts)


def _verdict(
    store: ParquetStore,
    spec: ComparisonVerdictSpec,
    runs: Sequence[str] | None,
    pending: pa.Table | None,
) -> pl.DataFrame:
    """One verdict block: its candidates (default: every other analysed run) against parent."""
    from hylo_analytics.compare import compare_runs

    parent = store.resolve_run(spec.parent)
    # ids, prefixes or selectors; a selector names every run it matches but the parent
    cands = store.select_runs(spec.candidates, exclude=parent) if spec.candidates else []
    if not cands:
        pool = runs if runs is not None else store.sql("select run_id from stg_runs")["run_id"]
        cands = sorted(r for r in pool if r != parent)
    if not cands:
        raise ConfigError("verdict.candidates", f"no run to compare with parent {parent!r}")
    return compare_runs(
        store,
        cands,
        parent,
        metrics=[spec.metric],
        by=spec.by,
        source=spec.source,
        pending=pending,
        rule=spec.rule,
        directions=None if spec.direction is None else {spec.metric: spec.direction},
    )


def _concat(tables: list[pa.Table]) -> pa.Table | None:
    """Pending rows of every section so far; a later section's rows replace an earlier one's."""
    if not tables:
        return None
    rows = pa.concat_tables([_schema.conform(t, "scores") for t in tables])
    # newer than anything stored, as they would be once committed
    seq = pa.repeat(pa.scalar(2**62, pa.int64()), rows.num_rows)
    return rows.set_column(rows.schema.get_field_index("batch_seq"), "batch_seq", seq)
