"""``hylo-analytics rank``: every option of ``rank_runs`` / ``rank_policies`` has a flag with
the same default, and the flags reach Python as they say."""

from __future__ import annotations

import inspect

from hylo_analytics.cli import build_parser
from hylo_analytics.cli import rank as rank_cli
from hylo_analytics.compare import StatisticalRule, rank_policies, rank_runs
from hylo_analytics.stats.bradley_terry import DEFAULT_PENALTY

NOT_FLAGS = {"store", "scores", "options", "policies", "rule", "directions", "progress"}


def _defaults() -> dict[str, object]:
    params = {**inspect.signature(rank_policies).parameters}
    params.update(inspect.signature(rank_runs).parameters)
    return {k: p.default for k, p in params.items() if k not in NOT_FLAGS}


def test_every_option_has_a_flag_with_its_default() -> None:
    args = build_parser().parse_args(["rank", "--store", "s"])
    opts = rank_cli.options(args)
    for name, default in _defaults().items():
        assert name in opts, f"rank_policies / rank_runs option {name!r} has no flag"
        assert opts[name] == default, name
    assert opts["rule"] == StatisticalRule() and opts["directions"] is None
    assert rank_cli.DEFAULT_PENALTY == DEFAULT_PENALTY


def test_flags_reach_python() -> None:
    argv = ["rank", "--store", "s", "--run", "a", "--policy", "run_id", "--strata", "",
            "--metric", "steps", "--direction", "minimize", "--penalty", "0.5", "--alpha",
            "0.1", "--margin", "0.02", "--adjust", "bh", "--errors", "exclude", "--reducer",
            "none", "--resamples", "50", "--level", "0.9", "--seed", "3", "--strength-ci",
            "bootstrap", "--quiet", "--cluster", "task_id"]  # fmt: skip
    opts = rank_cli.options(build_parser().parse_args(argv))
    assert opts == {
        "runs": ["a"], "policy": "run_id", "strata": (), "metric": "steps", "source": None,
        "rule": StatisticalRule(alpha=0.1, adjust="bh", margin=0.02),
        "directions": {"steps": "minimize"}, "errors": "exclude", "reducer": None,
        "penalty": 0.5, "strength_ci": "bootstrap", "n_resamples": 50, "level": 0.9,
        "seed": 3, "progress": False, "cluster": "task_id",
    }  # fmt: skip
