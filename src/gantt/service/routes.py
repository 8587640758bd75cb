"""Gantt's route table (``ROUTES``, and the live view's ``PAGES``), each handler behind the checks of its path and
query parameters, and the answers Starlette's router gives when a handler raises or no route matches."""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match, Route
from starlette.types import Scope

from gantt.model import GanttError, NotFound
from gantt.service.handlers import (
    candidates,
    capacity,
    confirm_move,
    delete_aggregate,
    delete_host,
    delete_instance,
    health,
    list_aggregates,
    list_allocations,
    list_hosts,
    metrics,
    openapi_document,
    overview,
    put_aggregate,
    release,
    report,
    report_batch,
    revert_move,
    select_destinations,
    show_aggregate,
    show_allocation,
    show_host,
    update_host,
    update_instances,
    version_document,
)
from gantt.service.liveview import UI, ui_asset
from gantt.service.queries import check_name, query_params
from gantt.service.responses import problem
from gantt.service.schemas import MethodNotAllowed

log = logging.getLogger("gantt.service")

def _route(path: str, endpoint: Callable[[Request], Awaitable[Response]], methods: list[str]) -> Route:
    """A route whose handler runs only if every path parameter is a name and every query parameter is one the
    path takes (``_QUERY``)."""

    @functools.wraps(endpoint)
    async def checked(request: Request) -> Response:
        for name, value in request.path_params.items():
            check_name(name, value)
        query_params(request)
        return await endpoint(request)

    return Route(path, checked, methods=methods)


ROUTES = [
    _route("/", version_document, methods=["GET"]),
    _route("/health", health, methods=["GET"]),
    _route("/metrics", metrics, methods=["GET"]),
    _route("/openapi.json", openapi_document, methods=["GET"]),
    _route("/v1/resource-stats", report, methods=["POST"]),
    _route("/v1/resource-stats/batch", report_batch, methods=["POST"]),
    _route("/v1/hosts", list_hosts, methods=["GET"]),
    _route("/v1/hosts/{host}", show_host, methods=["GET"]),
    _route("/v1/hosts/{host}", update_host, methods=["PATCH"]),
    _route("/v1/hosts/{host}", delete_host, methods=["DELETE"]),
    _route("/v1/aggregates", list_aggregates, methods=["GET"]),
    _route("/v1/aggregates/{id}", show_aggregate, methods=["GET"]),
    _route("/v1/aggregates/{id}", put_aggregate, methods=["PUT"]),
    _route("/v1/aggregates/{id}", delete_aggregate, methods=["DELETE"]),
    _route("/v1/select_destinations", select_destinations, methods=["POST"]),
    _route("/v1/candidates", candidates, methods=["POST"]),
    _route("/v1/capacity", capacity, methods=["POST"]),
    _route("/v1/overview", overview, methods=["GET"]),
    _route("/v1/allocations", list_allocations, methods=["GET"]),
    _route("/v1/allocations/{consumer}", show_allocation, methods=["GET"]),
    _route("/v1/allocations/{consumer}", release, methods=["DELETE"]),
    _route("/v1/migrations/{migration}/confirm", confirm_move, methods=["POST"]),
    _route("/v1/migrations/{migration}/revert", revert_move, methods=["POST"]),
    _route("/v1/instances/{host}", update_instances, methods=["POST", "PUT"]),
    _route("/v1/instances/{host}/{instance}", delete_instance, methods=["DELETE"]),
]


PAGES = [
    _route(UI, ui_asset, methods=["GET"]),
    _route(UI + "/", ui_asset, methods=["GET"]),
    _route(UI + "/{asset}", ui_asset, methods=["GET"]),
]


async def gantt_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, GanttError)
    if exc.status >= 500:
        log.warning("%s %s: %s", request.method, request.url.path, exc)
    return problem(exc)


async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 405:
        # Starlette's Allow names the methods of the first route that matched the path only; a path served by
        # several routes (GET and DELETE /v1/hosts/{host}) must list them all (RFC 9110 §15.5.6).
        allowed = _allowed_methods(request.scope)
        return problem(MethodNotAllowed(f"{request.method} is not allowed on {request.url.path}"),
                        headers={**(exc.headers or {}), "Allow": ", ".join(allowed)})
    if exc.status_code == 404:
        return problem(NotFound(f"no such path {request.url.path}"))
    error = GanttError(exc.detail)
    error.status = exc.status_code
    error.title = exc.detail
    return problem(error, headers=dict(exc.headers or {}))


def _allowed_methods(scope: Scope) -> list[str]:
    methods: set[str] = set()
    for route in (*ROUTES, *PAGES):
        match, _ = route.matches(scope)
        if match is not Match.NONE and route.methods:
            methods |= route.methods
    return sorted(methods)


async def unexpected(request: Request, exc: Exception) -> Response:
    # Starlette's outermost layer answers with this, then re-raises to Guard, which logs and counts it.
    return problem(GanttError("unexpected server error; it has been logged"))

