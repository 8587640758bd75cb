"""The ASGI app Gantt serves (``create_app``): Gantt's routes (``gantt.service.routes``) on Starlette, the hot
routes past it (``gantt.service.hot``), the Placement face under its mount, all behind ``Guard``, over the
``Service`` (``gantt.service.runtime``) that holds the replica."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import anyio.to_thread
import msgspec
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from gantt.config import GANTT_PATHS, Config, load_config
from gantt.model import GanttError
from gantt.placement.api import Policy, create_placement_app
from gantt.replication.replica import Replica
from gantt.service.guard import Guard
from gantt.service.hot import HOT, HotRoutes, Lane
from gantt.service.liveview import ui_assets
from gantt.service.openapi.document import openapi
from gantt.service.routes import PAGES, ROUTES, gantt_error, http_error, unexpected
from gantt.service.runtime import Service

log = logging.getLogger("gantt.service")

class Dispatch:
    """Placement's paths to its own app (its token header, X-Auth-Token, and error bodies), the hot routes to
    ``HotRoutes``, the rest to Gantt's Starlette app."""

    def __init__(self, gantt: ASGIApp, placement: ASGIApp, is_placement: Callable[[str], bool],
                 hot: HotRoutes | None = None) -> None:
        self.gantt = gantt
        self.placement = placement
        self.is_placement = is_placement
        self.hot = hot

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.is_placement(scope["path"]):
            await self.placement(scope, receive, send)
            return
        route = self.hot.match(scope) if self.hot is not None and scope["type"] == "http" else None
        if route is not None:
            assert self.hot is not None
            await self.hot.serve(route, scope, receive, send)
        else:
            await self.gantt(scope, receive, send)


def placement_paths(mount: str) -> Callable[[str], bool]:
    """Which paths are the Placement face's (``[gantt] placement_mount``): those under the mount, or, mounted at
    the root, every path but Gantt's own (GANTT_PATHS), "/" included (Placement's version document there)."""
    if mount == "/":
        return lambda path: path.split("/", 2)[1] not in GANTT_PATHS
    return lambda path: path == mount or path.startswith(mount + "/")


def create_app(replica: Replica | None = None, *, config: Config | None = None, store: Any = None,
               token: str | None = None, worker: int = 0, metrics_dir: str | None = None,
               hot_routes: bool = True) -> ASGIApp:
    """The service over ``replica``, or over a replica it opens at startup from ``store`` (a store URL, or a
    Store object that the app then owns; see ``Replica.open``).

    ``token`` defaults to ``GANTT_TOKEN``, then ``[gantt] token``. ``worker``: this process's index among
    ``gantt serve --workers N`` (the ``worker`` label of /metrics); ``metrics_dir``: the directory where the
    workers share their figures, so that each answers /metrics for all (``metrics.Shared``). ``hot_routes``:
    serve the load-carrying routes past Starlette (``HotRoutes``); off only to compare the two paths.
    """
    config = config or (replica.config if replica is not None else Config())
    token = token or os.environ.get("GANTT_TOKEN") or config.gantt.token
    service = Service(replica, config, token, worker, metrics_dir)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if replica is not None:
            try:
                yield
            finally:
                service.close()
            return
        # Loading a large store takes seconds: off the loop, so the process stays responsive to signals.
        built = await anyio.to_thread.run_sync(lambda: Replica.open(store or config.gantt.store, config))
        service._replica = built
        log.info("serving %d hosts from %s at revision %d", built.counters()["hosts"], built.url,
                 built.revision)
        if service.shared is not None:
            await anyio.to_thread.run_sync(service.shared.start, built)
        try:
            yield
        finally:
            if service.shared is not None:
                service.shared.stop()
            service.close()
            built.close()

    handlers: dict[Any, Callable[[Request, Exception], Awaitable[Response]]] = {
        GanttError: gantt_error, HTTPException: http_error, Exception: unexpected}
    app = Starlette(routes=[*ROUTES, *PAGES], exception_handlers=handlers, lifespan=lifespan)
    # No 307 to the path with(out) a slash: Starlette builds its Location from the request's Host header.
    app.router.redirect_slashes = False
    app.state.service = service
    app.state.openapi = openapi()
    app.state.ui = ui_assets()
    mount = config.gantt.placement_mount
    placement = create_placement_app(lambda: service.placement, service, token, "" if mount == "/" else mount,
                                     policy=Policy.of(config.oslo_policy), cors=config.cors,
                                     max_body=service.max_body)
    is_placement = placement_paths(mount)
    hot = HotRoutes(app, ROUTES) if hot_routes else None
    guard = Guard(Dispatch(app, placement, is_placement, hot), service, is_placement)
    if hot is not None and not any(is_placement(path) for _, path in HOT):
        guard.lane = Lane(guard, hot)
    return guard


def app_from_env() -> ASGIApp:
    """uvicorn factory (``--factory gantt.service.app:app_from_env``): GANTT_STORE, GANTT_CONFIG, GANTT_TOKEN, and
    the tuning variables (``gantt.config.tuning.ENVIRONMENT``)."""
    config = load_config(os.environ.get("GANTT_CONFIG") or None)
    config = msgspec.structs.replace(config, tuning=config.tuning.with_environment(os.environ))
    if config.namespace:  # this app serves the default namespace only: refuse rather than drop the others
        raise GanttError("the configuration declares namespaces: use --factory "
                         "gantt.service.namespaces:app_from_env, which serves them all")
    return create_app(config=config, store=os.environ.get("GANTT_STORE") or config.gantt.store)
