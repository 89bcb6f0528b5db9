"""A Spark error as one line: its class, its first line cut to :data:`LIMIT`, and the fix.

pyspark raises an error Spark names as a :class:`pyspark.errors.PySparkException` whose text
may carry the whole query plan after its first line (186 KB seen); an error it does not
convert (a task's Java exception, ``java.lang.OutOfMemoryError``) comes as a
``py4j.protocol.Py4JJavaError`` whose text is a Java stack trace, and a JVM that died as a
bare ``Py4JError``. :func:`one_line` keeps what a user acts on, for any of them and for the
project's own errors.
"""

from __future__ import annotations

import re
from typing import Any

from hylo_analytics._text import printable

# the store's tables a Spark session names as temp views (spark.local_session registers them)
_FRIENDLY = (
    "runs", "samples", "events", "scores", "quarantine", "ingested_files", "policy_results",
    "resolved_scores",
)  # fmt: skip

__all__ = ["LIMIT", "one_line"]

LIMIT = 400  # characters of the error's own message; the fix is never cut

_MEMORY = (
    "raise --conf spark.driver.memory=8g (local mode runs every task in the driver) or ask "
    "about fewer runs; keep spark.sql.autoBroadcastJoinThreshold=-1 (docs/scale-out.md)"
)
_JVM_GONE = f"the Spark JVM stopped, most often out of memory: {_MEMORY}"
_FIXES = {  # the error condition Spark names (its prefix) -> what to do
    "TABLE_OR_VIEW_NOT_FOUND": "the store's tables are {friendly} and the stg_*, int_*, "
    "mart_*, raw_* views: 'show views' lists them",
    "UNRESOLVED_COLUMN": "'describe VIEW' lists a view's columns",
    "UNRESOLVED_ROUTINE": "the query is Spark SQL, not DuckDB SQL: Spark's functions are at "
    "https://spark.apache.org/docs/latest/api/sql/",
    "PARSE_SYNTAX_ERROR": "the query is Spark SQL, not DuckDB SQL",
    "JAVA_GATEWAY_EXITED": "pyspark needs Java 17 (apt-get install openjdk-17-jre-headless)",
    "_LEGACY_ERROR_TEMP_2250": _MEMORY,  # not enough memory to build a broadcast
}
_OUT_OF_MEMORY = re.compile(r"OutOfMemoryError|Java heap space|GC overhead limit")
_CONDITION = re.compile(r"\[([A-Z0-9_]+)(?:\.[A-Z0-9_]+)*\]")


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def _java_chain(java_exception: Any) -> list[tuple[str, str]]:
    """(class name, first line of message) of a Java exception and each of its causes."""
    chain: list[tuple[str, str]] = []
    cause = java_exception
    while cause is not None and len(chain) < 20:
        chain.append((str(cause.getClass().getName()), _first_line(str(cause.getMessage() or ""))))
        cause = cause.getCause()
    return chain


def _describe_java(exc: BaseException) -> str:
    """``outer > ... > root: message`` of a Py4JJavaError: its causes, the deepest message."""
    try:
        chain = _java_chain(exc.java_exception)  # type: ignore[attr-defined]
    except Exception:  # the JVM is gone: nothing left to ask
        return ""
    names: list[str] = []
    for name, _ in chain:
        if not names or names[-1] != name:
            names.append(name)
    message = next((m for _, m in reversed(chain) if m), "")
    return " > ".join(names) + (f": {message}" if message else "")


def _message(exc: BaseException) -> str:
    from py4j.protocol import Py4JJavaError

    if isinstance(exc, Py4JJavaError):
        return _describe_java(exc) or _first_line(exc.errmsg)
    try:
        return _first_line(str(exc))
    except Exception:  # a pyspark error whose text asks a JVM that is gone
        return ""


def _fix(exc: BaseException, message: str) -> str:
    from py4j.protocol import Py4JError, Py4JJavaError

    if _OUT_OF_MEMORY.search(message):
        return _MEMORY
    condition = _CONDITION.search(message)
    if condition and condition.group(1) in _FIXES:
        return _FIXES[condition.group(1)].format(friendly=", ".join(_FRIENDLY))
    if isinstance(exc, Py4JError) and not isinstance(exc, Py4JJavaError):
        return _JVM_GONE
    return ""


def one_line(exc: BaseException, limit: int = LIMIT) -> str:
    """``Class: message. Fix: ...``: ``exc``'s class, the first line of its message (for a
    Java error, its chain of causes and the deepest message) cut to ``limit`` characters, and
    the fix where one is known. Never a newline."""
    message = _message(exc)
    fix = _fix(exc, message)
    if len(message) > limit:
        message = f"{message[:limit]}... ({len(message) - limit} more characters)"
    line = f"{type(exc).__name__}: {message}".rstrip(" ;:.") if message else type(exc).__name__
    line = f"{line}. Fix: {fix}" if fix else line
    # a message may quote the store's text (a run id Spark failed to parse): escape control
    # characters, so a name holding ESC sequences cannot drive the user's terminal
    return printable(line)
