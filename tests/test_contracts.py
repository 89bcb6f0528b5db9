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
    code = "from tests.test_contracts import _task; print(_task().digest())"
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
