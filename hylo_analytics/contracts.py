"""The spec's contracts (hylo-scorer: Task, Benchmark, Scorer) as frozen dataclasses.

In the store these become rows: a :class:`TaskInstance` is a sample keyed ``"<id>#<seed>"``,
a :class:`Score` is a row of the scores table. The classes exist so that code producing
benchmarks and scores has one checked, hashable definition of each.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from types import MappingProxyType
from typing import Any, Literal

__all__ = [
    "Benchmark",
    "DerivedMetricOutput",
    "InitStateRef",
    "Predicate",
    "Score",
    "SeedInit",
    "SnapshotInit",
    "TaskInstance",
    "TaskSpec",
    "canonical_json",
]


def _plain(obj: Any) -> Any:
    if is_dataclass(obj) and not isinstance(obj, type):
        out = {f.name: _plain(getattr(obj, f.name)) for f in fields(obj)}
        out["__kind__"] = type(obj).__name__
        return out
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, tuple | list):
        return [_plain(v) for v in obj]
    return obj


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no whitespace: the same bytes in every process."""
    return json.dumps(
        _plain(obj), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def _digest(obj: Any) -> str:
    return hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()


def _frozen_map(m: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(m or {}))


@dataclass(frozen=True)
class SeedInit:
    """The environment is reset from the episode's seed."""


@dataclass(frozen=True)
class InitStateRef:
    """Initial states stored elsewhere (e.g. LIBERO's ``.pruned_init`` files)."""

    uri: str
    count: int


@dataclass(frozen=True)
class SnapshotInit:
    """A saved simulator snapshot."""

    uri: str


InitSpec = SeedInit | InitStateRef | SnapshotInit


@dataclass(frozen=True)
class Predicate:
    """A success condition: a built-in name, a declarative expression, or a callable ref."""

    kind: Literal["builtin", "expr", "callable"]
    name: str = ""
    expr: str | None = None
    ref: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("builtin", "expr", "callable"):
            raise ValueError(f"Predicate.kind must be builtin, expr or callable, not {self.kind!r}")
        need = {"builtin": "name", "expr": "expr", "callable": "ref"}[self.kind]
        if not getattr(self, need):
            raise ValueError(f"a {self.kind!r} Predicate needs {need}")


@dataclass(frozen=True)
class TaskSpec:
    """One task: what to do, how it starts and how success is decided."""

    id: str
    version: str
    instruction: str
    init: InitSpec
    success: Predicate
    max_steps: int
    params: Mapping[str, Any] = field(default_factory=dict)
    tags: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.id or "#" in self.id:
            raise ValueError(f"TaskSpec.id must be non-empty and contain no '#': {self.id!r}")
        if self.max_steps <= 0:
            raise ValueError(f"TaskSpec.max_steps must be positive, not {self.max_steps}")
        object.__setattr__(self, "params", _frozen_map(self.params))
        object.__setattr__(self, "tags", tuple(self.tags))

    def digest(self) -> str:
        """sha256 of the canonical JSON of the spec."""
        return _digest(self)

    def __hash__(self) -> int:
        return hash(self.digest())


@dataclass(frozen=True)
class TaskInstance:
    """A task with a seed: the unit that is run, scored and paired across agents."""

    spec: TaskSpec
    seed: int
    episode_index: int = 0
    split: str = ""

    @property
    def key(self) -> str:
        """``"<task id>#<seed>"``: the primary key for paired comparison across versions."""
        return f"{self.spec.id}#{self.seed}"


@dataclass(frozen=True)
class Benchmark:
    """Tasks and the seeds of each split; a seed belongs to one split only."""

    id: str
    version: str
    tasks: tuple[TaskSpec, ...]
    splits: Mapping[str, tuple[int, ...]]
    requires_privileged: bool = False
    metadata: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        tasks = tuple(self.tasks)
        ids = [t.id for t in tasks]
        dup_tasks = sorted({i for i in ids if ids.count(i) > 1})
        if dup_tasks:
            raise ValueError(f"Benchmark {self.id!r}: duplicate task ids {dup_tasks}")
        splits = {name: tuple(int(s) for s in seeds) for name, seeds in self.splits.items()}
        owner: dict[int, str] = {}
        for name, seeds in splits.items():
            if len(set(seeds)) != len(seeds):
                raise ValueError(f"Benchmark {self.id!r}: split {name!r} repeats a seed")
            for s in seeds:
                if s in owner:
                    raise ValueError(
                        f"Benchmark {self.id!r}: seed {s} is in both split {owner[s]!r} and "
                        f"split {name!r}; a seed may belong to one split only"
                    )
                owner[s] = name
        object.__setattr__(self, "tasks", tasks)
        object.__setattr__(self, "splits", _frozen_map(splits))
        object.__setattr__(self, "metadata", _frozen_map(self.metadata))

    def instances(self, split: str) -> list[TaskInstance]:
        """Every (task, seed) of ``split``, tasks in order, seeds in order."""
        if split not in self.splits:
            raise KeyError(
                f"Benchmark {self.id!r} has no split {split!r}; splits: {sorted(self.splits)}"
            )
        seeds = self.splits[split]
        return [
            TaskInstance(spec=t, seed=s, episode_index=i, split=split)
            for t in self.tasks
            for i, s in enumerate(seeds)
        ]

    def digest(self) -> str:
        """sha256 of the canonical JSON of the benchmark (tasks, splits, flags, metadata)."""
        return _digest(self)

    def __hash__(self) -> int:
        return hash(self.digest())


@dataclass(frozen=True)
class Score:
    """A scorer's answer for one episode; ``value=None`` is an abstention, never a zero."""

    value: float | None
    explanation: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.value is not None:
            if isinstance(self.value, bool) or not isinstance(self.value, int | float):
                raise TypeError(
                    f"Score.value must be a float or None, not {type(self.value).__name__}"
                )
            object.__setattr__(self, "value", float(self.value))
        object.__setattr__(self, "metadata", _frozen_map(self.metadata))

    @property
    def abstained(self) -> bool:
        return self.value is None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["metadata"] = dict(self.metadata)
        return d


@dataclass(frozen=True)
class DerivedMetricOutput:
    """What a derived metric is called and means (Autobench's ``output`` block).

    Shared by every deriver (token cost, paired baseline, ...), so a derived score carries the
    same semantics wherever it was computed.
    """

    name: str
    semantic_type: str | None = None
    unit: str | None = None
    direction: Literal["maximize", "minimize"] = "maximize"
    role: Literal["objective", "constraint", "diagnostic"] = "objective"

    def __post_init__(self) -> None:
        if self.direction not in ("maximize", "minimize"):
            raise ValueError(f"direction must be maximize or minimize, not {self.direction!r}")
        if self.role not in ("objective", "constraint", "diagnostic"):
            raise ValueError(f"role must be objective, constraint or diagnostic, not {self.role!r}")
