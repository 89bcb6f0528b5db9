"""The spec's contracts: keys, digests, seed ownership, abstaining scores."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hylo_analytics.contracts import (
    Benchmark,
    InitStateRef,
    Predicate,
    Score,
    SeedInit,
    TaskInstance,
    TaskSpec,
)


def _task(tid: str = "libero_10/put_bowl", **kw: object) -> TaskSpec:
    args: dict[str, object] = dict(
        id=tid,
        version="1",
        instruction="put the bowl on the plate",
        init=InitStateRef("libero://libero_10/put_bowl.pruned_init", 50),
        success=Predicate("expr", expr="(On bowl plate)"),
        max_steps=300,
        params={"camera": "agentview", "res": [128, 128]},
        tags=("libero",),
    )
    args.update(kw)
    return TaskSpec(**args)  # type: ignore[arg-type]


def test_instance_key() -> None:
    assert TaskInstance(_task(), seed=10000).key == "libero_10/put_bowl#10000"


def test_digest_is_stable_across_processes() -> None:
    # by path: autorank and ppi-python (dev dependencies) install a top-level ``tests`` package
    code = "import runpy; print(runpy.run_path('tests/test_contracts.py')['_task']().digest())"
    other = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "123", "PATH": ""},
        cwd=str(__import__("pathlib").Path(__file__).parents[1]),
    )
    assert other.stdout.strip() == _task().digest()
    assert len(_task().digest()) == 64


def test_digest_ignores_mapping_order_but_not_content() -> None:
    a = _task(params={"a": 1, "b": 2})
    b = _task(params={"b": 2, "a": 1})
    assert a.digest() == b.digest() and a == b
    assert _task(params={"a": 1, "b": 3}).digest() != a.digest()
    assert _task(init=SeedInit()).digest() != _task().digest()


def test_benchmark_refuses_a_seed_in_two_splits() -> None:
    with pytest.raises(ValueError, match="seed 3 is in both split 'train' and split 'heldout'"):
        Benchmark("b", "1", (_task(),), {"train": (1, 2, 3), "heldout": (3, 4)})


def test_benchmark_instances_and_digest() -> None:
    t1, t2 = _task("t/a"), _task("t/b")
    bench = Benchmark("b", "1", (t1, t2), {"train": (1, 2), "heldout": (7,)})
    keys = [i.key for i in bench.instances("train")]
    assert keys == ["t/a#1", "t/a#2", "t/b#1", "t/b#2"]
    assert [i.split for i in bench.instances("heldout")] == ["heldout", "heldout"]
    with pytest.raises(KeyError, match="no split 'val'"):
        bench.instances("val")
    same = Benchmark("b", "1", (t1, t2), {"heldout": (7,), "train": (1, 2)})
    assert same.digest() == bench.digest()
    assert Benchmark("b", "2", (t1, t2), {"train": (1, 2)}).digest() != bench.digest()


def test_contracts_are_frozen() -> None:
    t = _task()
    with pytest.raises(AttributeError):
        t.id = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        t.params["camera"] = "wrist"  # type: ignore[index]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"id": "a#b"}, "no '#'"), ({"max_steps": 0}, "positive")],
)
def test_task_spec_validation(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _task(**kwargs)


def test_predicate_needs_its_field() -> None:
    with pytest.raises(ValueError, match="needs ref"):
        Predicate("callable")
    assert Predicate("builtin", name="success").name == "success"


@given(st.one_of(st.none(), st.floats(allow_nan=False), st.integers(-(10**6), 10**6)))
def test_score_value_is_float_or_none(v: float | int | None) -> None:
    s = Score(v)
    assert s.abstained == (v is None)
    assert s.value is None or isinstance(s.value, float)


@pytest.mark.parametrize("bad", [True, "1.0", [1]])
def test_score_rejects_non_numbers(bad: object) -> None:
    with pytest.raises(TypeError):
        Score(bad)  # type: ignore[arg-type]


# -- v0.2: TaskProvider, episodes_per_task, max_steps overrides, upstream ----------------


class _Layouts:
    """A small procedural provider: kitchen layouts sampled with numpy's seeded RNG."""

    id = "robocasa-lite"
    version = "0.1"

    def tasks(self, split: str, seed: int) -> list[TaskSpec]:
        import numpy as np

        rng = np.random.default_rng([seed, len(split)])
        n = 2 if split == "train" else 1
        return [
            _task(
                f"kitchen/{split}-{i}",
                init=SeedInit(),
                success=Predicate("callable", ref="robocasa.tasks:PnP._check_success"),
                params={"layout": int(rng.integers(0, 120)), "style": int(rng.integers(0, 11))},
            )
            for i in range(n)
        ]


def test_task_provider_builds_a_deterministic_benchmark() -> None:
    from hylo_analytics.contracts import TaskProvider

    assert isinstance(_Layouts(), TaskProvider)
    assert not isinstance(object(), TaskProvider)
    splits = {"train": (1, 2), "heldout": (9,)}
    a = Benchmark.from_provider(_Layouts(), splits, seed=7)
    b = Benchmark.from_provider(_Layouts(), splits, seed=7)
    assert a.digest() == b.digest() and a.tasks == b.tasks
    assert Benchmark.from_provider(_Layouts(), splits, seed=8).digest() != a.digest()
    assert a.metadata["task_provider"] == "robocasa-lite@0.1"
    # each split runs the tasks generated for it
    assert [i.key for i in a.instances("heldout")] == ["kitchen/heldout-0#9"]
    assert {i.spec.id for i in a.instances("train")} == {"kitchen/train-0", "kitchen/train-1"}
    with pytest.raises(TypeError, match="not a TaskProvider"):
        Benchmark.from_provider(object(), splits, seed=7)  # type: ignore[arg-type]


def test_episodes_per_task_are_epochs_of_one_key() -> None:
    bench = Benchmark("b", "1", (_task("t/a"),), {"train": (1, 2)}, episodes_per_task=3)
    inst = bench.instances("train")
    assert [(i.key, i.episode_index, i.epoch) for i in inst] == [
        ("t/a#1", 0, 1),
        ("t/a#1", 1, 2),
        ("t/a#1", 2, 3),
        ("t/a#2", 0, 1),
        ("t/a#2", 1, 2),
        ("t/a#2", 2, 3),
    ]
    assert len({(i.key, i.epoch) for i in inst}) == len(inst)  # unique in the store
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match="episodes_per_task must be an integer >= 1"):
            Benchmark("b", "1", (_task("t/a"),), {"train": (1,)}, episodes_per_task=bad)  # type: ignore[arg-type]


def test_max_steps_overrides_are_validated_and_effective() -> None:
    t1, t2 = _task("t/a"), _task("t/b")
    bench = Benchmark("b", "1", (t1, t2), {"train": (1,)}, max_steps={"t/b": 50})
    assert [(i.spec.id, i.max_steps) for i in bench.instances("train")] == [
        ("t/a", 300),
        ("t/b", 50),
    ]
    with pytest.raises(ValueError, match="unknown task 't/c'"):
        Benchmark("b", "1", (t1,), {"train": (1,)}, max_steps={"t/c": 5})
    for bad in (0, -3, True, "10"):
        with pytest.raises(ValueError, match=r"max_steps\['t/a'\] must be a positive integer"):
            Benchmark("b", "1", (t1,), {"train": (1,)}, max_steps={"t/a": bad})  # type: ignore[dict-item]


def test_upstream_is_validated() -> None:
    from hylo_analytics.contracts import Upstream

    up = Upstream("https://github.com/robocasa/robocasa", "a1b2c3d4", {"objects.zip": "sha256:ab"})
    assert up.to_dict()["assets"] == {"objects.zip": "sha256:ab"}
    with pytest.raises(ValueError, match="hex digits"):
        Upstream("r", "main")
    with pytest.raises(ValueError, match="non-empty string"):
        Upstream("", "a1b2c3d4")
    with pytest.raises(ValueError, match=r"assets\['x'\]"):
        Upstream("r", "a1b2c3d4", {"x": ""})


def test_v02_fields_are_in_the_digest_and_v01_digest_is_unchanged() -> None:
    from hylo_analytics.contracts import Upstream

    t1, t2 = _task("t/a"), _task("t/b")
    base = Benchmark("b", "1", (t1, t2), {"train": (1, 2), "heldout": (7,)}, metadata={"m": "x"})
    # the digest this benchmark had before v0.2 fields existed
    assert base.digest() == "e9418ee53b9ba5d00d7b9e8a7c0a80a6203487c4b2ec8096324e6c090bef75c3"
    args = (base.id, base.version, base.tasks, base.splits)
    up = Upstream("https://example.org/bench", "a1b2c3d4", {"assets.zip": "sha256:00"})
    variants = [
        Benchmark(*args, metadata=base.metadata, episodes_per_task=2),
        Benchmark(*args, metadata=base.metadata, max_steps={"t/a": 10}),
        Benchmark(*args, metadata=base.metadata, max_steps={"t/a": 11}),
        Benchmark(*args, metadata=base.metadata, upstream=up),
        Benchmark(
            *args,
            metadata=base.metadata,
            upstream=Upstream(up.repo, up.commit, {"assets.zip": "sha256:01"}),
        ),
        Benchmark(*args, metadata=base.metadata, upstream=Upstream(up.repo, "a1b2c3d5")),
    ]
    digests = {v.digest() for v in variants} | {base.digest()}
    assert len(digests) == len(variants) + 1
    assert variants[3].evallog_fields() == {"upstream": up.to_dict()}


def test_a_refused_contract_is_a_hylo_error_and_still_the_built_in() -> None:
    from hylo_analytics.contracts import BenchmarkSpec, MetricSpec, Upstream
    from hylo_analytics.errors import HyloError, InputError, InputTypeError

    with pytest.raises(InputError, match=r"TaskSpec\.max_steps must be positive"):
        _task(max_steps=0)
    with pytest.raises(InputTypeError, match=r"Score\.value must be a float"):
        Score("high")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"Upstream\.commit"):
        Upstream("https://example.org/x.git", "not-hex")
    with pytest.raises(HyloError, match=r"MetricSpec\.id must be a non-empty string"):
        MetricSpec(id="")
    with pytest.raises(HyloError, match=r"BenchmarkSpec\.metrics\[0\]"):
        BenchmarkSpec(name="b", metrics=({"id": "x", "kind": "weird"},))  # type: ignore[arg-type]
