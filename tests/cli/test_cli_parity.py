"""CLI parity: every Python option of ``compare`` and ``aggregate`` has a flag with the same
default, read from the signatures (``inspect.signature``) and the argparse parsers."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from hylo_analytics.aggregate import aggregate_scores
from hylo_analytics.api import Store
from hylo_analytics.cli import aggregate as aggregate_cli
from hylo_analytics.cli import build_parser
from hylo_analytics.cli import compare as compare_cli
from hylo_analytics.compare import RelativeNoiseRule, StatisticalRule, compare_scores
from hylo_analytics.compare.pooled_runs import pooled_compare_runs
from hylo_analytics.compare.runs import compare_runs

# Python parameters that cannot be (or need not be) flags, each with why.
COMPARE_NOT_FLAGS = {
    "self": "the store: --store",
    "store": "the store: --store",
    "scores": "the store's scores: --store",
    "candidates": "--candidate (required, no default)",
    "parent": "--parent (required, no default)",
    "pending": "uncommitted score rows of an analysis dry run (a pyarrow table), not input",
    "forced": "set by Store.compare itself (what the gate found), not an option of it",
    "declared": "set by Store.compare itself (the scores' declared directions, read in SQL)",
    "rule": "a rule object: its fields are flags, checked in test_the_verdict_rule_has_flags",
    "errors_as_failures": "the deprecated alias of errors=: --errors-as-failures, hidden",
    "options": "**options: compare_scores's keywords, listed from its own signature",
}
POOLED_NOT_FLAGS = {
    **{k: v for k, v in COMPARE_NOT_FLAGS.items() if k not in ("candidates", "pending")},
    "candidate": "--candidate (required, no default)",
    "candidates": "each suite's candidate run, found from --candidate",
    "by": "refused with --pooled: the suites are the groups",
    "ci": "refused with --pooled: the pooled interval combines the suites' Tango intervals",
    "family": "refused with --pooled: suite and pooled rows are one family",
    "pair_on_epoch": "refused with --pooled: pairs are keys",
}
AGGREGATE_NOT_FLAGS = {
    "self": "the store: --store",
    "scores": "the store (or a frame, from Python only): --store",
    "registry": "a MetricRegistry object; the CLI uses the default registry",
    "reduce": "the deprecated alias of reducer=: --reduce, hidden",
    "options": "**options: aggregate_scores's keywords, listed from its own signature",
}

_BASE = {
    "compare": ["compare", "--store", "s", "--candidate", "a", "--parent", "b"],
    "aggregate": ["aggregate", "--store", "s"],
    "pooled": ["compare", "--pooled", "--store", "s", "--candidate", "a", "--parent", "b"],
}
# one non-default value per option: the flags that set it, and what Python receives
COMPARE_FLAGS: dict[str, tuple[list[str], Any]] = {
    "metrics": (["--metric", "steps", "--metric", "success"], ("steps", "success")),
    "by": (["--by", "task_id"], ("task_id",)),
    "source": (["--source", "imported"], "imported"),
    "force": (["--force"], True),
    "reducer": (["--reducer", "max"], "max"),
    "pair_on_epoch": (["--pair-on-epoch"], True),
    "alternative": (["--two-sided"], "two-sided"),
    "mid_p": (["--mid-p"], True),
    "directions": (["--direction", "steps=minimize"], {"steps": "minimize"}),
    "ci": (["--ci", "studentized"], "studentized"),
    "n_resamples": (["--resamples", "500"], 500),
    "level": (["--level", "0.9"], 0.9),
    "seed": (["--seed", "3"], 3),
    "family": (["--family", "level"], "level"),
    "errors": (["--errors", "exclude"], "exclude"),
    "cluster": (["--cluster", "task_id"], "task_id"),
}
POOLED_FLAGS = {
    **{k: v for k, v in COMPARE_FLAGS.items() if k not in ("by", "ci", "family", "pair_on_epoch")},
    "weights": (["--weights", "episodes"], "episodes"),
}
AGGREGATE_FLAGS: dict[str, tuple[list[str], Any]] = {
    "by": (["--by", "run_id,task_id"], ("run_id", "task_id")),
    "metrics": (["--metric", "success"], ["success"]),
    "statistics": (["--statistics", "mean,sum"], ["mean", "sum"]),
    "ci": (["--ci", "success=wilson,steps=bca"], {"success": "wilson", "steps": "bca"}),
    "level": (["--level", "0.9"], 0.9),
    "seed": (["--seed", "3"], 3),
    "n_resamples": (["--resamples", "500"], 500),
    "reducer": (["--reducer", "none"], None),
    "stratify": (["--stratify", "task_id"], "task_id"),
    "cluster": (["--cluster", "task_id"], "task_id"),
    "optimality_threshold": (["--optimality-threshold", "0.5"], 0.5),
    "source": (["--source", "imported"], ["imported"]),
    "runs": (["--run", "a", "--run", "b"], ["a", "b"]),
    "errors": (["--errors", "failure"], "failure"),
}


def _params(*functions: Callable[..., Any]) -> dict[str, Any]:
    """Every keyword a user can pass, with its default (``inspect.Parameter.empty`` if none)."""
    out: dict[str, Any] = {}
    for fn in functions:
        for name, p in inspect.signature(fn).parameters.items():
            if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
                out.setdefault(name, p.default)
    return out


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return list(a) == list(b)
    return bool(a == b)


CASES = {
    "compare": (
        _params(Store.compare, compare_runs, compare_scores),
        COMPARE_NOT_FLAGS,
        COMPARE_FLAGS,
        compare_cli.options,
    ),
    "pooled": (
        _params(Store.pooled_compare, pooled_compare_runs, compare_scores),
        POOLED_NOT_FLAGS,
        POOLED_FLAGS,
        compare_cli.pooled_options,
    ),
    "aggregate": (
        _params(Store.aggregate, aggregate_scores),
        AGGREGATE_NOT_FLAGS,
        AGGREGATE_FLAGS,
        aggregate_cli.options,
    ),
}


@pytest.mark.parametrize("command", sorted(CASES))
def test_every_python_option_has_a_flag_with_its_default(command: str) -> None:
    params, not_flags, flags, options = CASES[command]
    assert not set(not_flags) - set(params) - {"options"}, "allow-list names a gone parameter"
    wanted = {n: d for n, d in params.items() if n not in not_flags}
    assert set(flags) == set(wanted), "an option without a flag (or a flag for no option)"
    got = options(_parse(_BASE[command]))
    passed = {k: v for k, v in got.items() if k not in ("rule", "errors_as_failures")}
    assert set(passed) == set(wanted)
    for name, default in wanted.items():
        assert _same(passed[name], default), (name, passed[name], default)
    for name, (argv, value) in flags.items():
        assert _same(options(_parse([*_BASE[command], *argv]))[name], value), name


def test_the_verdict_rule_has_flags() -> None:
    """``rule``: the CLI's default is Python's (``StatisticalRule()``), and each field of
    either rule has a flag."""
    base = _BASE["compare"]
    assert compare_cli.options(_parse(base))["rule"] == StatisticalRule()
    rule = compare_cli.options(
        _parse([*base, "--alpha", "0.1", "--adjust", "bh", "--margin", "0.02", "--threshold", "1"])
    )["rule"]
    assert rule == StatisticalRule(alpha=0.1, adjust="bh", margin=0.02, threshold=1.0)
    noisy = compare_cli.options(_parse([*base, "--relative-noise", "0.1", "--adjust", "none"]))
    assert noisy["rule"] == RelativeNoiseRule(noise=0.1, adjust="none")
    fields = {f.name for f in dataclasses.fields(StatisticalRule)}
    fields |= {f.name for f in dataclasses.fields(RelativeNoiseRule)}
    covered = {"alpha", "adjust", "margin", "threshold", "noise", "name"}  # name: a label
    assert fields == covered
    with pytest.raises(ValueError, match="--relative-noise is a rule of its own"):
        compare_cli.options(_parse([*base, "--relative-noise", "0.1", "--margin", "0.02"]))


def test_a_bad_ci_method_is_a_usage_error_with_a_did_you_mean(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        _parse([*_BASE["aggregate"], "--ci", "success=wilsn"])
    assert exit_.value.code == 2
    assert "did you mean 'wilson'?" in capsys.readouterr().err


def test_the_old_reduce_flag_warns_and_sets_reducer() -> None:
    """``aggregate --reduce`` is the deprecated spelling of ``--reducer`` (issue 30)."""
    new = aggregate_cli.options(_parse([*_BASE["aggregate"], "--reducer", "max"]), None)
    with pytest.warns(DeprecationWarning, match="--reduce is deprecated: pass --reducer"):
        old = aggregate_cli.options(_parse([*_BASE["aggregate"], "--reduce", "max"]), None)
    assert old["reducer"] == new["reducer"] == "max"
