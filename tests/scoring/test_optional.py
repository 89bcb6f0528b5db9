"""Optional scorers: their errors are recorded as rows without failing the run."""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest

import hylo_analytics as ha
from hylo_analytics.scoring import (
    EpisodeScorer,
    ExpectedActionScorer,
    ScorerDeclaration,
    ScoringCall,
    VectorizedScorer,
)

OPTIONAL = ScorerDeclaration(optional=True)


def _broken(call: ScoringCall) -> Any:
    raise RuntimeError("judge offline")


@pytest.mark.slow
def test_optional_errors_are_rows_and_the_run_still_passes(many_store: ha.Store) -> None:
    report = many_store.score(
        [
            EpisodeScorer("judge", _broken, declaration=OPTIONAL),
            VectorizedScorer("vec", lambda ep: pl.Series(["x"] * ep.height), declaration=OPTIONAL),
            ExpectedActionScorer("acts", declaration=OPTIONAL),  # no case.expected.actions
            {"cov": {"value": "output.coverage", "optional": True}},
        ]
    )
    assert report.ok and report.failed_runs == {}
    reasons = dict(
        many_store.sql(
            "select source, any_value(skip_reason) from stg_scores "
            "where source like 'scorer:%' group by source"
        ).rows()
    )
    assert reasons == {
        "scorer:judge": "error: RuntimeError: judge offline",
        "scorer:vec": "error: returned dtype String, expected floats or nulls",
        "scorer:acts": "missing path: case.expected.actions",
        "scorer:cov": "missing path: output.coverage",
    }
    assert {(s.source, s.optional, s.errors) for s in report.scorers} == {
        (src, True, 50) for src in reasons
    }
    assert report.errors  # still listed in the report


def test_the_same_errors_fail_a_required_scorer(many_store: ha.Store) -> None:
    report = many_store.score([EpisodeScorer("judge", _broken)])
    assert not report.ok
    assert report.failed_runs == {"run-many-1": ("scorer:judge",), "run-many-2": ("scorer:judge",)}
