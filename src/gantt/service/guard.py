"""The outermost layer of Gantt's app (``Guard``): the bearer token, the catch-up before a request is served, the
request's id, per-route counts and the access log, and the 500 for an error no handler answered."""

from __future__ import annotations

import hmac
import logging
import time
from collections.abc import Callable

from starlette.requests import ClientDisconnect
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gantt.base.ids import request_id as new_request_id
from gantt.model import GanttError
from gantt.placement.api import refusal
from gantt.service.liveview import UI
from gantt.service.responses import problem
from gantt.service.runtime import Service
from gantt.service.schemas import Unauthorized

log = logging.getLogger("gantt.service")
# One line per answer at INFO (``gantt serve --log-level info``): method, path, status, milliseconds, request id.
access_log = logging.getLogger("gantt.access")

_OPEN = ("/", "/health")  # version discovery and the load balancer's probe need no token
_UNREAD = frozenset({"/metrics", "/v1/resource-stats"})  # served without catching up first (Service.fresh)
_RELEASE = "/v1/allocations/"  # DELETE of one consumer's allocation: a release, served without catching up first


def _unread(method: str, path: str) -> bool:
    """A request whose answer reads nothing of the replica from before it: its catch-up would be for nothing.
    A release (``DELETE /v1/allocations/{consumer}``) writes a batch that the store checks against its own
    state (NotFound if it holds no such allocation, whichever worker placed it), and answers with a revision its
    own write's catch-up reached, every earlier commit included; the head's read before it cost ~45 us of CPU
    per release under two workers' writes (each read finds the WAL moved)."""
    if path in _UNREAD:
        return True
    return method == "DELETE" and path.startswith(_RELEASE) and "/" not in path[len(_RELEASE):]


def is_open(path: str) -> bool:
    return path in _OPEN or path == UI or path.startswith(UI + "/")


class Guard:
    """Outermost layer: the bearer token, per-route status counts, and the catch-all for unexpected errors.

    An exception that reaches this layer is a bug: it is logged, counted (``gantt_http_unhandled_total``) and
    answered with a 500 problem, and the server carries on.
    """

    def __init__(self, app: ASGIApp, service: Service, is_placement: Callable[[str], bool]) -> None:
        self.app = app
        self.service = service
        self.is_placement = is_placement  # paths that carry Placement's own token header instead
        self._expected = service.token.encode() if service.token else None
        # the hot lane (gantt.service.hot.Lane, which reads this Guard), set by create_app where hot routes are served
        self.lane: object | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 0
        start = time.perf_counter()
        request_id = self.name(scope)

        async def watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", ()), (b"x-openstack-request-id", request_id.encode())]
            await send(message)

        try:
            refused = self.refused(scope) or await self.stale(scope)
            if refused is not None:
                await _send(watch, refused, scope, receive)
                return
            await self.app(scope, receive, watch)
        except ClientDisconnect:
            # The client's doing, not a bug: one line (no traceback) and a count of their own, so that hanging
            # up mid-body cannot flood the log nor pass for a server fault.
            self.service.metrics.client_disconnects += 1
            log.info("client disconnected before its body was read: %s %s (%s)", scope.get("method"),
                     scope.get("path"), request_id)
            status = 499  # nginx's "client closed request", for the per-route counts: nothing was answered
        except Exception:
            failed = self.failed(scope, request_id)
            if status == 0:
                await _send(watch, failed, scope, receive)
        finally:
            self.answered(scope, status, start, request_id)

    @staticmethod
    def name(scope: Scope) -> str:
        """The request's id, kept where handlers read it. OpenStack's convention: every answer names its request
        (x-openstack-request-id), so a caller's log line and ours can be matched; Placement's error bodies name
        it too."""
        request_id = new_request_id()  # not uuid4: a kernel read per request
        scope.setdefault("state", {})["request_id"] = request_id
        return request_id

    def refused(self, scope: Scope) -> Response | None:
        """The 401 for a request without the service's bearer token, where its path needs one."""
        if self._expected is not None and not is_open(scope["path"]) and not self.is_placement(scope["path"]) \
                and not authorized(scope, self._expected):
            return problem(Unauthorized("a valid bearer token is required"), headers={"WWW-Authenticate": "Bearer"})
        return None

    async def stale(self, scope: Scope) -> Response | None:
        """The refusal of a request this worker cannot bring its replica up to date for (``Service.fresh``), in
        the error format of the face it asked."""
        path = scope["path"]
        if is_open(path) or _unread(scope["method"], path):
            return None
        error = await self.service.fresh()
        if error is None:
            return None
        if error.status >= 500:
            log.warning("%s %s: %s", scope.get("method"), scope.get("path"), error)
        if self.is_placement(scope["path"]):
            status, headers, body = refusal(error.status, str(error.message), scope["headers"])
            return Response(body, status_code=status, headers={k.decode(): v.decode() for k, v in headers
                                                               if k != b"x-openstack-request-id"})  # Guard's
        return problem(error)

    def failed(self, scope: Scope, request_id: str) -> Response:
        """An exception that reached this layer (a bug): logged, counted, and answered with a 500 problem."""
        self.service.metrics.unhandled += 1
        log.exception("unexpected error on %s %s (%s)", scope.get("method"), scope.get("path"), request_id)
        return problem(GanttError("unexpected server error; it has been logged"))

    def answered(self, scope: Scope, status: int, start: float, request_id: str) -> None:
        route = scope.get("route")
        seconds = time.perf_counter() - start
        self.service.metrics.answered(route.path if route is not None else "other", status, seconds)
        if access_log.isEnabledFor(logging.INFO):
            access_log.info("%s %s %d %.2fms %s", scope.get("method"), scope["path"], status, seconds * 1000,
                            request_id)


def authorized(scope: Scope, token: bytes | None) -> bool:
    """``Authorization: Bearer <token>``; the scheme is case-insensitive (RFC 7235), the token compared in
    constant time. True when the service has no token."""
    if token is None:
        return True
    for name, value in scope["headers"]:
        if name == b"authorization":
            scheme, _, credentials = value.strip().partition(b" ")
            return scheme.lower() == b"bearer" and hmac.compare_digest(credentials.strip(), token)
    return False


async def _send(send: Send, response: Response, scope: Scope, receive: Receive) -> None:
    await response(scope, receive, send)

