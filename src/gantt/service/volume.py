"""The HTTP face of a volume namespace (``/v1/namespaces/{namespace}/...``): thin handlers over its
façade, ``gantt.volume.facade.Volumes`` (built per call: it keeps nothing of its own) over its ``VolumeReplica``.

    POST   resource-stats             one backend's capabilities and its pools (Cinder's update_service_capabilities)
    GET    hosts                      every pool, with its state as the scheduler sees it
    DELETE hosts/{host}[?pool=name]   a backend (every pool) or one pool
    POST   select_destinations        a VolumeRequest (Cinder's request_spec): ranked pools, the first claimed
    GET    allocations                every volume's claim
    GET    allocations/{volume}
    DELETE allocations/{volume}       release: the pool gets the space back

Bodies decode whole before anything is written (a bad field is a 400 naming it), as on the compute face; the
request reaches these paths with the namespace prefix already stripped (``service.namespaces``).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from msgspec import Struct
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gantt.model import InvalidRequest, prepare_types, valid_name
from gantt.service.schemas import REVISION_HEADER, AllocationList, AllocationView, Written
from gantt.volume import BackendReport, Pick, VolumeRequest
from gantt.volume.facade import Volumes

_ENCODER = msgspec.json.Encoder()
# The query parameters each path takes; any other is a 400 (a mistyped ?pol= must not delete a whole backend).
_QUERY: dict[str, frozenset[str]] = {"/v1/hosts/{host}": frozenset({"pool"})}


class VolumeSelection(Struct):
    host: str
    pool: str
    backend_id: str  # Cinder's "host@backend#pool"
    weight: float

    @classmethod
    def of(cls, pick: Pick) -> VolumeSelection:
        return cls(host=pick.host, pool=pick.pool, backend_id=pick.backend_id, weight=pick.weight)


class VolumeSelections(Struct):
    """The claimed pool first, then the next best ones (unclaimed alternates)."""

    selections: list[VolumeSelection]


class VolumePool(Struct):
    host: str
    pool: str
    state: dict[str, Any]


class VolumePoolList(Struct):
    pools: list[VolumePool]


def _json(value: Any, status: int = 200) -> Response:
    return Response(_ENCODER.encode(value), status_code=status, media_type="application/json")


def _svc(request: Request) -> Any:
    return request.app.state.service  # gantt.service.runtime.Service over a VolumeReplica


def _volumes(svc: Any) -> Volumes:
    return Volumes(svc.replica)


def _query(request: Request) -> dict[str, str]:
    route = request.scope.get("route")
    allowed = _QUERY.get(route.path if route is not None else "", frozenset())
    seen: dict[str, str] = {}
    for name, value in request.query_params.multi_items():
        if name not in allowed:
            raise InvalidRequest(f"unknown query parameter {name[:64]!r} (this call takes: "
                                 f"{', '.join(sorted(allowed)) or 'none'})", field=name[:64])
        if name in seen:
            raise InvalidRequest(f"query parameter {name!r} given more than once", field=name)
        if not valid_name(value):
            raise InvalidRequest(f"{name} must be a name (1-255 characters, no '/')", field=name)
        seen[name] = value
    return seen


async def report(request: Request) -> Response:
    svc = _svc(request)
    body = await svc.body(request, BackendReport)
    return _json(Written(revision=await svc.run(_volumes(svc).report, body)))


async def list_pools(request: Request) -> Response:
    svc = _svc(request)
    pools = await svc.run(_volumes(svc).pools)
    return _json(VolumePoolList(pools=[VolumePool(**pool) for pool in pools]))


async def delete_backend(request: Request) -> Response:
    svc = _svc(request)
    revision = await svc.run(_volumes(svc).delete_backend, request.path_params["host"], _query(request).get("pool"))
    return Response(status_code=204, headers={REVISION_HEADER: str(revision)})


async def select_destinations(request: Request) -> Response:
    svc = _svc(request)
    body = await svc.body(request, VolumeRequest)
    with svc.metrics.deciding():
        picks = await svc.run(_volumes(svc).select_destinations, body, request.state.request_id)
    return _json(VolumeSelections(selections=[VolumeSelection.of(p) for p in picks]))


async def list_allocations(request: Request) -> Response:
    svc = _svc(request)
    held = sorted(svc.replica.allocations.values(), key=lambda a: a.consumer_uuid)
    return _json(AllocationList(allocations=[AllocationView.of(a) for a in held]))


async def show_allocation(request: Request) -> Response:
    return _json(AllocationView.of(_volumes(_svc(request)).allocation(request.path_params["volume"])))


async def release(request: Request) -> Response:
    svc = _svc(request)
    revision = await svc.run(_volumes(svc).release, request.path_params["volume"])
    return Response(status_code=204, headers={REVISION_HEADER: str(revision)})


def _route(path: str, endpoint: Callable[[Request], Awaitable[Response]], methods: list[str]) -> Route:
    @functools.wraps(endpoint)
    async def checked(request: Request) -> Response:
        for name, value in request.path_params.items():
            if not valid_name(value):
                raise InvalidRequest(f"{name} must be a name (1-255 characters, no '/')", field=name)
        _query(request)
        return await endpoint(request)

    return Route(path, checked, methods=methods)


ROUTES = [
    _route("/v1/resource-stats", report, methods=["POST"]),
    _route("/v1/hosts", list_pools, methods=["GET"]),
    _route("/v1/hosts/{host}", delete_backend, methods=["DELETE"]),
    _route("/v1/select_destinations", select_destinations, methods=["POST"]),
    _route("/v1/allocations", list_allocations, methods=["GET"]),
    _route("/v1/allocations/{volume}", show_allocation, methods=["GET"]),
    _route("/v1/allocations/{volume}", release, methods=["DELETE"]),
]


prepare_types(globals())  # build msgspec type info before any thread decodes (see model.prepare_types)
