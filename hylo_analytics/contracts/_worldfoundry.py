"""WorldFoundry's metric, task and benchmark contracts, frozen, with ``from_dict`` / ``to_dict``.

:class:`MetricSpec` says what a metric's values mean and how to report them; the registry
that resolves its aliases is :mod:`hylo_analytics.metrics`. :class:`EvaluationProtocolSpec`,
:class:`WorldTaskConfig` and :class:`BenchmarkSpec` are the rest of the spec: their
``from_dict`` / ``to_dict`` round-trip, and errors name the field
(``BenchmarkSpec.metrics[1].aggregator``), so a benchmark file is checked whole when read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import InitVar, dataclass, field, fields, is_dataclass
from types import MappingProxyType
from typing import Any, Literal

from hylo_analytics.errors import ConfigError, InputError

__all__ = [
    "AGGREGATORS",
    "BENCHMARK_SPEC_SCHEMA_VERSION",
    "EVALUATION_PROTOCOL_SCHEMA_VERSION",
    "METRIC_SPEC_SCHEMA_VERSION",
    "SPEC_STATISTICS",
    "WORLD_TASK_CONFIG_SCHEMA_VERSION",
    "BenchmarkSpec",
    "EvaluationProtocolSpec",
    "MetricKind",
    "MetricSpec",
    "WorldTaskConfig",
    "parse_normalizer",
]

METRIC_SPEC_SCHEMA_VERSION = "worldfoundry.metric_spec/v1"
EVALUATION_PROTOCOL_SCHEMA_VERSION = "worldfoundry.evaluation_protocol/v1"
WORLD_TASK_CONFIG_SCHEMA_VERSION = "worldfoundry.world_task_config/v1"
BENCHMARK_SPEC_SCHEMA_VERSION = "worldfoundry.benchmark_spec/v1"
# Statistics a metric's value can be: each is a column of ``aggregate_scores`` (``sum`` on
# request), so the scorecard reads the figure the engine computed and never recomputes it.
AGGREGATORS: tuple[str, ...] = ("mean", "median", "sum", "min", "max", "p95", "iqm")
# What ``statistics`` may name: the aggregators, the engine's other columns, and ``ci`` (the
# interval, always shown by a scorecard). tests/test_metrics.py holds this equal to the engine.
SPEC_STATISTICS: tuple[str, ...] = (
    *AGGREGATORS, "std", "stderr", "optimality_gap", "normalized_mean", "ci",
)  # fmt: skip
MetricKind = Literal["binary", "count", "continuous"]


def parse_normalizer(text: str | None, metric: str) -> tuple[str, float, float] | None:
    """``(kind, lo, hi)`` of a normalizer string, or ``None`` for none (``identity``)."""
    if text is None or text == "identity":
        return None
    parts: Sequence[str] = text.split(":")
    try:
        kind, lo, hi = parts[0], float(parts[1]), float(parts[2])
        ok = len(parts) == 3 and kind in ("minmax", "inverse_minmax") and hi != lo
    except (IndexError, ValueError):
        ok = False
    if not ok:
        raise InputError(
            f"MetricSpec {metric!r}: normalizer {text!r} is not understood; expected None, "
            "'identity', 'minmax:<lo>:<hi>' or 'inverse_minmax:<lo>:<hi>' with lo != hi"
        )
    return kind, lo, hi


@dataclass(frozen=True)
class MetricSpec:
    """Declarative description of a metric (WorldFoundry ``MetricSpec``, plus ``kind``).

    ``kind`` is ours: ``binary`` metrics take 0/1 values and get exact binomial intervals;
    ``count`` and ``continuous`` get bootstrap intervals. ``normalizer`` is ``None`` or
    ``"minmax:<lo>:<hi>"`` (``(x - lo) / (hi - lo)``) or ``"inverse_minmax:<lo>:<hi>"``
    (``(hi - x) / (hi - lo)``, for lower-is-better metrics), so normalized values are higher
    is better on [0, 1].
    """

    id: str
    aliases: tuple[str, ...] = ()
    display_name: str = ""
    description: str = ""
    version: str = "1.0"
    family: str = ""
    capability: str = ""
    requires_reference: bool = False
    required_artifacts: tuple[str, ...] = ()
    output_unit: str = ""
    higher_is_better: bool | None = None
    normalizer: str | None = None
    aggregator: str = "mean"
    statistics: tuple[str, ...] = ("mean",)
    primary: bool = False
    weight: float = 1.0
    implementation: str | None = None
    tags: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    kind: MetricKind = "continuous"
    schema_version: str = METRIC_SPEC_SCHEMA_VERSION

    def __post_init__(self) -> None:
        if not self.id:
            raise InputError("MetricSpec.id must be a non-empty string")
        if self.kind not in ("binary", "count", "continuous"):
            raise InputError(
                f"MetricSpec {self.id!r}: kind must be binary, count or continuous, got {self.kind!r}"
            )
        parse_normalizer(self.normalizer, self.id)
        if self.aggregator not in AGGREGATORS:
            raise ConfigError(
                "MetricSpec.aggregator",
                f"metric {self.id!r}: {self.aggregator!r} is not a known aggregator; "
                f"known: {', '.join(AGGREGATORS)}",
            )
        object.__setattr__(self, "statistics", tuple(self.statistics))
        unknown = [s for s in self.statistics if s not in SPEC_STATISTICS]
        if unknown:
            raise ConfigError(
                "MetricSpec.statistics",
                f"metric {self.id!r}: {unknown} are not known statistics; "
                f"known: {', '.join(SPEC_STATISTICS)}",
            )
        w = self.weight
        if isinstance(w, bool) or not isinstance(w, int | float) or not 0 <= w < float("inf"):
            raise ConfigError(
                "MetricSpec.weight", f"metric {self.id!r}: expected a finite number >= 0, got {w!r}"
            )
        object.__setattr__(self, "weight", float(w))
        object.__setattr__(self, "aliases", tuple(self.aliases))
        object.__setattr__(self, "required_artifacts", tuple(self.required_artifacts))
        object.__setattr__(self, "tags", tuple(self.tags))
        object.__setattr__(self, "metadata", MappingProxyType(dict(self.metadata or {})))

    @property
    def metric_id(self) -> str:
        return self.id

    @property
    def label(self) -> str:
        """The display name, or the id when none is set."""
        return self.display_name or self.id

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MetricSpec:
        """Build from a mapping; accepts ``metric_id`` for ``id`` and lists for tuples."""
        d = dict(data)
        if "id" not in d and "metric_id" in d:
            d["id"] = d.pop("metric_id")
        d.pop("metric_id", None)
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(d) - known)
        if unknown:
            raise InputError(
                f"MetricSpec.from_dict: unknown fields {unknown}; known: {sorted(known)}"
            )
        for key in ("aliases", "required_artifacts", "statistics", "tags"):
            if key in d:
                d[key] = _strings(d[key], key, "MetricSpec")
        if d.get("metadata") is None:
            d.pop("metadata", None)
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON/YAML-ready mapping; ``MetricSpec.from_dict(spec.to_dict()) == spec``."""
        out: dict[str, Any] = _plain(self)
        return out


def _strings(value: Any, field_name: str, owner: str) -> tuple[str, ...]:
    """A tuple of strings from a list/tuple (a bare string is one item, not its letters)."""
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{owner}.{field_name}", f"expected a list of strings, got {value!r}")
    return tuple(value)


def _mapping(value: Any, field_name: str, owner: str) -> Mapping[str, Any]:
    if value is None:
        return MappingProxyType({})
    if not isinstance(value, Mapping):
        raise ConfigError(f"{owner}.{field_name}", f"expected a mapping, got {value!r}")
    return MappingProxyType(dict(value))


def _plain(obj: Any) -> Any:
    """Dataclasses, tuples and mapping proxies as dicts and lists, for JSON and YAML."""
    if is_dataclass(obj):
        return {f.name: _plain(getattr(obj, f.name)) for f in fields(obj)}
    if isinstance(obj, Mapping):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    return obj


def _known_fields(cls: type, data: Any, owner: str, alias: str) -> dict[str, Any]:
    if not isinstance(data, Mapping):
        raise ConfigError(owner, f"expected a mapping, got {data!r}")
    d = dict(data)
    unknown = sorted(set(d) - set(cls.__dataclass_fields__) - {alias})  # type: ignore[attr-defined]
    if unknown:
        raise ConfigError(
            f"{owner}.{unknown[0]}",
            f"unknown field; known: {sorted(cls.__dataclass_fields__)}",  # type: ignore[attr-defined]
        )
    return d


def _name(value: Any, field_name: str, owner: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{owner}.{field_name}", f"expected a non-empty string, got {value!r}")
    return value


@dataclass(frozen=True)
class EvaluationProtocolSpec:
    """A named evaluation behaviour grouping metric ids (WorldFoundry's contract).

    A scorecard given a protocol scores exactly its ``metric_ids``. Extra keys of a catalog
    entry are kept in ``metadata`` by :meth:`from_mapping`, never dropped.
    """

    name: str
    metric_ids: tuple[str, ...] = ()
    metric_groups: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    schema_version: str = EVALUATION_PROTOCOL_SCHEMA_VERSION

    def __post_init__(self) -> None:
        owner = "EvaluationProtocolSpec"
        _name(self.name, "name", owner)
        object.__setattr__(self, "metric_ids", _strings(self.metric_ids, "metric_ids", owner))
        groups = _strings(self.metric_groups, "metric_groups", owner)
        object.__setattr__(self, "metric_groups", groups)
        object.__setattr__(self, "metadata", _mapping(self.metadata, "metadata", owner))

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> EvaluationProtocolSpec:
        """Build from a catalog entry; keys that are not fields go into ``metadata``."""
        if not isinstance(data, Mapping):
            raise ConfigError("EvaluationProtocolSpec", f"expected a mapping, got {data!r}")
        known = set(cls.__dataclass_fields__)
        d = {k: v for k, v in data.items() if k in known}
        extra = {k: v for k, v in data.items() if k not in known}
        if extra:
            d["metadata"] = {**dict(d.get("metadata") or {}), **extra}
        if "name" not in d:
            raise ConfigError("EvaluationProtocolSpec.name", "missing required field")
        return cls(**d)

    from_dict = from_mapping

    @classmethod
    def coerce_many(cls, value: Any) -> tuple[EvaluationProtocolSpec, ...]:
        """Protocols from what catalogs hold: ``None``, a name, a spec, a mapping with
        ``name``, a mapping name -> entry (or -> metric ids), or a list of any of these."""
        if value is None:
            return ()
        if isinstance(value, cls):
            return (value,)
        if isinstance(value, str):
            return (cls(name=value),)
        if isinstance(value, Mapping):
            if "name" in value:
                return (cls.from_mapping(value),)
            out = []
            for name, entry in value.items():
                if isinstance(entry, Mapping):
                    out.append(cls.from_mapping({"name": name, **entry}))
                else:
                    out.append(cls(name=name, metric_ids=entry or ()))
            return tuple(out)
        if isinstance(value, list | tuple):
            return tuple(p for item in value for p in cls.coerce_many(item))
        raise ConfigError("EvaluationProtocolSpec", f"cannot make a protocol of {value!r}")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = _plain(self)
        return out


@dataclass(frozen=True)
class WorldTaskConfig:
    """One task's inputs, outputs, generation defaults and metric set (WorldFoundry).

    ``name`` or ``task_id`` names it (``task_id`` is an alias of ``name``).
    """

    name: str | None = None
    task_id: InitVar[str | None] = None
    protocol: str = "open_loop"
    evaluation_protocol: str = "reference_metrics"
    capability_track: str = "core_video"
    schema_type: str = "sample"
    input_keys: tuple[str, ...] = ()
    output_keys: tuple[str, ...] = ("generated_video",)
    metric_ids: tuple[str, ...] = ()
    metric_groups: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    description: str = ""
    data: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    generation_defaults: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    metadata: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    schema_version: str = WORLD_TASK_CONFIG_SCHEMA_VERSION

    def __post_init__(self, task_id: str | None) -> None:
        owner = "WorldTaskConfig"
        if task_id is not None and self.name is not None and task_id != self.name:
            raise ConfigError(f"{owner}.task_id", f"{task_id!r} differs from name {self.name!r}")
        object.__setattr__(self, "name", _name(self.name or task_id, "name", owner))
        for key in ("protocol", "evaluation_protocol", "capability_track", "schema_type"):
            _name(getattr(self, key), key, owner)
        if not isinstance(self.description, str):
            raise ConfigError(
                f"{owner}.description", f"expected a string, got {self.description!r}"
            )
        for key in ("input_keys", "output_keys", "metric_ids", "metric_groups", "tags"):
            object.__setattr__(self, key, _strings(getattr(self, key), key, owner))
        for key in ("data", "generation_defaults", "metadata"):
            object.__setattr__(self, key, _mapping(getattr(self, key), key, owner))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WorldTaskConfig:
        """Build from a mapping; ``task_id`` is accepted for ``name``, lists for tuples."""
        return cls(**_known_fields(cls, data, "WorldTaskConfig", alias="task_id"))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = _plain(self)
        return out


@dataclass(frozen=True)
class BenchmarkSpec:
    """Tasks, metrics, splits and dataset metadata of a benchmark (WorldFoundry).

    ``tasks`` are coerced to :class:`WorldTaskConfig` and ``metrics`` to :class:`MetricSpec`
    (mappings are accepted), so a benchmark file is validated whole when it is read; a
    scorecard given a benchmark scores its metrics.
    """

    name: str | None = None
    benchmark_id: InitVar[str | None] = None
    version: str = "1.0"
    tasks: tuple[WorldTaskConfig, ...] = ()
    metrics: tuple[MetricSpec, ...] = ()
    splits: tuple[str, ...] = ("default",)
    tags: tuple[str, ...] = ()
    description: str = ""
    dataset_root: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    schema_version: str = BENCHMARK_SPEC_SCHEMA_VERSION

    def __post_init__(self, benchmark_id: str | None) -> None:
        owner = "BenchmarkSpec"
        if benchmark_id is not None and self.name is not None and benchmark_id != self.name:
            raise ConfigError(
                f"{owner}.benchmark_id", f"{benchmark_id!r} differs from name {self.name!r}"
            )
        object.__setattr__(self, "name", _name(self.name or benchmark_id, "name", owner))
        _name(self.version, "version", owner)
        if self.dataset_root is not None:
            _name(self.dataset_root, "dataset_root", owner)
        object.__setattr__(self, "tasks", _coerce(self.tasks, "tasks", WorldTaskConfig))
        object.__setattr__(self, "metrics", _coerce(self.metrics, "metrics", MetricSpec))
        ids = [m.id for m in self.metrics]
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if dup:
            raise ConfigError(f"{owner}.metrics", f"metric {dup[0]!r} is declared twice")
        for key in ("splits", "tags"):
            object.__setattr__(self, key, _strings(getattr(self, key), key, owner))
        object.__setattr__(self, "metadata", _mapping(self.metadata, "metadata", owner))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BenchmarkSpec:
        """Build from a mapping; ``benchmark_id`` is accepted for ``name``."""
        return cls(**_known_fields(cls, data, "BenchmarkSpec", alias="benchmark_id"))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = _plain(self)
        return out


# ``task_id`` and ``benchmark_id`` are constructor aliases of ``name`` (InitVars) and, once
# built, read-only properties returning it, as WorldFoundry's signatures have them.
setattr(WorldTaskConfig, "task_id", property(lambda self: self.name, doc="The task's name."))  # noqa: B010
setattr(BenchmarkSpec, "benchmark_id", property(lambda self: self.name, doc="The name."))  # noqa: B010


def _coerce(items: Any, field_name: str, cls: Any) -> tuple[Any, ...]:
    if not isinstance(items, list | tuple):
        raise ConfigError(f"BenchmarkSpec.{field_name}", f"expected a list, got {items!r}")
    out = []
    for i, item in enumerate(items):
        if isinstance(item, cls):
            out.append(item)
            continue
        where = f"BenchmarkSpec.{field_name}[{i}]"
        if not isinstance(item, Mapping):
            raise ConfigError(where, f"expected a {cls.__name__} or a mapping, got {item!r}")
        try:
            out.append(cls.from_dict(item))
        except ConfigError as exc:
            raise ConfigError(f"{where}.{exc.path.split('.', 1)[-1]}", exc.message) from None
        except (ValueError, TypeError) as exc:
            raise ConfigError(where, str(exc)) from None
    return tuple(out)
