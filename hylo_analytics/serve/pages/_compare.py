"""The comparison pages: candidates against a parent, pooled over suites, and one task's pairs."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import polars as pl

from hylo_analytics.compare.engine import test_label
from hylo_analytics.serve._data import (
    PAGE_SIZE,
    DataVersion,
    Page,
    errors_label,
)
from hylo_analytics.serve.pages._layout import (
    Cell,
    _badge,
    _e,
    _errors_toggle,
    _layout,
    _num,
    _p,
    _pager,
    _prose,
    _table,
    url,
)

__all__ = ["comparison_page", "pooled_page", "task_page"]


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
            f"[{_num(o['ci_adj_low'])}, {_num(o['ci_adj_high'])}] "
            f"(the verdict's {_level(o)} interval), "
            f"{o['candidate_wins']} wins / {o['parent_wins']} losses / {o['ties']} ties, "
            f"{_e(test_label(o.get('test')))}: p of the verdict = {_p(o['p_verdict'])}</p>"
            f'<p class="note">{_prose(o["verdict_note"])}</p>'
            f'<p class="note errors-count">{_e(errors_label(o.get("errors"), not errors))}: '
            f"errored "
            f"episodes {_e(errored.get(cand, 0))} of the candidate, "
            f"{_e(errored.get(parent, 0))} of the parent; {_e(o['n_dropped'])} pairs dropped "
            f"({_e(o['n_dropped_candidate'])} by the candidate, {_e(o['n_dropped_parent'])} by "
            f"the parent, {_e(o['n_dropped_both'])} by both)</p>"
        )
        if o.get("errors_note"):  # a verdict resting on harness errors says so beside it
            parts.append(f'<p class="note errors-note">{_prose(o["errors_note"])}</p>')
        if o.get("gate_note"):
            parts.append(f'<p class="note">{_prose(o["gate_note"])}</p>')
        if o.get("n_clusters") is not None:  # a clustered comparison: its clusters and df
            parts.append(
                f'<p class="note clusters">{_e(o["n_clusters"])} clusters'
                + (f", ci df {_e(o['ci_df'])}" if o.get("ci_df") is not None else "")
                + "</p>"
            )
        parts.append(
            f'<p class="note shrink-links">Per-task rates shrunk toward their suite: '
            f'<a href="{url("/shrink", {"run": cand})}">the candidate</a>, '
            f'<a href="{url("/shrink", {"run": parent})}">the parent</a>.</p>'
        )
        parts.append(forests.get(cand, ""))

        task_href = _task_link(parent, cand, errors, metric)
        columns: list[tuple[str, Cell]] = [
            ("task", lambda r, h=task_href: f'<a href="{h(r)}">{_e(r["task_id"])}</a>'),  # type: ignore[misc]
            ("pairs", lambda r: _e(r["n_pairs"])),
            ("wins", lambda r: _e(r["candidate_wins"])),
            ("losses", lambda r: _e(r["parent_wins"])),
            ("ties", lambda r: _e(r["ties"])),
            ("p of the verdict (adjusted)", lambda r: _p(r["p_verdict"])),
            (
                f"difference [the verdict's {_level(tasks.row(0, named=True))} interval]"
                if tasks.height
                else "difference [the verdict's interval]",
                lambda r: (
                    f"{_num(r['mean_diff'])} [{_num(r['ci_adj_low'])}, {_num(r['ci_adj_high'])}]"
                ),
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


def _level(row: dict[str, Any]) -> str:
    """The verdict's interval level as a page prints it (``90%``, ``99.5%``)."""
    level = row.get("ci_adj_level")
    return f"{level * 100:.3g}%" if level is not None else "adjusted"


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
    the weighting, test and interval named, a forest plot of the suites and the pooled row
    (its own request), then every suite row and the pooled row."""
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
            f"difference [the verdict's {_level(o)} interval]",
            lambda r: f"{_num(r['mean_diff'])} [{_num(r['ci_adj_low'])}, {_num(r['ci_adj_high'])}]",
        ),
        ("p of the verdict (adjusted)", lambda r: _p(r["p_verdict"])),
        ("verdict", lambda r: _badge(r["verdict"])),
    ]
    parts = [
        f"<h1>{_e(candidate)} against {_e(parent)}, pooled over suites</h1>",
        _errors_toggle("/pooled", params, errors, label),
        f'<p class="headline">{_badge(o["verdict"])} difference {_num(o["mean_diff"])} '
        f"[{_num(o['ci_adj_low'])}, {_num(o['ci_adj_high'])}] (the verdict's {_level(o)} "
        f"interval), p of the verdict = {_p(o['p_verdict'])}</p>",
        f'<p class="note">{_prose(o["verdict_note"])}</p>',
        f'<p class="note errors-note">{_prose(o["errors_note"])}</p>'
        if o.get("errors_note")
        else "",
        f'<p class="note">weighting: {_e(o["weighting"])}; test: {_prose(o["test_method"])}; '
        f"interval: {_e(o['ci_method'])}; the pooled McNemar p (it weighs suites by their "
        f"discordant pairs, so it is not the test of this difference): "
        f"{_p(o['p_pooled_mcnemar'])}</p>",
        f'<p class="note">{_prose(rule)}</p>',
        f'<div class="chart"><img alt="forest plot of the suites and the pooled row" '
        f'id="pooled-forest" src="{url("/pooled/forest.svg", [*params, ("errors", errors)])}">'
        "</div>",
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
