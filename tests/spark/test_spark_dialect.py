"""The project dialect: exact mappings, and refusals that name the view, construct and line.

No Spark session needed: this is the transpiler alone (the parity tests run its output).
"""

from __future__ import annotations

import re

import pytest

from hylo_analytics import _schema
from hylo_analytics._sql import view_names, view_sql
from hylo_analytics.spark import view_order
from hylo_analytics.spark._dialect import UntranslatableSQL, to_spark

RAW = {f"raw_{n}": s.names for n, s in _schema.SCHEMAS.items()}


def test_every_view_translates_and_no_approximate_percentile() -> None:
    for name in view_names():
        out = re.sub(r"/\*.*?\*/", "", to_spark(name, view_sql(name), RAW), flags=re.S).upper()
        assert "PERCENTILE_APPROX" not in out and "APPROX" not in out, name
        assert not re.search(r"\*\s*(EXCEPT|EXCLUDE)\b", out), name


def test_percentile_cont_is_spark_exact_percentile() -> None:
    out = to_spark("v", "select percentile_cont(0.95) within group (order by x) from t")
    assert out == "SELECT PERCENTILE(x, 0.95) FROM t"
    assert (
        to_spark("v", "select quantile_cont(x, 0.25) from t") == "SELECT PERCENTILE(x, 0.25) FROM t"
    )


def test_ordered_list_keeps_its_order_nulls_and_filter() -> None:
    out = to_spark("v", "select list(v order by k) filter (where c) from t")
    assert (
        "ARRAY_SORT(COLLECT_LIST(NAMED_STRUCT('n0', (k) IS NULL, 'k0', k, 'v', v)) FILTER( WHERE c))"
        in out
    )
    assert out.startswith("SELECT CASE WHEN SIZE(")  # DuckDB's NULL for a list of no rows


def test_macros_are_inlined_from_their_one_definition() -> None:
    out = to_spark("v", "select wilson_low(k, n, ci_z()) from t")
    assert "WILSON" not in out.upper() and "CI_Z" not in out.upper()
    assert "1.959963984540054" in out  # ci_z() at the default level, from hylo_analytics.stats


def test_exclude_is_expanded_from_the_known_columns() -> None:
    sql = "with r as (select *, 1 as rn from raw_quarantine) select * exclude (rn, sha256) from r"
    out = to_spark("v", sql, RAW)
    cols = [c for c in _schema.SCHEMAS["quarantine"].names if c != "sha256"]
    assert "SELECT " + ", ".join(f"`{c}`" for c in cols) + " FROM r" in out


@pytest.mark.parametrize(
    ("sql", "construct", "line", "why"),
    [
        (
            "select a,\n  approx_quantile(x, 0.5)\nfrom t",
            "APPROX_QUANTILE(x, 0.5)",
            2,
            "approximate",
        ),
        (
            "select\n  percentile_disc(0.5) within group (order by x) from t",
            "PERCENTILE_DISC",
            2,
            "not mapped",
        ),
        ("select my_udf(x) from t", "my_udf(x)", 1, "does not know"),
        ("select list(x order by k desc) from t", "ORDER BY k DESC", 1, "DESC"),
        (
            "select\n\n percentile_cont(0.5) within group (order by x desc) from t",
            "ORDER BY x DESC",
            3,
            "descending",
        ),
        ("select * from a union all by name select * from b", "UNION ALL BY NAME", 1, "BY NAME"),
        ("select * exclude (x) from t", "*", 1, "not known"),
        ("select score_rank(x) from t", "score_rank(x)", 1, "takes 2 arguments"),
    ],
)
def test_refusals_name_view_construct_and_line(
    sql: str, construct: str, line: int, why: str
) -> None:
    with pytest.raises(UntranslatableSQL) as info:
        to_spark("my_view", sql)
    msg = str(info.value)
    assert msg.startswith(f"view my_view, line {line}: "), msg
    assert construct.lower() in msg.lower() and why.lower() in msg.lower(), msg
    assert info.value.view == "my_view" and info.value.line == line


def test_two_statements_or_garbage_are_refused() -> None:
    with pytest.raises(UntranslatableSQL, match="exactly one SELECT"):
        to_spark("v", "select 1; select 2")
    with pytest.raises(UntranslatableSQL, match="cannot parse"):
        to_spark("v", "select (((")


def test_view_order_puts_each_view_after_what_it_reads() -> None:
    order = view_order()
    assert sorted(order) == sorted(view_names())
    assert (
        order.index("int_scores_preferred")
        < order.index("int_key_scores")
        < order.index("int_score_stats")
    )
    assert order.index("int_success_metric") < order.index("mart_success_rates")
