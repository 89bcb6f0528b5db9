"""The Starlette app: GET routes over one :class:`StoreReader`, nothing else.

Run ids come only from query parameters and are checked against the runs table; no URL part
is ever a file path, and a path with ``..`` is refused before routing. Only GET and HEAD are
served, so the app cannot change the store.
"""

from __future__ import annotations

import os
from html import escape as html_escape
from typing import Any

import polars as pl
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from hylo_analytics.compare import StatisticalRule
from hylo_analytics.serve import pages
from hylo_analytics.serve._data import SORTS, StoreReader, UnknownRunError

__all__ = ["create_app"]


class _Refuse(BaseHTTPMiddleware):
    """404 for any path that tries to climb (``/episode/../..``), 405 for writes."""

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        raw = request.scope.get("raw_path", b"").decode("latin-1").lower()
        if ".." in request.url.path or ".." in raw or "%2e%2e" in raw:
            return HTMLResponse("<h1>404</h1><p>no such page</p>", status_code=404)
        if request.method not in ("GET", "HEAD"):
            return HTMLResponse("<h1>405</h1><p>this server is read-only</p>", status_code=405)
        return await call_next(request)


def _page_number(request: Request) -> int:
    try:
        return max(1, int(request.query_params.get("page", "1")))
    except ValueError:
        return 1


def _one(request: Request, name: str) -> str:
    value = request.query_params.get(name)
    if not value:
        raise UnknownRunError(f"missing ?{name}=")
    return value


def create_app(store: str | os.PathLike[str] | StoreReader) -> Starlette:
    """The web app over the store at ``store`` (read-only)."""
    reader = store if isinstance(store, StoreReader) else StoreReader(store)
    rule = StatisticalRule().describe()

    def html(body: str, status: int = 200) -> HTMLResponse:
        return HTMLResponse(body, status_code=status, headers={"Cache-Control": "no-store"})

    def runs(request: Request) -> Response:
        q = request.query_params.get("q") or None
        sort = request.query_params.get("sort", "ingested")
        sort = sort if sort in SORTS else "ingested"
        page = reader.runs_page(q=q, sort=sort, page=_page_number(request))
        return html(pages.runs_page(page, q=q, sort=sort, version=reader.version()))

    def compare(request: Request) -> Response:
        parent = _one(request, "parent")
        candidates = list(dict.fromkeys(request.query_params.getlist("candidate")))
        if not candidates:
            raise UnknownRunError("pick at least one candidate (?candidate=RUN)")
        candidates = [c for c in candidates if c != parent] or candidates
        reader.check_runs([parent, *candidates])
        frame = reader.compare(candidates, parent)
        labels = reader.labels([parent, *candidates])
        # the chart is its own request (vl-convert takes a few hundred ms): the page comes first
        forests = {
            c: f'<div class="chart"><img alt="forest plot of {html_escape(c)}" '
            f'src="{pages.url("/compare/forest.svg", {"parent": parent, "candidate": c})}">'
            "</div>"
            for c in candidates
        }
        return html(
            pages.comparison_page(
                frame,
                parent=parent,
                candidates=candidates,
                labels=labels,
                rule=rule,
                forests=forests,
                version=reader.version(),
            )
        )

    def forest(request: Request) -> Response:
        parent, candidate = _one(request, "parent"), _one(request, "candidate")
        reader.check_runs([parent, candidate])
        svg: str = reader.memo(
            ("forest", parent, candidate), lambda: _forest(reader.compare([candidate], parent))
        )
        return Response(svg, media_type="image/svg+xml", headers={"Cache-Control": "no-store"})

    def task(request: Request) -> Response:
        parent, candidate, task_id = (_one(request, n) for n in ("parent", "candidate", "task"))
        reader.check_runs([parent, candidate])
        page = reader.task_page(candidate, parent, task_id, page=_page_number(request))
        if page.total == 0:
            return html(
                pages.error_page(404, f"no episodes of task {task_id!r}", reader.version()), 404
            )
        # the task's verdict row if its comparison was computed (the usual way here); a task
        # page opened cold does not pay for a whole comparison
        done = reader.compared([candidate], parent)
        rows = pl.DataFrame() if done is None else done.filter(pl.col("task_id") == task_id)
        return html(
            pages.task_page(
                page,
                parent=parent,
                candidate=candidate,
                task=task_id,
                summary=rows.row(0, named=True) if rows.height else None,
                labels=reader.labels([parent, candidate]),
                version=reader.version(),
            )
        )

    def episode(request: Request) -> Response:
        parent, candidate, key = (_one(request, n) for n in ("parent", "candidate", "key"))
        reader.check_runs([parent, candidate])
        scores = reader.key_scores([parent, candidate], key)
        if scores.is_empty():
            return html(
                pages.error_page(404, f"no episode with key {key!r}", reader.version()), 404
            )
        tasks = scores["task_id"].drop_nulls()
        return html(
            pages.episode_page(
                parent=parent,
                candidate=candidate,
                key=key,
                task=tasks[0] if tasks.len() else None,
                events={r: reader.episode(r, key) for r in (candidate, parent)},
                scores=scores,
                labels=reader.labels([parent, candidate]),
                version=reader.version(),
            )
        )

    def version(request: Request) -> Response:
        v = reader.version()
        when = v.committed_at.isoformat() if v.committed_at else None
        return JSONResponse(
            {"version": v.tag, "batch": v.seq, "committed_at": when, "text": v.text()}
        )

    async def unknown(request: Request, exc: Exception) -> Response:
        return html(pages.error_page(404, str(exc), reader.version()), 404)

    async def not_found(request: Request, exc: Exception) -> Response:
        return html(pages.error_page(404, "no such page", reader.version()), 404)

    handlers: dict[Any, Any] = {UnknownRunError: unknown, 404: not_found}
    return Starlette(
        routes=[
            Route("/", runs),
            Route("/compare", compare),
            Route("/compare/task", task),
            Route("/compare/forest.svg", forest),
            Route("/episode", episode),
            Route("/api/version", version),
        ],
        middleware=[Middleware(_Refuse)],
        exception_handlers=handlers,
    )


def _forest(frame: pl.DataFrame) -> str:
    """The report's forest plot (``charts.paired_forest``) as inline SVG, drawn server-side."""
    tasks = frame.filter(pl.col("level") != "overall")
    if tasks.is_empty():
        return '<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"/>'
    import vl_convert as vlc

    from hylo_analytics import charts
    from hylo_analytics._text import printable_spec

    svg: str = vlc.vegalite_to_svg(printable_spec(charts.paired_forest(tasks).to_dict()))
    return svg
