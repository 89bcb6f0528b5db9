"""paired_compare: the spec's two-run comparison, through the same engine as compare_scores."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from hylo_analytics.compare import PairedComparison, compare_scores, paired_compare
from hylo_analytics.stats import mcnemar_p


def test_paired_compare_drops_abstentions_and_counts() -> None:
    cand = {"a#1": 1.0, "a#2": 1.0, "b#1": None, "b#2": 0.0, "c#1": 1.0, "only_c": 1.0}
    par = {"a#1": 0.0, "a#2": 1.0, "b#1": 1.0, "b#2": None, "c#1": 0.0, "only_p": 0.0}
    pc = paired_compare(cand, par)
    assert (pc.n_pairs, pc.candidate_wins, pc.parent_wins, pc.ties) == (3, 2, 0, 1)
    assert pc.n_dropped == 2 and pc.n_unmatched == 2
    assert pc.p_value == 0.25
    assert pc.mean_diff == pytest.approx(2 / 3)


def test_paired_compare_five_to_zero() -> None:
    cand = {f"t#{i}": 1.0 for i in range(5)}
    par = {f"t#{i}": 0.0 for i in range(5)}
    assert paired_compare(cand, par).p_value == 1 / 32
    assert paired_compare(par, cand).p_value == 1.0
    assert paired_compare(cand, cand).p_value == 1.0


def test_direction_decides_wins() -> None:
    cand = {"a": 10.0, "b": 12.0, "c": 30.0}
    par = {"a": 20.0, "b": 15.0, "c": 30.0}
    steps = paired_compare(cand, par, metric="steps")
    assert (steps.candidate_wins, steps.parent_wins, steps.ties) == (2, 0, 1)
    assert not steps.higher_is_better
    assert paired_compare(cand, par).candidate_wins == 0
    assert paired_compare(cand, par, direction="minimize").candidate_wins == 2
    with pytest.raises(ValueError, match="direction"):
        paired_compare(cand, par, direction="up")  # type: ignore[arg-type]


def test_continuous_metrics_bootstrap_and_wilcoxon() -> None:
    from scipy import stats

    d = np.array([1.5, -0.5, 2.0, 2.0, 0.0, 3.0, -1.0, 0.5, 2.5, 1.0])
    par = {f"k{i}": 10.0 for i in range(d.size)}
    cand = {f"k{i}": 10.0 + x for i, x in enumerate(d)}
    pc = paired_compare(cand, par, n_resamples=4000, seed=1)
    assert pc.mean_diff == pytest.approx(d.mean())
    assert pc.ci_low < pc.mean_diff < pc.ci_high
    assert pc.wilcoxon_p == pytest.approx(stats.wilcoxon(d, alternative="greater").pvalue)
    again = paired_compare(cand, par, n_resamples=4000, seed=1)
    assert (again.ci_low, again.ci_high) == (pc.ci_low, pc.ci_high)
    # a minimize metric flips the Wilcoxon direction, not the reported difference
    lower = paired_compare(cand, par, direction="minimize", n_resamples=200)
    assert lower.mean_diff == pytest.approx(d.mean()) and lower.wilcoxon_p > 0.5


def test_frames_are_accepted_and_duplicates_refused() -> None:
    cand = pl.DataFrame({"key": ["a", "b", "c"], "value": [1.0, None, 1.0]})
    par = pl.DataFrame({"key": ["a", "b", "c"], "value": [0.0, 1.0, 1.0]})
    pc = paired_compare(cand, par)
    assert (pc.n_pairs, pc.candidate_wins, pc.ties, pc.n_dropped) == (2, 1, 1, 1)
    dup = pl.DataFrame({"key": ["a", "a"], "value": [1.0, 0.0]})
    with pytest.raises(ValueError, match="duplicated key"):
        paired_compare(dup, par)
    with pytest.raises(ValueError, match="lacks column"):
        paired_compare(pl.DataFrame({"k": ["a"]}), par)


def test_no_pairs_gives_nan_difference_not_zero() -> None:
    pc = paired_compare({"a": None}, {"a": 1.0})
    assert pc.n_pairs == 0 and pc.p_value == 1.0
    assert math.isnan(pc.mean_diff) and math.isnan(pc.ci_low)


def test_printing() -> None:
    pc = paired_compare({"a": 1.0, "b": 1.0}, {"a": 0.0, "b": 1.0}, n_resamples=50)
    text = str(pc)
    assert "1 | parent wins 0 | ties 1" in text and "McNemar" in text
    html = pc._repr_html_()
    assert html.startswith("<table>") and "<td>2</td>" in html
    assert isinstance(pc, PairedComparison) and pc.as_dict()["n_pairs"] == 2


PAIRS = {
    "binary": ([1, 1, 0, 1, 1, 0, 1, 1], [0, 1, 0, 0, 0, 1, 0, 1]),
    "counts": ([12, 30, 25, 9, 40, 18, 22, 31], [15, 28, 40, 9, 52, 19, 30, 33]),
    "abstaining": ([1, None, 0, 1, 1, 0, None, 1], [0, 1, 0, None, 0, 1, 0, 1]),
}


@pytest.mark.parametrize("name", list(PAIRS))
@pytest.mark.parametrize("alternative", ["greater", "two-sided"])
def test_paired_compare_is_the_overall_row_of_compare_scores(name: str, alternative: str) -> None:
    cand, par = PAIRS[name]
    keys = [f"t#{i}" for i in range(len(cand))]
    metric = "steps" if name == "counts" else "success"
    pc = paired_compare(
        dict(zip(keys, cand, strict=True)),
        dict(zip(keys, par, strict=True)),
        metric=metric,
        alternative=alternative,  # type: ignore[arg-type]
        seed=3,
    )
    frame = pl.DataFrame(
        {
            "run_id": ["c"] * len(keys) + ["p"] * len(keys),
            "key": keys * 2,
            "metric": metric,
            "value": [*cand, *par],
        },
        schema_overrides={"value": pl.Float64},
    )
    row = (
        compare_scores(frame, candidates="c", parent="p", alternative=alternative, seed=3)  # type: ignore[arg-type]
        .filter(pl.col("level") == "overall")
        .row(0, named=True)
    )
    # the spec's p-values are the exact McNemar's; the row's p_value is the verdict's test
    exact = {
        "p_value": row["p_mcnemar"],
        "p_test": row["p_value"],
        "p_worse": mcnemar_p(row["parent_wins"], row["candidate_wins"], alternative=alternative)
        if alternative == "greater"
        else row["p_mcnemar"],
        "p_two_sided": mcnemar_p(
            row["candidate_wins"], row["parent_wins"], alternative="two-sided"
        ),
    }
    assert (
        pc.test == row["test"] == ("tango score" if metric == "success" else "bootstrap percentile")
    )
    for field in PairedComparison.__dataclass_fields__:
        if field == "level":
            assert pc.level == 0.95
            continue
        want = exact.get(field, row.get(field))
        got = getattr(pc, field)
        if want is None:
            assert math.isnan(got), field
        else:
            assert got == want, field
