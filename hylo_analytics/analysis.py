"""One analysis spec (Autobench's shape): ``score``, ``derive``, ``post_derive``, ``policies``.

::

    score: {...}              # declarative scorers (hylo_analytics.scorers)
    derive:
      - kind: token_cost
        pricing: file://pricing/models.yaml      # relative to the spec file, or inline
        inputs: {model: llm.model.name}          # optional remapping (TokenCostInputs)
        output: {name: request_cost, semantic_type: money.cost, unit: usd,
                 direction: minimize, role: constraint}
    post_derive: [{kind: paired_baseline, ...}]  # cross-run (hylo_analytics.compare)
    policies: [{name: cost-cap, metric: money.cost, must_less_equal: 0.001}]

Sections run in that order against stored runs. Every section is validated when the spec is
loaded, so a typo fails before anything is written, with the key path
(``policies[2].must_between.min: expected a number``). ``score`` and ``post_derive`` are run by
other modules through :data:`EXTERNAL`; when a build lacks them, running such a section raises
:class:`NotAvailableError` instead of silently skipping it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import yaml

from hylo_analytics._config import (
    ConfigError,
    check_keys,
    expect_bool,
    expect_list,
    expect_mapping,
    expect_str,
)
from hylo_analytics.contracts import DerivedMetricOutput
from hylo_analytics.derive import (
    TOKEN_COST_OUTPUT,
    TokenCostInputs,
    TokenCostResult,
    commit_scores,
    token_cost,
)
from hylo_analytics.policies import (
    Policy,
    PolicyEvaluation,
    commit_policy_results,
    evaluate_policies,
    metrics_from_store,
    parse_policies,
)
from hylo_analytics.pricing import PricingTable, load_pricing
from hylo_analytics.store import Store

__all__ = [
    "EXTERNAL",
    "AnalysisReport",
    "AnalysisSpec",
    "DeriveStep",
    "NotAvailableError",
    "load_analysis_spec",
    "run_analysis",
]

SECTIONS = ("score", "derive", "post_derive", "policies")
# Sections run by other modules: (module, function(store, section, runs=...) -> Any).
EXTERNAL: Mapping[str, tuple[str, str]] = {
    "score": ("hylo_analytics.scorers", "run_score_spec"),
    "post_derive": ("hylo_analytics.compare", "run_post_derive"),
}
_DIRECTIONS = ("maximize", "minimize")
_ROLES = ("objective", "constraint", "diagnostic")
_SCORER_KINDS = ("value", "pass", "exact", "schema")
_FORMULAS = (
    "baseline_over_candidate",
    "candidate_over_baseline",
    "candidate_minus_baseline",
    "baseline_minus_candidate",
    "percent_change_from_baseline",
)


class NotAvailableError(RuntimeError):
    """A spec section needs a module this build does not have."""


@dataclass(frozen=True)
class DeriveStep:
    """One ``derive:`` entry, validated, with its pricing table loaded."""

    kind: str
    pricing: PricingTable
    inputs: TokenCostInputs
    output: DerivedMetricOutput


@dataclass(frozen=True)
class AnalysisSpec:
    """A validated analysis spec; ``score`` and ``post_derive`` stay as their raw mappings."""

    score: Mapping[str, Any] | None = None
    derive: tuple[DeriveStep, ...] = ()
    post_derive: tuple[Mapping[str, Any], ...] = ()
    policies: tuple[Policy, ...] = ()
    source: str | None = None


@dataclass(frozen=True, eq=False)
class AnalysisReport:
    """What a run of the spec did: derived results, policy evaluation, sections skipped."""

    derived: tuple[TokenCostResult, ...] = ()
    policies: PolicyEvaluation | None = None
    external: Mapping[str, Any] = field(default_factory=dict)
    skipped: tuple[str, ...] = ()

    def run_status(self) -> pl.DataFrame:
        """One row per run with its final status (empty when the spec has no policies)."""
        if self.policies is None:
            return pl.DataFrame(schema={"run_id": pl.String, "final_status": pl.String})
        return self.policies.run_status

    def __repr__(self) -> str:
        parts = [repr(d) for d in self.derived]
        if self.policies is not None:
            parts.append(repr(self.policies))
        parts += [f"skipped {s}" for s in self.skipped]
        return "AnalysisReport(" + "; ".join(parts or ["nothing run"]) + ")"

    def _repr_html_(self) -> str:
        return f"<p>{self!r}</p>" + self.run_status()._repr_html_()


def load_analysis_spec(source: str | Path | Mapping[str, Any]) -> AnalysisSpec:
    """Load and validate a spec from a YAML file or a mapping (pricing paths: relative to the file)."""
    if isinstance(source, Mapping):
        return _parse(source, base_dir=Path.cwd(), origin=None)
    path = Path(source)
    if not path.is_file():
        raise FileNotFoundError(f"analysis spec not found: {path}")
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
    score = _validate_score(top["score"]) if "score" in top else None
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
        _validate_post_derive(d, f"post_derive[{i}]")
        for i, d in enumerate(expect_list(top.get("post_derive", []), "post_derive"))
    )
    policies = parse_policies(top.get("policies", []), "policies")
    return AnalysisSpec(score, derive, post, policies, origin)


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


def _validate_score(value: object) -> Mapping[str, Any]:
    scorers = expect_mapping(value, "score")
    for name, spec in scorers.items():
        path = f"score.{name}"
        m = expect_mapping(spec, path)
        check_keys(
            m,
            [
                *_SCORER_KINDS,
                "semantic",
                "semantic_type",
                "unit",
                "goal",
                "direction",
                "role",
                "optional",
            ],
            path,
        )
        kinds = [k for k in _SCORER_KINDS if k in m]
        if len(kinds) != 1:
            raise ConfigError(
                path,
                f"expected exactly one of {list(_SCORER_KINDS)}, found {', '.join(kinds) or 'none'}",
            )
        if kinds[0] in ("value", "pass"):
            expect_str(m[kinds[0]], f"{path}.{kinds[0]}")
        elif kinds[0] == "exact":
            e = expect_mapping(m["exact"], f"{path}.exact")
            check_keys(e, ["actual", "expected"], f"{path}.exact")
            for k in ("actual", "expected"):
                expect_str(e.get(k), f"{path}.exact.{k}")
        else:
            expect_mapping(m["schema"], f"{path}.schema")
        for k in ("goal", "direction"):
            if k in m and m[k] not in _DIRECTIONS:
                raise ConfigError(
                    f"{path}.{k}", f"expected one of {list(_DIRECTIONS)}, got {m[k]!r}"
                )
        if "role" in m and m["role"] not in _ROLES:
            raise ConfigError(f"{path}.role", f"expected one of {list(_ROLES)}, got {m['role']!r}")
        if "optional" in m:
            expect_bool(m["optional"], f"{path}.optional")
    return scorers


def _validate_post_derive(entry: object, path: str) -> Mapping[str, Any]:
    m = expect_mapping(entry, path)
    allowed = [
        "kind",
        "baseline_variant",
        "match_on",
        "metric",
        "formula",
        "include_baseline",
        "output",
    ]
    check_keys(m, allowed, path)
    kind = expect_str(m.get("kind"), f"{path}.kind")
    if kind != "paired_baseline":
        raise ConfigError(f"{path}.kind", f"expected 'paired_baseline', got {kind!r}")
    expect_str(m.get("baseline_variant"), f"{path}.baseline_variant")
    expect_str(m.get("metric"), f"{path}.metric")
    formula = m.get("formula", "baseline_over_candidate")
    if formula not in _FORMULAS:
        raise ConfigError(f"{path}.formula", f"expected one of {list(_FORMULAS)}, got {formula!r}")
    for i, match in enumerate(
        expect_list(m.get("match_on", [{"kind": "case_id"}]), f"{path}.match_on")
    ):
        mp = f"{path}.match_on[{i}]"
        mm = expect_mapping(match, mp)
        check_keys(mm, ["kind", "name"], mp)
        mk = mm.get("kind")
        if mk not in ("case_id", "factor"):
            raise ConfigError(f"{mp}.kind", f"expected 'case_id' or 'factor', got {mk!r}")
        if mk == "factor":
            expect_str(mm.get("name"), f"{mp}.name")
    if "include_baseline" in m:
        expect_bool(m["include_baseline"], f"{path}.include_baseline")
    out = expect_mapping(m.get("output"), f"{path}.output")
    expect_str(out.get("name"), f"{path}.output.name")
    return m


def _external(section: str) -> Callable[..., Any]:
    module, func = EXTERNAL[section]
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module:  # the module exists but one of its imports is broken
            raise
        raise NotAvailableError(
            f"{section}: not available in this build (module {module} is missing)"
        ) from exc
    fn = getattr(mod, func, None)
    if fn is None:
        raise NotAvailableError(
            f"{section}: not available in this build ({module}.{func} is missing)"
        )
    return fn  # type: ignore[no-any-return]


def run_analysis(
    store: Store,
    spec: AnalysisSpec,
    *,
    runs: Sequence[str] | None = None,
    write: bool = True,
    skip_unavailable: bool = False,
) -> AnalysisReport:
    """Run the spec's sections in order against ``store``; ``write=False`` commits nothing."""
    external: dict[str, Any] = {}
    skipped: list[str] = []

    def call(section: str, payload: Any) -> None:
        try:
            fn = _external(section)
        except NotAvailableError as exc:
            if not skip_unavailable:
                raise
            skipped.append(str(exc))
            return
        external[section] = fn(store, payload, runs=runs, write=write)

    if spec.score is not None:
        call("score", spec.score)
    derived = tuple(
        token_cost(store, s.pricing, inputs=s.inputs, output=s.output, runs=runs)
        for s in spec.derive
    )
    if write and derived:
        # one commit: steps share the source "derive:token_cost", and a commit's tombstones only
        # supersede earlier batches, so a second commit would erase the first step's rows
        commit_scores(store, pa.concat_tables([d.to_scores() for d in derived]))
    if spec.post_derive:
        call("post_derive", spec.post_derive)
    evaluation = None
    if spec.policies:
        metrics = metrics_from_store(store, runs=runs)
        if not write:
            metrics = _with_unwritten(metrics, derived)
        evaluation = evaluate_policies(metrics, spec.policies, runs=runs)
        if write:
            commit_policy_results(store, evaluation)
    return AnalysisReport(derived, evaluation, external, tuple(skipped))


def _with_unwritten(metrics: pl.DataFrame, derived: Sequence[TokenCostResult]) -> pl.DataFrame:
    """Metrics as they would be after writing ``derived`` (for a dry run)."""
    frames = [metrics]
    for d in derived:
        names = [d.output.name, d.output.semantic_type]
        frames = [f.filter(~pl.col("metric").is_in(names)) for f in frames]
        for name in dict.fromkeys(names):
            frames.append(
                d.costs.select(
                    "run_id",
                    pl.col("key")
                    if "key" in d.costs.columns
                    else pl.lit(None, pl.String).alias("key"),
                    pl.col("epoch")
                    if "epoch" in d.costs.columns
                    else pl.lit(None, pl.Int64).alias("epoch"),
                    metric=pl.lit(name),
                    value=pl.col("cost"),
                )
            )
    return pl.concat(frames, how="diagonal_relaxed")
