"""The episode page: both sides of one pair, their events, fields, scores and transcripts."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from hylo_analytics._html import text
from hylo_analytics.serve._data import (
    FIELD_CHARS,
    TRANSCRIPT_CHARS,
    DataVersion,
    Page,
)
from hylo_analytics.serve.pages._layout import (
    Cell,
    _e,
    _layout,
    _num,
    _pager,
    _prose,
    _table,
    url,
)

if TYPE_CHECKING:
    from hylo_analytics.ingest.formats.inspect.transcript import Message, Transcript


__all__ = ["episode_page"]


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
