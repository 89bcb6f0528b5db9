"""``hylo-analytics spark-sql``: one query over the store's views on a Spark session."""

from __future__ import annotations

import argparse
import logging
import sys

from hylo_analytics.cli._common import add_format_args, emit, say
from hylo_analytics.errors import InputError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "spark-sql",
        help="run a Spark SQL query against the store's views (needs pyspark)",
        description=(
            "Run one Spark SQL query against the store: every view of the 'sql' command "
            "(runs, scores, stg_*, int_*, mart_*, raw_*) is created on a Spark session, "
            "transpiled from the same DuckDB SQL, so answers are the same. The store may be a "
            "local folder or a Hadoop URI (s3a://, hdfs://, abfss://). Needs pyspark "
            "(pip install 'hylo_analytics[spark]') and Java 17. On a cluster, use "
            "hylo_analytics.spark.register from a spark-submit job (docs/scale-out.md). "
            'Example: hylo-analytics spark-sql --store out/store "select metric, '
            'avg(mean) from mart_aggregate_run group by metric"'
        ),
    )
    p.add_argument("query", metavar="QUERY", help="a Spark SQL query")
    p.add_argument(
        "--store",
        required=True,
        metavar="DIR_OR_URI",
        help="the store: a folder, or a URI Spark can read, passed to Spark as it is",
    )
    p.add_argument(
        "--master",
        default="local[2]",
        help="the Spark master (default local[2]: this machine, two cores)",
    )
    p.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=(
            "a Spark setting, e.g. spark.driver.memory=4g (repeat); it overrides the session's "
            "own, among them spark.sql.autoBroadcastJoinThreshold=-1 (docs/scale-out.md)"
        ),
    )
    add_format_args(p)
    p.set_defaults(func=run_spark_sql)


def _parse_conf(items: list[str]) -> dict[str, str]:
    conf = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InputError(
                f"--conf expects KEY=VALUE, got {item!r} (e.g. spark.sql.shuffle.partitions=4)"
            )
        conf[key] = value
    return conf


def run_spark_sql(args: argparse.Namespace) -> int:
    conf = _parse_conf(args.conf)
    try:
        from py4j.protocol import Py4JError
        from pyspark.errors import PySparkException
    except ImportError:
        say(
            "hylo-analytics spark-sql: error: pyspark is not installed "
            "(pip install 'hylo_analytics[spark]'; it needs Java 17)",
            file=sys.stderr,
        )
        return 2
    from pyspark.logger import PySparkLogger

    from hylo_analytics._manifest import StoreError
    from hylo_analytics.spark import UntranslatableSQL, local_session, register, spark_sql
    from hylo_analytics.spark._errors import one_line

    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        # pyspark logs a failed query as JSON on stderr: the one-line error below says it
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)

    master = args.master
    cores = master[len("local[") : -1] if master.startswith("local[") else ""
    if not cores.isdigit():
        conf["spark.master"] = master
    try:
        session = local_session(cores=int(cores) if cores.isdigit() else 2, **conf)
        # the JVM logs a failed task with its Java stack trace: the one line below says it
        session.sparkContext.setLogLevel("OFF")
        register(session, args.store)
        frame = spark_sql(session, args.query)
    except (PySparkException, Py4JError, StoreError, UntranslatableSQL) as exc:
        from hylo_analytics.cli import verbose

        if verbose(args):  # the whole plan and stack trace, for a bug report
            import traceback

            traceback.print_exception(exc, file=sys.stderr)
        say(f"hylo-analytics spark-sql: error: {one_line(exc)}", file=sys.stderr)
        return 2
    emit(frame, args.format, args.output, wide=args.wide)
    return 0
