"""The Placement ASGI app: microversion, token, routing (404/405 as Placement answers them), error bodies."""

from __future__ import annotations

import hmac
import re
import time
from collections.abc import Awaitable, Callable

import msgspec
from starlette.types import ASGIApp, Receive, Scope, Send

from gantt.base.ids import request_id as new_request_id
from gantt.model import GanttError
from gantt.placement.api import (
    aggregates,
    allocation_candidates,
    allocations,
    catalog,
    inventories,
    reshaper,
    resource_providers,
    usages,
)
from gantt.placement.api.cors import Cors, CorsOptions
from gantt.placement.api.errors import CODE_VERSION, PlacementError
from gantt.placement.api.microversion import MAX_VERSION, MIN_VERSION, Version, negotiate
from gantt.placement.api.policy import Policy, credentials
from gantt.placement.api.wire import Answer, Call, PlacementRequest, gantt_error, json_response
from gantt.placement.facade import Placement
from gantt.replication.driver import Runtime

Handler = Callable[[Call], Awaitable[Answer]]


async def home(call: Call) -> Answer:
    document = {"versions": [{"id": f"v{MIN_VERSION}", "max_version": str(MAX_VERSION),
                              "min_version": str(MIN_VERSION), "status": "CURRENT",
                              "links": [{"rel": "self", "href": ""}]}]}
    return json_response(call, document, modified=time.time())


_RP = "/resource_providers/{uuid}"
ROUTES: list[tuple[str, dict[str, Handler]]] = [
    ("/", {"GET": home}),
    ("/resource_providers", {"GET": resource_providers.listing, "POST": resource_providers.create}),
    (_RP, {"GET": resource_providers.show, "PUT": resource_providers.update, "DELETE": resource_providers.delete}),
    (_RP + "/inventories", {"GET": inventories.listing, "POST": inventories.create, "PUT": inventories.replace,
                            "DELETE": inventories.delete_all}),
    (_RP + "/inventories/{resource_class}", {"GET": inventories.show, "PUT": inventories.update,
                                             "DELETE": inventories.delete}),
    (_RP + "/aggregates", {"GET": aggregates.show, "PUT": aggregates.replace}),
    (_RP + "/traits", {"GET": catalog.provider_traits, "PUT": catalog.set_provider_traits,
                       "DELETE": catalog.delete_provider_traits}),
    ("/resource_classes", {"GET": catalog.list_classes, "POST": catalog.create_class}),
    ("/resource_classes/{name}", {"GET": catalog.show_class, "PUT": catalog.put_class,
                                  "DELETE": catalog.delete_class}),
    ("/traits", {"GET": catalog.list_traits}),
    ("/traits/{name}", {"GET": catalog.show_trait, "PUT": catalog.put_trait, "DELETE": catalog.delete_trait}),
    ("/allocation_candidates", {"GET": allocation_candidates.listing}),
    ("/reshaper", {"POST": reshaper.reshape}),
    (_RP + "/allocations", {"GET": allocations.for_provider}),
    (_RP + "/usages", {"GET": usages.for_provider}),
    ("/allocations", {"POST": allocations.post}),
    ("/allocations/{consumer_uuid}", {"GET": allocations.show, "PUT": allocations.put,
                                      "DELETE": allocations.delete}),
    ("/usages", {"GET": usages.totals}),
]
_RPS, _INV, _AGG, _RPT = ("placement:resource_providers", "placement:resource_providers:inventories",
                          "placement:resource_providers:aggregates", "placement:resource_providers:traits")
# The policy rule each route's handler checks in Placement (gantt.placement.api.policy).
RULE_OF: dict[tuple[str, str], str] = {
    ("/resource_providers", "GET"): f"{_RPS}:list", ("/resource_providers", "POST"): f"{_RPS}:create",
    (_RP, "GET"): f"{_RPS}:show", (_RP, "PUT"): f"{_RPS}:update", (_RP, "DELETE"): f"{_RPS}:delete",
    (_RP + "/inventories", "GET"): f"{_INV}:list", (_RP + "/inventories", "POST"): f"{_INV}:create",
    (_RP + "/inventories", "PUT"): f"{_INV}:update", (_RP + "/inventories", "DELETE"): f"{_INV}:delete",
    (_RP + "/inventories/{resource_class}", "GET"): f"{_INV}:show",
    (_RP + "/inventories/{resource_class}", "PUT"): f"{_INV}:update",
    (_RP + "/inventories/{resource_class}", "DELETE"): f"{_INV}:delete",
    (_RP + "/aggregates", "GET"): f"{_AGG}:list", (_RP + "/aggregates", "PUT"): f"{_AGG}:update",
    (_RP + "/traits", "GET"): f"{_RPT}:list", (_RP + "/traits", "PUT"): f"{_RPT}:update",
    (_RP + "/traits", "DELETE"): f"{_RPT}:delete",
    ("/resource_classes", "GET"): "placement:resource_classes:list",
    ("/resource_classes", "POST"): "placement:resource_classes:create",
    ("/resource_classes/{name}", "GET"): "placement:resource_classes:show",
    ("/resource_classes/{name}", "PUT"): "placement:resource_classes:update",
    ("/resource_classes/{name}", "DELETE"): "placement:resource_classes:delete",
    ("/traits", "GET"): "placement:traits:list", ("/traits/{name}", "GET"): "placement:traits:show",
    ("/traits/{name}", "PUT"): "placement:traits:update", ("/traits/{name}", "DELETE"): "placement:traits:delete",
    ("/allocation_candidates", "GET"): "placement:allocation_candidates:list",
    ("/reshaper", "POST"): "placement:reshaper:reshape",
    (_RP + "/allocations", "GET"): f"{_RPS}:allocations:list", (_RP + "/usages", "GET"): f"{_RPS}:usages",
    ("/allocations", "POST"): "placement:allocations:manage",
    ("/allocations/{consumer_uuid}", "GET"): "placement:allocations:list",
    ("/allocations/{consumer_uuid}", "PUT"): "placement:allocations:update",
    ("/allocations/{consumer_uuid}", "DELETE"): "placement:allocations:delete",
    ("/usages", "GET"): "placement:usages",
}
# Which microversion introduced a route (earlier ones answer 404, as Placement's router does).
_SINCE = {"/allocation_candidates": 10, "/reshaper": 30, "/resource_classes": 2, "/resource_classes/{name}": 2,
          "/traits": 6, "/traits/{name}": 6, _RP + "/traits": 6, "/usages": 9}
_COMPILED = [(re.compile("^" + re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", path) + "$"), path, methods)
             for path, methods in ROUTES]
# The routes a path may match, by its first segment and its number of slashes (a template's parameters match no
# slash), in ROUTES' order: one or two patterns tried per request, not every route's until one matches.
_CANDIDATES: dict[tuple[str, int], list[tuple[re.Pattern[str], str, dict[str, Handler]]]] = {}
for _entry in _COMPILED:
    _CANDIDATES.setdefault((_entry[1].split("/", 2)[1], _entry[1].count("/")), []).append(_entry)


def resolve(method: str, path: str, version: Version) -> tuple[Handler, dict[str, str], str]:
    """The handler, the path's parameters, and the route's template."""
    for pattern, template, methods in _CANDIDATES.get((path.split("/", 2)[1], path.count("/")), ()):
        match = pattern.match(path)
        if match is None or not version.at_least(_SINCE.get(template, 0)):
            continue
        handler = methods.get(method)
        if handler is None:
            allowed = ", ".join(sorted(methods))
            raise PlacementError(405, f"The method {method} is not allowed for this resource.",
                                 headers={"allow": allowed})
        return handler, match.groupdict(), template
    raise PlacementError(404, "The resource could not be found.")


class PlacementApp:
    """Placement's API over ``placement()`` (the façade, ``gantt.placement.facade.Placement``), mounted at
    ``prefix``; ``runtime``: where its operations may run off the loop (``gantt.replication.driver.Runtime``).
    ``token``: Gantt's token, carried in ``X-Auth-Token`` and worth the service's own roles; without one any token
    is taken, its roles read as Placement's noauth2 reads them. ``policy``: Placement's rules, as configured
    (gantt.placement.api.policy)."""

    def __init__(self, placement: Callable[[], Placement], runtime: Runtime, token: str | None,
                 prefix: str = "/placement", policy: Policy | None = None, max_body: int | None = None) -> None:
        self.placement = placement
        self.runtime = runtime
        self.token = token.encode() if token else None
        self.prefix = prefix
        self.policy = policy or Policy()
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = PlacementRequest(scope, receive, self.max_body)
        request_id = scope.get("state", {}).get("request_id") or new_request_id()
        version: Version | None = None
        try:
            path = scope["path"][len(self.prefix):] or "/"
            if path != "/":
                # First, as Placement's auth middleware runs outside its router and microversion check: a client
                # without a token learns nothing of which paths, methods or versions exist.
                self._authenticate(request)
            version = negotiate(scope["headers"])
            handler, params, template = resolve(scope["method"], path, version)
            if path != "/":
                who = credentials(request, service_token=self.token is not None)
                rule = RULE_OF[(template, scope["method"])]
                # Placement's usages handler names the project asked about as the target; the rest the caller's.
                target = {"project_id": request.query_params.get("project_id")} if rule == "placement:usages" \
                    else None
                self.policy.authorize(rule, who, target)
            call = Call(request, version, self.placement(), self.runtime, self.prefix, params)
            response = await handler(call)
        except PlacementError as exc:
            response = _error(exc, request, version, request_id)
        except GanttError as exc:
            response = _error(gantt_error(exc), request, version, request_id)
        response.headers["openstack-api-version"] = f"placement {version or MIN_VERSION}"
        response.headers["vary"] = "openstack-api-version"
        await response(scope, receive, send)

    def _authenticate(self, request: PlacementRequest) -> None:
        token = request.headers.get("x-auth-token")
        if token is None or (self.token is not None and not hmac.compare_digest(token.encode(), self.token)):
            raise PlacementError(401, "The request you have made requires authentication.")


def _error(exc: PlacementError, request: PlacementRequest, version: Version | None, request_id: str) -> Answer:
    headers = dict(exc.headers)
    accept = request.headers.get("accept", "")
    if "text/html" in accept and "json" not in accept:  # as webob: an HTML error for a browser's Accept
        html = f"<html><head><title>{exc.status} {exc.title}</title></head><body><h1>{exc.status} {exc.title}" \
               f"</h1>{exc.detail}</body></html>"
        return Answer(html.encode(), status_code=exc.status, media_type="text/html", headers=headers)
    return Answer(_error_body(exc, version, request_id), status_code=exc.status, media_type="application/json",
                  headers=headers)


def _error_body(exc: PlacementError, version: Version | None, request_id: str) -> bytes:
    return msgspec.json.encode(exc.body(request_id, with_code=version is not None and version.at_least(CODE_VERSION),
                                        versions=(str(MIN_VERSION), str(MAX_VERSION))))


def refusal(status: int, detail: str, headers: list[tuple[bytes, bytes]]) \
        -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """The answer's headers and body for a request to the face that the HTTP layer refused before it reached the
    app (a Content-Length that is no integer: gantt.service.protocol), as the face would answer it: Placement's
    error body at the version ``headers`` ask for (an unacceptable version is refused first, as in the app) and a
    request id."""
    error = PlacementError(status, detail)
    version: Version | None = None
    try:
        version = negotiate(headers)
    except PlacementError as exc:
        error = exc
    request_id = new_request_id()
    return (error.status, [(b"content-type", b"application/json"), (b"x-openstack-request-id", request_id.encode()),
             (b"openstack-api-version", f"placement {version or MIN_VERSION}".encode()),
             (b"vary", b"openstack-api-version")], _error_body(error, version, request_id))


def create_placement_app(placement: Callable[[], Placement], runtime: Runtime, token: str | None,
                         prefix: str = "/placement", *, policy: Policy | None = None,
                         cors: CorsOptions | None = None, max_body: int | None = None) -> ASGIApp:
    """Placement's app at ``prefix`` ("" for the root), behind oslo.middleware's CORS when ``[cors]`` names an
    origin (as Placement's deployment adds it). ``max_body``: the largest request body read, in bytes."""
    app: ASGIApp = PlacementApp(placement, runtime, token, prefix, policy, max_body)
    return Cors(app, cors) if cors is not None and cors.allowed_origin else app
