"""Server-rendered HTML for each view: f-strings over frames, every value escaped.

The pages only lay out what the readers return (``_data``); they compute no statistic. Each
link is a stable URL of query parameters, so a page can be shared as it is.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import polars as pl

from hylo_analytics._html import attr, shorten, text
from hylo_analytics.compare.engine import test_label
from hylo_analytics.serve._assets import CSS, JS
from hylo_analytics.serve._data import (
    FIELD_CHARS,
    NAME_CHARS,
    PAGE_SIZE,
    SORTS,
    TRANSCRIPT_CHARS,
    DataVersion,
    Page,
    errors_label,
)

if TYPE_CHECKING:
    from hylo_analytics.ingest.inspect_transcript import Message, Transcript

__all__ = [
    "comparison_page",
    "episode_page",
    "error_page",
    "runs_page",
    "task_page",
    "url",
]

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


def _layout(title: str, body: str, version: DataVersion, *, live: str = "banner") -> str:
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(title)} - hylo-analytics</title><style>{CSS}</style></head>"
        f'<body data-version="{version.tag}" data-live="{live}">'
        f'<header><a href="/">runs</a><span>hylo-analytics</span>'
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


# -- runs ----------------------------------------------------------------------------------


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
        "version",
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
        f'<form method="get" action="/compare" id="pick">{keep_errors}'
        f'<button id="compare">compare candidates with parent</button>'
        f"{_pager(page, '/', params)}{_table(columns, page.rows, head=head)}</form>"
        f"{_pager(page, '/', params)}"
    )
    return _layout("runs", body, version, live="reload")


# -- comparison ----------------------------------------------------------------------------


def comparison_page(
    frame: pl.DataFrame,
    *,
    parent: str,
    candidates: Sequence[str],
    labels: Mapping[str, str],
    rule: str,
    forests: Mapping[str, str],
    version: DataVersion,
    page: int = 1,
    errors: str | None = None,
    errored: Mapping[str, int] | None = None,
    metric: str | None = None,
) -> str:
    """Headline verdict, rule, forest plot, the per-task table (a page of it) and the
    dropped pairs, all under one errors policy (``errors``, None: each run's harness
    convention; the frame's ``errors`` column names the one applied); ``errored``: each run's
    errored episodes."""
    errored = errored or {}
    params: list[tuple[str, Any]] = [
        ("parent", parent),
        *(("candidate", c) for c in candidates),
        ("metric", metric),
    ]
    applied = sorted(set(frame["errors"].drop_nulls().to_list())) if "errors" in frame else []
    label = errors_label(
        errors or (applied[0] if len(applied) == 1 else "mixed" if applied else None),
        convention=errors is None,
    )
    parts = [
        f"<h1>Comparison against parent {_e(labels.get(parent, parent))}</h1>",
        _errors_toggle("/compare", params, errors, label),
        f'<p class="note">{_prose(rule)}</p>',
    ]
    for cand in candidates:
        rows = frame.filter(pl.col("candidate") == cand)
        overall = rows.filter(pl.col("level") == "overall")
        tasks = rows.filter(pl.col("level") != "overall").sort("task_id")
        parts.append(f"<h2>{_e(labels.get(cand, cand))} <small>({_e(cand)})</small></h2>")
        if overall.is_empty():
            parts.append('<p class="err">no comparable pairs</p>')
            continue
        o = overall.row(0, named=True)
        parts.append(
            f'<p class="headline">{_badge(o["verdict"])} {_e(metric or "success")} '
            f"{_num(o['mean_candidate'])} "
            f"vs {_num(o['mean_parent'])}: difference {_num(o['mean_diff'])} "
            f"[{_num(o['ci_low'])}, {_num(o['ci_high'])}], "
            f"{o['candidate_wins']} wins / {o['parent_wins']} losses / {o['ties']} ties, "
            f"{_e(test_label(o.get('test')))}: p better = {_p(o['p_value'])}, "
            f"p worse = {_p(o['p_worse'])}, adjusted p of the verdict = "
            f"{_p(o['p_verdict'])}</p>"
            f'<p class="note">{_prose(o["verdict_note"])}</p>'
            f'<p class="note errors-count">{_e(errors_label(o.get("errors"), not errors))}: '
            f"errored "
            f"episodes {_e(errored.get(cand, 0))} of the candidate, "
            f"{_e(errored.get(parent, 0))} of the parent; {_e(o['n_dropped'])} pairs dropped "
            f"({_e(o['n_dropped_candidate'])} by the candidate, {_e(o['n_dropped_parent'])} by "
            f"the parent, {_e(o['n_dropped_both'])} by both)</p>"
        )
        if o.get("gate_note"):
            parts.append(f'<p class="note">{_prose(o["gate_note"])}</p>')
        parts.append(forests.get(cand, ""))

        task_href = _task_link(parent, cand, errors, metric)
        columns: list[tuple[str, Cell]] = [
            ("task", lambda r, h=task_href: f'<a href="{h(r)}">{_e(r["task_id"])}</a>'),  # type: ignore[misc]
            ("pairs", lambda r: _e(r["n_pairs"])),
            ("wins", lambda r: _e(r["candidate_wins"])),
            ("losses", lambda r: _e(r["parent_wins"])),
            ("ties", lambda r: _e(r["ties"])),
            ("p better", lambda r: _p(r["p_value"])),
            ("p worse", lambda r: _p(r["p_worse"])),
            ("adjusted p (verdict)", lambda r: _p(r["p_verdict"])),
            (
                "difference [CI]",
                lambda r: f"{_num(r['mean_diff'])} [{_num(r['ci_low'])}, {_num(r['ci_high'])}]",
            ),
            ("verdict", lambda r: _badge(r["verdict"])),
            ("dropped", lambda r: _e(r["n_dropped"])),
        ]
        shown = Page(tasks.slice((page - 1) * PAGE_SIZE, PAGE_SIZE), tasks.height, page, PAGE_SIZE)
        pager = _pager(shown, "/compare", [*params, ("errors", errors)]) if shown.pages > 1 else ""
        parts.append(pager + _table(columns, shown.rows, href=task_href) + pager)
        parts.append("<h2>Dropped pairs</h2>")
        if o["n_dropped"]:
            parts.append(
                f"<p>{_prose(o['drop_note'])}</p><p class='note'>{_prose(o['drop_reasons'])}</p>"
            )
        else:
            parts.append("<p>none: every key was scored on both sides</p>")
    return _layout("comparison", "".join(parts), version)


def pooled_page(
    frame: pl.DataFrame,
    *,
    candidate: str,
    parent: str,
    rule: str,
    version: DataVersion,
    errors: str | None = None,
) -> str:
    """One policy against another over suites: the pooled row's verdict as the headline,
    then every suite row and the pooled row, with the weighting, test and interval named."""
    params: list[tuple[str, Any]] = [("candidate", candidate), ("parent", parent)]
    applied = sorted(set(frame["errors"].drop_nulls().to_list()))
    label = errors_label(
        errors or (applied[0] if len(applied) == 1 else "mixed" if applied else None),
        convention=errors is None,
    )
    o = frame.filter(pl.col("level") == "pooled").row(0, named=True)
    columns: list[tuple[str, Cell]] = [
        ("suite", lambda r: _e(r["suite"])),
        ("weight", lambda r: _num(r["weight"])),
        ("pairs", lambda r: _e(r["n_pairs"])),
        ("wins", lambda r: _e(r["candidate_wins"])),
        ("losses", lambda r: _e(r["parent_wins"])),
        (
            "difference [CI]",
            lambda r: f"{_num(r['mean_diff'])} [{_num(r['ci_low'])}, {_num(r['ci_high'])}]",
        ),
        ("p better", lambda r: _p(r["p_value"])),
        ("adjusted p (verdict)", lambda r: _p(r["p_verdict"])),
        ("verdict", lambda r: _badge(r["verdict"])),
    ]
    parts = [
        f"<h1>{_e(candidate)} against {_e(parent)}, pooled over suites</h1>",
        _errors_toggle("/pooled", params, errors, label),
        f'<p class="headline">{_badge(o["verdict"])} difference {_num(o["mean_diff"])} '
        f"[{_num(o['ci_low'])}, {_num(o['ci_high'])}], p better = {_p(o['p_value'])}, "
        f"adjusted p of the verdict = {_p(o['p_verdict'])}</p>",
        f'<p class="note">{_prose(o["verdict_note"])}</p>',
        f'<p class="note">weighting: {_e(o["weighting"])}; test: {_prose(o["test_method"])}; '
        f"interval: {_e(o['ci_method'])}; the pooled McNemar p (it weighs suites by their "
        f"discordant pairs, so it is not the test of this difference): "
        f"{_p(o['p_pooled_mcnemar'])}</p>",
        f'<p class="note">{_prose(rule)}</p>',
        _table(columns, frame),
    ]
    return _layout("pooled comparison", "".join(parts), version)


def _task_link(
    parent: str, candidate: str, errors: str | None = None, metric: str | None = None
) -> Callable[[dict[str, Any]], str]:
    def href(r: dict[str, Any]) -> str:
        return url(
            "/compare/task",
            {
                "parent": parent,
                "candidate": candidate,
                "task": r["task_id"],
                "errors": errors,
                "metric": metric,
            },
        )

    return href


# -- task ----------------------------------------------------------------------------------


def _score(r: dict[str, Any], role: str) -> str:
    """A side's success on the task page, marked when its episode errored (under failure its
    score is the 0 the comparison counts; excluded, it has none)."""
    mark = ' <span class="note">errored</span>' if r.get(f"{role}_errored") else ""
    return _num(r[f"{role}_value"]) + mark


def task_page(
    page: Page,
    *,
    parent: str,
    candidate: str,
    task: str,
    summary: dict[str, Any] | None,
    labels: Mapping[str, str],
    version: DataVersion,
    errors: str | None = None,
    metric: str | None = None,
) -> str:
    """The paired episodes of one task (on ``metric``, None: success): candidate wins, then parent wins, drops, ties, each
    side read under the errors policy of the comparison (``errors``; ``page.policy`` names
    the one applied)."""

    def href(r: dict[str, Any]) -> str:
        return url(
            "/episode",
            {
                "parent": parent,
                "candidate": candidate,
                "key": r["key"],
                "errors": errors,
                "metric": metric,
            },
        )

    def klass(r: dict[str, Any]) -> str:
        return {"candidate won": "won-c", "parent won": "won-p"}.get(r["outcome"], "")

    columns: list[tuple[str, Cell]] = [
        ("key", lambda r: f'<a href="{href(r)}">{_e(r["key"])}</a>'),
        ("outcome", lambda r: _e(r["outcome"])),
        ("candidate score", lambda r: _score(r, "candidate")),
        ("parent score", lambda r: _score(r, "parent")),
        ("candidate steps", lambda r: _num(r["candidate_steps"], 0)),
        ("parent steps", lambda r: _num(r["parent_steps"], 0)),
        ("candidate status", lambda r: _e(r["candidate_status"])),
        ("parent status", lambda r: _e(r["parent_status"])),
        ("candidate skip", lambda r: _e(r["candidate_skip"])),
        ("parent skip", lambda r: _e(r["parent_skip"])),
    ]
    timed = [
        c
        for c in ("candidate_elapsed_sec", "parent_elapsed_sec")
        if c in page.rows.columns and page.rows[c].is_not_null().any()
    ]
    if timed:  # a log that times its episodes (vla-eval's elapsed_sec), after the steps
        columns[6:6] = [
            (c.replace("_elapsed_sec", " elapsed s"), lambda r, c=c: _num(r[c], 1))  # type: ignore[misc]
            for c in timed
        ]
    back = url(
        "/compare",
        [("parent", parent), ("candidate", candidate), ("errors", errors), ("metric", metric)],
    )
    counts = dict(page.counts)
    kept = [("parent", parent), ("candidate", candidate), ("task", task), ("metric", metric)]
    head = (
        f'<h1>Task {_e(task)}</h1><p><a href="{back}">back to the comparison</a>: '
        f"candidate {_e(labels.get(candidate, candidate))} vs parent "
        f"{_e(labels.get(parent, parent))}</p>"
        + _errors_toggle(
            "/compare/task", kept, errors, errors_label(page.policy or errors, errors is None)
        )
    )
    if counts:
        head += (
            f'<p class="note" id="outcomes">{counts.get("candidate won", 0)} candidate won / '
            f"{counts.get('parent won', 0)} parent won / {counts.get('tie', 0)} ties / "
            f"{counts.get('dropped', 0)} dropped; errored episodes: "
            f"{counts.get('candidate errored', 0)} of the candidate, "
            f"{counts.get('parent errored', 0)} of the parent</p>"
        )
    if summary:
        head += (
            f'<p class="headline">{_badge(summary["verdict"])} {summary["candidate_wins"]} wins '
            f"/ {summary['parent_wins']} losses / {summary['ties']} ties, "
            f"{_e(test_label(summary.get('test')))}: p better = {_p(summary['p_value'])}, "
            f"p worse = {_p(summary['p_worse'])}, adjusted p of the verdict = "
            f"{_p(summary['p_verdict'])}</p>"
        )
    params = {
        "parent": parent,
        "candidate": candidate,
        "task": task,
        "errors": errors,
        "metric": metric,
    }
    body = (
        f"{head}{_pager(page, '/compare/task', params)}"
        f"{_table(columns, page.rows, href=href, row_class=klass)}"
        f"{_pager(page, '/compare/task', params)}"
    )
    return _layout(f"task {task}", body, version)


# -- episode -------------------------------------------------------------------------------


def _timeline(events: pl.DataFrame) -> str:
    """Reward per step as a small inline SVG, interventions and grades as marks."""
    steps = events.filter(pl.col("type") == "step")
    if steps.is_empty():
        return ""
    w, h, pad = 520, 90, 6
    idx: list[int] = [int(i) for i in steps["idx"].to_list()]
    rew = [0.0 if r is None else float(r) for r in steps["reward"].to_list()]
    lo, hi = min(idx), max(max(idx), min(idx) + 1)
    rmin, rmax = min(0.0, *rew), max(1e-9, *rew)

    def x(i: float) -> float:
        return pad + (w - 2 * pad) * (i - lo) / (hi - lo)

    def y(r: float) -> float:
        return h - pad - (h - 2 * pad) * (r - rmin) / (rmax - rmin)

    line = " ".join(f"{x(i):.1f},{y(r):.1f}" for i, r in zip(idx, rew, strict=True))
    marks = []
    for kind, colour in (("intervention", "#b91c1c"), ("grade", "#7c3aed"), ("end", "#111")):
        for i in events.filter(pl.col("type") == kind)["idx"].to_list():
            xi = x(min(max(i, lo), hi))
            marks.append(
                f'<line x1="{xi:.1f}" x2="{xi:.1f}" y1="0" y2="{h}" stroke="{colour}" '
                f'stroke-dasharray="3 2"><title>{kind} at {i}</title></line>'
            )
    ok = steps.filter(pl.col("success").fill_null(False))["idx"].to_list()
    dots = "".join(
        f'<circle cx="{x(i):.1f}" cy="{pad}" r="3" fill="#15803d"><title>success at {i}'
        f"</title></circle>"
        for i in ok
    )
    return (
        f'<svg class="timeline" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" '
        f'aria-label="reward per step"><rect width="{w}" height="{h}" fill="#fff" '
        f'stroke="#e5e7eb"/><polyline fill="none" stroke="#2563eb" points="{line}"/>'
        f"{''.join(marks)}{dots}</svg>"
        f'<p class="note">blue: reward per step; green dots: info.success; red: '
        f"interventions; purple: grades; black: end</p>"
    )


def _detail(r: dict[str, Any], whole: Callable[[dict[str, Any], str], str]) -> str:
    """The event's text fields, each escaped once; a cut one links to its whole text."""
    parts = []
    for field in ("reason", "status", "grader", "name", "value", "explanation"):
        value = r[field]
        if value is None:
            continue
        if field == "value":
            parts.append(f"= {text(value)}")
            continue
        shown = text(value)
        n = r[f"{field}_chars"]
        if n is not None and n > FIELD_CHARS:
            shown += f'\u2026 <a href="{whole(r, field)}">(whole {field}: {n:,} characters)</a>'
        parts.append(shown)
    return " ".join(parts)


def _fields(samples: pl.DataFrame) -> str:
    """What the log stored of the episode, one row per epoch: its status, trace status and
    every field kept in ``extra`` (a vla-eval episode's ``elapsed_sec`` and
    ``failure_reason``, an Inspect sample's error, metadata...), each escaped once."""
    if samples.is_empty():
        return ""
    columns: list[tuple[str, Cell]] = [
        ("episode", lambda r: _e(r["episode_id"])),
        ("epoch", lambda r: _e(r["epoch"])),
        ("status", lambda r: _e(r["status"])),
        ("trace", lambda r: _e(r["trace_status"])),
        ("fields", _extra),
    ]
    return _table(columns, samples)


def _extra(r: dict[str, Any]) -> str:
    raw, n = r["extra"], r["extra_chars"]
    if raw is None:
        return ""
    if n is not None and n > FIELD_CHARS:  # cut in DuckDB: shown as the text it is
        return f"{_prose(raw)}\u2026 ({n:,} characters)"
    try:
        doc = json.loads(raw)
    except ValueError:
        return _prose(raw)
    if not isinstance(doc, dict):
        return _prose(raw)
    parts = []
    for name, value in doc.items():
        if value is None:
            continue
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        parts.append(f"<b>{_e(name)}</b>: {_prose(shown)}")
    return "; ".join(parts)


def _long(value: str | None) -> str:
    """A transcript's text as page text: escaped once, cut at :data:`TRANSCRIPT_CHARS`."""
    if value is None:
        return ""
    if len(value) <= TRANSCRIPT_CHARS:
        return text(value)
    return text(value[:TRANSCRIPT_CHARS]) + f"\u2026 ({len(value):,} characters in the log)"


def _message(m: Message) -> str:
    """One message as Inspect's viewer shows it: the role, the text, each tool call with its
    arguments, and for a tool's answer the call it answers and its error."""
    role = m.role if m.role in ("system", "user", "assistant", "tool") else "other"
    who = _e(m.role) + (f" <small>{_e(m.model)}</small>" if m.model else "")
    if m.function:
        who += f" <small>{_e(m.function)}</small>"
    if m.tool_call_id:
        who += f" <small>answers {_e(m.tool_call_id)}</small>"
    calls = "".join(
        f'<div class="call">call <b>{_e(c.function)}</b>'
        + (f" <small>{_e(c.id)}</small>" if c.id else "")
        + f"<pre>{_long(c.arguments)}</pre></div>"
        for c in m.tool_calls
    )
    error = f'<p class="err">error: {_prose(m.error)}</p>' if m.error else ""
    body = f"<pre>{_long(m.text)}</pre>" if m.text else ""
    return f'<div class="msg {role}"><div class="role">{who}</div>{body}{calls}{error}</div>'


def _transcript(t: Transcript | str) -> str:
    """One epoch's transcript (messages, then scores with their explanations), or why the
    log could not be read."""
    if isinstance(t, str):
        return f'<div class="transcript"><p class="err">transcript: {_prose(t)}</p></div>'
    head = (
        f"<h3>transcript, epoch {_e(t.epoch)} <small>sample {_e(t.sample_id)}, read from "
        f"{_e(t.path)}</small></h3>"
    )
    more = (
        f'<p class="note">{t.n_messages - len(t.messages):,} more messages in the log</p>'
        if t.n_messages > len(t.messages)
        else ""
    )
    scores = "".join(
        f"<tr><td>{_e(s.scorer)}</td><td>{_e(s.value)}</td><td>{_prose(s.answer)}</td>"
        f"<td>{_prose(s.explanation)}</td></tr>"
        for s in t.scores
    )
    table = (
        '<div class="scroll"><table><thead><tr><th>scorer</th><th>value</th><th>answer</th>'
        f"<th>explanation</th></tr></thead><tbody>{scores}</tbody></table></div>"
        if scores
        else ""
    )
    target = f'<p class="note">target: {_prose(t.target)}</p>' if t.target else ""
    error = f'<p class="err">sample error: {_prose(t.error)}</p>' if t.error else ""
    messages = "".join(_message(m) for m in t.messages)
    return f'<div class="transcript">{head}{error}{messages}{more}{target}{table}</div>'


def _side(
    title: str,
    run: str,
    events: pl.DataFrame,
    scores: pl.DataFrame,
    samples: pl.DataFrame,
    whole: Callable[[dict[str, Any], str], str],
    transcripts: Sequence[Transcript | str] | None = None,
) -> str:
    columns: list[tuple[str, Cell]] = [
        ("idx", lambda r: _e(r["idx"])),
        ("type", lambda r: _e(r["type"])),
        ("reward", lambda r: _num(r["reward"])),
        ("success", lambda r: _e(r["success"])),
        ("latency ms", lambda r: _num(r["latency_ms"], 1)),
        ("detail", lambda r: _detail(r, whole)),
    ]
    score_line = ", ".join(  # built as markup, each part escaped once
        f"{_e(m)}: {_num(v)}" + (f" ({_e(s)})" if s else "")
        for m, v, s in scores.select("metric", "value", "skip_reason").iter_rows()
    )
    if events.height:
        trace = _timeline(events) + _table(columns, events)
    elif transcripts is not None:
        trace = ""
    elif samples.height:
        trace = (
            '<p class="note">no trace events stored for this episode (or this page): the '
            "log's fields above are what it recorded</p>"
        )
    else:
        trace = '<p class="note">no trace stored for this episode (or this page)</p>'
    return (
        f"<section><h2>{_e(title)} <small>{_e(run)}</small></h2>"
        f'<p class="note">{score_line or "no scores"}</p>{_fields(samples)}{trace}'
        f"{''.join(_transcript(t) for t in transcripts or ())}</section>"
    )


def episode_page(
    *,
    parent: str,
    candidate: str,
    key: str,
    task: str | None,
    events: Mapping[str, Page],
    scores: pl.DataFrame,
    labels: Mapping[str, str],
    version: DataVersion,
    samples: Mapping[str, pl.DataFrame] | None = None,
    errors: str | None = None,
    transcripts: Mapping[str, Sequence[Transcript | str] | None] | None = None,
    metric: str | None = None,
) -> str:
    """Both sides of one pair, side by side, a page of events at a time (the stored scores,
    before any errors policy: the links back keep the comparison's, ``errors``), with an
    Inspect sample's transcript per epoch (``transcripts``: read from its log, or why not)."""
    back = (
        url(
            "/compare/task",
            {
                "parent": parent,
                "candidate": candidate,
                "task": task,
                "errors": errors,
                "metric": metric,
            },
        )
        if task
        else url(
            "/compare",
            [("parent", parent), ("candidate", candidate), ("errors", errors), ("metric", metric)],
        )
    )

    def whole(run: str) -> Callable[[dict[str, Any], str], str]:
        def link(r: dict[str, Any], field: str) -> str:
            return url(
                "/episode/field",
                [
                    ("run", run),
                    ("key", key),
                    ("episode", r["episode_id"]),
                    ("idx", r["idx"]),
                    ("field", field),
                ],
            )

        return link

    sides = "".join(
        _side(
            f"{role}: {labels.get(run, run)}",
            run,
            events[run].rows,
            scores.filter(pl.col("run_id") == run),
            (samples or {}).get(run, pl.DataFrame()),
            whole(run),
            (transcripts or {}).get(run),
        )
        for role, run in (("candidate", candidate), ("parent", parent))
    )
    longest = max(events.values(), key=lambda p: p.total)
    params = [
        ("parent", parent),
        ("candidate", candidate),
        ("key", key),
        ("errors", errors),
        ("metric", metric),
    ]
    pager = _pager(longest, "/episode", params) if longest.pages > 1 else ""
    body = (
        f'<h1>Episode {_e(key)}</h1><p><a href="{back}">back to the task</a></p>'
        f'{pager}<div class="cols">{sides}</div>{pager}'
    )
    return _layout(f"episode {key}", body, version)


def error_page(status: int, message: str, version: DataVersion) -> str:
    body = f'<h1>{status}</h1><p class="err">{_prose(message)}</p><p><a href="/">all runs</a></p>'
    return _layout(str(status), body, version)
