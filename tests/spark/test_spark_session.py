"""The shipped local session's settings."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def test_session_broadcasts_at_run_time_only(spark: SparkSession) -> None:
    # plan time sizes Parquet by compressed bytes (a 10M-sample store ran the driver out of
    # memory); adaptive execution sizes a finished shuffle by its real rows
    assert spark.conf.get("spark.sql.autoBroadcastJoinThreshold") == "-1"
    assert spark.conf.get("spark.sql.adaptive.autoBroadcastJoinThreshold") == "10MB"
    assert spark.conf.get("spark.sql.adaptive.enabled") == "true"
