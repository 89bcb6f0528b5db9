"""Versions in the order people mean: ``1.9.0 < 1.10.0``, ``1.2.0-rc1 < 1.2.0 < 1.2.1``.

Text order puts ``2.294.0`` before ``2.3.0`` and ``1.2.0`` before ``1.2.0-rc1``. The natural
order here reads a version as its runs of digits (compared as numbers) and of letters: a
pre-release word (``dev``, ``a``/``alpha``, ``b``/``beta``, ``c``/``pre``/``preview``,
``rc``, in that order) sorts before the release it precedes, any other word (``post``, a
local label) after it, and a leading ``v`` is dropped (``v1.2`` is ``1.2``). Separators
(``.``, ``-``, ``_``, ``+``) only split. It orders labels (a few thousand distinct versions),
never rows: :func:`version_ranks` turns a column into ranks once per distinct value.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

__all__ = ["natural_sorted", "version_key", "version_ranks"]

_TOKEN = re.compile(r"\d+|[a-z]+")
_PRE = {"dev": 0, "a": 1, "alpha": 1, "b": 2, "beta": 2, "c": 3, "pre": 3, "preview": 3, "rc": 4}
_END = (1, 0, "")  # the end of a version: after a pre-release word, before a number or word

VersionKey = tuple[tuple[int, int, str], ...]


def version_key(version: str | None) -> VersionKey:
    """A sort key for ``version`` in natural version order (None and "" first)."""
    if not version:
        return ()
    text = version.strip().lower()
    if len(text) > 1 and text[0] == "v" and text[1].isdigit():
        text = text[1:]
    key = []
    for tok in _TOKEN.findall(text):
        if tok.isdigit():
            key.append((2, int(tok), ""))
        elif tok in _PRE:
            key.append((0, _PRE[tok], tok))
        else:
            key.append((3, 0, tok))
    key.append(_END)
    return tuple(key)


def natural_sorted(versions: Iterable[str | None]) -> list[str | None]:
    """The distinct ``versions`` in natural version order (ties in text order)."""
    return sorted(set(versions), key=lambda v: (version_key(v), v is not None, v or ""))


def version_ranks(column: pl.Series) -> pl.Series:
    """Each value's 0-based rank in natural version order (equal values share a rank; null
    first), as a ``UInt32`` series: sort or filter a frame by it."""
    import polars as pl

    order = natural_sorted(column.cast(pl.String).unique().to_list())
    ranks = {v: i for i, v in enumerate(order)}
    return (
        column.cast(pl.String)
        .replace_strict(
            {k: v for k, v in ranks.items() if k is not None}, default=0, return_dtype=pl.UInt32
        )
        .fill_null(0)
        .alias(column.name)
    )
