"""The runs page: every run, a page at a time, with the parent / candidate picker.

The picks go to a comparison, or to the pooled comparison of the two runs' agents; the page
links to the ranking.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hylo_analytics._html import attr
from hylo_analytics.serve._data import (
    SORTS,
    DataVersion,
    Page,
    errors_label,
)
from hylo_analytics.serve.pages._layout import (
    Cell,
    _e,
    _errors_toggle,
    _layout,
    _num,
    _pager,
    _prose,
    _table,
    url,
)

__all__ = ["runs_page"]


def runs_page(
    page: Page,
    *,
    q: str | None,
    sort: str,
    version: DataVersion,
    parent: str | None = None,
    candidates: Sequence[str] = (),
    message: str | None = None,
) -> str:
    """Every run, a page at a time, with the parent / candidate picker; ``parent`` and
    ``candidates`` come checked (an incomplete pick sent back with ``message``). Success is
    under one errors policy, ``page.policy`` (None: each run's harness convention)."""
    picked = set(candidates)
    errors = page.policy

    def checked(on: bool) -> str:
        return " checked" if on else ""

    def sort_link(label: str, key: str) -> str:
        mark = " ▾" if key == sort else ""
        return (
            f'<a href="{url("/", {"q": q, "sort": key, "errors": errors})}">{_e(label)}{mark}</a>'
        )

    def interval(r: dict[str, Any]) -> str:
        if r["success"] is None:
            return "" if version.complete else '<span class="note">reading…</span>'

        return f"{_num(r['success'])} [{_num(r['ci_low'])}, {_num(r['ci_high'])}]"

    rid: Cell = lambda r: _e(r["run_id"])  # noqa: E731
    columns: list[tuple[str, Cell]] = [
        (
            "parent",
            lambda r: (
                f'<input type="radio" name="parent" value="{attr(r["run_id"])}"'
                f"{checked(r['run_id'] == parent)}>"
            ),
        ),
        (
            "candidate",
            lambda r: (
                f'<input type="checkbox" name="candidate" value="{attr(r["run_id"])}"'
                f"{checked(r['run_id'] in picked)}>"
            ),
        ),
        ("run", rid),
        ("agent", lambda r: _e(r["agent_name"])),
        ("version", lambda r: _e(r["agent_version"])),
        ("benchmark", lambda r: _e(r["benchmark_id"])),
        ("split", lambda r: _e(r["split"])),
        ("format", lambda r: _e(r["source_format"])),
        ("episodes", lambda r: f'<span class="num">{_e(r["n_samples"])}</span>'),
        ("success [95% CI]", interval),
        ("errors", lambda r: _e(r["errors"])),
        ("errored", lambda r: f'<span class="num">{_e(r["run_n_errors"])}</span>'),
        ("coverage", lambda r: _num(r["coverage"])),
        ("ingested", lambda r: _e(str(r["ingested_at"])[:19])),
    ]
    head = [
        "parent",
        "candidates",
        sort_link("run", "run"),
        sort_link("agent", "agent"),
        sort_link("version", "version"),
        sort_link("benchmark", "benchmark"),
        "split",
        "format",
        sort_link("episodes", "episodes"),
        sort_link("success [95% CI]", "success"),
        "errors",
        "errored",
        sort_link("coverage", "coverage"),
        sort_link("ingested", "ingested"),
    ]
    params = {"q": q, "sort": sort if sort in SORTS else None, "errors": errors}
    note = f'<p class="err" id="pick-note">{_prose(message)}</p>' if message else ""
    if parent is not None or candidates:  # the picker sent back: the toggle keeps the picks
        base = "/compare"
        kept: list[tuple[str, Any]] = [("parent", parent), *(("candidate", c) for c in candidates)]
    else:
        base, kept = "/", [("q", q), ("sort", params["sort"])]
    keep_errors = f'<input type="hidden" name="errors" value="{attr(errors)}">' if errors else ""
    body = (
        f"<h1>Runs</h1>{note}"
        f"{_errors_toggle(base, kept, errors, errors_label(errors))}"
        f'<form method="get" action="/"><input type="search" id="filter" name="q" '
        f'value="{attr(q)}" placeholder="filter runs (/ to focus; Enter searches the store)">'
        f'<input type="hidden" name="sort" value="{attr(sort)}">{keep_errors} '
        f"<button>search</button></form>"
        f'<p class="note">Keys: <kbd>j</kbd>/<kbd>k</kbd> move, <kbd>p</kbd> parent, '
        f"<kbd>c</kbd> candidate, <kbd>Enter</kbd> compare. Success is each run's success "
        f"metric under the errors policy above (the errors column: failure counts an errored "
        f"episode as a failure, exclude leaves it out) with its Wilson interval on that "
        f"denominator; errored counts the run's errored episodes; coverage is the share of "
        f"episodes in the denominator.</p>"
        f'<p class="note" id="rank-links">Rank: <a href="{url("/rank", {"errors": errors})}">'
        f"the agents, each over its runs</a> or "
        f'<a href="{url("/rank", {"policy": "run_id", "errors": errors})}">every run</a> '
        "(rank sets, tie groups, strengths; keys pair within each benchmark and split).</p>"
        f'<form method="get" action="/compare" id="pick">{keep_errors}'
        f'<button id="compare">compare candidates with parent</button> '
        f'<button id="pool" formaction="/pooled/pick" title="the candidate\'s agent against '
        "the parent's agent, paired within each suite both ran, then pooled\">"
        "pool their agents over suites</button>"
        f"{_pager(page, '/', params)}{_table(columns, page.rows, head=head)}</form>"
        f"{_pager(page, '/', params)}"
    )
    return _layout("runs", body, version, live="reload")
