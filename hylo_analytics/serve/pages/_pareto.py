"""The cost-quality Pareto page: ``Store.pareto``'s front, its table and its chart."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hylo_analytics._html import attr
from hylo_analytics.serve._data import DataVersion
from hylo_analytics.serve.pages._layout import Cell, _e, _layout, _num, _prose, _table, url

__all__ = ["pareto_choose", "pareto_page", "pareto_refused"]

_HOW = (
    "Each policy's mean quality (success) and mean cost with percentile intervals from a "
    "bootstrap of keys within suites (paired where the policies share their keys); on front: "
    "no other policy is at least as good on both means and better on one; P(on front): the "
    "share of the resamples on which it is on the front. <code>Store.pareto</code> or "
    "<code>hylo-analytics pareto</code> gives the same numbers."
)


def _form(costs: Sequence[str], cost: str, policy: str) -> str:
    options = "".join(
        f'<option value="{attr(m)}"{" selected" if m == cost else ""}>{_e(m)}</option>'
        for m in costs
    )
    return (
        '<form method="get" action="/pareto" id="pareto-form" class="note">'
        f'<label>cost <select name="cost">{options}</select></label> '
        f'<label>policy <input type="text" name="policy" value="{attr(policy)}" size="14">'
        "</label> <button>draw the front</button></form>"
    )


def _head(costs: Sequence[str], cost: str, policy: str) -> list[str]:
    title = f"Cost-quality front of each {_e(policy)}" + (f" on {_e(cost)}" if cost else "")
    return [f"<h1>{title}</h1>", _form(costs, cost, policy), f'<p class="note">{_HOW}</p>']


def _no_cost() -> str:
    return (
        '<p class="err" id="pareto-no-cost">The store holds no cost metric (no scores other '
        "than success): a front needs a cost such as steps, a latency or a token cost.</p>"
    )


def pareto_choose(costs: Sequence[str], *, policy: str, version: DataVersion) -> str:
    """The page before a cost is picked: the form, or why there is nothing to pick."""
    body = _head(costs, "", policy)
    if costs:
        links = ", ".join(
            f'<a href="{url("/pareto", {"cost": m, "policy": policy})}">{_e(m)}</a>' for m in costs
        )
        body.append(f'<p class="headline" id="pareto-pick">Pick a cost metric: {links}.</p>')
    else:
        body.append(_no_cost())
    return _layout("pareto front", "".join(body), version)


def pareto_refused(
    costs: Sequence[str], cost: str, policy: str, message: str, *, version: DataVersion
) -> str:
    """The page when the store refused the front: why, and the form to change it."""
    said = _prose(message.rstrip(". ") + ".")
    body = [*_head(costs, cost, policy), f'<p class="err" id="pareto-error">{said}</p>']
    if not costs:
        body.append(_no_cost())
    return _layout("pareto front", "".join(body), version)


def pareto_page(front: Any, costs: Sequence[str], *, policy: str, version: DataVersion) -> str:
    """``front`` (a :class:`~hylo_analytics.compare.ParetoFront`): its rows, the front's
    first, the notes, and the chart (its own request, drawn on the server)."""
    frame = front.frame
    level = f"{front.level:.0%}"
    columns: list[tuple[str, Cell]] = [
        ("policy", lambda r: _e(r["policy"])),
        (
            f"{front.quality} [{level}]",
            lambda r: f"{_num(r['quality'])} [{_num(r['quality_low'])}, {_num(r['quality_high'])}]",
        ),
        (
            f"{front.cost} [{level}]",
            lambda r: f"{_num(r['cost'])} [{_num(r['cost_low'])}, {_num(r['cost_high'])}]",
        ),
        ("on front", lambda r: "yes" if r["on_front"] else "no"),
        ("P(on front)", lambda r: _num(r["p_front"], 2)),
        ("keys", lambda r: f"{_e(r['n_keys'])} / {_e(r['n_cost_keys'])}"),
    ]
    on = int(frame["on_front"].sum())
    notes = "".join(f"<li>{_prose(n)}</li>" for n in front.notes)
    params = {"cost": front.cost, "policy": policy}
    body = [
        *_head(costs, front.cost, policy),
        f'<p class="headline" id="pareto-summary">{on:,} of {frame.height:,} policies on the '
        f"front ({_e(front.quality)} {_e(front.quality_direction)}, {_e(front.cost)} "
        f"{_e(front.cost_direction)}; {_e(front.pairing)}, {front.n_resamples:,} resamples).</p>",
        f'<ul class="note" id="pareto-notes">{notes}</ul>' if notes else "",
        _table(columns, frame, row_class=lambda r: "front" if r["on_front"] else "off"),
        f'<div class="chart"><img alt="cost-quality front" id="pareto-chart" '
        f'src="{url("/pareto/chart.svg", params)}"></div>',
    ]
    return _layout("pareto front", "".join(body), version)
