"""The ranking page: the ranks a page at a time, the strengths and the verdict heatmap."""

from __future__ import annotations

from hylo_analytics._html import attr
from hylo_analytics.serve._data import PAGE_SIZE, DataVersion, Page, errors_label
from hylo_analytics.serve._ranking import RANK_FIELDS, RankQuery, RankView
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

__all__ = ["ranking_page"]

_HOW = (
    "Each pair of policies is counted and tested as <code>compare</code> tests a pair (keys "
    "pair within a stratum), the p-values Holm-adjusted over every pair as one family. A "
    "policy's rank set runs from 1 + the policies significantly better than it to N - those "
    "significantly worse; a tie group holds policies no test separates (going down the "
    "ranking, a group grows while its next policy is separated from none of its members). "
    "Strengths are Bradley-Terry log-strengths (sum 0) fitted on the keys' games."
)


def _form(query: RankQuery) -> str:
    """The query as a form: the policy field, the strata, the metric and run selectors."""
    options = "".join(
        f'<option value="{attr(f)}"{" selected" if f == query.policy else ""}>{_e(f)}</option>'
        for f in RANK_FIELDS
    )
    runs = "".join(
        f'<input type="text" name="run" value="{attr(r)}" size="24">' for r in query.runs
    )
    keep = (
        f'<input type="hidden" name="errors" value="{attr(query.errors)}">' if query.errors else ""
    )
    return (
        '<form method="get" action="/rank" id="rank-form" class="note">'
        f'<label>policy <select name="policy">{options}</select></label> '
        f'<label>strata <input type="text" name="strata" value="{attr(",".join(query.strata))}"'
        ' size="22" placeholder="none"></label> '
        f'<label>metric <input type="text" name="metric" value="{attr(query.metric)}" '
        'size="12"></label> '
        f"<label>runs {runs}"
        '<input type="text" name="run" size="24" placeholder="every run, or agent=NAME"></label>'
        f"{keep} <button>rank</button></form>"
    )


def _head(query: RankQuery) -> list[str]:
    strata = ", ".join(query.strata) or "none (every key pairs across the store)"
    return [
        f"<h1>Ranking of each {_e(query.policy)} on {_e(query.metric)}</h1>",
        _form(query),
        f'<p class="note">Strata (keys pair and resample within each): {_e(strata)}. {_HOW}</p>',
    ]


def ranking_page(
    view: RankView,
    *,
    query: RankQuery,
    page: int,
    version: DataVersion,
) -> str:
    """The ranks of page ``page`` (:data:`PAGE_SIZE` a page, best first) with their rank
    sets and tie groups, the strengths chart and the verdict heatmap of the page's
    policies (each its own request, drawn on the server), and links to the other pages."""
    n = view.ranks.height
    rows, _pairs = view.page(page)
    shown = Page(rows, n, page, PAGE_SIZE)
    params = query.params()
    first = int((view.ranks["tie_group"] == 1).sum())
    groups = view.ranks["tie_group"].n_unique()
    applied = view.errors[0] if len(view.errors) == 1 else "mixed" if view.errors else None
    columns: list[tuple[str, Cell]] = [
        ("rank", lambda r: _e(r["rank"])),
        ("policy", lambda r: _e(r["policy"])),
        ("rank set", lambda r: _e(r["rank_set"])),
        ("tie group", lambda r: _e(r["tie_group"])),
        ("better / worse than", lambda r: f"{_e(r['n_below'])} / {_e(r['n_above'])}"),
        ("mean", lambda r: _num(r["mean"])),
        (
            f"strength [{view.level:.0%} {view.strength_method}]",
            lambda r: (
                f"{_num(r['strength'])} [{_num(r['strength_low'])}, {_num(r['strength_high'])}]"
            ),
        ),
    ]
    lo, hi = (page - 1) * PAGE_SIZE + 1, min(page * PAGE_SIZE, n)
    charts = [("strengths", "Bradley-Terry strengths with their intervals and tie groups")]
    if rows.height > 1:
        charts.append(("heatmap", "verdict of every pair of this page's policies"))
    imgs = "".join(
        f'<div class="chart"><img alt="{attr(alt)} (ranks {lo} to {hi})" id="rank-{kind}" '
        f'src="{url(f"/rank/{kind}.svg", [*params, ("page", page)])}"></div>'
        for kind, alt in charts
    )
    pager = _pager(shown, "/rank", params) if shown.pages > 1 else ""
    parts = [
        *_head(query),
        _errors_toggle(
            "/rank", params, query.errors, errors_label(applied, convention=query.errors is None)
        ),
        f'<p class="headline" id="rank-summary">{n:,} policies, {view.n_pairs:,} pairs; '
        f"{groups:,} tie group(s), the first holding {first:,} that no test separates. "
        f"Showing ranks {lo:,} to {hi:,} of {n:,}.</p>",
        f'<p class="note">Computed in {view.seconds:.1f} s and kept until the store changes. '
        "Every row: <code>hylo-analytics rank --top 0 --format csv -o ranks.csv</code> with "
        "the same options, or <code>Store.rank</code>. Average ranks across tasks: "
        f'<a href="{url("/critical-difference", {"policy": query.policy})}" id="rank-cd">'
        "the critical-difference diagram</a>.</p>",
        pager + _table(columns, rows) + pager,
        imgs,
    ]
    return _layout("ranking", "".join(parts), version)


def ranking_pending(query: RankQuery, *, seconds: float, version: DataVersion) -> str:
    """The page while the ranking is computed: it reloads itself until the ranks are in."""
    parts = [
        *_head(query),
        f'<p class="headline" id="rank-pending">Computing the ranking ({seconds:.0f} s so far; '
        "2,000 policies take 10 to 20 s on two cores). This page reloads itself when it is "
        "done; the other pages answer meanwhile.</p>",
    ]
    return _layout("ranking", "".join(parts), version, pending=True)


def ranking_refused(query: RankQuery, message: str, *, version: DataVersion) -> str:
    """The page when the store refused the ranking: why, and the form to change it."""
    hint = ""
    if query.policy != "run_id":
        each = RankQuery("run_id", query.strata, query.metric, query.errors, query.runs)
        hint = (
            f' <a href="{url("/rank", each.params())}" id="rank-runs">Rank each run '
            "instead</a> (policy run_id)."
        )
    said = _prose(message.rstrip(". ") + ".")
    parts = [*_head(query), f'<p class="err" id="rank-error">{said}{hint}</p>']
    return _layout("ranking", "".join(parts), version)
