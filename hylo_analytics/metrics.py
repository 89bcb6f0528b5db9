"""Metric metadata: what a metric's values mean and how to aggregate them.

A :class:`MetricSpec` (WorldFoundry's contract) is declarative: identity, aliases, unit, score
direction, normalizer and aggregation policy. It does not compute anything; the aggregate reads
it to decide, for example, that ``success`` is a 0/1 metric (Wilson interval, errors-as-failures
rate) and that fewer ``steps`` is better. The registry resolves aliases, so data written under
``success_rate`` and ``success`` land in one metric.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

import polars as pl

__all__ = [
    "BUILTIN_METRICS",
    "METRIC_SPEC_SCHEMA_VERSION",
    "Direction",
    "MetricKind",
    "MetricRegistry",
    "MetricSpec",
    "default_registry",
    "get_metric",
    "normalize_expr",
    "resolve_directions",
]

METRIC_SPEC_SCHEMA_VERSION = "worldfoundry.metric_spec/v1"
MetricKind = Literal["binary", "count", "continuous"]
Direction = Literal["maximize", "minimize"]


def _parse_normalizer(text: str | None, metric: str) -> tuple[str, float, float] | None:
    if text is None or text == "identity":
        return None
    parts: Sequence[str] = text.split(":")
    try:
        kind, lo, hi = parts[0], float(parts[1]), float(parts[2])
        ok = len(parts) == 3 and kind in ("minmax", "inverse_minmax") and hi != lo
    except (IndexError, ValueError):
        ok = False
    if not ok:
        raise ValueError(
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
            raise ValueError("MetricSpec.id must be a non-empty string")
        if self.kind not in ("binary", "count", "continuous"):
            raise ValueError(
                f"MetricSpec {self.id!r}: kind must be binary, count or continuous, got {self.kind!r}"
            )
        _parse_normalizer(self.normalizer, self.id)
        object.__setattr__(self, "aliases", tuple(self.aliases))
        object.__setattr__(self, "metadata", MappingProxyType(dict(self.metadata)))

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
            raise ValueError(
                f"MetricSpec.from_dict: unknown fields {unknown}; known: {sorted(known)}"
            )
        for key in ("aliases", "required_artifacts", "statistics", "tags"):
            if key in d:
                d[key] = tuple(d[key])
        return cls(**d)


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
            raise ValueError(f"metric {spec.id!r} is already registered")
        if spec.id in self._specs:
            self._names = {k: v for k, v in self._names.items() if v != spec.id}
        for name in (spec.id, *spec.aliases):
            owner = self._names.get(name)
            if owner is not None and owner != spec.id:
                raise ValueError(
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
    parsed = _parse_normalizer(spec.normalizer, spec.id)
    if parsed is None:
        return None
    kind, lo, hi = parsed
    x = pl.col(col)
    return (x - lo) / (hi - lo) if kind == "minmax" else (hi - x) / (hi - lo)


DirectionSource = Literal["argument", "scores", "registry"]


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
    the registry (aliases included). A metric in none of them is absent from the result: its
    direction is unknown, and no comparison may call it improved or regressed.
    """
    reg = (registry or default_registry()).directions()
    out: dict[str, tuple[Direction, DirectionSource]] = {}
    for name in metrics:
        for source, table in (("argument", explicit), ("scores", declared), ("registry", reg)):
            d = (table or {}).get(name)
            if d is None:
                continue
            if d not in ("maximize", "minimize"):
                raise ValueError(
                    f"direction of {name!r} must be 'maximize' or 'minimize', got {d!r}"
                )
            out[name] = (d, source)  # type: ignore[assignment]
            break
    return out
