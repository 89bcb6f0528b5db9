"""paired_baseline: the five formulas, matching, include_baseline and every diagnostic."""

from __future__ import annotations

from dataclasses import replace

import polars as pl
import pytest

from hylo_analytics.contracts import DerivedMetricOutput
from hylo_analytics.derive.baseline import PairedBaseline, paired_baseline

OUT = DerivedMetricOutput("speedup", "performance.speedup", "ratio", "maximize", "objective")


def _latency() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "variant": ["baseline", "baseline", "fast", "fast"],
            "case_id": ["a", "b", "a", "b"],
            "metric": "time.latency",
            "value": [10.0, 4.0, 5.0, 8.0],
        }
    )


@pytest.mark.parametrize(
    ("formula", "want"),
    [
        ("baseline_over_candidate", [2.0, 0.5]),
        ("candidate_over_baseline", [0.5, 2.0]),
        ("candidate_minus_baseline", [-5.0, 4.0]),
        ("baseline_minus_candidate", [5.0, -4.0]),
        ("percent_change_from_baseline", [-50.0, 100.0]),
    ],
)
def test_formulas(formula: str, want: list[float]) -> None:
    res = paired_baseline(
        _latency(),
        baseline_variant="baseline",
        metric="time.latency",
        output=OUT,
        formula=formula,
        include_baseline=False,  # type: ignore[arg-type]
    )
    assert res.values["value"].to_list() == want
    assert res.values["case_id"].to_list() == ["a", "b"]
    assert res.diagnostics.is_empty()


def test_named_output_and_include_baseline() -> None:
    res = PairedBaseline("baseline", "time.latency", OUT).derive(_latency())
    v = res.values
    assert v.height == 4
    assert v.filter(pl.col("variant") == "baseline")["value"].to_list() == [1.0, 1.0]
    row = v.row(0, named=True)
    assert (row["metric"], row["semantic_type"], row["unit"], row["direction"], row["role"]) == (
        "speedup",
        "performance.speedup",
        "ratio",
        "maximize",
        "objective",
    )
    assert row["source_metric"] == "time.latency" and row["formula"] == "baseline_over_candidate"


def test_match_on_factor_columns() -> None:
    frame = pl.DataFrame(
        {
            "variant": ["baseline", "baseline", "new", "new", "new"],
            "case_id": ["c1", "c2", "c3", "c4", "c5"],
            "workload.size": [10, 100, 10, 100, 1000],
            "metric": "time.latency",
            "value": [2.0, 20.0, 1.0, 5.0, 7.0],
        }
    )
    res = paired_baseline(
        frame,
        baseline_variant="baseline",
        metric="time.latency",
        output=OUT,
        match_on=["workload.size"],
        include_baseline=False,
    )
    assert res.values["value"].to_list() == [2.0, 4.0]
    assert res.diagnostics.select("workload.size", "kind").rows() == [(1000, "missing_match")]


def test_identity_keeps_candidate_rows_apart_on_a_factor_match() -> None:
    frame = pl.DataFrame(
        {
            "variant": ["baseline", "baseline", "new", "new", "new"],
            "case_id": ["c1", "c2", "c3", "c4", "c5"],
            "workload.size": [10, 100, 10, 10, 100],
            "metric": "time.latency",
            "value": [2.0, 20.0, 1.0, 4.0, 5.0],
        }
    )
    spec = PairedBaseline("baseline", "time.latency", OUT, match_on=["workload.size"],
                          identity=["case_id"], include_baseline=False)  # fmt: skip
    res = spec.derive(frame)
    assert res.values.select("case_id", "value").rows() == [("c3", 2.0), ("c4", 0.5), ("c5", 4.0)]
    assert res.diagnostics.is_empty()
    # without it the two candidates of size 10 are one case with two rows: ambiguous
    res = replace(spec, identity=()).derive(frame)
    assert res.diagnostics.select("workload.size", "kind").rows() == [(10, "ambiguous_match")]


def _messy() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "variant": ["baseline"] * 5 + ["fast"] * 7,
            "case_id": ["a", "b", "c", "d", "f", "a", "b", "c", "d", "e", "f", "f"],
            "metric": ["lat"] * 5 + ["lat", "lat", "other", "lat", "lat", "lat", "lat"],
            "value": ["10", "0", "5", "x", "1", "5", "2", "1", "4", "3", "1", "2"],
        }
    )


def test_every_diagnostic_is_a_row() -> None:
    res = paired_baseline(
        _messy(),
        baseline_variant="baseline",
        metric="lat",
        output=OUT,
        formula="candidate_over_baseline",
        include_baseline=False,
    )
    kinds = dict(res.diagnostics.select("case_id", "kind").rows())
    assert kinds == {
        "b": "zero_division",
        "c": "absent_metric",
        "d": "non_numeric",
        "e": "missing_match",
        "f": "ambiguous_match",
    }
    details = dict(res.diagnostics.select("case_id", "detail").rows())
    assert details["d"] == "baseline value x is not a number"
    assert details["c"] == "candidate has no value"
    assert res.values["case_id"].to_list() == ["a"]
    assert res.values["value"].to_list() == [0.5]
    assert not res.values["value"].is_nan().any()
    assert "zero_division 1" in str(res)


def test_skip_counts_instead_of_recording() -> None:
    res = paired_baseline(
        _messy(),
        baseline_variant="baseline",
        metric="lat",
        output=OUT,
        formula="candidate_over_baseline",
        include_baseline=False,
        on_problem="skip",
    )
    assert res.diagnostics.is_empty()
    assert res.skipped == {
        "missing_match": 1,
        "ambiguous_match": 1,
        "absent_metric": 1,
        "non_numeric": 1,
        "zero_division": 1,
        "non_finite": 0,
    }
    assert "skipped: missing_match 1" in str(res) and "<table" in res._repr_html_()


def test_null_values_and_zero_in_the_candidate() -> None:
    frame = pl.DataFrame(
        {
            "variant": ["baseline", "baseline", "v", "v"],
            "case_id": ["a", "b", "a", "b"],
            "metric": "lat",
            "value": [1.0, 2.0, None, 0.0],
        }
    )
    res = paired_baseline(
        frame, baseline_variant="baseline", metric="lat", output=OUT, include_baseline=False
    )
    assert res.diagnostics.select("case_id", "kind").rows() == [
        ("a", "absent_metric"),
        ("b", "zero_division"),
    ]
    ok = paired_baseline(
        frame,
        baseline_variant="baseline",
        metric="lat",
        output=OUT,
        formula="candidate_minus_baseline",
        include_baseline=False,
    )
    assert ok.values["value"].to_list() == [-2.0]  # subtraction has no denominator


def test_configuration_errors_are_raised_up_front() -> None:
    with pytest.raises(ValueError, match="baseline variant 'nope'"):
        paired_baseline(_latency(), baseline_variant="nope", metric="time.latency", output=OUT)
    with pytest.raises(ValueError, match=r"lacks column\(s\) \['size'\]"):
        paired_baseline(
            _latency(),
            baseline_variant="baseline",
            metric="time.latency",
            output=OUT,
            match_on=["size"],
        )
    with pytest.raises(ValueError, match="formula"):
        paired_baseline(
            _latency(),
            baseline_variant="baseline",
            metric="time.latency",
            output=OUT,
            formula="ratio",
        )  # type: ignore[arg-type]


@pytest.mark.parametrize("formula", ["candidate_over_baseline", "candidate_minus_baseline"])
def test_infinite_input_is_a_diagnostic_never_a_nan(formula: str) -> None:
    frame = pl.DataFrame(
        {
            "variant": ["baseline", "baseline", "fast", "fast"],
            "case_id": ["a", "b", "a", "b"],
            "metric": ["lat"] * 4,
            "value": [10.0, float("inf"), 5.0, float("inf")],
        }
    )
    res = paired_baseline(
        frame,
        baseline_variant="baseline",
        metric="lat",
        output=OUT,
        formula=formula,  # type: ignore[arg-type]
        include_baseline=False,
    )
    assert res.values["case_id"].to_list() == ["a"]
    assert res.values["value"].is_finite().all()
    row = res.diagnostics.row(0, named=True)
    assert (row["case_id"], row["kind"]) == ("b", "non_finite")
    assert row["detail"].startswith(f"{formula} of candidate inf and baseline inf is")
