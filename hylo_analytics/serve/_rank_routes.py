"""The ranking's routes: the page (computed in the background) and its two charts."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from hylo_analytics.errors import BadRequestError
from hylo_analytics.serve import pages
from hylo_analytics.serve._data import PAGE_SIZE, StoreReader
from hylo_analytics.serve._ranking import RankQuery, RankView, rank_job

__all__ = ["FIRST_WAIT", "rank_routes"]

FIRST_WAIT = 1.0  # s the first request waits for the ranking before it says "computing"


def rank_routes(
    reader: StoreReader,
    *,
    html: Callable[[str, int], Response],
    svg: Callable[[str], Response],
    page_number: Callable[[Request], int],
    draw: Callable[[Any], str],
) -> list[Route]:
    """``/rank`` and its charts over ``reader``; ``html`` / ``svg`` make the responses
    (with the app's headers), ``draw`` turns a chart into SVG text."""

    def query_of(request: Request) -> tuple[RankQuery, int]:
        params = request.query_params
        return RankQuery.parse(params.get, params.getlist), page_number(request)

    def view_of(query: RankQuery, page: int) -> RankView:
        """The ranking (waiting for it: a chart is asked for by a page that has it)."""
        try:
            view: RankView = rank_job(reader, query).result()
        except ValueError as exc:  # the store refused it: the page says why
            raise BadRequestError(f"cannot rank: {exc}") from exc
        if page > view.pages:
            raise BadRequestError(f"page {page} is past the last page ({view.pages})")
        return view

    def rank(request: Request) -> Response:
        query, page = query_of(request)
        version = reader.version()
        job = rank_job(reader, query)
        if not job.wait(FIRST_WAIT):
            seconds = time.monotonic() - job.started
            return html(pages.ranking_pending(query, seconds=seconds, version=version), 200)
        try:
            job.result()
        except ValueError as exc:
            return html(pages.ranking_refused(query, str(exc), version=version), 400)
        view = view_of(query, page)
        return html(pages.ranking_page(view, query=query, page=page, version=version), 200)

    def _span(view: RankView, page: int) -> str:
        lo, hi = (page - 1) * PAGE_SIZE + 1, min(page * PAGE_SIZE, view.ranks.height)
        return f"ranks {lo:,} to {hi:,} of {view.ranks.height:,} policies"

    def strengths(request: Request) -> Response:
        from hylo_analytics import charts

        query, page = query_of(request)
        view = view_of(query, page)
        rows, _ = view.page(page)
        title = f"Bradley-Terry strengths, {_span(view, page)}"
        return svg(
            reader.memo(
                ("rank-strengths", query, page),
                lambda: draw(charts.strength_intervals(rows, top=None, title=title)),
            )
        )

    def heatmap(request: Request) -> Response:
        from hylo_analytics import charts

        query, page = query_of(request)
        view = view_of(query, page)
        rows, pairs = view.page(page)
        if rows.height < 2:
            raise BadRequestError("a heatmap needs two policies; this page has one")
        order = rows["policy"].to_list()
        title = f"Pairwise verdicts, {_span(view, page)}"
        return svg(
            reader.memo(
                ("rank-heatmap", query, page),
                lambda: draw(charts.ranking_matrix(pairs, order=order, title=title)),
            )
        )

    return [
        Route("/rank", rank),
        Route("/rank/strengths.svg", strengths),
        Route("/rank/heatmap.svg", heatmap),
    ]
