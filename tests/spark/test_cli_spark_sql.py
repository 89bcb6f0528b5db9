"""``hylo-analytics spark-sql``: a one-off Spark SQL query over the store, output like ``sql``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import hylo_analytics as ha
from hylo_analytics.cli import main


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


def test_spark_sql_bad_query_is_a_one_line_error(
    spark: object, spark_sample_store: ha.Store, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["spark-sql", "--store", str(spark_sample_store.root), "select nope from runs"])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("hylo-analytics spark-sql: error: ") and "nope" in err


def test_spark_sql_bad_conf_and_missing_store(
    spark: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["spark-sql", "--store", str(tmp_path), "--conf", "novalue", "select 1"]) == 2
    assert "--conf expects KEY=VALUE, got 'novalue'" in capsys.readouterr().err
    assert main(["spark-sql", "--store", str(tmp_path / "none"), "select 1"]) == 2
    assert "no store at" in capsys.readouterr().err


def test_spark_sql_help_names_the_uri_forms(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["spark-sql", "--help"])
    text = capsys.readouterr().out
    assert "s3a://" in text and "spark-submit" in text and "--master" in text
