"""The critical-difference page: ``Store.critical_difference``'s ranks, tests and diagram."""

from __future__ import annotations

from typing import Any

from hylo_analytics._html import attr
from hylo_analytics.serve._data import DataVersion
from hylo_analytics.serve.pages._layout import Cell, _e, _layout, _num, _prose, _table, url

__all__ = ["cd_page", "cd_refused"]

_TESTS = ("nemenyi", "wilcoxon")


def _form(policy: str, metric: str, test: str) -> str:
    options = "".join(
        f'<option value="{t}"{" selected" if t == test else ""}>{t}</option>' for t in _TESTS
    )
    return (
        '<form method="get" action="/critical-difference" id="cd-form" class="note">'
        f'<label>policy <input type="text" name="policy" value="{attr(policy)}" size="14">'
        f'</label> <label>metric <input type="text" name="metric" value="{attr(metric)}" '
        f'size="12"></label> <label>test <select name="test">{options}</select></label> '
        "<button>rank</button></form>"
    )


def _head(policy: str, metric: str, test: str) -> list[str]:
    return [
        f"<h1>Average ranks of each {_e(policy)} on {_e(metric)} across tasks</h1>",
        _form(policy, metric, test),
        '<p class="note">Each policy ranked within each task (1 = best), the ranks averaged; '
        "Friedman tests whether any differ, then Nemenyi's critical difference (or Wilcoxon-"
        "Holm of every pair) finds the cliques no test separates. <code>Store."
        "critical_difference</code> gives the same numbers.</p>",
    ]


def cd_summary(result: Any) -> str:
    """The tests in one line: Friedman's and the critical difference."""
    f = result.friedman
    post = f"CD = {result.cd:.3f}" if result.test == "nemenyi" else "Wilcoxon-Holm pairs"
    return (
        f"Friedman chi-square {_num(f.statistic)} (df {_e(f.df)}), p = {_num(f.p)}; "
        f"Iman-Davenport F p = {_num(f.f_p)}; {post} at alpha {result.alpha:g}; "
        f"{f.k:,} policies over {f.n_blocks:,} blocks."
    )


def cd_page(result: Any, *, policy: str, version: DataVersion) -> str:
    """``result`` (a :class:`~hylo_analytics.compare.CriticalDifference`): the ranks, the
    tests' line, the notes and the diagram (its own request, drawn on the server)."""
    columns: list[tuple[str, Cell]] = [
        ("rank", lambda r: _e(r["rank"])),
        ("policy", lambda r: _e(r["policy"])),
        ("average rank", lambda r: _num(r["avg_rank"])),
        ("mean", lambda r: _num(r["mean"])),
        ("blocks", lambda r: _e(r["n_blocks"])),
        ("missing", lambda r: _e(r["n_missing"])),
        ("cliques", lambda r: _e(", ".join(str(c) for c in r["cliques"] or []))),
    ]
    notes = "".join(f"<li>{_prose(n)}</li>" for n in result.notes)
    params = {"policy": policy, "metric": result.metric, "test": result.test}
    body = [
        *_head(policy, result.metric, result.test),
        f'<p class="headline" id="cd-summary">{cd_summary(result)}</p>',
        f'<ul class="note" id="cd-notes">{notes}</ul>' if notes else "",
        _table(columns, result.ranks),
        f'<div class="chart"><img alt="critical-difference diagram" id="cd-chart" '
        f'src="{url("/critical-difference/chart.svg", params)}"></div>',
    ]
    return _layout("critical difference", "".join(body), version)


def cd_refused(policy: str, metric: str, test: str, message: str, *, version: DataVersion) -> str:
    """The page when the store refused: why, and the form to change it."""
    said = _prose(message.rstrip(". ") + ".")
    body = [*_head(policy, metric, test), f'<p class="err" id="cd-error">{said}</p>']
    return _layout("critical difference", "".join(body), version)
