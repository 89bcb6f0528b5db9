"""HTML for the comparison report: inline CSS, tables, and charts inlined as SVG.

Private to :mod:`hylo_analytics.report`; everything here turns small frames into markup, so
the page needs no network to be viewed (no scripts, fonts or styles are fetched).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import polars as pl

from hylo_analytics import charts
from hylo_analytics._html import attr, text
from hylo_analytics.compare.engine import test_label
from hylo_analytics.report._parts import _pct, _svg, _table
from hylo_analytics.report._runs import runs_section
from hylo_analytics.report._stats import stat_sections

__all__ = ["render_report", "report_fragment", "summary_sentence"]

# -- pieces ---------------------------------------------------------------------------------

_CSS = """
:root { --ink:#1f2328; --muted:#59636e; --line:#d1d9e0; --bg:#f6f8fa;
        --improved:#0072B2; --regressed:#D55E00; --unchanged:#6E6E6E; --inconclusive:#B07800; }
* { box-sizing: border-box; }
body { margin:0; font:15px/1.5 -apple-system, "Segoe UI", "DejaVu Sans", Helvetica, Arial,
       sans-serif; color:var(--ink); background:#fff; }
main { max-width: 1080px; margin: 0 auto; padding: 32px 40px 64px; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 40px 0 12px; padding-bottom: 6px; border-bottom: 1px solid var(--line); }
.meta { color: var(--muted); font-size: 13px; margin-bottom: 20px; }
.summary { font-size: 17px; background: var(--bg); border-left: 4px solid var(--improved);
           padding: 14px 18px; border-radius: 4px; margin: 16px 0 20px; }
.summary.regressed { border-left-color: var(--regressed); }
.summary.inconclusive, .summary.unchanged { border-left-color: var(--unchanged); }
.cards { display: grid; grid-template-columns: repeat(4, 1fr); gap: 12px; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: 12px 14px; }
.card .label { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
.card .value { font-size: 24px; font-weight: 600; margin-top: 2px; }
.card .sub { color: var(--muted); font-size: 12px; overflow-wrap: anywhere; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; font-size: 13.5px; margin: 8px 0; }
th, td { padding: 6px 8px; border-bottom: 1px solid var(--line); text-align: right;
         font-variant-numeric: tabular-nums; white-space: nowrap; }
th { background: var(--bg); font-weight: 600; white-space: normal; vertical-align: bottom; }
td:last-child, th:last-child { text-align: center; }
th:first-child, td:first-child { text-align: left; white-space: normal; min-width: 14em;
                                 overflow-wrap: anywhere; }
tbody tr:hover { background: #fafbfc; }
.verdict { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px;
           font-weight: 600; color: #fff; }
.verdict.improved { background: var(--improved); } .verdict.regressed { background: var(--regressed); }
.verdict.unchanged { background: var(--unchanged); } .verdict.inconclusive { background: var(--inconclusive); }
.chart { margin: 12px 0 4px; overflow-x: auto; } .chart svg { max-width: 100%; height: auto; }
.grid2 { display: grid; grid-template-columns: 1fr 1fr; gap: 20px; align-items: start; }
.note { color: var(--muted); font-size: 13px; }
code { font-size: 13px; background: var(--bg); padding: 1px 4px; border-radius: 3px; }
"""


def _p(x: float | None) -> str:
    return "\u2013" if x is None else (f"{x:.3f}" if x >= 0.001 else f"{x:.1e}")


def _badge(verdict: str | None) -> str:
    v = text(verdict or "")
    return f'<span class="verdict {v}">{v}</span>'


def summary_sentence(headline: dict[str, Any]) -> str:
    """One sentence a reader can quote: rates, difference with CI, p, per-task verdicts."""
    h = headline
    cand, par = h.get("candidate_label") or h["candidate"], h.get("parent_label") or h["parent"]
    return (
        f"On the {h['n_pairs']} paired episodes, candidate {cand} succeeded on "
        f"{_pct(h['candidate_rate'])} versus {_pct(h['parent_rate'])} for parent "
        f"{par}: a difference of {_pct(h['diff'], True)} points "
        f"({_verdict_interval(h)}; {_test_p(h)}), {h['verdict']} "
        "overall. Per task: "
        f"{h['tasks_improved']} improved, {h['tasks_regressed']} regressed, "
        f"{h['tasks_unchanged']} unchanged, {h['tasks_inconclusive']} inconclusive "
        f"of {h['n_tasks']}."
    )


def _verdict_interval(h: dict[str, Any]) -> str:
    """The interval the verdict was decided on, named with its level (the 95% one where a
    headline has no verdict interval)."""
    if h.get("verdict_ci_level") is None:
        return f"95% CI {_pct(h['ci_low'], True)} to {_pct(h['ci_high'], True)}"
    return (
        f"the {h['verdict_ci_level'] * 100:.3g}% interval the verdict used: "
        f"{_pct(h['verdict_ci_low'], True)} to {_pct(h['verdict_ci_high'], True)}"
    )


def _test_p(h: dict[str, Any]) -> str:
    """The verdict's test and its p, with the sidedness the engine computed it with."""
    name = test_label(h.get("test"))
    if h.get("p_sides") == "two-sided":
        return f"two-sided {name} p = {_p(h['p_value'])} (the metric's direction is unknown)"
    if h.get("verdict") == "regressed":  # the p that decided: the test that it is worse
        return f"one-sided {name} p = {_p(h['p_worse'])} that the candidate is worse"
    return f"one-sided {name} p = {_p(h['p_value'])} that the candidate is better"


def _label(h: dict[str, Any], role: str) -> str:
    """What the page calls the candidate or the parent: its label, else its id."""
    return str(h.get(f"{role}_label") or h[role])


def _who(h: dict[str, Any], role: str) -> str:
    label = h.get(f"{role}_label")
    run = text(h[role])
    return f"<b>{text(label)}</b><br>{run}" if label and label != h[role] else run


def _paired_sub(h: dict[str, Any], role: str, runs: pl.DataFrame | None) -> str:
    """Who the card is, and that its rate is over the paired episodes: with the run's own
    rate beside it when the pairs are not every scored episode of the run."""
    sub = f"{_who(h, role)}<br>on {h['n_pairs']} paired episodes"
    if runs is None:
        return sub
    row = runs.filter(pl.col("run") == h[role])
    if row.height == 1 and row["n_scored"].item() != h["n_pairs"]:
        r = row.row(0, named=True)
        sub += f"; the run: {_pct(r['success'])} of {r['n_scored']} scored"
    return sub


def _cards(h: dict[str, Any], runs: pl.DataFrame | None = None) -> str:
    cards = [
        ("candidate (paired)", _pct(h["candidate_rate"]), _paired_sub(h, "candidate", runs)),
        ("parent (paired)", _pct(h["parent_rate"]), _paired_sub(h, "parent", runs)),
        (
            "difference",
            f"{_pct(h['diff'], True)} pts",
            _verdict_interval(h)
            + (
                f"<br>(unadjusted 95% CI {_pct(h['ci_low'], True)} to {_pct(h['ci_high'], True)})"
                if h.get("verdict_ci_level") is not None
                else ""
            ),
        ),
        (
            "paired outcomes",
            f"{h['candidate_wins']} / {h['parent_wins']} / {h['ties']}",
            f"candidate / parent wins / ties · p = "
            f"{_p(h['p_worse'] if h.get('verdict') == 'regressed' else h['p_value'])}"
            + (" (worse)" if h.get("verdict") == "regressed" else ""),
        ),
    ]
    return (
        '<div class="cards">'
        + "".join(
            f'<div class="card"><div class="label">{k}</div><div class="value">{v}</div>'
            f'<div class="sub">{s}</div></div>'
            for k, v, s in cards
        )
        + "</div>"
    )


def _task_header(tasks: pl.DataFrame) -> list[str]:
    """The per-task header; its interval is the verdict's (adjusted as the p beside it)."""
    levels = tasks["verdict_ci_level"].drop_nulls().unique().to_list() if tasks.height else []
    m = int(tasks["family_size"].max() or 0) if tasks.height else 0  # type: ignore[arg-type]
    ci = (
        f"{levels[0] * 100:.3g}% CI (Bonferroni over {m})"
        if len(levels) == 1
        else "CI (Bonferroni)"
    )
    return [ci if h == "95% CI" else h for h in _TASK_HEADER]


def _task_rows(tasks: pl.DataFrame, anchors: dict[str, str] | None = None) -> list[list[str]]:
    """The per-task rows; a task with flipped keys links to them (``anchors``)."""
    ordered = tasks.sort(["diff", "task_id"], descending=[True, False])
    anchors = anchors or {}

    def task(t: Any) -> str:
        return f'<a href="#{anchors[t]}">{text(t)}</a>' if t in anchors else text(t)

    return [
        [
            task(r["task_id"]),
            str(r["n_pairs"]),
            _pct(r["candidate_rate"]),
            _pct(r["parent_rate"]),
            _pct(r["diff"], True),
            f"{_pct(r['verdict_ci_low'], True)} to {_pct(r['verdict_ci_high'], True)}",
            f"{r['candidate_wins']} / {r['parent_wins']} / {r['ties']}",
            _p(r["p_value"]),
            _p(r["p_adjusted"]),
            f'<span title="{attr(r["verdict_note"])}">{_badge(r["verdict"])}</span>',
        ]
        for r in ordered.iter_rows(named=True)
    ]


def _flip_anchors(flips: pl.DataFrame | None) -> dict[str, str]:
    """Task -> the id of its part of the flips section (ids made here, never from a log)."""
    if flips is None or flips.is_empty():
        return {}
    tasks = flips["task_id"].unique(maintain_order=True).to_list()
    return {t: f"flips-{i}" for i, t in enumerate(tasks)}


def _pooled_section(pooled: pl.DataFrame | None) -> str:
    """The two policies over every suite both ran: each suite's paired comparison and the
    pooled row (suite-weighted difference, its stratified test and MOVER interval), one
    Holm family; nothing when there is no second suite."""
    if pooled is None or pooled.is_empty():
        return ""
    p = pooled.filter(pl.col("level") == "pooled").row(0, named=True)
    suites = pooled.filter(pl.col("level") != "pooled")
    rows = [
        [
            "<b>pooled</b>" if r["level"] == "pooled" else text(r["suite"]),
            f"{r['n_pairs']:,}",
            text(f"{r['weight']:.3g}"),
            _pct(r["mean_diff"], True),
            f"{_pct(r['ci_low'], True)} to {_pct(r['ci_high'], True)}",
            f"{r['candidate_wins']} / {r['parent_wins']} / {r['ties']}",
            text(test_label(r.get("test"))),
            _p(r["p_worse"] if r["verdict"] == "regressed" else r["p_value"]),
            _p(r["p_verdict"]),
            _badge(r["verdict"]),
        ]
        for r in [*suites.iter_rows(named=True), p]
    ]
    header = ["suite", "pairs", "weight", "diff (pts)", "95% CI", "wins c / p / ties"]
    header += ["test", "p", "p (verdict)", "verdict"]
    return (
        "<h2>The same two policies over every suite they share</h2>"
        + _table(header, rows)
        + '<p class="note">Each suite pairs the two policies\' runs on that suite by key '
        "(Store.pooled_compare); the pooled row is the suite-weighted paired difference "
        f"({text(p['weighting'] or '')}), tested by {text(p['test_method'] or '')} and "
        f"bounded by the {text(p['ci_method'] or '')} interval; the suite rows and the pooled "
        "row are one Holm family. The pooled McNemar, which weighs suites by their "
        "discordant pairs rather than equally, gives a one-sided p that the candidate is "
        f"better of {_p(p['p_pooled_mcnemar'])} (shown for reference).</p>"
    )


def _flips_section(flips: pl.DataFrame | None) -> str:
    """The keys that flipped, per task: regressions first, each with its episodes and sample
    id, and the two runs' source files once."""
    if flips is None:
        return ""
    head = "<h2>Episodes that flipped</h2>"
    if flips.is_empty():
        return head + '<p class="note">none: every paired key tied (or was dropped)</p>'
    first = flips.row(0, named=True)
    parts = [
        head,
        '<p class="note">The pairs behind each task\'s wins and losses: a regression went '
        "from success (parent) to failure (candidate), a fix the other way; worse / better "
        "where a key's epochs average to other values. Source files: candidate "
        f"<code>{text(first['candidate_path'] or '')}</code>, parent "
        f"<code>{text(first['parent_path'] or '')}</code>.</p>",
    ]
    errored = flips.filter(pl.col("errored_side").is_not_null())
    if errored.height:  # issue 40: a harness error behind a flip is said, before any table
        parts.append(
            f'<p class="note errors-note"><b>{errored.height} of the {flips.height} flips rest '
            "on a harness error</b> (an errored episode counted as a failure): they are marked "
            "<i>errored</i> below and are no fix or regression of the policy's.</p>"
        )
    anchors = _flip_anchors(flips)
    for (task,), rows in flips.group_by("task_id", maintain_order=True):
        counts = ", ".join(f"{n} {c}" for c, n in rows["change"].value_counts(sort=True).rows())
        n_err = int(rows["errored_side"].is_not_null().sum())
        if n_err:
            counts += f"; {n_err} on an errored side"
        parts.append(
            f'<h3 id="{anchors[task]}">{text(task)} <small class="note">({text(counts)})</small>'
            "</h3>"
        )
        body = [
            [
                text(r["key"]),
                text(r["change"])
                + (f" <b>(errored: {text(r['errored_side'])})</b>" if r["errored_side"] else ""),
                f"{r['parent_value']:g} \u2192 {r['candidate_value']:g}",
                f"{text(r['parent_status'] or '')} \u2192 {text(r['candidate_status'] or '')}",
                text(r["sample_id"] or ""),
                text(r["candidate_episodes"] or ""),
                text(r["parent_episodes"] or ""),
            ]
            for r in rows.iter_rows(named=True)
        ]
        header = ["key", "change", "parent \u2192 candidate", "status", "sample id"]
        parts.append(_table([*header, "candidate episodes", "parent episodes"], body))
    return "".join(parts)


def report_fragment(frames: dict[str, pl.DataFrame]) -> str:
    """Summary, cards and the per-task table without charts: the Jupyter view (fast)."""
    h = frames["headline"].row(0, named=True)
    return (
        f'<div class="hylo-report"><style>{_scoped_css()}</style>'
        f'<div class="summary {text(h["verdict"])}">{text(summary_sentence(h))}</div>'
        + _errors_banner(h)
        + f"{_cards(h, frames.get('runs'))}"
        f"{_table(_task_header(frames['tasks']), _task_rows(frames['tasks']))}"
        f'<p class="note">{text(errors_text(h.get("errors")))}</p></div>'
    )


def _scoped_css() -> str:
    """The page CSS limited to the fragment, so a notebook's own styles are left alone."""
    rules = [r.strip() for r in _CSS.split("}") if r.strip()]
    scoped = []
    for rule in rules:
        selectors, _, body = rule.partition("{")
        if selectors.strip() in (":root", "*", "body", "main", "h1", "h2"):
            continue
        parts = ", ".join(f".hylo-report {sel.strip()}" for sel in selectors.split(","))
        scoped.append(f"{parts} {{{body}}}")
    return _VARS + "\n".join(scoped)


_VARS = (
    ".hylo-report { --ink:#1f2328; --muted:#59636e; --line:#d1d9e0; --bg:#f6f8fa; "
    "--improved:#0072B2; --regressed:#D55E00; --unchanged:#6E6E6E; --inconclusive:#B07800; }\n"
)

_TASK_HEADER = [
    "task",
    "pairs",
    "candidate",
    "parent",
    "diff (pts)",
    "95% CI",
    "wins c / p / ties",
    "p better (one-sided)",
    "p (verdict)",
    "verdict",
]


def _errors_banner(h: dict[str, Any]) -> str:
    """Beside the verdict (issue 40): whether it rests on harness errors, computed under the
    other errors policy (``errors_note`` of the comparison's overall row)."""
    note = h.get("errors_note")
    if not note:
        return ""
    rests = str(note).startswith("the verdict rests on harness errors")
    cls = "summary regressed" if rests else "note"
    return f'<div class="{cls} errors-note">{text(note)}</div>'


def _method_note(h: dict[str, Any]) -> str:
    """How the numbers were made and what a verdict means: the rule and its thresholds."""
    drops = (
        f" <b>Dropped pairs:</b> {text(h['drop_note'])}"
        + (f" ({text(h['drop_reasons'])})" if h.get("drop_reasons") else "")
        + "."
        if h.get("drop_note")
        else ""
    )
    forced = (
        f" <b>Compared despite the comparability gate (forced):</b> {text(h['gate_note'])}."
        if h.get("forced")
        else ""
    )
    return (
        '<p class="note">Pairs are episodes both runs scored on the same task and seed (the '
        f"preferred score per episode); {h['n_dropped']} shared episodes were dropped because a "
        f"run abstained. {text(errors_text(h.get('errors')))} "
        "Numbers come from <code>Store.compare</code>: differences are candidate "
        f"\u2212 parent in percentage points with {text(h['ci_text'])}; p is the "
        + (
            f"two-sided {text(test_label(h.get('test')))} (the metric's direction is unknown), "
            if h.get("p_sides") == "two-sided"
            else f"one-sided {text(test_label(h.get('test')))} that the candidate is better "
            "(and, for a regression, worse), "
        )
        + "the test that interval inverts, so p and interval describe one difference; "
        + "the overall row is its own family, the per-task rows another, Holm-adjusted within. "
        "The per-task interval is the verdict's: the two-sided interval whose lower side is "
        "the one-sided test at the rule's alpha, Bonferroni-adjusted over the tasks, so a "
        "verdict and the interval beside it agree; a test that rejects while that interval "
        "holds 0 gives no verdict (the note says so). "
        f"Verdicts: {text(h['rule_text'])}. Overall: "
        f"{text(h['verdict_note'] or '')}.{drops}{forced}</p>"
    )


def errors_text(errors: str | None) -> str:
    """The errors policy of the page's numbers, in words."""
    if errors == "failure":
        return (
            "Errored episodes (harness errors such as timeouts) count as failures, as the "
            "harness that wrote these runs counts them."
        )
    if errors == "exclude":
        return (
            "Errored episodes (harness errors such as timeouts) are left out of every rate, "
            "as the harness that wrote these runs leaves them out."
        )
    return "Errored episodes follow each run's own harness convention (the runs differ)."


def _latency_chart(latency: pl.DataFrame) -> str:
    if "n" not in latency.columns or not (latency["n"].fill_null(0) > 0).any():
        return '<p class="note">Step latency: neither run has step events with latencies.</p>'
    return _svg(
        charts.metric_distribution(latency, value_label="step latency (ms)", title="Step latency")
    )


def render_report(
    frames: dict[str, pl.DataFrame], *, title: str | None = None, sections: str = ""
) -> str:
    """One self-contained HTML page from :func:`report_frames`' output; ``sections``: HTML
    of further sections, at the end (the trend's, :mod:`hylo_analytics.report.trend`)."""
    h = frames["headline"].row(0, named=True)
    tasks, runs = frames["tasks"], frames["runs"]
    pair = runs.filter(pl.col("role").is_not_null())
    suite = " · ".join(str(x) for x in dict.fromkeys((h.get("benchmark_id"), h.get("split"))) if x)
    title = title or f"{_label(h, 'candidate')} vs {_label(h, 'parent')}" + (
        f" on {suite}" if suite else ""
    )
    success = charts.success_rate_by_task(
        frames["task_success"].drop("run").rename({"label": "run"}),  # legend: "run"
        run_label="run",
        title="Success rate per task",
    )
    latency_order = (
        pair.select("run")
        .join(frames["latency"], on="run", how="left")
        .with_columns(pl.col("label").alias("run"))
    )
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        f"<h1>{text(title)}</h1>",
        f'<div class="meta">hylo_analytics report · metric <code>{text(h["metric"])}'
        f"</code> · candidate <code>{text(h['candidate'])}</code> · parent "
        f"<code>{text(h['parent'])}</code> · errors <code>{text(h.get('errors') or '')}</code>"
        f" · generated {now}</div>",
        f'<div class="summary {text(h["verdict"])}">{text(summary_sentence(h))}</div>',
        _errors_banner(h),
        _cards(h, runs),
        "<h2>Per task</h2>",
        _table(_task_header(tasks), _task_rows(tasks, _flip_anchors(frames.get("flips")))),
        _method_note(h),
        _svg(
            charts.paired_forest(
                tasks, title=f"{_label(h, 'candidate')} \u2212 {_label(h, 'parent')}, per task"
            )
        ),
        _svg(charts.win_loss_bars(tasks)),
        _svg(success),
        _pooled_section(frames.get("pooled")),
        runs_section(runs, suite),
        stat_sections(frames),
        _svg(charts.coverage_breakdown(frames["coverage"].with_columns(run=pl.col("label")))),
        _latency_chart(latency_order),
        _flips_section(frames.get("flips")),
        sections,
    ]
    body = "\n".join(parts)
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{text(title)}</title><style>{_CSS}</style></head>"
        f"<body><main>\n{body}\n</main></body></html>\n"
    )
