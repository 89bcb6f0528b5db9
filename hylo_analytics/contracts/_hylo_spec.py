"""The hylo-scorer spec's contracts (Task, Benchmark, Scorer) as frozen dataclasses.

In the store these become rows: a :class:`TaskInstance` is a sample keyed ``"<id>#<seed>"``,
a :class:`Score` is a row of the scores table. The classes exist so that code producing
benchmarks and scores has one checked, hashable definition of each.

v0.2 of the Benchmark contract: a :class:`TaskProvider` generates the task list (procedural
tasks such as RoboCasa layouts; :meth:`Benchmark.from_provider`), ``episodes_per_task``
repeats each (task, seed), ``max_steps`` overrides a task's step limit, and ``upstream``
records an external benchmark's repository, commit and asset hashes. All are in
:meth:`Benchmark.digest`; a benchmark that uses none of them keeps its v0.1 digest.

Repeated episodes keep the key ``"<task id>#<seed>"`` and are *epochs* (``episode_index``
0, 1, ...; the store's ``epoch`` is ``episode_index + 1``), never new seeds: pairing across
runs joins on the key and reduces a key's epochs by their mean, so a run with 3 episodes per
task still pairs key for key with one that ran 1, and a seed stays owned by one split.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from types import MappingProxyType
from typing import Any, Literal, Protocol, runtime_checkable

from hylo_analytics.errors import InputError, InputTypeError

__all__ = [
    "Benchmark",
    "DerivedMetricOutput",
    "InitStateRef",
    "Predicate",
    "Score",
    "SeedInit",
    "SnapshotInit",
    "TaskInstance",
    "TaskProvider",
    "TaskSpec",
    "Upstream",
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
            raise InputError(f"Predicate.kind must be builtin, expr or callable, not {self.kind!r}")
        need = {"builtin": "name", "expr": "expr", "callable": "ref"}[self.kind]
        if not getattr(self, need):
            raise InputError(f"a {self.kind!r} Predicate needs {need}")


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
            raise InputError(f"TaskSpec.id must be non-empty and contain no '#': {self.id!r}")
        if self.max_steps <= 0:
            raise InputError(f"TaskSpec.max_steps must be positive, not {self.max_steps}")
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
    episode_index: int = 0  # the repeat of (task, seed): 0 .. episodes_per_task - 1
    split: str = ""
    max_steps_override: int | None = None  # the benchmark's per-task override, if any

    @property
    def key(self) -> str:
        """``"<task id>#<seed>"``: the primary key for paired comparison across versions."""
        return f"{self.spec.id}#{self.seed}"

    @property
    def epoch(self) -> int:
        """The store's ``epoch`` of this episode (1-based): repeats share the key."""
        return self.episode_index + 1

    @property
    def max_steps(self) -> int:
        """The effective step limit: the benchmark's override, else the task's own."""
        return self.spec.max_steps if self.max_steps_override is None else self.max_steps_override


@runtime_checkable
class TaskProvider(Protocol):
    """A generator of tasks (procedural layouts, sampled scenes): same split and seed, same list.

    ``id`` and ``version`` name the generator; :meth:`Benchmark.from_provider` records them and
    the generation seed in the benchmark's metadata, so the digest changes with any of them.
    """

    id: str
    version: str

    def tasks(self, split: str, seed: int) -> Sequence[TaskSpec]: ...


_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class Upstream:
    """Where an external benchmark came from: repository, commit and the hashes of its assets."""

    repo: str
    commit: str
    assets: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.repo, str) or not self.repo:
            raise InputError(f"Upstream.repo must be a non-empty string, not {self.repo!r}")
        c = self.commit
        if not isinstance(c, str) or not 7 <= len(c) <= 64 or not set(c) <= _HEX:
            raise InputError(
                f"Upstream.commit must be 7 to 64 lowercase hex digits, not {self.commit!r}"
            )
        for name, h in dict(self.assets).items():
            if not isinstance(name, str) or not name or not isinstance(h, str) or not h:
                raise InputError(
                    f"Upstream.assets[{name!r}] must map a name to a hash string, not {h!r}"
                )
        object.__setattr__(self, "assets", _frozen_map(self.assets))

    def to_dict(self) -> dict[str, Any]:
        """The EvalLog's ``benchmark.upstream`` object."""
        return {"repo": self.repo, "commit": self.commit, "assets": dict(self.assets)}


# v0.2 fields at these values are left out of the digest: a v0.1 benchmark keeps its digest
_V02_DEFAULTS: dict[str, Any] = {
    "episodes_per_task": 1,
    "max_steps": {},
    "upstream": None,
    "split_tasks": {},
}


@dataclass(frozen=True)
class Benchmark:
    """Tasks and the seeds of each split; a seed belongs to one split only."""

    id: str
    version: str
    tasks: tuple[TaskSpec, ...]
    splits: Mapping[str, tuple[int, ...]]
    requires_privileged: bool = False
    metadata: Mapping[str, str] = field(default_factory=dict)
    episodes_per_task: int = 1
    max_steps: Mapping[str, int] = field(default_factory=dict)  # task id -> step limit
    upstream: Upstream | None = None
    split_tasks: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # empty: all

    def __post_init__(self) -> None:
        tasks = tuple(self.tasks)
        ids = [t.id for t in tasks]
        dup_tasks = sorted({i for i in ids if ids.count(i) > 1})
        if dup_tasks:
            raise InputError(f"Benchmark {self.id!r}: duplicate task ids {dup_tasks}")
        splits = {name: tuple(int(s) for s in seeds) for name, seeds in self.splits.items()}
        owner: dict[int, str] = {}
        for name, seeds in splits.items():
            if len(set(seeds)) != len(seeds):
                raise InputError(f"Benchmark {self.id!r}: split {name!r} repeats a seed")
            for s in seeds:
                if s in owner:
                    raise InputError(
                        f"Benchmark {self.id!r}: seed {s} is in both split {owner[s]!r} and "
                        f"split {name!r}; a seed may belong to one split only"
                    )
                owner[s] = name
        n = self.episodes_per_task
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise InputError(
                f"Benchmark {self.id!r}: episodes_per_task must be an integer >= 1, not {n!r}"
            )
        known = set(ids)
        for tid, limit in dict(self.max_steps).items():
            if tid not in known:
                raise InputError(f"Benchmark {self.id!r}: max_steps names unknown task {tid!r}")
            if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
                raise InputError(
                    f"Benchmark {self.id!r}: max_steps[{tid!r}] must be a positive integer, "
                    f"not {limit!r}"
                )
        if self.upstream is not None and not isinstance(self.upstream, Upstream):
            raise InputTypeError(f"Benchmark {self.id!r}: upstream must be an Upstream")
        split_tasks = {name: tuple(t) for name, t in self.split_tasks.items()}
        for name, tids in split_tasks.items():
            if name not in splits:
                raise InputError(f"Benchmark {self.id!r}: split_tasks names unknown split {name!r}")
            unknown = sorted(set(tids) - known)
            if unknown:
                raise InputError(f"Benchmark {self.id!r}: split {name!r} lists unknown {unknown}")
        object.__setattr__(self, "tasks", tasks)
        object.__setattr__(self, "splits", _frozen_map(splits))
        object.__setattr__(self, "metadata", _frozen_map(self.metadata))
        object.__setattr__(self, "max_steps", _frozen_map(self.max_steps))
        object.__setattr__(self, "split_tasks", _frozen_map(split_tasks))

    @classmethod
    def from_provider(
        cls,
        provider: TaskProvider,
        splits: Mapping[str, tuple[int, ...]],
        *,
        seed: int,
        **kwargs: Any,
    ) -> Benchmark:
        """The benchmark of ``provider``'s tasks for each split, generated with ``seed``.

        A task id generated for two splits must be the same spec in both (else the id would
        name two tasks). The provider's id, version and seed go into ``metadata`` (and so the
        digest); ``kwargs`` are the other fields (``episodes_per_task``, ``max_steps``, ...).
        """
        if not isinstance(provider, TaskProvider):
            raise InputTypeError(
                f"{provider!r} is not a TaskProvider (id, version, tasks(split, seed))"
            )
        by_id: dict[str, TaskSpec] = {}
        split_tasks: dict[str, tuple[str, ...]] = {}
        for name in splits:
            specs = tuple(provider.tasks(name, seed))
            for t in specs:
                if by_id.setdefault(t.id, t) != t:
                    raise InputError(
                        f"TaskProvider {provider.id!r} generated two different tasks {t.id!r}"
                    )
            split_tasks[name] = tuple(t.id for t in specs)
        metadata = {
            **dict(kwargs.pop("metadata", {})),
            "task_provider": f"{provider.id}@{provider.version}",
            "task_provider_seed": str(seed),
        }
        return cls(
            provider.id,
            provider.version,
            tuple(by_id.values()),
            splits,
            metadata=metadata,
            split_tasks=split_tasks,
            **kwargs,
        )

    def instances(self, split: str) -> list[TaskInstance]:
        """Every (task, seed, repeat) of ``split``: tasks in order, then seeds, then repeats."""
        if split not in self.splits:
            raise KeyError(
                f"Benchmark {self.id!r} has no split {split!r}; splits: {sorted(self.splits)}"
            )
        seeds = self.splits[split]
        only = self.split_tasks.get(split)
        tasks = self.tasks if only is None else tuple(t for t in self.tasks if t.id in only)
        return [
            TaskInstance(
                spec=t,
                seed=s,
                episode_index=e,
                split=split,
                max_steps_override=self.max_steps.get(t.id),
            )
            for t in tasks
            for s in seeds
            for e in range(self.episodes_per_task)
        ]

    def digest(self) -> str:
        """sha256 of the canonical JSON of the benchmark (tasks, splits, flags, metadata, and
        the v0.2 fields that are not at their defaults)."""
        plain = _plain(self)
        for name, default in _V02_DEFAULTS.items():
            if plain[name] == default:
                del plain[name]
        return hashlib.sha256(canonical_json(plain).encode("utf-8")).hexdigest()

    def evallog_fields(self) -> dict[str, Any]:
        """The v0.2 members of an EvalLog's ``benchmark`` object (those not at defaults)."""
        out: dict[str, Any] = {}
        if self.episodes_per_task != 1:
            out["episodes_per_task"] = self.episodes_per_task
        if self.max_steps:
            out["max_steps"] = dict(self.max_steps)
        if self.upstream is not None:
            out["upstream"] = self.upstream.to_dict()
        return out

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
                raise InputTypeError(
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
            raise InputError(f"direction must be maximize or minimize, not {self.direction!r}")
        if self.role not in ("objective", "constraint", "diagnostic"):
            raise InputError(f"role must be objective, constraint or diagnostic, not {self.role!r}")
