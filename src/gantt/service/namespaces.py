"""Named namespaces over HTTP: ``/v1/namespaces/{namespace}/...`` (``gantt.model.namespaces``).

``create_app`` is the service ``gantt serve`` runs: the default namespace's app (``gantt.service.app``, which knows
nothing of namespaces: its paths do not change) behind ``NamespaceRouter``, which hands ``/v1/namespaces/{ns}/<rest>``
to that namespace's own app as ``/v1/<rest>``. A compute namespace's app has the very same handlers as the default
one over its own ``Service`` (its replica of its partition of the store, its Config, its counters); a volume
namespace's has the volume routes (``gantt.service.volume``). Each namespace's app sits behind its own ``Guard``
(the bearer token, request ids, per-route counters). A namespace the service does not serve is a 404 problem
that names it, answered behind the default's Guard (no token, no list of namespaces).

Lifecycle: the namespaces' replicas open when the service starts (in the ASGI lifespan of the default app, which
the router wraps) and close when it stops; a namespace whose store cannot be read fails the start as the default
would. ``/health`` and ``/metrics`` (the default app's) show every namespace's replica through hooks this module
sets on the default Service.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio.to_thread
import msgspec
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gantt.config import Config, Namespace, load_config
from gantt.model import GanttError, InvalidRequest, NotFound
from gantt.model.namespaces import DEFAULT, UnknownNamespace, check_name
from gantt.replication.replica import Replica
from gantt.service import app as gantt_app
from gantt.service.guard import Guard
from gantt.service.handlers import STALE_AFTER
from gantt.service.responses import problem
from gantt.service.routes import ROUTES, gantt_error, http_error, unexpected
from gantt.service.runtime import Service
from gantt.store.base import Store
from gantt.store.urls import open_store

log = logging.getLogger("gantt.service")

PREFIX = "/v1/namespaces/"
_NO_PLACEMENT: Callable[[str], bool] = lambda path: False  # noqa: E731  only the default serves Placement's face


@dataclass
class Served:
    """One named namespace as the service runs it."""

    namespace: Namespace
    app: ASGIApp
    service: Service
    replica: Any = None  # Replica (compute) or gantt.volume.replica.VolumeReplica, once started


def create_app(*, config: Config, store: str | Store | None = None, token: str | None = None, worker: int = 0,
               metrics_dir: str | None = None) -> ASGIApp:
    """``gantt.service.app.create_app`` for the default namespace, and every named namespace ``config``
    declares beside it; with none declared, exactly the default app."""
    default = gantt_app.create_app(config=config, store=store, token=token, worker=worker, metrics_dir=metrics_dir)
    assert isinstance(default, Guard)
    service = default.service
    served = build(config, service.token, worker)
    if not served:
        return default
    service.named_health = lambda: health(served, STALE_AFTER)
    service.metrics.extra = lambda replica: metric_lines(replica, served, worker)
    url = store if isinstance(store, str) else store.url if store is not None else config.gantt.store
    return NamespaceRouter(default, served, url)


def app_from_env() -> ASGIApp:
    """uvicorn factory (``--factory gantt.service.namespaces:app_from_env``): GANTT_STORE, GANTT_CONFIG,
    GANTT_TOKEN, the tuning variables (``gantt.config.tuning.ENVIRONMENT``), every namespace the configuration
    declares."""
    config = load_config(os.environ.get("GANTT_CONFIG") or None)
    config = msgspec.structs.replace(config, tuning=config.tuning.with_environment(os.environ))
    return create_app(config=config, store=os.environ.get("GANTT_STORE") or config.gantt.store)


def build(config: Config, token: str | None, worker: int) -> dict[str, Served]:
    """The named namespaces ``config`` declares, each with its app and Service (replicas open at start): a
    compute one with the default's routes and its own Config, a volume one with the volume routes (its Service
    keeps the file's Config for what is the service's: body limits)."""
    served: dict[str, Served] = {}
    for name, namespace in config.namespaces().items():
        if name == DEFAULT:
            continue
        if namespace.kind == "volume":
            from gantt.service.volume import ROUTES as VOLUME_ROUTES

            service = Service(None, config, token, worker)
            routes = VOLUME_ROUTES
        else:
            assert namespace.config is not None
            # [tuning] sizes the process, as [gantt] does: the file's, not a namespace's own
            service = Service(None, msgspec.structs.replace(namespace.config, tuning=config.tuning), token, worker)
            routes = ROUTES
        served[name] = Served(namespace=namespace, app=_app(service, routes), service=service)
    return served


_HANDLERS: dict[Any, Callable[[Request, Exception], Awaitable[Any]]] = {
    GanttError: gantt_error, HTTPException: http_error,
    Exception: unexpected}


def _app(service: Service, routes: list[Route]) -> ASGIApp:
    inner = Starlette(routes=routes, exception_handlers=_HANDLERS)
    inner.router.redirect_slashes = False  # as the default app: no redirect built from the Host header
    inner.state.service = service
    return Guard(inner, service, _NO_PLACEMENT)


class _Refusal:
    """An app that answers every request with one problem (behind a Guard: the token is checked first)."""

    def __init__(self, error: GanttError) -> None:
        self.error = error

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await problem(self.error)(scope, receive, send)


class NamespaceRouter:
    """``/v1/namespaces/{namespace}/<rest>`` to that namespace's app as ``/v1/<rest>``; every other path, and the
    lifespan, to the default app (the lifespan also opening and closing the namespaces' replicas)."""

    def __init__(self, default: Guard, served: dict[str, Served], store: str) -> None:
        self.default = default
        self.served = served
        self.store = store

    @property
    def names(self) -> list[str]:
        return [DEFAULT, *self.served]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(scope, receive, send)
            return
        path: str = scope.get("path", "")
        if scope["type"] != "http" or not path.startswith(PREFIX):
            await self.default(scope, receive, send)
            return
        name, slash, rest = path[len(PREFIX):].partition("/")
        served = self.served.get(name)
        if served is None:
            refusal = Guard(_Refusal(self._unknown(name)), self.default.service, _NO_PLACEMENT)
            await refusal(scope, receive, send)
            return
        inner = dict(scope)
        inner["path"] = "/v1/" + rest if slash else "/v1"
        inner["raw_path"] = inner["path"].encode()
        await served.app(inner, receive, send)

    def _unknown(self, name: str) -> GanttError:
        if name == DEFAULT:  # the default's paths are the plain ones: one spelling per resource
            return NotFound(f"the default namespace {DEFAULT!r} is served at /v1/... (without "
                            f"/namespaces/{DEFAULT})", field="namespace")
        try:
            check_name(name)
        except ValueError as exc:
            return InvalidRequest(str(exc), field="namespace")
        return UnknownNamespace(name, self.names)

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
                from gantt.volume.replica import VolumeReplica

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
    """Per-namespace series, the default namespace's included: what is per replica, labelled by namespace, and
    each named namespace's decisions (the default's are gantt_decisions_total)."""
    rows: list[tuple[str, Any]] = [(DEFAULT, default)]
    rows += [(name, one.replica) for name, one in served.items() if one.replica is not None]
    labels = f'worker="{worker}"'
    # The cloud's figures (hosts, allocations held) carry no worker label: given once (service.metrics.CLOUD_WIDE).
    lines = ["# HELP gantt_namespace_hosts Nodes (pools, in a volume namespace) in the namespace's replica, "
             "by state (the cloud's figure: no worker label).", "# TYPE gantt_namespace_hosts gauge"]
    for name, replica in rows:
        for state, n in _states(replica):
            lines.append(f'gantt_namespace_hosts{{namespace="{name}",state="{state}"}} {n}')
    per_replica: tuple[tuple[str, str, str, Callable[[Any], object]], ...] = (
            ("gantt_namespace_replica_revision", "gauge", "Store revision the namespace's replica has applied "
             "(each namespace has its own sequence).", lambda r: r.revision),
            ("gantt_namespace_replica_seconds_since_feed_read", "gauge", "Seconds since the namespace's replica "
             "last read its change feed (not a lag: see gantt_namespace_replica_revisions_behind).",
             lambda r: round(r.lag, 3)),
            ("gantt_namespace_placements_total", "counter", "Instances (volumes) claimed in the namespace.",
             lambda r: r.counters()["placements"]))
    for metric, kind, help_text, value in per_replica:
        lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} {kind}"]
        lines += [f'{metric}{{{labels},namespace="{name}"}} {value(replica)}' for name, replica in rows]
    behind = "gantt_namespace_replica_revisions_behind"
    lines += [f"# HELP {behind} Revisions the namespace's store holds that its replica has not applied yet "
              "(the store's head minus gantt_namespace_replica_revision): its real lag.", f"# TYPE {behind} gauge"]
    for name, replica in rows:
        try:
            head = replica.store.barrier()
        except Exception:  # an unreachable store: unknown, not 0
            continue
        lines.append(f'{behind}{{{labels},namespace="{name}"}} {max(0, head - replica.revision)}')
    lines += ["# HELP gantt_namespace_allocations Allocations held in the namespace (the cloud's figure: no "
              "worker label).", "# TYPE gantt_namespace_allocations gauge"]
    lines += [f'gantt_namespace_allocations{{namespace="{name}"}} {replica.counters()["allocations"]}'
              for name, replica in rows]
    lines += ["# HELP gantt_namespace_decisions_total A named namespace's select_destinations requests "
              "answered, by outcome (as gantt_decisions_total).", "# TYPE gantt_namespace_decisions_total counter"]
    for name, one in served.items():
        for outcome, n in sorted(one.service.metrics.decisions.items()):
            lines.append(f'gantt_namespace_decisions_total{{{labels},namespace="{name}",outcome="{outcome}"}} {n}')
    return lines


def _states(replica: Any) -> tuple[tuple[str, int], ...]:
    if isinstance(replica, Replica):
        state = replica.utilization()
        return ("up", state.hosts_up), ("down", state.hosts_down), ("disabled", state.hosts_disabled)
    counters = replica.counters()  # a volume namespace: pools are up or disabled (they have no liveness yet)
    return ("up", counters["hosts_up"]), ("disabled", counters["hosts_disabled"])
