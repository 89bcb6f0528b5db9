"""Both verdict rules at their boundaries, in both directions and without one."""

from __future__ import annotations

import polars as pl
import pytest

from hylo_analytics.compare.verdicts import RelativeNoiseRule, StatisticalRule, add_verdicts


def _row(**kw: object) -> pl.DataFrame:
    base: dict[str, object] = {
        "metric": "success",
        "direction": "maximize",
        "n_pairs": 100,
        "is_binary": True,
        "mean_candidate": 0.9,
        "mean_parent": 0.8,
        "p_value": 0.5,
        "p_worse": 0.5,
        "ci_low": -0.05,
        "ci_high": 0.05,
        "eq_low": -0.04,
        "eq_high": 0.04,
    }
    base.update(kw)
    base["p_holm"], base["p_worse_holm"] = base["p_value"], base["p_worse"]
    base["p_bh"], base["p_worse_bh"] = base["p_value"], base["p_worse"]
    schema = {k: pl.Float64 for k in base if k.startswith(("p_", "ci_", "eq_", "mean_"))}
    return pl.DataFrame({k: [v] for k, v in base.items()}, schema_overrides=schema)


def _verdict(rule: StatisticalRule | RelativeNoiseRule, **kw: object) -> dict[str, object]:
    row: dict[str, object] = add_verdicts(_row(**kw), rule).row(0, named=True)
    return row


@pytest.mark.parametrize(
    ("kw", "want"),
    [
        ({"p_value": 0.01}, "improved"),
        ({"p_value": 0.05}, "inconclusive"),  # p == alpha is not significant
        ({"p_value": 0.0499}, "improved"),
        ({"p_worse": 0.01}, "regressed"),
        # lower is better: the engine already oriented p_value / p_worse to the direction
        ({"p_value": 0.01, "direction": "minimize"}, "improved"),
        # no direction: never improved or regressed, whatever the p
        ({"p_value": 0.001, "direction": "unknown"}, "inconclusive"),
        ({"p_value": None}, "inconclusive"),
    ],
)
def test_the_test_decides_improved_and_regressed(kw: dict[str, object], want: str) -> None:
    assert _verdict(StatisticalRule(), **kw)["verdict"] == want


def test_unchanged_needs_a_stated_margin_and_an_equivalence_interval() -> None:
    no_margin = _verdict(StatisticalRule())
    assert no_margin["verdict"] == "inconclusive"
    assert "needs an equivalence margin" in str(no_margin["verdict_note"])
    inside = _verdict(StatisticalRule(margin=0.05))
    assert inside["verdict"] == "unchanged" and inside["margin"] == 0.05
    assert "90% CI [-0.04, 0.04] inside +-0.05" in str(inside["verdict_note"])
    # strictly inside: touching the margin is not equivalence
    assert _verdict(StatisticalRule(margin=0.04))["verdict"] == "inconclusive"
    # continuous metrics: the margin is a fraction of the parent's mean
    cont = _verdict(StatisticalRule(margin=0.06), is_binary=False, mean_parent=1.0)
    assert cont["verdict"] == "unchanged" and cont["margin"] == pytest.approx(0.06)
    assert _verdict(StatisticalRule(margin=0.03), is_binary=False, mean_parent=1.0)["verdict"] == (
        "inconclusive"
    )
    # an unknown direction can still be shown unchanged: equivalence needs no direction
    assert _verdict(StatisticalRule(margin=0.05), direction="unknown")["verdict"] == "unchanged"


def test_the_threshold_is_an_extra_condition_never_a_replacement() -> None:
    rule = StatisticalRule(threshold=0.1)
    # significant, but the interval does not clear +0.1
    assert _verdict(rule, p_value=0.001, ci_low=0.05, ci_high=0.3)["verdict"] == "inconclusive"
    assert _verdict(rule, p_value=0.001, ci_low=0.11, ci_high=0.3)["verdict"] == "improved"
    # clears it, but not significant
    assert _verdict(rule, p_value=0.2, ci_low=0.11, ci_high=0.3)["verdict"] == "inconclusive"
    # lower is better: the interval is oriented
    low = _verdict(rule, direction="minimize", p_value=0.001, ci_low=-0.3, ci_high=-0.11)
    assert low["verdict"] == "improved"


def test_the_deciding_p_is_the_one_shown() -> None:
    up = _verdict(StatisticalRule(), p_value=0.01, p_worse=0.99)
    assert up["p_verdict"] == 0.01 and "p = 0.01 < 0.05" in str(up["verdict_note"])
    down = _verdict(StatisticalRule(), p_value=0.99, p_worse=0.02)
    assert down["p_verdict"] == 0.02 and "p(worse) = 0.02" in str(down["verdict_note"])
    bh = add_verdicts(
        _row(p_value=0.01).with_columns(p_bh=pl.lit(0.2)), StatisticalRule(adjust="bh")
    ).row(0, named=True)
    assert (bh["verdict"], bh["p_verdict"]) == ("inconclusive", 0.2)


def test_unknown_direction_says_why_and_how_to_fix_it() -> None:
    note = str(_verdict(StatisticalRule(), direction="unknown", metric="latency")["verdict_note"])
    assert note.startswith("no direction known for 'latency'")
    assert "--direction latency=" in note


@pytest.mark.parametrize(
    ("kw", "want"),
    [
        # +12.5 % relative and significant
        ({"mean_candidate": 0.9, "mean_parent": 0.8, "p_value": 0.01}, "improved"),
        # 2/2 vs 1/2: +100 % relative, but p = 1 (sampling error is not ignored)
        ({"mean_candidate": 1.0, "mean_parent": 0.5, "p_value": 1.0, "eq_low": -0.4,
          "eq_high": 0.9}, "inconclusive"),
        # significant but under the noise: the noise is an extra condition ...
        ({"mean_candidate": 0.81, "mean_parent": 0.8, "p_value": 0.01, "ci_low": 0.001,
          "ci_high": 0.05, "eq_low": 0.002, "eq_high": 0.045}, "inconclusive"),
        # ... and with an equivalence interval inside +-0.04 it is practically unchanged
        ({"mean_candidate": 0.81, "mean_parent": 0.8, "p_value": 0.01, "ci_low": 0.001,
          "ci_high": 0.02, "eq_low": 0.002, "eq_high": 0.018}, "unchanged"),
        # within noise with an equivalence interval inside +-5 % of the parent (0.04)
        ({"mean_candidate": 0.8, "mean_parent": 0.8, "eq_low": -0.03, "eq_high": 0.03},
         "unchanged"),
        ({"mean_candidate": 0.8, "mean_parent": 0.8, "eq_low": -0.05, "eq_high": 0.03},
         "inconclusive"),
        ({"direction": "minimize", "mean_candidate": 0.7, "mean_parent": 0.8, "p_value": 0.01,
          "ci_low": -0.2, "ci_high": -0.05}, "improved"),
    ],
)  # fmt: skip
def test_relative_noise_rule(kw: dict[str, object], want: str) -> None:
    kw.setdefault("ci_low", 0.05)
    kw.setdefault("ci_high", 0.2)
    out = _verdict(RelativeNoiseRule(noise=0.05), **kw)
    assert out["verdict_rule"] == "relative_noise"
    assert out["verdict"] == want


def test_rules_describe_themselves() -> None:
    assert "unchanged needs an equivalence margin" in StatisticalRule().describe()
    assert "+-0.02 (2 points" in StatisticalRule(margin=0.02).describe()
    assert "exceeds 5% of the parent's mean" in RelativeNoiseRule().describe()


def test_bad_rules_are_refused() -> None:
    with pytest.raises(ValueError, match="alpha"):
        StatisticalRule(alpha=0.7)
    with pytest.raises(ValueError, match="margin"):
        StatisticalRule(margin=0.0)
    with pytest.raises(ValueError, match="threshold"):
        StatisticalRule(threshold=-1.0)
