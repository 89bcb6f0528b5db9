"""The calibration page: ``Store.calibrate``'s PPI++ rates of a trusted grade from a judge."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from hylo_analytics._html import attr
from hylo_analytics.serve._data import DataVersion
from hylo_analytics.serve.pages._layout import Cell, _e, _layout, _num, _prose, _table, url

__all__ = ["calibrate_page", "calibrate_refused"]


def _form(sources: Sequence[str], trusted: str, judge: str, baseline: str) -> str:
    def select(name: str, chosen: str) -> str:
        options = "".join(
            f'<option value="{attr(s)}"{" selected" if s == chosen else ""}>{_e(s)}</option>'
            for s in ["", *sources]
        )
        return f'<label>{name} <select name="{name}">{options}</select></label> '

    return (
        '<form method="get" action="/calibrate" id="calibrate-form" class="note">'
        + select("trusted_source", trusted)
        + select("judge_source", judge)
        + f'<label>baseline <input type="text" name="baseline" value="{attr(baseline)}" '
        'size="20"></label> <button>calibrate</button></form>'
    )


def _head(sources: Sequence[str], trusted: str, judge: str, baseline: str) -> list[str]:
    return [
        "<h1>Success rates calibrated from a judge</h1>",
        _form(sources, trusted, judge, baseline),
        "<p class=\"note\">Each policy's rate of the trusted grade (a person's, an oracle's, on "
        "some keys) by PPI++ from a judge's grades of every key, beside the classical and the "
        "judge-only estimates. <code>Store.calibrate</code> gives the same numbers.</p>",
    ]


def _cell(column: str) -> Cell:
    return lambda r: _num(r[column]) if isinstance(r[column], float) else _e(r[column])


def calibrate_refused(
    sources: Sequence[str],
    trusted: str,
    judge: str,
    baseline: str,
    message: str,
    *,
    version: DataVersion,
) -> str:
    """The page without a trusted source, or when the store refused: why, and the form."""
    said = _prose(message.rstrip(". ") + ".")
    body = [
        *_head(sources, trusted, judge, baseline),
        f'<p class="err" id="calibrate-error">{said}</p>',
    ]
    return _layout("calibration", "".join(body), version)


def calibrate_page(
    result: Any, sources: Sequence[str], *, query: dict[str, str], version: DataVersion
) -> str:
    """``result`` (a :class:`~hylo_analytics.compare.Calibration`): its rates, its
    differences from the baseline, its notes and the chart."""
    rates: pl.DataFrame = result.rates
    diffs: pl.DataFrame = result.differences
    notes = "".join(f"<li>{_prose(n)}</li>" for n in result.notes)
    body = [
        *_head(sources, query["trusted_source"], query["judge_source"], query["baseline"]),
        f'<p class="headline" id="calibrate-summary">{rates.height:,} policy-suite rows of '
        f"{_e(result.trusted)} at {result.level:.0%}.</p>",
        f'<ul class="note" id="calibrate-notes">{notes}</ul>' if notes else "",
        _table([(c, _cell(c)) for c in rates.columns], rates),
    ]
    if diffs.height:
        body.append("<h2>Differences from the baseline</h2>")
        body.append(_table([(c, _cell(c)) for c in diffs.columns], diffs))
    body.append(
        f'<div class="chart"><img alt="calibrated rates" id="calibrate-chart" '
        f'src="{url("/calibrate/chart.svg", query)}"></div>'
    )
    return _layout("calibration", "".join(body), version)
