"""The error family: every class is a ``HyloError`` and still the built-in users caught before,
and the mistakes users make at each stage raise one, with a message that names the thing."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

import pytest

import hylo_analytics as ha
from hylo_analytics import errors
from hylo_analytics.cli import main
from hylo_analytics.errors import (
    ArchiveError,
    BadRequestError,
    ComparabilityError,
    ConfigError,
    GraderError,
    HyloError,
    InputError,
    InputNotFoundError,
    InputTypeError,
    ManifestError,
    ManifestWriteError,
    RunSelectionError,
    SelectionError,
    SingleRunError,
    StaleSnapshotError,
    StoreError,
    StoreLockedError,
    StoreNotFoundError,
    StoreWriteError,
    UnknownRunError,
)
from hylo_analytics.ingest import IngestError

# each class and the built-in(s) an ``except`` written before it existed catches it as
BASES: dict[type[HyloError], tuple[type[Exception], ...]] = {
    InputError: (ValueError,),
    InputTypeError: (ValueError, TypeError),
    InputNotFoundError: (ValueError, FileNotFoundError),
    ConfigError: (ValueError,),
    ArchiveError: (ValueError,),
    BadRequestError: (ValueError,),
    IngestError: (ValueError,),
    SelectionError: (ValueError,),
    RunSelectionError: (ValueError,),
    UnknownRunError: (LookupError,),
    ComparabilityError: (ValueError,),
    SingleRunError: (ValueError,),
    StoreError: (),
    StoreNotFoundError: (FileNotFoundError,),
    StoreLockedError: (),
    StoreWriteError: (),
    ManifestError: (RuntimeError,),
    ManifestWriteError: (),
    StaleSnapshotError: (RuntimeError,),
    GraderError: (RuntimeError,),
}


def _instance(cls: type[HyloError]) -> HyloError:
    return cls("where", "what") if cls is ConfigError else cls("what")  # type: ignore[call-arg]


def test_every_class_of_the_module_is_in_the_table() -> None:
    """A new class says which built-in it keeps (here) before it ships."""
    listed = {getattr(errors, name) for name in errors.__all__} - {HyloError}
    assert listed == set(BASES) - {IngestError}


@pytest.mark.parametrize("cls", list(BASES), ids=lambda c: c.__name__)
def test_each_class_is_a_hylo_error_and_its_builtin(cls: type[HyloError]) -> None:
    exc = _instance(cls)
    assert isinstance(exc, HyloError)
    for base in BASES[cls]:
        assert isinstance(exc, base), f"{cls.__name__} is no longer a {base.__name__}"
    assert "what" in str(exc)


def test_except_value_error_still_catches_a_refused_input() -> None:
    for cls in (InputError, ConfigError, SelectionError, ComparabilityError, IngestError):
        with pytest.raises(ValueError, match="what"):
            raise _instance(cls)


def test_the_old_import_paths_name_the_same_classes() -> None:
    from hylo_analytics import store
    from hylo_analytics.serve import app

    assert store.StoreError is StoreError and store.StaleSnapshotError is StaleSnapshotError
    assert app.BadRequestError is BadRequestError
    assert ha.HyloError is HyloError and ha.StoreNotFoundError is StoreNotFoundError


# -- the mistakes users make, stage by stage -------------------------------------------------


def test_a_missing_store(tmp_path: Path) -> None:
    with pytest.raises(StoreNotFoundError, match="nope") as info:
        ha.open_store(tmp_path / "nope", create=False)
    assert isinstance(info.value, FileNotFoundError) and "ingest" in str(info.value)


def test_an_unknown_run(sample_store: ha.Store) -> None:
    with pytest.raises(RunSelectionError, match="zzz-no-such-run"):
        sample_store.resolve_run("zzz-no-such-run")


def test_a_bad_errors_policy(sample_store: ha.Store) -> None:
    with pytest.raises(InputError, match=r"'fail'.*did you mean 'failure'"):
        sample_store.aggregate(errors="fail")  # type: ignore[arg-type]


def test_a_bad_config_value() -> None:
    from hylo_analytics.derive.pricing import load_pricing

    with pytest.raises(ConfigError, match=r"models\['m'\]\.input") as info:
        load_pricing({"models": {"m": {"input": "abc"}}})
    assert info.value.path.endswith(".input")


def test_a_missing_input_file(tmp_path: Path) -> None:
    from hylo_analytics.analysis import load_analysis_spec
    from hylo_analytics.derive.pricing import load_pricing

    for load, name in ((load_pricing, "prices.yaml"), (load_analysis_spec, "spec.yaml")):
        with pytest.raises(InputNotFoundError, match=name) as info:
            load(tmp_path / name)
        assert isinstance(info.value, FileNotFoundError)


def test_a_bad_export_version(sample_store: ha.Store, tmp_path: Path) -> None:
    run = sample_store.runs()["run_id"][0]
    with pytest.raises(InputError, match=r"'v9'.*'v0\.1' or 'v0\.2'"):
        ha.export_evallog(sample_store, run, tmp_path / "out.json", version="v9")  # type: ignore[arg-type]


def test_a_chart_of_the_wrong_frame(sample_store: ha.Store) -> None:
    from hylo_analytics.charts import paired_forest

    with pytest.raises(InputError, match="paired_forest: the frame lacks"):
        paired_forest(sample_store.runs())


def test_a_bad_cli_argument_is_an_input_error_and_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from hylo_analytics.cli import build_parser

    args = build_parser().parse_args(["plan", "--delta", "0.1"])
    with pytest.raises(InputError, match="--parent-rate"):
        args.func(args)
    assert main(["plan", "--delta", "0.1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hylo-analytics plan: error: give --parent-rate") and err.count("\n") == 1


@pytest.mark.parametrize(
    "exc",
    [
        UnknownRunError("no run 'x': pick one from 'hylo-analytics runs'"),  # a LookupError
        GraderError("grader 'g' returned 'x', not a grade: return a float"),  # a RuntimeError
        StaleSnapshotError("the snapshot was collected: re-run the operation"),
        StoreLockedError("the store is locked: wait, or raise --lock-timeout"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_the_cli_prints_any_hylo_error_as_one_line(
    exc: HyloError, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import hylo_analytics.cli.plan as plan

    def fail(args: argparse.Namespace) -> int:
        raise exc

    monkeypatch.setattr(plan, "run", fail)
    assert main(["plan", "--delta", "0.1"]) == 2
    err = capsys.readouterr().err
    assert err == f"hylo-analytics plan: error: {exc}\n"


def test_a_bug_keeps_its_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the toolkit's errors (and what the engines refuse) are one line: not a bug."""
    import hylo_analytics.cli.plan as plan

    def fail(args: argparse.Namespace) -> int:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(plan, "run", fail)
    with pytest.raises(ZeroDivisionError):
        main(["plan", "--delta", "0.1"])


# -- the mistakes met in the other stages' verbs, and the scan that keeps it so ----------------


def test_a_bad_metric_name_in_compare_and_aggregate(sample_store: ha.Store) -> None:
    a, b = sample_store.runs()["run_id"].to_list()[:2]
    with pytest.raises(HyloError, match="sucess") as info:
        sample_store.compare(a, b, metrics=["sucess"])
    assert isinstance(info.value, ValueError) and "did you mean 'success'" in str(info.value)
    with pytest.raises(HyloError, match="sucess"):
        sample_store.aggregate(metrics=["sucess"])


def test_a_missing_path_to_ingest(sample_store: ha.Store, tmp_path: Path) -> None:
    with pytest.raises(HyloError, match="not-there") as info:
        sample_store.ingest(tmp_path / "not-there", progress=False)
    assert isinstance(info.value, FileNotFoundError)  # as before: InputNotFoundError fits


PACKAGE = Path(__file__).resolve().parents[1] / "hylo_analytics"
_BUILTINS = {"ValueError", "TypeError"}


def _bare_raises(path: Path) -> list[str]:
    """``raise ValueError(...)``, ``raise TypeError`` and ``raise ... from`` of either."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Raise) or node.exc is None:
            continue  # a bare ``raise`` re-raises what was caught: not a new error
        exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        if isinstance(exc, ast.Name) and exc.id in _BUILTINS:
            found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: raise {exc.id}")
    return found


def test_no_bare_value_or_type_error_is_raised() -> None:
    """Every error a user can meet is a HyloError: raise the family that says what went
    wrong (``hylo_analytics.errors``), never the built-in alone."""
    found = [hit for path in sorted(PACKAGE.rglob("*.py")) for hit in _bare_raises(path)]
    assert found == [], "\n".join(found)
