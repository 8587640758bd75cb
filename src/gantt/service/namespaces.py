"""Named namespaces over HTTP: ``/v1/namespaces/{namespace}/...`` (``gantt.namespaces``).

The default namespace (``compute``) keeps every path as it is. A named namespace of kind compute is served by the
very same handlers as the default one, each namespace with its own ``Service`` (its replica of its partition of
the store, its Config, its decision counters): ``NamespaceRouter`` strips ``/namespaces/{namespace}`` from the
path and hands the request to that namespace's app. A namespace the service does not serve is a 404 problem that
names it. The token, request ids, access log and per-route counters stay the outer layer's (``Guard``), the
route labelled with its namespaced path so that each namespace's traffic is counted apart.

Lifecycle: the namespaces' replicas open when the service starts (in the ASGI lifespan of the default app, which
they wrap) and close when it stops; a namespace whose store cannot be read fails the start as the default would.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio.to_thread
import msgspec
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gantt.config import Config, Namespace
from gantt.model import GanttError, InvalidRequest, NotFound
from gantt.namespaces import DEFAULT, UnknownNamespace, check_name
from gantt.replica import Replica
from gantt.service.schemas import PROBLEM_JSON
from gantt.store.base import open_store

log = logging.getLogger("gantt.service")

PREFIX = "/v1/namespaces/"
_ENCODER = msgspec.json.Encoder()


@dataclass
class Served:
    """One named namespace as the service runs it."""

    namespace: Namespace
    app: ASGIApp
    service: Any  # gantt.service.app.Service (imported late: app.py imports this module)
    replica: Replica | None = None


class _Route:
    """What ``Guard`` reads of a matched route (its ``path``): the namespaced form of the inner route's path."""

    def __init__(self, path: str) -> None:
        self.path = path


def _problem(error: GanttError) -> Response:
    return Response(_ENCODER.encode(error.to_problem()), status_code=error.status, media_type=PROBLEM_JSON)


class NamespaceRouter:
    """``/v1/namespaces/{namespace}/<rest>`` to that namespace's app as ``/v1/<rest>``; every other path, and the
    lifespan, to the default app (the lifespan also opening and closing the namespaces' replicas)."""

    def __init__(self, default: ASGIApp, served: dict[str, Served], store: str) -> None:
        self.default = default
        self.served = served
        self.store = store

    @property
    def names(self) -> list[str]:
        return [DEFAULT, *self.served]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan" and self.served:
            await self._lifespan(scope, receive, send)
            return
        path: str = scope.get("path", "")
        if scope["type"] != "http" or not path.startswith(PREFIX):
            await self.default(scope, receive, send)
            return
        name, slash, rest = path[len(PREFIX):].partition("/")
        served = self.served.get(name)
        if served is None:
            error: GanttError = UnknownNamespace(name, self.names)
            if name == DEFAULT:  # the default's paths are the plain ones: one spelling per resource
                error = NotFound(f"the default namespace {DEFAULT!r} is served at /v1/... (without "
                                 f"/namespaces/{DEFAULT})", field="namespace")
            else:
                try:
                    check_name(name)
                except ValueError as exc:
                    error = InvalidRequest(str(exc), field="namespace")
            await _problem(error)(scope, receive, send)
            return
        inner = dict(scope)
        inner["path"] = "/v1/" + rest if slash else "/v1"
        if "raw_path" in scope:
            inner["raw_path"] = inner["path"].encode()
        try:
            await served.app(inner, receive, send)
        finally:
            route = inner.get("route")
            if route is not None:  # Guard counts the answer under the namespaced route
                scope["route"] = _Route(f"{PREFIX}{{namespace}}/" + route.path[len("/v1/"):])

    async def _lifespan(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def receive_(ns_receive: Callable[[], Awaitable[Message]] = receive) -> Message:
            message = await ns_receive()
            if message["type"] == "lifespan.startup":
                await anyio.to_thread.run_sync(self.start)  # raising here fails the start (Starlette says so)
            return message

        async def send_(message: Message) -> None:
            if message["type"] in ("lifespan.shutdown.complete", "lifespan.shutdown.failed",
                                   "lifespan.startup.failed"):
                await anyio.to_thread.run_sync(self.stop)
            await send(message)

        await self.default(scope, receive_, send_)

    def start(self) -> None:
        for name, served in self.served.items():
            if served.replica is not None:
                continue
            store = open_store(self.store, namespace=name)
            if served.namespace.kind == "volume":
                from gantt.volume_replica import VolumeReplica

                served.replica = VolumeReplica.open(store, served.namespace.options)
            else:
                served.replica = Replica.open(store, served.namespace.config)
            served.service._replica = served.replica
            log.info("namespace %s: serving %d hosts at revision %d", name, served.replica.counters()["hosts"],
                     served.replica.revision)

    def stop(self) -> None:
        for served in self.served.values():
            served.service.close()
            if served.replica is not None:
                served.replica.close()
                served.replica = None
                served.service._replica = None


def build(config: Config, make_app: Callable[[Any, list[Route]], Starlette], compute_routes: list[Route],
          make_service: Callable[[Config], Any]) -> dict[str, Served]:
    """The named namespaces ``config`` declares, each with its app and service (replicas open at start): a
    compute one with the default's routes and its own Config, a volume one with the volume routes (its Service
    keeps the file's Config for what is the service's: body limits)."""
    served: dict[str, Served] = {}
    for name, namespace in config.namespaces().items():
        if name == DEFAULT:
            continue
        if namespace.kind == "volume":
            from gantt.service.volume import ROUTES as VOLUME_ROUTES

            service = make_service(config)
            served[name] = Served(namespace=namespace, app=make_app(service, VOLUME_ROUTES), service=service)
            continue
        assert namespace.config is not None
        service = make_service(namespace.config)
        served[name] = Served(namespace=namespace, app=make_app(service, compute_routes), service=service)
    return served


def health(served: dict[str, Served], stale_after: float) -> dict[str, dict[str, Any]]:
    """Each named namespace's replica as ``/health`` shows the default's."""
    out: dict[str, dict[str, Any]] = {}
    for name, one in served.items():
        replica = one.replica
        if replica is None:
            out[name] = {"kind": one.namespace.kind, "status": "starting"}
            continue
        counters = replica.counters()
        lag = replica.lag
        status = "ok" if lag < stale_after and replica.last_write_error is None else "degraded"
        out[name] = {"kind": one.namespace.kind, "status": status, "revision": replica.revision,
                     "hosts": counters["hosts"], "hosts_up": counters["hosts_up"],
                     "seconds_since_sync": round(lag, 3)}
    return out


def metric_lines(default: Replica, served: dict[str, Served], worker: int) -> list[str]:
    """Per-namespace series, the default namespace's included: what is per replica, labelled by namespace."""
    rows: list[tuple[str, Replica, Any]] = [(DEFAULT, default, None)]
    rows += [(name, one.replica, one.service) for name, one in served.items() if one.replica is not None]
    lines = ["# HELP gantt_namespace_hosts Nodes in the namespace's replica, by state (as gantt_hosts).",
             "# TYPE gantt_namespace_hosts gauge"]
    for name, replica, _ in rows:
        for label, n in _states(replica):
            lines.append(f'gantt_namespace_hosts{{worker="{worker}",namespace="{name}",state="{label}"}} {n}')
    for metric, kind, help_text, value in (
            ("gantt_namespace_replica_revision", "gauge", "Store revision the namespace's replica has applied "
             "(each namespace has its own sequence).", lambda r: r.revision),
            ("gantt_namespace_replica_lag_seconds", "gauge", "Seconds since the namespace's replica last read "
             "its change feed.", lambda r: round(r.lag, 3)),
            ("gantt_namespace_placements_total", "counter", "Instances claimed in the namespace.",
             lambda r: r.counters()["placements"]),
            ("gantt_namespace_allocations", "gauge", "Allocations held in the namespace.",
             lambda r: r.counters()["allocations"])):
        lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} {kind}"]
        lines += [f'{metric}{{worker="{worker}",namespace="{name}"}} {value(replica)}' for name, replica, _ in rows]
    return lines


def _states(replica: Any) -> tuple[tuple[str, int], ...]:
    if isinstance(replica, Replica):
        state = replica.utilization()
        return ("up", state.hosts_up), ("down", state.hosts_down), ("disabled", state.hosts_disabled)
    counters = replica.counters()  # a volume namespace: pools are up or disabled (they have no liveness yet)
    return ("up", counters["hosts_up"]), ("disabled", counters["hosts_disabled"])
