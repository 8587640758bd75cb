"""The scheduler library for callers: ``SchedulerClient`` (sync) and ``AsyncSchedulerClient``, over HTTP.

Both speak through the same ``Call`` objects: ``_calls`` builds each request (method, path, body) and says how to
decode its answer into gantt.model's Structs, so the twins differ only in how they send. Errors come back as
gantt.model's exceptions: ``NoValidHost`` (with its ``explanation``), ``InvalidRequest`` (with its ``field``),
``NotFound``, ``StoreUnavailable``; an unreachable service is ``Unreachable``.

    with SchedulerClient("http://127.0.0.1:8780", token="…") as client:
        client.update_resource_stats("compute-1", {"vcpus": 32, "memory_mb": 131072, "local_gb": 2000})
        [[chosen, *alternates]] = client.select_destinations({"flavor": {"vcpus": 2, "memory_mb": 4096}})
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
import msgspec

from gantt.model import (
    Aggregate,
    Allocation,
    CapacityAnswer,
    CapacityQuestion,
    GanttError,
    HostReport,
    HostStats,
    NoValidHost,
    RequestSpec,
    Selection,
)
from gantt.model.activity import Overview
from gantt.model.namespaces import DEFAULT as DEFAULT_NAMESPACE
from gantt.model.namespaces import check_name
from gantt.service.schemas import (
    ERRORS,
    REVISION_HEADER,
    AggregateList,
    AllocationList,
    AllocationView,
    Candidates,
    Health,
    HostInfo,
    HostList,
    Problem,
    Selections,
    Written,
)

__all__ = ["AsyncSchedulerClient", "Candidates", "Health", "HostInfo", "SchedulerClient", "Unreachable"]

DEFAULT_URL = "http://127.0.0.1:8780"

T = TypeVar("T")
Name = str | list[str] | tuple[str, str]
Report = HostReport | tuple[Name, HostStats | dict[str, Any]] | dict[str, Any]


class Unreachable(GanttError):
    """The service did not answer (refused, timed out, connection lost)."""

    status = 503
    title = "Service unreachable"


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    method: str
    path: str
    decode: Callable[[bytes], T]
    body: bytes | None = None
    params: dict[str, str] | None = None
    accept: tuple[int, ...] = (200,)  # statuses whose body is a result, not a problem
    header: str | None = None  # decode this response header's value instead of the body (204 No Content)


def _segment(value: object) -> str:
    return quote(str(value), safe="")


def _decoder(type_: type[T]) -> Callable[[bytes], T]:
    decoder = msgspec.json.Decoder(type_)
    return decoder.decode


_written = _decoder(Written)


def _revision(raw: bytes) -> int:
    return _written(raw).revision


def _header_revision(raw: bytes) -> int:
    return int(raw)


def _deleted(path: str, params: dict[str, str] | None = None) -> Call[int]:
    """A DELETE: 204 No Content, the revision that holds it in the Gantt-Revision header."""
    return Call("DELETE", path, _header_revision, params=params, accept=(204,), header=REVISION_HEADER)


def _paged(limit: int | None, marker: str | None) -> dict[str, str] | None:
    params = {}
    if limit is not None:
        params["limit"] = str(limit)
    if marker is not None:
        params["marker"] = marker
    return params or None


def _encode(value: Any) -> bytes:
    return msgspec.json.encode(value)


def _report_body(report: Report) -> dict[str, Any]:
    if isinstance(report, HostReport):
        name: Any = [report.host, report.node] if report.node is not None else report.host
        return {"name": name, "stats": report.stats}
    if isinstance(report, tuple):
        return {"name": report[0], "stats": report[1]}
    return report


class _Calls:
    """Every API call as a ``Call``: the one place that knows paths, bodies and result types."""

    _selections = staticmethod(_decoder(Selections))
    _candidates = staticmethod(_decoder(Candidates))
    _capacity = staticmethod(_decoder(CapacityAnswer))
    _host = staticmethod(_decoder(HostInfo))
    _hosts = staticmethod(_decoder(HostList))
    _aggregate = staticmethod(_decoder(Aggregate))
    _aggregates = staticmethod(_decoder(AggregateList))
    _allocation_view = staticmethod(_decoder(AllocationView))
    _allocations = staticmethod(_decoder(AllocationList))
    _health = staticmethod(_decoder(Health))

    def select_destinations(self, spec: RequestSpec | dict[str, Any]) -> Call[list[list[Selection]]]:
        decode = self._selections
        return Call("POST", "/v1/select_destinations", lambda raw: decode(raw).selections, _encode(spec))

    def candidates(self, spec: RequestSpec | dict[str, Any], limit: int | None = None) -> Call[Candidates]:
        params = {"limit": str(limit)} if limit is not None else None
        return Call("POST", "/v1/candidates", self._candidates, _encode(spec), params)

    def capacity(self, question: CapacityQuestion | dict[str, Any]) -> Call[CapacityAnswer]:
        return Call("POST", "/v1/capacity", self._capacity, _encode(question))

    def update_resource_stats(self, name: Name, stats: HostStats | dict[str, Any]) -> Call[int]:
        return Call("POST", "/v1/resource-stats", _revision, _encode({"name": name, "stats": stats}))

    def update_resource_stats_many(self, reports: Iterable[Report]) -> Call[int]:
        body = _encode({"reports": [_report_body(r) for r in reports]})
        return Call("POST", "/v1/resource-stats/batch", _revision, body)

    def hosts(self, limit: int | None = None, marker: str | None = None) -> Call[list[HostInfo]]:
        decode = self._hosts
        return Call("GET", "/v1/hosts", lambda raw: decode(raw).hosts, params=_paged(limit, marker))

    def update_host(self, name: str, stats: HostStats | dict[str, Any], node: str | None = None) -> Call[int]:
        return Call("PATCH", f"/v1/hosts/{_segment(name)}", _revision, _encode(stats), params=_node(node))

    def host(self, name: str, node: str | None = None) -> Call[HostInfo]:
        return Call("GET", f"/v1/hosts/{_segment(name)}", self._host, params=_node(node))

    def delete_host(self, name: str, node: str | None = None, force: bool = False) -> Call[int]:
        params = _node(node) or {}
        if force:
            params["force"] = "true"
        return _deleted(f"/v1/hosts/{_segment(name)}", params or None)

    def aggregates(self) -> Call[list[Aggregate]]:
        decode = self._aggregates
        return Call("GET", "/v1/aggregates", lambda raw: decode(raw).aggregates)

    def aggregate(self, aggregate_id: int | str) -> Call[Aggregate]:
        return Call("GET", f"/v1/aggregates/{_segment(aggregate_id)}", self._aggregate)

    def update_aggregate(self, aggregate: Aggregate | dict[str, Any]) -> Call[int]:
        aggregate_id = aggregate.id if isinstance(aggregate, Aggregate) else aggregate.get("id", "")
        return Call("PUT", f"/v1/aggregates/{_segment(aggregate_id)}", _revision, _encode(aggregate))

    def delete_aggregate(self, aggregate_id: int | str) -> Call[int]:
        return _deleted(f"/v1/aggregates/{_segment(aggregate_id)}")

    def allocations(self, limit: int | None = None, marker: str | None = None) -> Call[list[Allocation]]:
        decode = self._allocations
        return Call("GET", "/v1/allocations", lambda raw: [a.to_model() for a in decode(raw).allocations],
                    params=_paged(limit, marker))

    def _one_allocation(self, raw: bytes) -> Allocation:
        return self._allocation_view(raw).to_model()

    def allocation(self, consumer_uuid: str) -> Call[Allocation]:
        return Call("GET", f"/v1/allocations/{_segment(consumer_uuid)}", self._one_allocation)

    def release(self, consumer_uuid: str) -> Call[int]:
        return _deleted(f"/v1/allocations/{_segment(consumer_uuid)}")

    def confirm_move(self, migration_uuid: str) -> Call[Allocation]:
        return Call("POST", f"/v1/migrations/{_segment(migration_uuid)}/confirm", self._one_allocation)

    def revert_move(self, migration_uuid: str) -> Call[Allocation]:
        return Call("POST", f"/v1/migrations/{_segment(migration_uuid)}/revert", self._one_allocation)

    # A volume namespace's face (gantt.service.volume): Cinder's pools, reported per backend, and volumes.

    def pools(self) -> Call[list[dict[str, Any]]]:
        return Call("GET", "/v1/hosts", lambda raw: list(msgspec.json.decode(raw)["pools"]))

    def report_backend(self, report: dict[str, Any]) -> Call[int]:
        return Call("POST", "/v1/resource-stats", _revision, _encode(report))

    def delete_backend(self, host: str, pool: str | None = None) -> Call[int]:
        return _deleted(f"/v1/hosts/{_segment(host)}", {"pool": pool} if pool is not None else None)

    def select_volume(self, request: dict[str, Any]) -> Call[list[dict[str, Any]]]:
        return Call("POST", "/v1/select_destinations", lambda raw: list(msgspec.json.decode(raw)["selections"]),
                    _encode(request))

    def update_instance_info(self, host: str, instances: list[str]) -> Call[int]:
        return Call("POST", f"/v1/instances/{_segment(host)}", _revision, _encode({"instances": instances}))

    def sync_instance_info(self, host: str, instances: list[str]) -> Call[int]:
        return Call("PUT", f"/v1/instances/{_segment(host)}", _revision, _encode({"instances": instances}))

    def delete_instance_info(self, host: str, instance_uuid: str) -> Call[int]:
        return _deleted(f"/v1/instances/{_segment(host)}/{_segment(instance_uuid)}")

    def health(self) -> Call[Health]:
        return Call("GET", "/health", self._health, accept=(200, 503))

    def metrics(self) -> Call[str]:
        return Call("GET", "/metrics", lambda raw: raw.decode())

    def openapi(self) -> Call[dict[str, Any]]:
        return Call("GET", "/openapi.json", msgspec.json.decode)

    def overview(self) -> Call[Overview]:
        return Call("GET", "/v1/overview", lambda raw: msgspec.json.decode(raw, type=Overview))


def _node(node: str | None) -> dict[str, str] | None:
    return {"node": node} if node is not None else None


_CALLS = _Calls()
_problem = _decoder(Problem)


def error_from(status: int, content: bytes) -> GanttError:
    """The gantt.model exception a problem answer stands for."""
    try:
        problem: Problem | None = _problem(content)
    except msgspec.MsgspecError:
        problem = None
    detail = problem.detail if problem is not None else (content[:300].decode(errors="replace") or f"HTTP {status}")
    if status == 409 and problem is not None and problem.explanation is not None:
        return NoValidHost(detail, problem.explanation)
    cls = ERRORS.get(status, GanttError)
    error = cls(detail, field=problem.field if problem is not None else None)
    if cls is GanttError:
        error.status = status
        error.title = problem.title if problem is not None else f"HTTP {status}"
    return error


def _result(call: Call[T], response: httpx.Response) -> T:
    if response.status_code in call.accept:
        if call.header is not None:
            return call.decode(response.headers.get(call.header, "").encode())
        return call.decode(response.content)
    raise error_from(response.status_code, response.content)


def _headers(token: str | None) -> dict[str, str]:
    headers = {"content-type": "application/json", "accept": "application/json"}
    if token:
        headers["authorization"] = f"Bearer {token}"
    return headers


def _settings(url: str | None, token: str | None) -> tuple[str, str | None]:
    return (url or os.environ.get("GANTT_URL") or DEFAULT_URL).rstrip("/"), token or os.environ.get("GANTT_TOKEN")


def _prefix(namespace: str | None) -> str | None:
    """Where a namespace's /v1 calls go (``gantt.model.namespaces``): None for the default one, whose paths are the
    plain /v1 ones; ``/health``, ``/metrics`` and the rest are the service's and stay where they are."""
    namespace = namespace or os.environ.get("GANTT_NAMESPACE") or None
    if namespace is None or namespace == DEFAULT_NAMESPACE:
        return None
    return f"/v1/namespaces/{check_name(namespace)}/"


def _path(call: Call[Any], prefix: str | None) -> str:
    return call.path if prefix is None or not call.path.startswith("/v1/") else prefix + call.path[4:]


class SchedulerClient:
    """Blocking client. ``url`` defaults to GANTT_URL (then http://127.0.0.1:8780), ``token`` to GANTT_TOKEN."""

    def __init__(self, url: str | None = None, token: str | None = None, *, timeout: float = 30.0,
                 namespace: str | None = None,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.url, token = _settings(url, token)
        self._prefix = _prefix(namespace)  # None: the default namespace (GANTT_NAMESPACE when not given)
        self._http = httpx.Client(base_url=self.url, headers=_headers(token), timeout=timeout, transport=transport)

    def _do(self, call: Call[T]) -> T:
        try:
            response = self._http.request(call.method, _path(call, self._prefix), content=call.body,
                                          params=call.params)
        except httpx.TransportError as exc:
            raise Unreachable(f"{self.url}: {exc or type(exc).__name__}") from exc
        return _result(call, response)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> SchedulerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def select_destinations(self, spec: RequestSpec | dict[str, Any]) -> list[list[Selection]]:
        return self._do(_CALLS.select_destinations(spec))

    def candidates(self, spec: RequestSpec | dict[str, Any], limit: int | None = None) -> Candidates:
        return self._do(_CALLS.candidates(spec, limit))

    def capacity(self, question: CapacityQuestion | dict[str, Any]) -> CapacityAnswer:
        """How many more instances of each request fit (``gantt.compute.capacity``); claims nothing."""
        return self._do(_CALLS.capacity(question))

    def update_resource_stats(self, name: Name, stats: HostStats | dict[str, Any]) -> int:
        return self._do(_CALLS.update_resource_stats(name, stats))

    def update_resource_stats_many(self, reports: Iterable[Report]) -> int:
        return self._do(_CALLS.update_resource_stats_many(reports))

    def hosts(self, limit: int | None = None, marker: str | None = None) -> list[HostInfo]:
        """Every node in (host, node) order; with ``limit``, at most that many after the node ``marker``
        names (the last one's ``host`` alone, or "host/node" for a node named otherwise)."""
        return self._do(_CALLS.hosts(limit, marker))

    def update_host(self, name: str, stats: HostStats | dict[str, Any], node: str | None = None) -> int:
        """An operator's change to a node's record (``{"service": {"disabled": true, "disabled_reason": …}}``):
        merged as a report is, without counting as one (the last-report time stays)."""
        return self._do(_CALLS.update_host(name, stats, node))

    def host(self, name: str, node: str | None = None) -> HostInfo:
        return self._do(_CALLS.host(name, node))

    def delete_host(self, name: str, node: str | None = None, *, force: bool = False) -> int:
        """Delete a host (or one node): refused (409) while allocations have parts on it, unless ``force``,
        which removes those parts (a consumer keeps what it holds elsewhere)."""
        return self._do(_CALLS.delete_host(name, node, force))

    def aggregates(self) -> list[Aggregate]:
        return self._do(_CALLS.aggregates())

    def aggregate(self, aggregate_id: int | str) -> Aggregate:
        return self._do(_CALLS.aggregate(aggregate_id))

    def update_aggregate(self, aggregate: Aggregate | dict[str, Any]) -> int:
        return self._do(_CALLS.update_aggregate(aggregate))

    def delete_aggregate(self, aggregate_id: int | str) -> int:
        return self._do(_CALLS.delete_aggregate(aggregate_id))

    def allocations(self, limit: int | None = None, marker: str | None = None) -> list[Allocation]:
        """Every allocation in consumer order; with ``limit``, at most that many after the consumer ``marker``."""
        return self._do(_CALLS.allocations(limit, marker))

    def allocation(self, consumer_uuid: str) -> Allocation:
        return self._do(_CALLS.allocation(consumer_uuid))

    def release(self, consumer_uuid: str) -> int:
        return self._do(_CALLS.release(consumer_uuid))

    def confirm_move(self, migration_uuid: str) -> Allocation:
        return self._do(_CALLS.confirm_move(migration_uuid))

    def revert_move(self, migration_uuid: str) -> Allocation:
        return self._do(_CALLS.revert_move(migration_uuid))

    def pools(self) -> list[dict[str, Any]]:
        """A volume namespace's pools: ``{"host", "pool", "state"}`` each, state as Cinder's PoolState."""
        return self._do(_CALLS.pools())

    def report_backend(self, report: dict[str, Any]) -> int:
        """A volume backend's report (Cinder's update_service_capabilities: host, capabilities, pools)."""
        return self._do(_CALLS.report_backend(report))

    def delete_backend(self, host: str, pool: str | None = None) -> int:
        return self._do(_CALLS.delete_backend(host, pool))

    def select_volume(self, request: dict[str, Any]) -> list[dict[str, Any]]:
        """A volume's pools, best first (the first claimed): ``{"host", "pool", "backend_id", "weight"}`` each."""
        return self._do(_CALLS.select_volume(request))

    def update_instance_info(self, host: str, instances: list[str]) -> int:
        return self._do(_CALLS.update_instance_info(host, instances))

    def sync_instance_info(self, host: str, instances: list[str]) -> int:
        return self._do(_CALLS.sync_instance_info(host, instances))

    def delete_instance_info(self, host: str, instance_uuid: str) -> int:
        return self._do(_CALLS.delete_instance_info(host, instance_uuid))

    def health(self) -> Health:
        return self._do(_CALLS.health())

    def metrics(self) -> str:
        return self._do(_CALLS.metrics())

    def openapi(self) -> dict[str, Any]:
        return self._do(_CALLS.openapi())

    def overview(self) -> Overview:
        """The cloud at a glance (what the /ui page shows); decisions and refusals are the answering process's."""
        return self._do(_CALLS.overview())


class AsyncSchedulerClient:
    """The asyncio twin of ``SchedulerClient``: the same calls, awaited."""

    def __init__(self, url: str | None = None, token: str | None = None, *, timeout: float = 30.0,
                 namespace: str | None = None,
                 transport: httpx.AsyncBaseTransport | None = None, max_connections: int = 100) -> None:
        self.url, token = _settings(url, token)
        self._prefix = _prefix(namespace)  # None: the default namespace (GANTT_NAMESPACE when not given)
        self._http = httpx.AsyncClient(base_url=self.url, headers=_headers(token), timeout=timeout,
                                       transport=transport,
                                       limits=httpx.Limits(max_connections=max_connections,
                                                           max_keepalive_connections=max_connections))

    async def _do(self, call: Call[T]) -> T:
        try:
            response = await self._http.request(call.method, _path(call, self._prefix), content=call.body,
                                                params=call.params)
        except httpx.TransportError as exc:
            raise Unreachable(f"{self.url}: {exc or type(exc).__name__}") from exc
        return _result(call, response)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncSchedulerClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def select_destinations(self, spec: RequestSpec | dict[str, Any]) -> list[list[Selection]]:
        return await self._do(_CALLS.select_destinations(spec))

    async def candidates(self, spec: RequestSpec | dict[str, Any], limit: int | None = None) -> Candidates:
        return await self._do(_CALLS.candidates(spec, limit))

    async def capacity(self, question: CapacityQuestion | dict[str, Any]) -> CapacityAnswer:
        return await self._do(_CALLS.capacity(question))

    async def update_resource_stats(self, name: Name, stats: HostStats | dict[str, Any]) -> int:
        return await self._do(_CALLS.update_resource_stats(name, stats))

    async def update_resource_stats_many(self, reports: Iterable[Report]) -> int:
        return await self._do(_CALLS.update_resource_stats_many(reports))

    async def hosts(self, limit: int | None = None, marker: str | None = None) -> list[HostInfo]:
        """Every node in (host, node) order; with ``limit``, at most that many after the node ``marker``
        names (the last one's ``host`` alone, or "host/node" for a node named otherwise)."""
        return await self._do(_CALLS.hosts(limit, marker))

    async def update_host(self, name: str, stats: HostStats | dict[str, Any], node: str | None = None) -> int:
        """An operator's change to a node's record (``{"service": {"disabled": true, "disabled_reason": …}}``):
        merged as a report is, without counting as one (the last-report time stays)."""
        return await self._do(_CALLS.update_host(name, stats, node))

    async def host(self, name: str, node: str | None = None) -> HostInfo:
        return await self._do(_CALLS.host(name, node))

    async def delete_host(self, name: str, node: str | None = None, *, force: bool = False) -> int:
        return await self._do(_CALLS.delete_host(name, node, force))

    async def aggregates(self) -> list[Aggregate]:
        return await self._do(_CALLS.aggregates())

    async def aggregate(self, aggregate_id: int | str) -> Aggregate:
        return await self._do(_CALLS.aggregate(aggregate_id))

    async def update_aggregate(self, aggregate: Aggregate | dict[str, Any]) -> int:
        return await self._do(_CALLS.update_aggregate(aggregate))

    async def delete_aggregate(self, aggregate_id: int | str) -> int:
        return await self._do(_CALLS.delete_aggregate(aggregate_id))

    async def allocations(self, limit: int | None = None, marker: str | None = None) -> list[Allocation]:
        """Every allocation in consumer order; with ``limit``, at most that many after the consumer ``marker``."""
        return await self._do(_CALLS.allocations(limit, marker))

    async def allocation(self, consumer_uuid: str) -> Allocation:
        return await self._do(_CALLS.allocation(consumer_uuid))

    async def release(self, consumer_uuid: str) -> int:
        return await self._do(_CALLS.release(consumer_uuid))

    async def confirm_move(self, migration_uuid: str) -> Allocation:
        return await self._do(_CALLS.confirm_move(migration_uuid))

    async def revert_move(self, migration_uuid: str) -> Allocation:
        return await self._do(_CALLS.revert_move(migration_uuid))

    async def pools(self) -> list[dict[str, Any]]:
        return await self._do(_CALLS.pools())

    async def report_backend(self, report: dict[str, Any]) -> int:
        return await self._do(_CALLS.report_backend(report))

    async def delete_backend(self, host: str, pool: str | None = None) -> int:
        return await self._do(_CALLS.delete_backend(host, pool))

    async def select_volume(self, request: dict[str, Any]) -> list[dict[str, Any]]:
        return await self._do(_CALLS.select_volume(request))

    async def update_instance_info(self, host: str, instances: list[str]) -> int:
        return await self._do(_CALLS.update_instance_info(host, instances))

    async def sync_instance_info(self, host: str, instances: list[str]) -> int:
        return await self._do(_CALLS.sync_instance_info(host, instances))

    async def delete_instance_info(self, host: str, instance_uuid: str) -> int:
        return await self._do(_CALLS.delete_instance_info(host, instance_uuid))

    async def health(self) -> Health:
        return await self._do(_CALLS.health())

    async def metrics(self) -> str:
        return await self._do(_CALLS.metrics())

    async def openapi(self) -> dict[str, Any]:
        return await self._do(_CALLS.openapi())

    async def overview(self) -> Overview:
        return await self._do(_CALLS.overview())
