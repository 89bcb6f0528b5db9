"""The line a field of a JSON document is on, for error messages (the slow, rare path).

Validation runs vectorized over parsed values, which carry no positions; once a file is known
to be bad, this scans its text once to say where ``samples[7].seed`` is. A field that is
missing is reported at the line of the object that should hold it.
"""

from __future__ import annotations

import re

from hylo_analytics.errors import InputError

__all__ = ["field_line"]

_STEP = re.compile(r"\.?([A-Za-z_][\w.-]*?)(?=\.|\[|$)|\[(\d+)\]")
_WS = " \t\r\n"
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_SCALAR = re.compile(r"[^,\]}\s]+")


def _path(field: str) -> list[str | int]:
    """``samples[7].seed`` -> ``["samples", 7, "seed"]``."""
    out: list[str | int] = []
    for name, index in _STEP.findall(field):
        out.append(int(index) if index else name)
    return out


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def ws(self) -> None:
        t, n = self.text, len(self.text)
        while self.pos < n and t[self.pos] in _WS:
            self.pos += 1

    def skip_value(self) -> None:
        self.ws()
        c = self.text[self.pos]
        if c == '"':
            m = _STRING.match(self.text, self.pos)
            if m is None:
                raise InputError("unterminated string")
            self.pos = m.end()
        elif c in "{[":
            close = "}" if c == "{" else "]"
            self.pos += 1
            self.ws()
            if self.text[self.pos] == close:
                self.pos += 1
                return
            while True:
                if c == "{":
                    self.skip_value()  # key
                    self.ws()
                    self.pos += 1  # ':'
                self.skip_value()
                self.ws()
                sep = self.text[self.pos]
                self.pos += 1
                if sep == close:
                    return
        else:
            m = _SCALAR.match(self.text, self.pos)
            self.pos = m.end() if m else self.pos + 1

    def find(self, step: str | int) -> bool:
        """Move to the value of ``step`` in the object/array at ``pos``; False if absent."""
        self.ws()
        c = self.text[self.pos]
        if isinstance(step, int) != (c == "["):
            return False
        close = "]" if c == "[" else "}"
        self.pos += 1
        i = 0
        while True:
            self.ws()
            if self.text[self.pos] == close:
                return False
            if isinstance(step, int):
                if i == step:
                    self.ws()
                    return True
            else:
                m = _STRING.match(self.text, self.pos)
                if m is None:
                    return False
                key = m.group(0)[1:-1]
                self.pos = m.end()
                self.ws()
                self.pos += 1  # ':'
                if key == step:
                    self.ws()
                    return True
            self.skip_value()
            self.ws()
            if self.text[self.pos] == ",":
                self.pos += 1
            i += 1


def field_line(data: bytes, field: str) -> int | None:
    """1-based line of ``field`` in the JSON document ``data`` (or of its closest parent)."""
    try:
        text = data.decode("utf-8")
        scan = _Scanner(text)
        scan.ws()
        found = scan.pos
        for step in _path(field):
            if not scan.find(step):
                break
            found = scan.pos
        return text.count("\n", 0, found) + 1
    except (ValueError, IndexError, UnicodeDecodeError):
        return None
