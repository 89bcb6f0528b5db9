"""The report's building blocks: percentages, tables and charts inlined as SVG."""

from __future__ import annotations

from typing import Any

import vl_convert as vlc

from hylo_analytics._html import text
from hylo_analytics._text import printable_spec

__all__ = ["_pct", "_svg", "_table"]


def _pct(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "\u2013"
    return f"{x * 100:+.1f}" if signed else f"{x * 100:.1f}%"


def _svg(chart: Any) -> str:
    svg: str = vlc.vegalite_to_svg(printable_spec(chart.to_dict()))
    return f'<div class="chart">{svg}</div>'


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{text(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return (
        f'<div class="scroll"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>"
    )
