"""An interval is a property of the run: the same bounds alone or among other runs.

The kind of a metric (binary or not), the interval's method and the bootstrap's path are
decided per group from the group's own values and the registry, never from the other runs
of the call, so a run's row is bit-identical whether it is aggregated alone or with others.
"""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

import hylo_analytics as ha
from hylo_analytics.aggregate import aggregate_scores

# one run's values of one metric: 0/1 only, -1/0/1, small integers, or any floats
_VALUES = st.one_of(
    st.lists(st.sampled_from([0.0, 1.0]), min_size=1, max_size=15),
    st.lists(st.sampled_from([-1.0, 0.0, 1.0]), min_size=1, max_size=15),
    st.lists(st.integers(0, 30).map(float), min_size=1, max_size=15),
    st.lists(st.floats(-5, 5, allow_nan=False, width=32), min_size=1, max_size=15),
    st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=1, max_size=15),
)


def _frame(runs: list[dict[str, list[float]]]) -> pl.DataFrame:
    rows: list[dict[str, Any]] = []
    for r, metrics in enumerate(runs):
        for metric, values in metrics.items():
            for i, v in enumerate(values):
                rows.append(
                    {
                        "run_id": f"run{r}",
                        "key": f"t{i % 3}#{i}",
                        "task_id": f"t{i % 3}",
                        "metric": metric,
                        "value": v,
                    }
                )
    return pl.DataFrame(rows)


@pytest.mark.filterwarnings("ignore::hylo_analytics.stats.closed_form.StatisticsWarning")
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    runs=st.lists(
        st.fixed_dictionaries({"success": _VALUES, "steps": _VALUES, "made_up": _VALUES}),
        min_size=2,
        max_size=4,
    ),
    ci=st.sampled_from(["auto", "hall", "percentile", "bca", "studentized", "normal"]),
    stratify=st.sampled_from([None, "task_id"]),
)
@pytest.mark.slow
def test_a_run_alone_gets_the_bounds_it_gets_among_others(
    runs: list[dict[str, list[float]]], ci: str, stratify: str | None
) -> None:
    if stratify and ci == "studentized":
        ci = "percentile"  # the studentized bootstrap is not stratified
    frame = _frame(runs)
    options: dict[str, Any] = {"ci": ci, "n_resamples": 200, "seed": 5, "stratify": stratify}
    together = aggregate_scores(frame, ("run_id",), **options)
    for r in range(len(runs)):
        run = f"run{r}"
        alone = aggregate_scores(frame.filter(pl.col("run_id") == run), ("run_id",), **options)
        assert_frame_equal(alone, together.filter(pl.col("run_id") == run), check_exact=True)
    # and one metric alone: the company of the other metrics does not matter either
    run = "run0"
    for metric in ("steps", "made_up"):
        one = aggregate_scores(
            frame.filter((pl.col("run_id") == run) & (pl.col("metric") == metric)),
            ("run_id",),
            **options,
        )
        want = together.filter((pl.col("run_id") == run) & (pl.col("metric") == metric))
        assert_frame_equal(one, want, check_exact=True)


def test_the_method_follows_the_runs_own_values() -> None:
    """A metric only the data knows: a run of 0/1 values gets Wilson, a run holding 0.5 Hall's
    interval; the registry's declared kind stands (steps: a count, never Wilson)."""
    frame = _frame(
        [
            {"made_up": [0.0, 0.0, 0.0, 0.0], "steps": [0.0, 1.0, 1.0]},
            {"made_up": [0.5, 1.0, 0.0, 1.0], "steps": [3.0, 9.0, 4.0]},
        ]
    )
    out = aggregate_scores(frame, ("run_id",), n_resamples=200).sort("run_id", "metric")
    methods = dict(
        zip(
            (out["run_id"] + "/" + out["metric"]).to_list(), out["ci_method"].to_list(), strict=True
        )
    )
    assert methods == {
        "run0/made_up": "wilson",
        "run0/steps": "hall",
        "run1/made_up": "hall",
        "run1/steps": "hall",
    }
    # Wilson at 0 of 4, as one run alone gets it: not a degenerate [0, 0] bootstrap
    row = out.filter((pl.col("run_id") == "run0") & (pl.col("metric") == "made_up"))
    assert row["ci_low"].item() == 0.0 and 0.4 < row["ci_high"].item() < 0.6


def test_a_stored_run_alone_gets_its_default_interval_bit_for_bit(sample_store: ha.Store) -> None:
    """The default interval of a count (Hall's, from moments computed in DuckDB) reads the
    run's own rows: a run asked for alone gets the bits it gets among every run."""
    every = sample_store.aggregate(("run_id",), metrics=["steps"])
    assert set(every["ci_method"]) == {"hall"}
    for run in every["run_id"].to_list():
        alone = sample_store.aggregate(("run_id",), metrics=["steps"], runs=[run])
        assert_frame_equal(alone, every.filter(pl.col("run_id") == run), check_exact=True)
