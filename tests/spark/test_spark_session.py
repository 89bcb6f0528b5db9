"""The shipped local session's settings, and Spark errors as one line (``spark._errors``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from py4j.protocol import Py4JJavaError, Py4JNetworkError
from pyspark.errors import PySparkException

from hylo_analytics.spark._errors import LIMIT, one_line

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def test_session_broadcasts_at_run_time_only(spark: SparkSession) -> None:
    # plan time sizes Parquet by compressed bytes (a 10M-sample store ran the driver out of
    # memory); adaptive execution sizes a finished shuffle by its real rows
    assert spark.conf.get("spark.sql.autoBroadcastJoinThreshold") == "-1"
    assert spark.conf.get("spark.sql.adaptive.autoBroadcastJoinThreshold") == "10MB"
    assert spark.conf.get("spark.sql.adaptive.enabled") == "true"


def _raised(spark: SparkSession, query: str) -> PySparkException:
    with pytest.raises(PySparkException) as info:
        spark.sql(query).collect()
    return info.value


@pytest.mark.parametrize(
    ("query", "want"),
    [
        (
            "select * from no_such_view",
            "AnalysisException: [TABLE_OR_VIEW_NOT_FOUND] The table or view `no_such_view` "
            "cannot be found.",
        ),
        ("select x y z from", "ParseException: [PARSE_SYNTAX_ERROR] Syntax error at or near"),
        ("select no_such_fn(1)", "AnalysisException: [UNRESOLVED_ROUTINE] Cannot resolve"),
    ],
)
def test_one_line_names_the_class_the_condition_and_the_fix(
    spark: SparkSession, query: str, want: str
) -> None:
    line = one_line(_raised(spark, query))
    assert line.startswith(want) and "\n" not in line and ". Fix: " in line


def test_one_line_lists_the_store_tables_for_a_missing_one(spark: SparkSession) -> None:
    line = one_line(_raised(spark, "select * from no_such_view"))
    assert line.endswith(
        "Fix: the store's tables are runs, samples, events, scores, quarantine, "
        "ingested_files, policy_results, resolved_scores and the stg_*, int_*, mart_*, raw_* "
        "views: "
        "'show views' lists them"
    )


class _JavaThrowable:
    """A stand-in for a py4j JavaObject of a Java exception: a real OutOfMemoryError would
    end the shared test JVM (Spark exits the JVM on a task's OutOfMemoryError). Its
    methods keep the Java names."""

    _target_id = "o1"

    def __init__(self, name: str, message: str | None, cause: Any = None) -> None:
        self.name, self.message, self.cause = name, message, cause

    def getClass(self) -> Any:
        return type("Class", (), {"getName": lambda _: self.name})()

    def getMessage(self) -> str | None:
        return self.message

    def getCause(self) -> Any:
        return self.cause


def test_one_line_out_of_memory_gives_the_memory_fix() -> None:
    oom = _JavaThrowable(
        "org.apache.spark.memory.SparkOutOfMemoryError",
        "Not enough memory to build and broadcast the table to all worker nodes.\n\tat x",
    )
    outer = _JavaThrowable("org.apache.spark.SparkException", "Exception thrown in await", oom)
    line = one_line(Py4JJavaError("An error occurred while calling o1.getResult.\n", outer))
    assert line == (
        "Py4JJavaError: org.apache.spark.SparkException > "
        "org.apache.spark.memory.SparkOutOfMemoryError: Not enough memory to build and "
        "broadcast the table to all worker nodes. Fix: raise --conf spark.driver.memory=8g "
        "(local mode runs every task in the driver) or ask about fewer runs; keep "
        "spark.sql.autoBroadcastJoinThreshold=-1 (docs/scale-out.md)"
    )


def test_one_line_jvm_gone_and_cut() -> None:
    line = one_line(Py4JNetworkError("Answer from Java side is empty"))
    assert line.startswith("Py4JNetworkError: Answer from Java side is empty. Fix: the Spark JVM")
    line = one_line(ValueError("x" * (LIMIT + 50) + "\nsecond line"))
    assert line == f"ValueError: {'x' * LIMIT}... (50 more characters)"


def test_one_line_escapes_control_characters_from_the_store(spark: SparkSession) -> None:
    """A run id holding ESC sequences, quoted back by Spark, reaches the terminal inert."""
    hostile = "run-\x1b]0;owned\x07-\x1b[2J"
    line = one_line(_raised(spark, f"select raise_error('bad run {hostile}')"))
    assert "\x1b" not in line and "\x07" not in line
    assert "\\x1b]0;owned\\x07-\\x1b[2J" in line
