"""Escaping for every HTML the package writes: the one place untrusted text meets markup.

Run, task and metric names, explanations and metadata come from logs that anyone can write, so
every writer (the report, the charts, ``serve``, the notebook views) goes through these
helpers instead of its own: :func:`text` for element content, :func:`attr` for attribute
values, :func:`script_json` for data inside ``<script>``.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
from typing import Any

__all__ = [
    "HIDDEN",
    "ScriptJSONEncoder",
    "attr",
    "csp_hash",
    "script_json",
    "shorten",
    "text",
]

# C0/C1 controls (tab and newline kept), the line separators (JavaScript parsers before 2019,
# Vega's expression parser among them, end a string literal there) and the bidi marks,
# overrides and isolates that make a name read differently from what it is (U+202E turns
# "gpj.exe" around); a regex character class body, for ``re`` and for polars alike
HIDDEN = "\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_HIDDEN = re.compile(f"[{HIDDEN}]")

# inside a JSON string these are harmless to JSON but not to the HTML parser (``</script>``,
# ``<!--``) or to older JavaScript (the line separators); JSON has none of them outside strings
_SCRIPT_UNSAFE = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}
_SCRIPT_RE = re.compile("[<>&\u2028\u2029]")


def _visible(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def text(value: Any) -> str:
    """``value`` as element content: markup escaped, control and bidi characters shown as
    ``\\uXXXX`` so a name cannot hide or reorder what is printed; None is empty."""
    if value is None:
        return ""
    return html.escape(_HIDDEN.sub(_visible, str(value)), quote=True)


def attr(value: Any) -> str:
    """``value`` inside a double-quoted attribute, exactly (a form value must round-trip)."""
    return "" if value is None else html.escape(str(value), quote=True)


def shorten(value: Any, limit: int) -> str:
    """At most ``limit`` characters of ``value`` with an ellipsis, for a label, never markup."""
    s = "" if value is None else str(value)
    return s if len(s) <= limit else s[: max(limit - 1, 0)] + "\u2026"


def _script_safe(encoded: str) -> str:
    return _SCRIPT_RE.sub(lambda m: _SCRIPT_UNSAFE[m.group()], encoded)


class ScriptJSONEncoder(json.JSONEncoder):
    """JSON that can sit inside ``<script>``: ``< > &`` and U+2028/9 as ``\\uXXXX``.

    Given to altair as ``json_kwds={"cls": ScriptJSONEncoder}`` so its templates embed a spec
    that no string in it can close.
    """

    def encode(self, o: Any) -> str:
        return _script_safe(super().encode(o))

    def iterencode(self, o: Any, _one_shot: bool = False) -> Any:
        for chunk in super().iterencode(o, _one_shot):
            yield _script_safe(chunk)


def script_json(value: Any) -> str:
    """``value`` as JSON safe to embed in a ``<script>`` element."""
    return json.dumps(value, cls=ScriptJSONEncoder)


def csp_hash(script: str) -> str:
    """The Content-Security-Policy source (``'sha256-...'``) that allows this inline script."""
    digest = hashlib.sha256(script.encode()).digest()
    return f"'sha256-{base64.b64encode(digest).decode()}'"
