"""Untrusted text made safe to show on a terminal or open in a spreadsheet.

Every string in a log (run, task and metric names, notes, paths) comes from harnesses, forks
and colleagues. Printed raw, ``ESC]0;...BEL`` retitles the user's terminal and ``ESC[2J``
clears it; U+202E reverses what follows. Written raw into a CSV cell, ``=HYPERLINK(...)``
runs when the file is opened in a spreadsheet. One rule each, shared by every output path.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

__all__ = [
    "FORMULA_START",
    "did_you_mean",
    "json_printable",
    "printable",
    "printable_lines",
    "printable_spec",
    "spreadsheet_safe",
]


def _visible(c: str) -> str:
    return c if c.isprintable() else c.encode("unicode_escape").decode("ascii")


def printable(text: str) -> str:
    """``text`` with every character that is not printable (C0 and C1 controls, DEL, format
    characters such as the bidi overrides U+202A-U+202E and U+2066-U+2069, line and paragraph
    separators) shown as its Python escape (``\\x1b``, ``\\u202e``), so it cannot drive a
    terminal nor hide what follows. Printable text (any script) is returned as it is."""
    if text.isprintable():  # the common case, at C speed
        return text
    return "".join(_visible(c) for c in text)


def printable_lines(text: str) -> str:
    """:func:`printable` on each line of ``text``: newlines are kept, nothing else hidden is."""
    return "\n".join(printable(line) for line in text.split("\n"))


def printable_spec(value: Any) -> Any:
    """A JSON-like value (a Vega-Lite spec) with :func:`printable` applied to every string and
    key. vl-convert, which draws the report's and the server's charts, aborts the whole
    process (a Rust panic measuring text) on a label holding ESC or BEL."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {printable(k): printable_spec(v) for k, v in value.items()}
    if isinstance(value, list):
        return [printable_spec(v) for v in value]
    return value


def json_printable(text: str) -> str:
    """JSON ``text`` with the characters :func:`printable` escapes written as JSON escapes
    (``\\u001b``, ``\\u202e``) instead: the same data, safe to print. Newlines between
    values are kept; inside a JSON string there are none (JSON escapes them)."""
    if text.isprintable():
        return text
    return "".join(
        c if c.isprintable() or c == "\n" else json.dumps(c)[1:-1]  # ensure_ascii: \\uXXXX
        for c in text
    )


# What makes a spreadsheet read a cell as a formula (OWASP "CSV injection"): a leading = + -
# @, or a tab / carriage return that some spreadsheets skip before one of them.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(cell: str) -> str:
    """``cell`` prefixed with ``'`` when a spreadsheet would run it as a formula (OWASP);
    a number such as ``-0.5`` is data and stays as it is."""
    if not cell.startswith(FORMULA_START) or _is_number(cell):
        return cell
    return "'" + cell


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def did_you_mean(asked: Iterable[str], known: Iterable[str]) -> str:
    """``; did you mean 'x' for 'y'?`` for each asked name not known that has a close known
    one (``difflib``); empty when there is none. The one hint every name the CLI takes gets:
    metrics, run ids, columns, sources, statistics, reducers."""
    import difflib

    known = list(known)
    near = {a: difflib.get_close_matches(a, known, n=1) for a in asked if a not in known}
    return "".join(f"; did you mean {c[0]!r} for {a!r}?" for a, c in near.items() if c)
