"""The fast path of the load-carrying routes (``HOT``: host reports, placements, releases): ``HotRoutes`` serves
them past Starlette's middleware and router, ``Lane`` answers them from the HTTP protocol itself
(``gantt.service.protocol.HotCycle``); both with the same endpoints, refusals and counts as the Starlette path."""

from __future__ import annotations

import time

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gantt.model import GanttError
from gantt.service.guard import Guard
from gantt.service.routes import gantt_error

# The routes that carry a cloud's load (host reports, placements, releases). Profiled under load, Starlette's
# layers around one of these requests (two middlewares, a regex match against every route in order, two
# exception-handling wrappers) were about a third of the event loop's CPU per host report.
HOT = frozenset({("POST", "/v1/resource-stats"), ("POST", "/v1/select_destinations"),
                 ("DELETE", "/v1/allocations/{consumer}")})


class HotRoutes:
    """The hot routes served without Starlette's middleware and router: the same route objects match them, the
    same endpoints (with their checks) answer, and a refusal is rendered by the same ``gantt_error``, so bodies
    and statuses are those of the Starlette path. Anything else (another method on these paths included) goes
    through Starlette as before; an unexpected error goes up to ``Guard``, which answers the same 500."""

    def __init__(self, app: Starlette, routes: list[Route]) -> None:
        self.app = app
        self.routes = [route for route in routes if any((method, route.path) in HOT for method in route.methods or ())]

    def match(self, scope: Scope) -> Route | None:
        for route in self.routes:
            match, child = route.matches(scope)
            if match is Match.FULL:
                scope.update(child)
                scope["route"] = route
                return route
        return None

    async def serve(self, route: Route, scope: Scope, receive: Receive, send: Send) -> None:
        response = await self.answer(route, scope, receive)
        await response(scope, receive, send)

    async def answer(self, route: Route, scope: Scope, receive: Receive) -> Response:
        """The endpoint's answer, a refusal rendered as under Starlette; an unexpected error is raised."""
        scope["app"] = self.app  # what a handler's request.app reads (the service), as under Starlette
        request = Request(scope, receive)
        try:
            return await route.endpoint(request)  # type: ignore[no-any-return]  # Starlette's endpoints are untyped
        except GanttError as exc:
            return await gantt_error(request, exc)


class Lane:
    """The hot routes answered from the HTTP protocol itself (``protocol.HotCycle``): a request read whole is
    answered by the same endpoints, refusals, token check, counts and logs as through ``Guard`` and ``HotRoutes``,
    with none of the ASGI machinery between (uvicorn's cycle and its event, the proxy-headers middleware, two
    messages and three wrappers per answer). Measured per repeated host report on one worker, uvicorn's cycle
    and the layers above the endpoint cost more of the event loop than the report itself.

    Only the plain spelling of a hot path comes here (no query, no percent-escape): any other target, and any
    request the protocol does not hand over whole, goes the ASGI way, to the same answers."""

    def __init__(self, guard: Guard, hot: HotRoutes) -> None:
        self.guard = guard
        self.hot = hot
        self.max_body = guard.service.max_body
        self._exact: dict[tuple[bytes, bytes], Route] = {}
        self._last: list[tuple[bytes, bytes, str, Route]] = []  # method, prefix, parameter: a path's last segment
        for route in hot.routes:
            for method in route.methods or ():
                if (method, route.path) not in HOT:
                    continue
                prefix, brace, rest = route.path.partition("{")
                if not brace:
                    self._exact[(method.encode(), route.path.encode())] = route
                else:
                    assert rest.endswith("}") and "/" not in rest, "one parameter, the path's last segment"
                    self._last.append((method.encode(), prefix.encode(), rest[:-1], route))

    def route(self, method: bytes, target: bytes) -> tuple[Route, dict[str, str]] | None:
        """The hot route a request line names, with its path parameters; None for anything else."""
        route = self._exact.get((method, target))
        if route is not None:
            return route, {}
        for verb, prefix, parameter, route in self._last:
            if method == verb and target.startswith(prefix):
                value = target[len(prefix):]
                if value and value.isascii() and not any(c in value for c in (b"/", b"?", b"#", b"%")):
                    return route, {parameter: value.decode("ascii")}
        return None

    def refuse(self, scope: Scope) -> tuple[Response, str] | None:
        """The 401 to a request without the token, from its head alone (before its body is read), counted and
        logged as any answer; None when the request may go on."""
        guard = self.guard
        start = time.perf_counter()
        response = guard.refused(scope)
        if response is None:
            return None
        request_id = guard.name(scope)
        guard.service.metrics.hot_lane += 1
        guard.answered(scope, response.status_code, start, request_id)
        return response, request_id

    async def answer(self, scope: Scope, body: bytes) -> tuple[Response, str]:
        """The answer to ``scope``'s request with ``body``, and the request's id."""
        guard = self.guard
        start = time.perf_counter()
        request_id = guard.name(scope)
        guard.service.metrics.hot_lane += 1
        sent = False

        async def receive() -> Message:
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        try:
            response = guard.refused(scope) or await guard.stale(scope)
            if response is None:
                response = await self.hot.answer(scope["route"], scope, receive)
        except Exception:
            response = guard.failed(scope, request_id)
        guard.answered(scope, response.status_code, start, request_id)
        return response, request_id


def lane(app: ASGIApp) -> Lane | None:
    """The hot lane of a served app (``create_app``'s, or the default namespace's beside named ones)."""
    default = getattr(app, "default", app)  # namespaces.NamespaceRouter serves the plain paths from its default
    found = getattr(default, "lane", None)
    return found if isinstance(found, Lane) else None

