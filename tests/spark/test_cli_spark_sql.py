"""``hylo-analytics spark-sql``: a one-off Spark SQL query over the store, output like ``sql``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import hylo_analytics as ha
from hylo_analytics.cli import main
from hylo_analytics.spark import BROADCAST_DEFAULTS
from hylo_analytics.spark._errors import LIMIT

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def test_spark_sql_json_matches_duckdb(
    spark: object, spark_sample_store: ha.Store, capsys: pytest.CaptureFixture[str]
) -> None:
    query = "select run_id, n_valid, successes from mart_success_rates order by run_id"
    code = main(["spark-sql", "--store", str(spark_sample_store.root), "--format", "json", query])
    assert code == 0
    got = json.loads(capsys.readouterr().out)
    want = spark_sample_store.sql(query).to_dicts()
    assert got == want and len(got) == 3


def test_spark_sql_csv_to_a_file(
    spark: object, spark_sample_store: ha.Store, tmp_path: Path
) -> None:
    out = tmp_path / "runs.csv"
    query = "select count(*) as n from runs"
    assert (
        main(
            [
                "spark-sql",
                "--store",
                str(spark_sample_store.root),
                "--format",
                "csv",
                "-o",
                str(out),
                query,
            ]
        )
        == 0
    )
    assert out.read_text().splitlines() == ["n", "3"]


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    """The command's stderr, asserted to be one error line with no Python or Java trace."""
    err = capsys.readouterr().err
    assert err.startswith("hylo-analytics spark-sql: error: ") and err.count("\n") == 1
    assert "Traceback" not in err and "at org.apache" not in err and "\tat " not in err
    return err


def test_spark_sql_bad_query_is_a_one_line_error(
    spark: object, spark_sample_store: ha.Store, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["spark-sql", "--store", str(spark_sample_store.root), "select nope from runs"])
    assert code == 2
    err = _one_line_error(capsys)
    # the analysis error's first line names the column and Spark's suggestions; its plan is cut
    assert "AnalysisException: [UNRESOLVED_COLUMN" in err and "`nope`" in err
    assert "'describe VIEW' lists a view's columns" in err and "Project" not in err


def test_spark_sql_java_error_is_a_one_line_error(
    spark: object, spark_sample_store: ha.Store, capsys: pytest.CaptureFixture[str]
) -> None:
    # a task's Java exception that pyspark does not convert: a real py4j Py4JJavaError
    query = "select reflect('java.lang.Integer', 'parseInt', run_id) from runs"
    assert main(["spark-sql", "--store", str(spark_sample_store.root), query]) == 2
    err = _one_line_error(capsys)
    assert "error: Py4JJavaError: org.apache.spark.SparkException > " in err
    assert "java.lang.NumberFormatException: For input string: " in err


def test_spark_sql_long_message_is_cut(
    spark: object, spark_sample_store: ha.Store, capsys: pytest.CaptureFixture[str]
) -> None:
    query = "select raise_error(concat(repeat('y', 5000), run_id)) from runs"
    assert main(["spark-sql", "--store", str(spark_sample_store.root), query]) == 2
    err = _one_line_error(capsys)
    assert "SparkRuntimeException: [USER_RAISED_EXCEPTION] yyy" in err
    assert len(err) < LIMIT + 200 and "more characters)" in err


def test_spark_sql_bad_conf_and_missing_store(
    spark: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["spark-sql", "--store", str(tmp_path), "--conf", "novalue", "select 1"]) == 2
    assert "--conf expects KEY=VALUE, got 'novalue'" in capsys.readouterr().err
    assert main(["spark-sql", "--store", str(tmp_path / "none"), "select 1"]) == 2
    assert "error: StoreError: no store at" in _one_line_error(capsys)


def test_spark_sql_conf_overrides_the_broadcast_default(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = "spark.sql.autoBroadcastJoinThreshold"
    assert spark.conf.get(key) == "-1"  # as shipped (tests/spark/test_spark_session.py)
    try:
        # the session is set before the store is read: a missing store keeps this test quick
        argv = ["spark-sql", "--store", str(tmp_path / "none"), "--conf", f"{key}=10m"]
        assert main([*argv, "select 1"]) == 2
        _one_line_error(capsys)
        assert spark.conf.get(key) == "10m"
    finally:  # the session is shared by every test of tests/spark
        spark.conf.set(key, BROADCAST_DEFAULTS[key])


def test_spark_sql_help_names_the_uri_forms(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["spark-sql", "--help"])
    text = capsys.readouterr().out
    assert "s3a://" in text and "spark-submit" in text and "--master" in text


def test_spark_sql_verbose_shows_the_whole_error(
    spark: object, spark_sample_store: ha.Store, capsys: pytest.CaptureFixture[str]
) -> None:
    """One line by default; ``--verbose`` adds the traceback and Spark's whole message (its
    plan), the one line still last."""
    argv = ["spark-sql", "--store", str(spark_sample_store.root), "select nope from runs"]
    assert main(["--verbose", *argv]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and "AnalysisException" in err
    assert err.strip().splitlines()[-1].startswith("hylo-analytics spark-sql: error: ")
    assert len(err.splitlines()) > 3
