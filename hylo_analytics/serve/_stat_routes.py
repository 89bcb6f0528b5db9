"""The issue-42 statistics' routes: ``/pareto``, ``/critical-difference``, their charts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from hylo_analytics.errors import BadRequestError, HyloError
from hylo_analytics.serve import pages
from hylo_analytics.serve._data import StoreReader
from hylo_analytics.stats.critical_difference import CDTest

__all__ = ["stat_routes"]

_FIELD = 200  # longest metric / column name a query may carry


def _param(request: Request, name: str, default: str = "") -> str:
    value = request.query_params.get(name, default).strip()
    if len(value) > _FIELD:
        raise BadRequestError(f"{name} is longer than {_FIELD} characters")
    return value


def stat_routes(
    reader: StoreReader,
    *,
    html: Callable[[str, int], Response],
    svg: Callable[[str], Response],
    draw: Callable[[Any], str],
) -> list[Route]:
    """``/pareto``, ``/critical-difference`` and their charts over ``reader``; ``html`` / ``svg`` make the
    responses, ``draw`` turns a chart into SVG text."""

    def metrics() -> list[str]:
        found = reader.memo(
            ("metrics",),
            lambda: reader.sql("SELECT DISTINCT metric FROM scores ORDER BY metric"),
        )
        return [str(m) for m in found["metric"].to_list()]

    def front_of(cost: str, policy: str) -> Any:
        """``Store.pareto`` in a thread of its own, kept per data version."""
        job = reader.background(
            ("pareto", cost, policy), lambda store: store.pareto(cost=cost, policy=policy)
        )
        return job.result()

    def pareto(request: Request) -> Response:
        cost, policy = _param(request, "cost"), _param(request, "policy", "run_id")
        known = metrics()
        costs = [m for m in known if m not in ("success", "success_once", "success_at_end")]
        version = reader.version()
        if not cost:
            return html(pages.pareto_choose(costs, policy=policy, version=version), 200)
        try:
            front = front_of(cost, policy)
        except (HyloError, ValueError) as exc:  # the store refused it: the page says why
            page = pages.pareto_refused(costs, cost, policy, str(exc), version=version)
            return html(page, 400)
        return html(pages.pareto_page(front, costs, policy=policy, version=version), 200)

    def chart(request: Request) -> Response:
        cost, policy = _param(request, "cost"), _param(request, "policy", "run_id")
        if not cost:
            raise BadRequestError("the chart needs a cost metric: /pareto/chart.svg?cost=NAME")
        try:
            front = front_of(cost, policy)
        except (HyloError, ValueError) as exc:
            raise BadRequestError(f"cannot draw the front: {exc}") from exc
        return svg(reader.memo(("pareto-svg", cost, policy), lambda: draw(front.chart())))

    def cd_query(request: Request) -> tuple[str, str, str]:
        policy = _param(request, "policy", "run_id")
        metric = _param(request, "metric", "success")
        test = _param(request, "test", "nemenyi")
        if test not in ("nemenyi", "wilcoxon"):
            raise BadRequestError("test must be nemenyi or wilcoxon")
        return policy, metric, test

    def cd_of(policy: str, metric: str, test: str) -> Any:
        """``Store.critical_difference`` in a thread of its own, kept per data version."""
        job = reader.background(
            ("cd", policy, metric, test),
            lambda store: store.critical_difference(
                policy=policy, metric=metric, test=cast(CDTest, test)
            ),
        )
        return job.result()

    def cd(request: Request) -> Response:
        policy, metric, test = cd_query(request)
        version = reader.version()
        try:
            result = cd_of(policy, metric, test)
        except (HyloError, ValueError) as exc:
            return html(pages.cd_refused(policy, metric, test, str(exc), version=version), 400)
        return html(pages.cd_page(result, policy=policy, version=version), 200)

    def cd_chart(request: Request) -> Response:
        policy, metric, test = cd_query(request)
        try:
            result = cd_of(policy, metric, test)
        except (HyloError, ValueError) as exc:
            raise BadRequestError(f"cannot draw the diagram: {exc}") from exc
        key = ("cd-svg", policy, metric, test)
        return svg(reader.memo(key, lambda: draw(result.chart())))

    def shrunk(request: Request) -> tuple[str, str, Any]:
        run, metric = _param(request, "run"), _param(request, "metric", "success")
        reader.check_runs([run] if run else [])
        job = reader.background(
            ("shrink", run, metric), lambda store: store.shrink(run, metric=metric)
        )
        try:
            return run, metric, job.result()
        except (HyloError, ValueError) as exc:
            raise BadRequestError(f"cannot shrink: {exc}") from exc

    def shrink(request: Request) -> Response:
        run, metric, frame = shrunk(request)
        return html(pages.shrink_page(frame, run=run, metric=metric, version=reader.version()), 200)

    def shrink_chart(request: Request) -> Response:
        from hylo_analytics import charts

        run, metric, frame = shrunk(request)
        if frame.is_empty():
            raise BadRequestError("no tasks to draw")
        return svg(reader.memo(("shrink-svg", run, metric), lambda: draw(charts.shrinkage(frame))))

    def cal_query(request: Request) -> dict[str, str]:
        return {k: _param(request, k) for k in ("trusted_source", "judge_source", "baseline")}

    def sources() -> list[str]:
        found = reader.memo(
            ("sources",), lambda: reader.sql("SELECT DISTINCT source FROM scores ORDER BY 1")
        )
        return [str(s) for s in found["source"].to_list() if s is not None]

    def calibrated(q: dict[str, str]) -> Any:
        job = reader.background(
            ("calibrate", *q.values()),
            lambda store: store.calibrate(
                policy="run_id",
                trusted_source=q["trusted_source"] or None,
                judge_source=q["judge_source"] or None,
                baseline=q["baseline"] or None,
            ),
        )
        return job.result()

    def calibrate(request: Request) -> Response:
        q, known, version = cal_query(request), sources(), reader.version()
        args = (known, q["trusted_source"], q["judge_source"], q["baseline"])
        if not q["trusted_source"]:
            said = (
                "No trusted source chosen: calibration needs a trusted grade (a person's or an "
                "oracle's scores, on some keys) and a judge's grades of every key; the store's "
                f"sources are {', '.join(known) or 'none'}"
            )
            return html(pages.calibrate_refused(*args, said, version=version), 200)
        try:
            result = calibrated(q)
        except (HyloError, ValueError) as exc:
            return html(pages.calibrate_refused(*args, str(exc), version=version), 400)
        return html(pages.calibrate_page(result, known, query=q, version=version), 200)

    def calibrate_chart(request: Request) -> Response:
        q = cal_query(request)
        try:
            result = calibrated(q)
        except (HyloError, ValueError) as exc:
            raise BadRequestError(f"cannot draw the calibration: {exc}") from exc
        return svg(reader.memo(("calibrate-svg", *q.values()), lambda: draw(result.chart())))

    return [
        Route("/calibrate", calibrate),
        Route("/calibrate/chart.svg", calibrate_chart),
        Route("/shrink", shrink),
        Route("/shrink/chart.svg", shrink_chart),
        Route("/pareto", pareto),
        Route("/pareto/chart.svg", chart),
        Route("/critical-difference", cd),
        Route("/critical-difference/chart.svg", cd_chart),
    ]


def epochs_note(reader: StoreReader, candidate: str, parent: str, metric: str) -> str:
    """``Store.epochs_plan``'s sentence for a comparison whose keys have two epochs or more
    (HTML, escaped), else "" (kept per data version)."""
    from hylo_analytics.serve.pages._layout import _e, _prose

    def make() -> str:
        try:
            plan = reader.background(
                ("epochs", candidate, parent, metric),
                lambda store: store.epochs_plan(candidate, parent, metric=metric),
            ).result()
        except (HyloError, ValueError):
            return ""
        if plan.is_empty() or (plan["epochs"][0] or 0) < 2:
            return ""
        r = plan.row(0, named=True)
        share = r["within_share"]
        said = f"{_e(r['epochs'])} epochs per key"
        if share is not None:
            said += f"; the epochs' noise is {share:.0%} of the difference's variance"
        if r["epochs_to_halve"] is not None:
            said += f"; {_e(r['epochs_to_halve'])} epochs per key would halve the interval"
        if r["items_to_halve"] is not None:
            said += f", or {_e(r['items_to_halve'])} keys"
        note = f" {_prose(r['note'])}" if r.get("note") else ""
        return f'<p class="note epochs-plan">{said}.{note}</p>'

    note: str = reader.memo(("epochs-plan", candidate, parent, metric), make)
    return note
