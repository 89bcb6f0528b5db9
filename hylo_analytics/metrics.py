"""The MetricSpec registry: built-in metrics, alias resolution and each metric's direction.

A :class:`~hylo_analytics.contracts.MetricSpec` (WorldFoundry's contract, in
:mod:`hylo_analytics.contracts`) is declarative: identity, aliases, unit, score direction,
normalizer and aggregation policy. It does not compute anything; the aggregate reads it to
decide, for example, that ``success`` is a 0/1 metric (Wilson interval, an errored episode a
failure under ``errors="failure"``) and that fewer ``steps`` is better. The registry here
resolves aliases, so data written under ``success_rate`` and ``success`` land in one metric,
and :func:`resolve_directions` is the one rule for what "better" means.

The aggregation fields are read, not decorative: ``aggregator`` names the statistic that is a
metric's reported value (one of :data:`AGGREGATORS`, each a column the aggregate engine
already computes), ``statistics`` the ones a scorecard shows beside it, ``primary`` the one
metric a scorecard leads with, ``weight`` its share of the overall score
(:mod:`hylo_analytics.aggregate.scorecard`). A name the engine does not compute is a
``ValueError`` when the spec is built, so a typo cannot silently report the mean.

:func:`load_metric_specs` reads specs (or a whole :class:`BenchmarkSpec`) from a YAML or JSON
file. The contracts (``MetricSpec``, ``EvaluationProtocolSpec``, ``WorldTaskConfig``,
``BenchmarkSpec`` and their schema versions) are re-exported here, where they lived before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

import polars as pl

from hylo_analytics.contracts._worldfoundry import (
    AGGREGATORS,
    BENCHMARK_SPEC_SCHEMA_VERSION,
    EVALUATION_PROTOCOL_SCHEMA_VERSION,
    METRIC_SPEC_SCHEMA_VERSION,
    SPEC_STATISTICS,
    WORLD_TASK_CONFIG_SCHEMA_VERSION,
    BenchmarkSpec,
    EvaluationProtocolSpec,
    MetricKind,
    MetricSpec,
    WorldTaskConfig,
    parse_normalizer,
)
from hylo_analytics.errors import ConfigError, InputError

# the old private name, read by the aggregate engine
_parse_normalizer = parse_normalizer

__all__ = [
    "AGGREGATORS",
    "BENCHMARK_SPEC_SCHEMA_VERSION",
    "BUILTIN_METRICS",
    "CONVENTION_DIRECTIONS",
    "EVALUATION_PROTOCOL_SCHEMA_VERSION",
    "METRIC_SPEC_SCHEMA_VERSION",
    "SPEC_STATISTICS",
    "WORLD_TASK_CONFIG_SCHEMA_VERSION",
    "BenchmarkSpec",
    "Direction",
    "EvaluationProtocolSpec",
    "MetricKind",
    "MetricRegistry",
    "MetricSpec",
    "WorldTaskConfig",
    "default_registry",
    "get_metric",
    "load_metric_specs",
    "metric_bounds",
    "normalize_expr",
    "resolve_directions",
]

Direction = Literal["maximize", "minimize"]


def _spec(**kw: Any) -> MetricSpec:
    return MetricSpec(**kw)


BUILTIN_METRICS: tuple[MetricSpec, ...] = (
    _spec(
        id="success",
        aliases=("success_rate", "is_success", "succeeded"),
        display_name="Success",
        description="the episode ended with status success (abstains on error / no end event)",
        higher_is_better=True,
        kind="binary",
        statistics=("mean", "stderr", "ci"),
        primary=True,
        output_unit="fraction",
    ),
    _spec(
        id="success_once",
        aliases=("success_any",),
        display_name="Success (once)",
        description="ManiSkill: info.success was true at any step",
        higher_is_better=True,
        kind="binary",
        output_unit="fraction",
    ),
    _spec(
        id="success_at_end",
        aliases=("success_final",),
        display_name="Success (at end)",
        description="ManiSkill: info.success at the last step",
        higher_is_better=True,
        kind="binary",
        output_unit="fraction",
    ),
    _spec(
        id="steps",
        aliases=("episode_length", "n_steps"),
        display_name="Steps",
        description="number of environment steps in the episode",
        higher_is_better=False,
        kind="count",
        output_unit="steps",
    ),
    _spec(
        id="safety_interventions",
        aliases=("interventions", "n_interventions"),
        display_name="Safety interventions",
        description="number of safety interventions during the episode",
        higher_is_better=False,
        kind="count",
        output_unit="count",
    ),
    _spec(
        id="return",
        aliases=("episode_return", "reward_sum"),
        display_name="Return",
        description="sum of rewards over the episode",
        higher_is_better=True,
        kind="continuous",
    ),
    _spec(
        id="latency_p95",
        aliases=("latency_ms_p95",),
        display_name="Latency p95",
        description="95th percentile of per-step policy latency",
        higher_is_better=False,
        kind="continuous",
        output_unit="ms",
    ),
)


class MetricRegistry:
    """Metric specs by id, with alias resolution. Registering never mutates a spec."""

    def __init__(self, specs: Iterable[MetricSpec] = ()) -> None:
        self._specs: dict[str, MetricSpec] = {}
        self._names: dict[str, str] = {}
        for spec in specs:
            self.register(spec)

    def register(self, spec: MetricSpec, *, replace_existing: bool = False) -> None:
        """Add ``spec``; an id or alias already taken by another metric is an error."""
        if spec.id in self._specs and not replace_existing:
            raise InputError(f"metric {spec.id!r} is already registered")
        if spec.id in self._specs:
            self._names = {k: v for k, v in self._names.items() if v != spec.id}
        for name in (spec.id, *spec.aliases):
            owner = self._names.get(name)
            if owner is not None and owner != spec.id:
                raise InputError(
                    f"name {name!r} of metric {spec.id!r} is already used by {owner!r}"
                )
            self._names[name] = spec.id
        self._specs[spec.id] = spec

    def resolve(self, name: str) -> str:
        """The canonical id of ``name`` (an id or an alias); KeyError listing known names."""
        try:
            return self._names[name]
        except KeyError:
            raise KeyError(
                f"unknown metric {name!r}; known metrics: {', '.join(sorted(self._specs))} "
                f"(aliases: {', '.join(sorted(set(self._names) - set(self._specs)))})"
            ) from None

    def get(self, name: str) -> MetricSpec:
        """The spec for ``name`` (id or alias)."""
        return self._specs[self.resolve(name)]

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self) -> Any:
        return iter(self._specs.values())

    def __len__(self) -> int:
        return len(self._specs)

    def ids(self) -> tuple[str, ...]:
        return tuple(sorted(self._specs))

    def alias_map(self) -> dict[str, str]:
        """Every known name mapped to its canonical id (for ``pl.col("metric").replace``)."""
        return dict(self._names)

    def directions(self) -> dict[str, Direction]:
        """Every name (id and alias) of a metric with a known direction -> its direction."""
        out: dict[str, Direction] = {}
        for name, mid in self._names.items():
            hib = self._specs[mid].higher_is_better
            if hib is not None:
                out[name] = "maximize" if hib else "minimize"
        return out

    def with_spec(self, spec: MetricSpec) -> MetricRegistry:
        """A copy with ``spec`` added or replaced."""
        out = MetricRegistry(self._specs.values())
        out.register(spec, replace_existing=True)
        return out

    def spec_or_default(self, name: str, kind: MetricKind = "continuous") -> MetricSpec:
        """The registered spec, or an ad-hoc one for a metric only the data knows."""
        if name in self._names:
            return self.get(name)
        return MetricSpec(id=name, kind=kind)


_DEFAULT = MetricRegistry(BUILTIN_METRICS)


def default_registry() -> MetricRegistry:
    """The registry of built-in scorer metrics (a copy: extend it freely)."""
    return MetricRegistry(_DEFAULT)


def get_metric(name: str) -> MetricSpec:
    """The built-in spec for ``name`` (id or alias); KeyError listing the known ones."""
    return _DEFAULT.get(name)


def normalize_expr(spec: MetricSpec, col: str = "value") -> pl.Expr | None:
    """A polars expression mapping raw values to normalized ones, or ``None`` without normalizer."""
    parsed = parse_normalizer(spec.normalizer, spec.id)
    if parsed is None:
        return None
    kind, lo, hi = parsed
    x = pl.col(col)
    return (x - lo) / (hi - lo) if kind == "minmax" else (hi - x) / (hi - lo)


DirectionSource = Literal["argument", "scores", "registry", "convention"]

#: Inspect's built-in scorers (and the score it names ``accuracy``): higher is better by
#: Inspect's own convention (a CORRECT answer scores 1, its metrics are accuracy and mean).
#: Directions only: their kinds follow their values (``match`` is 0/1, ``f1`` and the
#: model-graded scorers' partial credit are not), so they are not registered as specs.
_INSPECT_SCORERS = ("match", "includes", "pattern", "answer", "choice", "exact", "f1",
                    "model_graded_qa", "model_graded_fact", "accuracy")  # fmt: skip
CONVENTION_DIRECTIONS: Mapping[str, Direction] = MappingProxyType(
    dict.fromkeys(_INSPECT_SCORERS, "maximize")
)


def metric_bounds(
    metric: str, registry: MetricRegistry | None = None
) -> tuple[float, float] | None:
    """The range a metric's values are declared to lie in, or None: ``(0, 1)`` for a metric
    the registry declares binary, ``(lo, hi)`` of a declared ``minmax`` normalizer. What a
    dropped value could have been is this range, not the values that happened to be seen."""
    reg = registry or _DEFAULT
    if metric not in reg:
        return None
    spec = reg.get(metric)
    if spec.kind == "binary":
        return (0.0, 1.0)
    parsed = parse_normalizer(spec.normalizer, spec.id)
    return None if parsed is None else (min(parsed[1], parsed[2]), max(parsed[1], parsed[2]))


def resolve_directions(
    metrics: Iterable[str],
    *,
    explicit: Mapping[str, str] | None = None,
    declared: Mapping[str, str] | None = None,
    registry: MetricRegistry | None = None,
) -> dict[str, tuple[Direction, DirectionSource]]:
    """metric -> (direction, where it came from), for the metrics whose direction is known.

    The one rule every comparison uses: an ``explicit`` direction (``directions=``,
    ``--direction``) first, then what the scores declare (a declarative scorer's
    ``goal``/``direction``, a derived output's ``direction``, stored in ``metadata``), then
    the registry (aliases included), then a harness's convention for its own scorers
    (:data:`CONVENTION_DIRECTIONS`: Inspect's, higher is better). A metric in none of them is absent from the result: its
    direction is unknown, and no comparison may call it improved or regressed.
    """
    reg = (registry or default_registry()).directions()
    out: dict[str, tuple[Direction, DirectionSource]] = {}
    tables = (("argument", explicit), ("scores", declared), ("registry", reg),
              ("convention", CONVENTION_DIRECTIONS))  # fmt: skip
    for name in metrics:
        for source, table in tables:
            d = (table or {}).get(name)
            if d is None:
                continue
            if d not in ("maximize", "minimize"):
                raise InputError(
                    f"direction of {name!r} must be 'maximize' or 'minimize', got {d!r}"
                )
            out[name] = (d, source)  # type: ignore[assignment]
            break
    return out


def load_metric_specs(path: str | Path) -> tuple[MetricSpec, ...] | BenchmarkSpec:
    """Metric specs from a YAML or JSON file: a list of specs, ``{metrics: [...]}``, or a
    benchmark (a mapping with ``name`` or ``benchmark_id``, read as :class:`BenchmarkSpec`).

    Errors name the file and the field (``metrics.yaml: BenchmarkSpec.metrics[1].weight: ...``).
    """
    import json

    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise FileNotFoundError(f"{p}: cannot read the metric specs: {exc}") from None
    try:
        if p.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except ValueError as exc:  # json.JSONDecodeError and yaml.YAMLError both
        raise ConfigError(str(p), f"not valid {p.suffix.lstrip('.') or 'YAML'}: {exc}") from None
    except Exception as exc:  # yaml.YAMLError is not a ValueError
        raise ConfigError(str(p), f"not valid YAML: {exc}") from None
    try:
        if isinstance(data, Mapping) and ("name" in data or "benchmark_id" in data):
            return BenchmarkSpec.from_dict(data)
        if isinstance(data, Mapping) and set(data) == {"metrics"}:
            data = data["metrics"]
        if not isinstance(data, list):
            raise ConfigError(
                "", "expected a list of metric specs, {metrics: [...]} or a benchmark mapping"
            )
        return BenchmarkSpec(name=p.stem, metrics=tuple(data)).metrics
    except ConfigError as exc:
        raise ConfigError(f"{p}: {exc.path}" if exc.path else str(p), exc.message) from None
