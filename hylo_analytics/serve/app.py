"""The Starlette app: GET routes over one :class:`StoreReader`, nothing else.

Run ids come only from query parameters and are checked against the runs table; no URL part
is ever a file path, and a path with ``..`` is refused before routing. Only GET and HEAD are
served, so the app cannot change the store. Every request passes :class:`_Guard` first: the
``Host`` must be one the server answers to (a web page cannot reach it through a rebinding
domain), a non-loopback server wants its token, and every response carries a
Content-Security-Policy that runs only the pages' own script. A bad parameter is a 4xx page
that says why, never a 500.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import polars as pl
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from hylo_analytics._harness import Errors
from hylo_analytics._html import attr, csp_hash
from hylo_analytics.compare import ComparabilityError, StatisticalRule
from hylo_analytics.errors import BadRequestError
from hylo_analytics.serve import pages
from hylo_analytics.serve._assets import CSS, JS
from hylo_analytics.serve._data import (
    LONG_FIELDS,
    MAX_CANDIDATES,
    MAX_PAGE,
    NAME_CHARS,
    SORTS,
    StoreReader,
    UnknownRunError,
    parse_errors,
)
from hylo_analytics.serve._rank_routes import rank_routes
from hylo_analytics.serve._stat_routes import epochs_note, stat_routes

__all__ = ["LOOPBACK_HOSTS", "TOKEN_COOKIE", "Access", "BadRequestError", "create_app"]

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
TOKEN_COOKIE = "hylo_token"

# the pages' one script and one stylesheet by hash: an injected <script> or inline handler
# would not run even if some text escaped its escaping
PAGE_CSP = (
    f"default-src 'none'; script-src {csp_hash(JS)}; style-src {csp_hash(CSS)}; "
    "img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'"
)
# the forest plot (an SVG drawn by vl-convert, styled inline) and a field's whole text
SVG_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'"
TEXT_CSP = "default-src 'none'; sandbox; frame-ancestors 'none'"
_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


@dataclass(frozen=True)
class Access:
    """Who may reach the app: the ``Host`` names it answers to and, off loopback, a token.

    ``hosts`` holds bare names (any port); ``token`` is None on a loopback bind.
    """

    hosts: frozenset[str] = field(default_factory=lambda: frozenset(LOOPBACK_HOSTS))
    token: str | None = None

    @classmethod
    def of(cls, allow_hosts: Sequence[str] = (), token: str | None = None) -> Access:
        """The loopback names plus ``allow_hosts`` (``name``, ``name:port`` or ``[v6]``)."""
        return cls(frozenset(LOOPBACK_HOSTS) | {_hostname(h) for h in allow_hosts}, token)

    def allows(self, host_header: str | None) -> bool:
        return bool(host_header) and _hostname(host_header or "") in self.hosts


def new_token() -> str:
    """A fresh random token for a non-loopback server (printed once in its URL)."""
    return secrets.token_urlsafe(24)


def _hostname(host: str) -> str:
    """``Host`` without its port, lower case: ``[::1]:8765`` -> ``::1``."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    if host.count(":") == 1:
        host = host.split(":", 1)[0]
    return host.rstrip(".")


class _Guard(BaseHTTPMiddleware):
    """Host allow-list, path climbing, writes and the token, then the security headers."""

    def __init__(self, app: ASGIApp, access: Access, error: Callable[[int, str], Response]):
        super().__init__(app)
        self.access = access
        self.error = error

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        response = await self._checked(request, call_next)
        for name, value in _HEADERS.items():
            response.headers.setdefault(name, value)
        response.headers.setdefault("Content-Security-Policy", PAGE_CSP)
        return response

    async def _checked(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        host = request.headers.get("host")
        if not self.access.allows(host):
            return self.error(
                400,
                f"this server does not answer to host {host!r} (it answers to "
                f"{', '.join(sorted(self.access.hosts))}); a name of your own needs "
                "'hylo-analytics serve --allow-host NAME'",
            )
        raw = request.scope.get("raw_path", b"").decode("latin-1").lower()
        if ".." in request.url.path or ".." in raw or "%2e%2e" in raw:
            return self.error(404, "no such page")
        if request.method not in ("GET", "HEAD"):
            return self.error(405, "this server is read-only")
        token = self.access.token
        if token is None:
            return await call_next(request)
        given = request.query_params.get("token")
        if given is not None and secrets.compare_digest(given, token):
            # the token leaves the address bar (and the history) for a cookie
            rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            path = "/" + request.url.path.lstrip("/")  # never "//host": no open redirect
            target = path + ("?" + urlencode(rest) if rest else "")
            response = RedirectResponse(target, status_code=303)
            response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict")
            return response
        cookie = request.cookies.get(TOKEN_COOKIE)
        if cookie is not None and secrets.compare_digest(cookie, token):
            return await call_next(request)
        return self.error(
            403,
            "this server listens beyond this machine and needs its token: open the address "
            "with ?token=... that 'hylo-analytics serve' printed when it started",
        )


def _page_number(request: Request) -> int:
    raw = request.query_params.get("page", "1")
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_PAGE:
        raise BadRequestError(f"page must be a whole number from 1 to {MAX_PAGE:,}")
    return int(raw)


def _errors(request: Request) -> Errors | None:
    """``?errors=``: ``failure``, ``exclude``, or absent for each run's harness convention."""
    try:
        return parse_errors(request.query_params.get("errors"))
    except ValueError as exc:
        raise BadRequestError(f"{exc}: on a page, leave errors= out for that") from exc


def _metric(request: Request) -> str | None:
    """``?metric=``: the metric a comparison is on; absent (None) is success."""
    value = request.query_params.get("metric") or None
    if value is not None and len(value) > NAME_CHARS:
        raise BadRequestError(f"metric must be a metric's name (at most {NAME_CHARS} characters)")
    return None if value == "success" else value


def _one(request: Request, name: str) -> str:
    value = request.query_params.get(name)
    if not value:
        raise UnknownRunError(f"missing ?{name}=")
    return value


def create_app(
    store: str | os.PathLike[str] | StoreReader,
    *,
    allow_hosts: Sequence[str] = (),
    token: str | None = None,
) -> Starlette:
    """The web app over the store at ``store`` (read-only).

    It answers to the loopback names and ``allow_hosts`` only; with ``token`` set every
    request must carry it (``?token=`` once, then the cookie it sets).
    """
    reader = store if isinstance(store, StoreReader) else StoreReader(store)
    rule = StatisticalRule().describe()

    def html(body: str, status: int = 200) -> HTMLResponse:
        return HTMLResponse(body, status_code=status, headers=_HEADERS)

    def error(status: int, message: str) -> Response:
        return html(pages.error_page(status, message, reader.version()), status)

    def runs(request: Request) -> Response:
        q = request.query_params.get("q") or None
        sort = request.query_params.get("sort", "ingested")
        if sort not in SORTS:
            raise BadRequestError(f"sort must be one of {', '.join(SORTS)}")
        errors = _errors(request)
        # the version first: a success read that ends while the page is built leaves it
        # "pending", so the page reloads for it (taken after, the page would never know)
        version = reader.version()
        page = reader.runs_page(q=q, sort=sort, page=_page_number(request), errors=errors)
        return html(pages.runs_page(page, q=q, sort=sort, version=version))

    def picker(
        request: Request, parent: str | None, candidates: list[str], errors: Errors | None
    ) -> Response:
        if parent is None and not candidates:
            why = "pick a parent (the left column) and at least one candidate, then compare"
        elif parent is None:
            why = "pick a parent too (the left column): the run the candidates are compared with"
        else:
            why = "pick at least one candidate (the second column) to compare with the parent"
        version = reader.version()  # before the read, as in runs
        page = reader.runs_page(q=None, sort="ingested", page=_page_number(request), errors=errors)
        return html(
            pages.runs_page(
                page,
                q=None,
                sort="ingested",
                version=version,
                parent=parent,
                candidates=candidates,
                message=why,
            )
        )

    def compare(request: Request) -> Response:
        parent = request.query_params.get("parent") or None
        candidates = list(dict.fromkeys(c for c in request.query_params.getlist("candidate") if c))
        errors = _errors(request)
        if parent is None or not candidates:
            # the picker sent an incomplete pick: back to it, the picks kept, saying what is due
            return picker(request, parent, candidates, errors)
        if len(candidates) > MAX_CANDIDATES:
            raise BadRequestError(
                f"{len(candidates)} candidates: a comparison takes at most {MAX_CANDIDATES} "
                "(each is a comparison and a forest plot); pick fewer"
            )
        candidates = [c for c in candidates if c != parent]
        if not candidates:
            raise BadRequestError("the parent is its only candidate: pick another run")
        page_number = _page_number(request)
        metric = _metric(request)
        reader.check_runs([parent, *candidates])
        frame = _compared(reader, candidates, parent, errors, metric)
        labels = reader.labels([parent, *candidates])
        # the chart is its own request (vl-convert takes a few hundred ms): the page comes first
        forests = {
            c: f'<div class="chart"><img alt="forest plot of {attr(c)}" src="'
            + pages.url(
                "/compare/forest.svg",
                {"parent": parent, "candidate": c, "errors": errors, "metric": metric},
            )
            + '"></div>'
            + epochs_note(reader, c, parent, metric or "success")
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
                page=page_number,
                errors=errors,
                errored=reader.errored([parent, *candidates], metric or "success"),
                metric=metric,
            )
        )

    def pooled(request: Request) -> Response:
        candidate, parent = _one(request, "candidate"), _one(request, "parent")
        errors = _errors(request)
        try:
            frame = reader.pooled(candidate, parent, errors)
        except ComparabilityError:
            raise
        except ValueError as exc:
            raise BadRequestError(f"cannot pool these runs: {exc}") from exc
        return html(
            pages.pooled_page(
                frame,
                candidate=candidate,
                parent=parent,
                rule=rule,
                version=reader.version(),
                errors=errors,
            )
        )

    def pooled_pick(request: Request) -> Response:
        """The runs page's picks as the pooled comparison of their two agents (a redirect)."""
        parent = request.query_params.get("parent") or None
        candidates = list(dict.fromkeys(c for c in request.query_params.getlist("candidate") if c))
        errors = _errors(request)
        if parent is None or not candidates:
            return picker(request, parent, candidates, errors)
        if len(candidates) != 1:
            raise BadRequestError(
                f"{len(candidates)} candidates: a pooled comparison is one agent against "
                "another; pick one candidate"
            )
        reader.check_runs([parent, *candidates])
        cand, par = _agent_selector(reader, candidates[0]), _agent_selector(reader, parent)
        if cand == par:
            raise BadRequestError(
                f"both runs are of {cand}: pooling compares two agents over their suites; pick "
                "a run of another agent (or compare the two runs)"
            )
        kept = {"candidate": cand, "parent": par, **({"errors": errors} if errors else {})}
        return RedirectResponse("/pooled?" + urlencode(kept), status_code=303, headers=_HEADERS)

    def pooled_forest(request: Request) -> Response:
        candidate, parent = _one(request, "candidate"), _one(request, "parent")
        errors = _errors(request)
        try:
            frame = reader.pooled(candidate, parent, errors)
        except ComparabilityError:
            raise
        except ValueError as exc:
            raise BadRequestError(f"cannot pool these runs: {exc}") from exc
        return svg_response(
            reader.memo(
                ("pooled-forest", candidate, parent, errors),
                lambda: _pooled_forest(frame, candidate, parent),
            )
        )

    def svg_response(svg: str) -> Response:
        return Response(
            svg,
            media_type="image/svg+xml",
            headers={**_HEADERS, "Content-Security-Policy": SVG_CSP},
        )

    def forest(request: Request) -> Response:
        parent, candidate = _one(request, "parent"), _one(request, "candidate")
        if candidate == parent:
            raise BadRequestError("the parent is its only candidate: pick another run")
        errors, metric = _errors(request), _metric(request)
        reader.check_runs([parent, candidate])
        svg: str = reader.memo(
            ("forest", parent, candidate, errors, metric),
            lambda: _forest(_compared(reader, [candidate], parent, errors, metric)),
        )
        return Response(
            svg,
            media_type="image/svg+xml",
            headers={**_HEADERS, "Content-Security-Policy": SVG_CSP},
        )

    def task(request: Request) -> Response:
        parent, candidate, task_id = (_one(request, n) for n in ("parent", "candidate", "task"))
        page_number = _page_number(request)
        errors, metric = _errors(request), _metric(request)
        reader.check_runs([parent, candidate])
        page = reader.task_page(
            candidate, parent, task_id, page=page_number, errors=errors, metric=metric or "success"
        )
        if page.total == 0:
            return error(404, f"no episodes of task {task_id!r}")
        # the task's verdict row if its comparison was computed (the usual way here); a task
        # page opened cold does not pay for a whole comparison
        done = reader.compared([candidate], parent, errors, metric or "success")
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
                errors=errors,
                metric=metric,
            )
        )

    def episode(request: Request) -> Response:
        parent, candidate, key = (_one(request, n) for n in ("parent", "candidate", "key"))
        page_number = _page_number(request)
        errors = _errors(request)
        reader.check_runs([parent, candidate])
        scores = reader.key_scores([parent, candidate], key)
        if scores.is_empty():
            return error(404, f"no episode with key {key!r}")
        tasks = scores["task_id"].drop_nulls()
        return html(
            pages.episode_page(
                parent=parent,
                candidate=candidate,
                key=key,
                task=tasks[0] if tasks.len() else None,
                events={r: reader.episode(r, key, page=page_number) for r in (candidate, parent)},
                scores=scores,
                labels=reader.labels([parent, candidate]),
                version=reader.version(),
                samples={r: reader.key_samples(r, key) for r in (candidate, parent)},
                errors=errors,
                transcripts={r: reader.transcripts(r, key) for r in (candidate, parent)},
                metric=_metric(request),
            )
        )

    def whole_field(request: Request) -> Response:
        run, key, episode_id = (_one(request, n) for n in ("run", "key", "episode"))
        name, idx = request.query_params.get("field", ""), request.query_params.get("idx", "")
        if name not in LONG_FIELDS:
            raise BadRequestError(f"field must be one of {', '.join(LONG_FIELDS)}")
        if not idx.isdigit():
            raise BadRequestError("idx must be a whole number")
        reader.check_runs([run])
        value = reader.field(run, key, episode_id, int(idx), name)
        if value is None:
            return error(404, f"no {name} at event {idx} of that episode")
        return Response(
            value,
            media_type="text/plain; charset=utf-8",
            headers={**_HEADERS, "Content-Security-Policy": TEXT_CSP},
        )

    def version(request: Request) -> Response:
        v = reader.version()
        when = v.committed_at.isoformat() if v.committed_at else None
        return JSONResponse(
            {"version": v.tag, "batch": v.seq, "committed_at": when, "text": v.text()},
            headers=_HEADERS,
        )

    async def unknown(request: Request, exc: Exception) -> Response:
        return error(404, str(exc))

    async def bad(request: Request, exc: Exception) -> Response:
        return error(400, str(exc))

    async def incomparable(request: Request, exc: Exception) -> Response:
        return error(
            409,
            f"these runs are not comparable: {exc} (serve never forces a comparison; the "
            "command line does: hylo-analytics compare --force)",
        )

    async def not_found(request: Request, exc: Exception) -> Response:
        return error(404, "no such page")

    handlers: dict[Any, Any] = {
        UnknownRunError: unknown,
        BadRequestError: bad,
        ComparabilityError: incomparable,
        404: not_found,
    }
    return Starlette(
        routes=[
            Route("/", runs),
            Route("/compare", compare),
            Route("/compare/task", task),
            Route("/compare/forest.svg", forest),
            Route("/pooled", pooled),
            Route("/pooled/pick", pooled_pick),
            Route("/pooled/forest.svg", pooled_forest),
            *rank_routes(reader, html=html, svg=svg_response, page_number=_page_number, draw=_draw),
            *stat_routes(reader, html=html, svg=svg_response, draw=_draw),
            Route("/episode", episode),
            Route("/episode/field", whole_field),
            Route("/api/version", version),
        ],
        middleware=[Middleware(_Guard, access=Access.of(allow_hosts, token), error=error)],
        exception_handlers=handlers,
    )


def _compared(
    reader: StoreReader,
    candidates: Sequence[str],
    parent: str,
    errors: Errors | None,
    metric: str | None = None,
) -> pl.DataFrame:
    """``reader.compare``, its refusals as the 4xx they are: the gate's a 409 (its handler),
    any other (a parent with no scores of the metric) a 400 that quotes it."""
    try:
        return reader.compare(candidates, parent, errors, metric or "success")
    except ComparabilityError:
        raise
    except ValueError as exc:
        raise BadRequestError(f"cannot compare these runs: {exc}") from exc


def _draw(chart: Any) -> str:
    """An altair chart as SVG text, drawn server-side (names made printable first)."""
    import vl_convert as vlc

    from hylo_analytics._text import printable_spec

    svg: str = vlc.vegalite_to_svg(printable_spec(chart.to_dict()))
    return svg


def _forest(frame: pl.DataFrame) -> str:
    """The report's forest plot (``charts.paired_forest``) as inline SVG, drawn server-side."""
    tasks = frame.filter(pl.col("level") != "overall")
    if tasks.is_empty():
        return '<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"/>'
    from hylo_analytics import charts

    return _draw(charts.paired_forest(tasks))


def _pooled_forest(frame: pl.DataFrame, candidate: str, parent: str) -> str:
    """The pooled comparison's suites and its pooled row as a forest plot (SVG)."""
    from hylo_analytics import charts

    rows = (
        frame.with_columns(
            task_id=pl.when(pl.col("level") == "pooled")
            .then(pl.lit("pooled over the suites"))
            .otherwise(pl.col("suite").cast(pl.String)),
        )
        .drop("level")
        .rename({"mean_diff": "diff", "p_verdict": "p_adjusted"})
    )
    title = f"{candidate} \u2212 {parent}, per suite and pooled"
    return _draw(charts.paired_forest(rows, title=title))


def _agent_selector(reader: StoreReader, run: str) -> str:
    """``agent=NAME`` of ``run``'s agent, the selector a pooled comparison takes; a name a
    selector cannot spell (none, a comma, an equals sign, edge spaces) is a 400."""
    found = reader.sql("SELECT agent_name FROM runs WHERE run_id = $run", {"run": run})
    name = found["agent_name"][0] if found.height else None
    if not name or any(c in name for c in ",=") or name != name.strip():
        raise BadRequestError(
            f"run {run!r} has no agent name a selector can spell ({name!r}); pool with "
            "selectors of your own: /pooled?candidate=SELECTOR&parent=SELECTOR"
        )
    return f"agent={name}"
