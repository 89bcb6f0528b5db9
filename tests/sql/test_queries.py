"""The SQL modules run lives in ``sql/queries/`` (and the macro bodies in ``sql/macros/``):
each file is used, each use names a file, and each file's ``{fields}`` are well formed."""

from __future__ import annotations

import re
import string
from pathlib import Path

from hylo_analytics._sql import query_sql, sql_dir

PACKAGE = Path(__file__).resolve().parents[2] / "hylo_analytics"
_CALL = re.compile(r"""query_sql\(\s*["']([a-z_]+)["']""")


def _calls() -> set[str]:
    return {m for p in PACKAGE.rglob("*.py") for m in _CALL.findall(p.read_text())}


def test_every_query_is_used_and_every_use_names_a_query() -> None:
    files = {p.stem for p in (sql_dir() / "queries").glob("*.sql")}
    assert files, "no sql/queries/*.sql"
    assert _calls() == files


def test_every_query_formats_with_its_fields() -> None:
    for path in (sql_dir() / "queries").glob("*.sql"):
        fields = {f for _, f, _, _ in string.Formatter().parse(path.read_text()) if f}
        text = query_sql(path.stem, **{f: f"<{f}>" for f in fields})
        # a brace left outside comments and string literals is a field gone wrong (a JSON
        # literal such as '{}' is written twice in the file and stays in its string)
        code = re.sub(r"'(?:[^']|'')*'", "''", re.sub(r"--[^\n]*", "", text))
        assert "{" not in code or path.stem.startswith("export_"), path
        # a field is never inside a comment: its value would comment out the lines after it
        for line in text.splitlines():
            if line.lstrip().startswith("--"):
                assert not any(f"<{f}>" in line for f in fields), f"{path.name}: {line}"
