"""Cross-origin requests to the Placement face, as oslo.middleware's CORS filter answers them in front of
Placement (``[cors]``, gantt.config.CorsSection): on only when ``allowed_origin`` names an origin.

A request from an allowed origin gets ``Access-Control-Allow-Origin`` (and credentials, exposed headers); an
``OPTIONS`` request is a preflight: whatever Placement answered that is not a success becomes an empty 200 (so a
browser may ask without a token), and, if the origin, the requested method and every requested header that is not
one of HTTP's simple headers are allowed, it names them with ``Access-Control-Allow-Methods`` / ``-Headers`` and
``-Max-Age``. A refused preflight gets the 200 without those headers: the browser then refuses on its side.
"""

from __future__ import annotations

from typing import Protocol

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

_SIMPLE_HEADERS = {"ACCEPT", "ACCEPT-LANGUAGE", "CONTENT-TYPE", "CACHE-CONTROL", "CONTENT-LANGUAGE", "EXPIRES",
                   "LAST-MODIFIED", "PRAGMA"}


class CorsOptions(Protocol):
    """``[cors]``'s options (gantt.config.CorsSection)."""

    allowed_origin: list[str]
    allow_credentials: bool
    expose_headers: list[str]
    max_age: int
    allow_methods: list[str]
    allow_headers: list[str]


class Cors:
    def __init__(self, app: ASGIApp, options: CorsOptions) -> None:
        self.app = app
        self.options = options
        self.allowed = set(options.allowed_origin)
        self.permitted_headers = {h.upper() for h in options.allow_headers} | _SIMPLE_HEADERS

    def _origin(self, headers: Headers) -> str | None:
        """The origin as the answer names it (``*`` when only the wildcard allows it), or None."""
        origin = headers.get("origin")
        if origin is None:
            return None
        if origin in self.allowed:
            return origin
        return "*" if "*" in self.allowed else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Headers(scope=scope)
        if scope["method"] == "OPTIONS":
            await self._preflight(scope, receive, send, request)
            return
        origin = self._origin(request)

        async def decorate(message: Message) -> None:
            if message["type"] == "http.response.start" and origin is not None:
                headers = MutableHeaders(scope=message)
                if "access-control-allow-origin" not in headers:
                    vary = headers.get("vary")
                    headers["vary"] = f"{vary},Origin" if vary else "Origin"
                    headers["access-control-allow-origin"] = origin
                    if self.options.allow_credentials:
                        headers["access-control-allow-credentials"] = "true"
                    if self.options.expose_headers:
                        headers["access-control-expose-headers"] = ",".join(self.options.expose_headers)
            await send(message)

        await self.app(scope, receive, decorate)

    async def _preflight(self, scope: Scope, receive: Receive, send: Send, request: Headers) -> None:
        replaced = False

        async def decorate(message: Message) -> None:
            nonlocal replaced
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                if "access-control-allow-origin" in headers:
                    await send(message)
                    return
                if not 200 <= message["status"] < 300:
                    replaced = True  # an empty 200 with no content type, Placement's answer dropped
                    message = {"type": "http.response.start", "status": 200,
                               "headers": [(b"content-length", b"0")]}
                    headers = MutableHeaders(scope=message)
                self._allow(request, headers)
            elif message["type"] == "http.response.body" and replaced:
                if message.get("more_body", False):
                    return
                message = {"type": "http.response.body", "body": b""}
            await send(message)

        await self.app(scope, receive, decorate)

    def _allow(self, request: Headers, headers: MutableHeaders) -> None:
        origin = self._origin(request)
        method = request.get("access-control-request-method")
        if origin is None or method is None or method not in self.options.allow_methods:
            return
        asked = [h.strip() for h in request.get("access-control-request-headers", "").split(",") if h.strip()]
        if any(h.upper() not in self.permitted_headers for h in asked):
            return
        headers["vary"] = "Origin"
        headers["access-control-allow-origin"] = origin
        if self.options.allow_credentials:
            headers["access-control-allow-credentials"] = "true"
        if self.options.max_age:
            headers["access-control-max-age"] = str(self.options.max_age)
        headers["access-control-allow-methods"] = method
        if asked:
            headers["access-control-allow-headers"] = ",".join(asked)
