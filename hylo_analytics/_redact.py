"""What a shared page must not give away: secrets in metadata, and where the files lived.

Logs carry whatever their harness recorded: an Inspect model config may hold an API key, a
harness config a token, an error message the absolute path of a file (the user's name, the
host's layout). :func:`redact_secrets` applies always where the project shows metadata;
:class:`Redactor` (also paths, the home folder and the host name) when the user shares on
purpose (``report --redact``).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["REDACTED", "Redactor", "redact_secrets", "secret_key"]

REDACTED = "[redacted]"

# words of a key name (split at non-letters and camelCase) that mark its value as secret
_SECRET_WORDS = frozenset(
    {"token", "secret", "password", "passwd", "authorization", "credential", "credentials",
     "apikey", "cookie", "bearer"}
)  # fmt: skip
_SECRET_PAIRS = frozenset(
    {("api", "key"), ("private", "key"), ("access", "key"), ("secret", "key")}
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def secret_key(name: str) -> bool:
    """Whether a metadata key names a secret: ``api_key``, ``OPENAI_API_KEY``, ``apiKey``,
    ``x-api-key``, ``auth_token``, ``client_secret``, ``password``, ``Authorization``,
    ``credentials`` (case-insensitive, by whole words: ``max_tokens`` is not one)."""
    words = [w for w in re.split(r"[^a-z0-9]+", _CAMEL.sub("_", name).lower()) if w]
    return any(w in _SECRET_WORDS for w in words) or any(
        pair in _SECRET_PAIRS for pair in itertools.pairwise(words)
    )


# ``key: value`` or ``key=value`` in free text (a Python repr or a command line quoted by an
# error message), the key and the value bare or quoted
_PAIR = re.compile(
    r"""(?P<key>["']?[A-Za-z_][\w.-]*["']?)(?P<sep>\s*[:=]\s*)"""
    r"""(?P<value>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|[^\s,;)}\]]+)"""
)


def _pair(m: re.Match[str]) -> str:
    if not secret_key(m.group("key").strip("'\"")):
        return m.group(0)
    value = m.group("value")
    quote = value[0] if value[0] in "'\"" else ""
    return f"{m.group('key')}{m.group('sep')}{quote}{REDACTED}{quote}"


def redact_secrets(value: Any) -> Any:
    """A JSON-like value with the value of every secret-looking key (:func:`secret_key`), at
    any depth, replaced by :data:`REDACTED`; text is looked into too: JSON, and ``key: value``
    or ``key=value`` pairs (an error message quoting a config)."""
    if isinstance(value, dict):
        return {
            k: REDACTED if secret_key(str(k)) and v is not None else redact_secrets(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [redact_secrets(v) for v in value]
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            inner = json.loads(value)
        except ValueError:
            return _PAIR.sub(_pair, value)
        cleaned = redact_secrets(inner)
        return value if cleaned == inner else json.dumps(cleaned)
    if isinstance(value, str) and ("=" in value or ":" in value):
        return _PAIR.sub(_pair, value)
    return value


# an absolute path: POSIX (``/a/b``, not inside a word or URL) or Windows (``C:\\a``)
_ABS_PATH = re.compile(
    r"(?<![\w.~/:-])(?:/(?:[^\s/'\"<>|,;()\[\]{}]+/)+[^\s/'\"<>|,;()\[\]{}]*"
    r"|[A-Za-z]:\\(?:[^\s\\'\"<>|,;()\[\]{}]+\\)*[^\s\\'\"<>|,;()\[\]{}]*)"
)


@dataclass(frozen=True)
class Redactor:
    """Rewrites text for sharing: an absolute path becomes relative to the root it lies in
    (a run's folder) or its file name; the home folder and the host name (as a whole word)
    left in the text are replaced; secrets as :func:`redact_secrets`."""

    roots: tuple[str, ...] = ()
    home: str = field(default_factory=lambda: os.path.expanduser("~"))
    host: str = field(default_factory=socket.gethostname)

    @classmethod
    def for_roots(cls, roots: Iterable[str | os.PathLike[str]]) -> Redactor:
        real = {str(Path(r)) for r in roots if r}
        return cls(roots=tuple(sorted(real, key=len, reverse=True)))  # deepest first

    def _path(self, m: re.Match[str]) -> str:
        path = m.group(0).rstrip(".")
        for root in self.roots:
            if path.startswith(root.rstrip("/") + "/"):
                return path[len(root.rstrip("/")) + 1 :] + m.group(0)[len(path) :]
        name = re.split(r"[/\\]", path.rstrip("/\\"))[-1]
        return (name or "[path]") + m.group(0)[len(path) :]

    def text(self, text: str) -> str:
        text = redact_secrets(text)
        text = _ABS_PATH.sub(self._path, text)
        if len(self.home) > 1:
            text = text.replace(self.home, "~")
        if self.host:
            text = re.sub(rf"(?<![\w-]){re.escape(self.host)}(?![\w-])", "[host]", text)
        return text
