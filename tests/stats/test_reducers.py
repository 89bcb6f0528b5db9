"""Epoch reducers: golden pass@k values and abstention handling."""

from __future__ import annotations

from math import comb

import polars as pl
import pytest

from hylo_analytics.stats.reducers import Reducer, at_least, pass_at_k, reduce_epochs, reducer


def _frame(values):
    df = pl.DataFrame(
        {"key": ["a"] * len(values), "value": values}, schema_overrides={"value": pl.Float64}
    )
    ok = pl.col("value").is_not_null()
    return df.with_columns(
        _value=pl.col("value"),
        _valid=ok,
        _reason=pl.when(ok).then(None).otherwise(pl.lit("error")),
    )


def _reduce(values, how):
    return reduce_epochs(_frame(values), ["key"], reducer(how)).row(0, named=True)


@pytest.mark.parametrize(
    ("values", "how", "expected"),
    [
        ([1.0, 0.0, 1.0, None], "mean", 2 / 3),
        ([1.0, 0.0, 3.0, None], "median", 1.0),
        ([1.0, 0.0, 3.0], "max", 3.0),
        ([1.0, 0.0, 3.0], "min", 0.0),
        ([1.0, 0.0, 1.0], "at_least(2)", 1.0),
        ([1.0, 0.0, 0.0], "at_least(2)", 0.0),
        # 1 - C(n - c, k) / C(n, k), n = 5, c = 2
        ([1.0, 1.0, 0.0, 0.0, 0.0], "pass@1", 0.4),
        ([1.0, 1.0, 0.0, 0.0, 0.0], "pass_at_k(2)", 1 - comb(3, 2) / comb(5, 2)),
        ([1.0, 1.0, 0.0, 0.0, 0.0], "pass_at_k(4)", 1.0),
        ([0.0] * 10 + [1.0] * 3, "pass@5", 1 - comb(10, 5) / comb(13, 5)),
    ],
)
def test_reducers(values, how, expected):
    row = _reduce(values, how)
    assert row["_valid"] is True
    assert row["_value"] == pytest.approx(expected)


def test_key_with_no_valid_epoch_keeps_its_reason():
    row = _reduce([None, None], "mean")
    assert row["_valid"] is False and row["_value"] is None and row["_reason"] == "error"


def test_pass_at_k_with_fewer_than_k_epochs_abstains():
    row = _reduce([1.0, None], "pass@2")
    assert row["_valid"] is False and row["_reason"] == "error"
    row = reduce_epochs(
        _frame([1.0]).with_columns(_reason=pl.lit(None, pl.String)), ["key"], pass_at_k(2)
    ).row(0, named=True)
    assert row["_reason"] == "fewer_than_k_epochs"


def test_parsing_and_validation():
    assert reducer("pass@3") == pass_at_k(3) == Reducer("pass_at_k", 3)
    assert reducer("at_least(2)") == at_least(2)
    assert str(pass_at_k(3)) == "pass_at_k(3)" and str(reducer("mean")) == "mean"
    with pytest.raises(ValueError, match="unknown reducer 'avg'"):
        reducer("avg")
    with pytest.raises(ValueError, match="k must be >= 1"):
        Reducer("at_least")
