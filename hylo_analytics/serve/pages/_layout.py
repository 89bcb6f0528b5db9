"""The frame every page shares: escaping, numbers, tables, pagers, the layout, the error page.

Every value reaches the page through :func:`_e` / :func:`_prose` (escaped once, cut at a
length), and every link through :func:`url`, so a page can be shared as it is.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlencode

import polars as pl

from hylo_analytics._html import attr, shorten, text
from hylo_analytics.serve._assets import CSS, JS
from hylo_analytics.serve._data import (
    FIELD_CHARS,
    NAME_CHARS,
    DataVersion,
    Page,
)

__all__ = ["Cell", "error_page", "url"]


Cell = Callable[[dict[str, Any]], str]


def url(path: str, params: Sequence[tuple[str, Any]] | Mapping[str, Any]) -> str:
    """``path?query`` with ``None`` values left out (the one way links are built)."""
    items = params.items() if isinstance(params, Mapping) else params
    kept = [(k, str(v)) for k, v in items if v is not None and v != ""]
    return attr(path + ("?" + urlencode(kept) if kept else ""))


def _e(value: Any) -> str:
    """A name or value as page text: escaped once, cut at :data:`NAME_CHARS`."""
    return text(None if value is None else shorten(value, NAME_CHARS))


def _prose(value: Any) -> str:
    """A note or message as page text: escaped once, cut at :data:`FIELD_CHARS`."""
    return text(None if value is None else shorten(value, FIELD_CHARS))


def _num(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 1e-3 and value != 0 else f"{value:.{digits}f}"
    return _e(value)


def _p(value: Any) -> str:
    if value is None:
        return ""
    return f"{value:.2g}" if value < 0.001 else f"{value:.3f}"


def _badge(verdict: Any) -> str:
    v = _e(verdict)
    return f'<span class="verdict {v}">{v}</span>'


def _layout(
    title: str, body: str, version: DataVersion, *, live: str = "banner", pending: bool = False
) -> str:
    """The page around ``body``. ``pending``: the page shows work still being computed; its
    version tag never matches the store's, so the poll reloads it (every 2 s) until done."""
    tag = f"{version.tag}.computing" if pending else version.tag
    flag = ' data-pending="1"' if pending else ""
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(title)} - hylo-analytics</title><style>{CSS}</style></head>"
        f'<body data-version="{tag}" data-live="{"reload" if pending else live}"{flag}>'
        f'<header><a href="/">runs</a><a href="/rank">ranking</a><a href="/pareto">pareto</a><span>hylo-analytics</span>'
        f'<span class="asof" id="asof">data as of {_e(version.text())}</span></header>'
        f'<div id="live">New data in the store - <a href="">reload</a></div>'
        f"<main>{body}</main><script>{JS}</script></body></html>"
    )


def _table(
    columns: Sequence[tuple[str, Cell]],
    rows: pl.DataFrame,
    *,
    href: Callable[[dict[str, Any]], str | None] | None = None,
    row_class: Callable[[dict[str, Any]], str] | None = None,
    head: Sequence[str] | None = None,
) -> str:
    header = "".join(f"<th>{h}</th>" for h in (head or [_e(name) for name, _ in columns]))
    body = []
    for row in rows.iter_rows(named=True):  # one page of rows: laying out, not computing
        link = href(row) if href else None
        attrs = f' data-href="{link}"' if link else ""
        cls = f' class="{row_class(row)}"' if row_class else ""
        cells = "".join(f"<td>{fmt(row)}</td>" for _, fmt in columns)
        body.append(f"<tr data-row{attrs}{cls}>{cells}</tr>")
    # a wide table scrolls inside its box: the page itself never grows wider than the window
    return (
        f'<div class="scroll"><table><thead><tr>{header}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def _pager(page: Page, base: str, params: Mapping[str, Any] | Sequence[tuple[str, Any]]) -> str:
    items = list(params.items() if isinstance(params, Mapping) else params)

    def to(n: int) -> str:
        return url(base, [*items, ("page", n)])

    links = []
    if page.page > 1:
        links.append(f'<a rel="prev" href="{to(min(page.page, page.pages + 1) - 1)}">prev</a>')
    if page.page < page.pages:
        links.append(f'<a rel="next" href="{to(page.page + 1)}">next</a>')
    return (
        f'<div class="pager">page {page.page} of {page.pages} ({page.total} rows) '
        f"{' '.join(links)}</div>"
    )


def _errors_toggle(
    base: str, params: Sequence[tuple[str, Any]], errors: str | None, label: str
) -> str:
    """The errors policy the page applies (``label``) and links to the same page under each
    policy, every other query parameter kept: harness default, failure, exclude."""
    kept = [(k, v) for k, v in params if k not in ("errors", "page")]
    choices = (("harness default", None), ("failure", "failure"), ("exclude", "exclude"))
    links = " | ".join(
        (
            f'<a class="errors-choice" href="{url(base, [*kept, ("errors", value)])}"'
            + (' aria-current="true"><b>' if value == errors else ">")
            + _e(name)
            + ("</b>" if value == errors else "")
            + "</a>"
        )
        for name, value in choices
    )
    return f'<p class="note" id="errors-policy"><b>{_e(label)}</b> - show errors as: {links}</p>'


def error_page(status: int, message: str, version: DataVersion) -> str:
    """A 4xx / 5xx page: the status and the message (which says what to do)."""
    body = f'<h1>{status}</h1><p class="err">{_prose(message)}</p><p><a href="/">all runs</a></p>'
    return _layout(str(status), body, version)
