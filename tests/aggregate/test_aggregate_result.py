"""AggregateResult: round trip with the frame, printing, the invariant."""

from __future__ import annotations

import polars as pl
import pytest

from hylo_analytics.aggregate import aggregate_scores
from hylo_analytics.aggregate.result import AggregateResult, results_from_frame

SCORES = pl.DataFrame(
    {
        "run_id": ["r1", "r1", "r1", "r2"],
        "metric": "success",
        "value": [1.0, None, 0.0, 1.0],
        "skip_reason": [None, "error", None, None],
        "errored": [False, True, False, False],
    }
)


def test_from_row_and_back():
    frame = aggregate_scores(SCORES, by=["run_id"])
    results = results_from_frame(frame)
    first = results[0]
    assert first.group == {"run_id": "r1"}
    assert first.metric_id == "success"
    assert (first.n_total, first.n_valid, first.n_skipped) == (3, 2, 1)
    assert first.skip_breakdown == {"error": 1}
    assert first.raw_stats["mean"] == pytest.approx(0.5)
    assert first.confidence_interval["method"] == "wilson"
    assert first.diagnostics["errors"] == "exclude"
    assert first.diagnostics["n_errors"] == 1
    back = AggregateResult.to_rows(results)
    assert back.select(frame.columns).equals(frame)


def test_printing():
    r = results_from_frame(aggregate_scores(SCORES, by=["run_id"]))[0]
    text = str(r)
    assert "AggregateResult success [run_id=r1]" in text
    assert "n_total 3, n_valid 2, n_skipped 1" in text
    assert "error: 1" in text and "errors: exclude (1 errored, left out)" in text
    assert "(95 % wilson)" in text
    html = r._repr_html_()
    assert "<table>" in html and "2 / 3" in html


def test_invariant_is_enforced():
    with pytest.raises(ValueError, match="n_total=3 != n_valid=1"):
        AggregateResult(metric_id="m", n_total=3, n_valid=1, n_skipped=2, skip_breakdown={"x": 1})
