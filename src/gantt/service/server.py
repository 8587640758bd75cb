"""Running the service: binding (loopback unless a token is set), uvicorn, and ``--workers N``.

Workers: N processes on one store, each with its own Replica (built in the app's lifespan from a snapshot, then
fed by the store's change feed). Where the OS has SO_REUSEPORT (Linux, BSD) each worker binds the port itself and
the kernel spreads new connections across them evenly; the supervisor holds the port with a bound socket that
never listens, so the port stays ours between worker restarts. Elsewhere, or when serving an inherited socket
(``--fd``), the workers share one listening socket. The supervisor restarts a worker that dies and stops them all
on SIGTERM/SIGINT.
"""

from __future__ import annotations

import ipaddress
import logging
import multiprocessing
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from gantt.config import Config, load_config
from gantt.service.lifeline import die_with_parent
from gantt.store.base import redact_url

log = logging.getLogger("gantt.service")

STARTUP_FAILURE = 3


class ServeError(Exception):
    """A configuration that must not start (printed as is; exit status 2, or 3 when the store is unusable)."""

    def __init__(self, message: str, *, store: bool = False) -> None:
        super().__init__(message)
        self.store = store


def describe_store(url: str) -> str:
    """The store URL as printed (credentials hidden), with the absolute path of a SQLite file: ``sqlite:///rel`` is
    relative to the working directory and ``sqlite:////abs`` absolute (SQLAlchemy's rule), which is easy to miss."""
    shown = redact_url(url)
    if not url.startswith("sqlite:"):
        return shown
    from gantt.store.sqlite import path_of  # type: ignore[import-not-found,unused-ignore]

    try:
        path = path_of(url)
    except ValueError:
        return shown
    return f"{shown} (file {Path(path).absolute()})"


def _relative_without_directory(url: str) -> str | None:
    """A relative SQLite path whose directory does not exist: the operator most likely meant the absolute path
    (``sqlite:///tmp/x`` for /tmp/x); say so rather than create ./tmp/ in the working directory."""
    from gantt.store.sqlite import path_of  # type: ignore[import-not-found,unused-ignore]

    try:
        path = Path(path_of(url))
    except ValueError:
        return None
    if path.is_absolute() or path.parent.exists():
        return None
    return (f"{url}: the directory {path.parent.absolute()} does not exist. sqlite:///PATH is relative to the "
            f"working directory ({Path.cwd()}); an absolute path takes four slashes: sqlite:////{path}. Create the "
            "directory to use the relative path.")


def check_store(url: str) -> None:
    """Open the store once before anything is printed or spawned: a URL of no known kind (exit status 2), a
    missing directory, a foreign or damaged file, an etcd cluster nobody answers for (exit status 3) is one
    line, not "serving …" and then a traceback in every worker."""
    from gantt.model import StoreUnavailable
    from gantt.store.base import open_store

    if url.startswith("memory:"):
        return  # cannot fail
    if not url.startswith(("sqlite:", "etcd:")):
        raise ServeError(f"unknown store URL {url!r}: use sqlite:///path, etcd://host:port[,…] or memory://")
    if url.startswith("sqlite:"):
        mistaken = _relative_without_directory(url)
        if mistaken is not None:
            raise ServeError(mistaken, store=True)
    try:
        store = open_store(url)
    except (StoreUnavailable, ValueError, OSError) as exc:
        raise ServeError(str(exc), store=True) from None
    try:
        if url.startswith("etcd:"):
            store.barrier()  # one linearizable read within the URL's budget (2 s by default), not a 30 s snapshot
    except StoreUnavailable as exc:
        raise ServeError(f"{exc} (is etcd running there? ?budget= in the URL bounds this check)", store=True) from None
    finally:
        store.close()


@dataclass
class ServeOptions:
    store: str
    host: str
    port: int
    config_path: str | None = None
    workers: int = 1
    token: str | None = None
    fd: int | None = None
    log_level: str = "warning"
    metrics_dir: str | None = None  # set by the supervisor of several workers (see metrics.Shared)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name other than localhost may resolve anywhere


def check(options: ServeOptions) -> None:
    if not is_loopback(options.host) and not options.token:
        raise ServeError(f"refusing to bind {options.host}: a non-loopback address needs a bearer token "
                         "(set [gantt] token in the config file or GANTT_TOKEN)")
    if options.workers < 1:
        raise ServeError("--workers must be at least 1")
    if options.workers > 1 and options.store.startswith("memory:"):
        raise ServeError("memory:// lives inside one process: several workers need a shared store "
                         "(sqlite:///path or etcd://…)")


def _listen(host: str, port: int, *, reuse_port: bool) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host.strip("[]"), port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _load(options: ServeOptions, *, log_unused: bool = False) -> Config:
    # What the file holds that Gantt reads but does not use is listed once, by the start-up line's load, which is
    # also where a bad tuning variable stops the start (before any worker is spawned).
    return tuned(load_config(options.config_path or None, log_unused=log_unused))


def tuned(config: Config) -> Config:
    """``config`` with the tuning the environment gives (``gantt.config.tuning.ENVIRONMENT``) in place of its own."""
    try:
        tuning = config.tuning.with_environment(os.environ)
    except ValueError as exc:
        raise ServeError(str(exc)) from None
    return msgspec.structs.replace(config, tuning=tuning)


def worker_config(options: ServeOptions, worker: int) -> Config:
    """What worker ``worker`` decides with: the file's options, and on etcd its own share of the instance's subset
    slot (``Config.for_worker``), since each worker is a replica whose claims compare node revisions there.

    On SQLite the workers' claims go through the file's one writer, which checks room, not revisions: two workers
    picking the same host both succeed while it has room (no conflict to avoid), and more than one slot would cost
    every decision the block pick at large tables (the slots read every row's score; 100,000 hosts: ~0.4 ms)."""
    config = _load(options)
    return config.for_worker(worker, options.workers) if options.store.startswith("etcd:") else config


def _serve_sockets(options: ServeOptions, sockets: list[socket.socket], worker: int = 0) -> int:
    import uvicorn

    from gantt.base.allocator import collect_less_often, keep_freed_memory
    from gantt.service import protocol
    from gantt.service.connections import Budget, Spread
    from gantt.service.hot import lane
    from gantt.service.namespaces import create_app
    from gantt.service.protocol import BoundedHttpToolsProtocol

    keep_freed_memory()
    collect_less_often()

    _log_to_stderr(options)
    config = worker_config(options, worker)
    app = create_app(config=config, store=options.store, token=options.token, worker=worker,
                     metrics_dir=options.metrics_dir)
    protocol.REFUSAL = _refusals(config.gantt.placement_mount)
    protocol.LANE = lane(app)
    protocol.MAX_BODY = config.gantt.max_body_bytes  # every mount's, refused before it is read
    # one body always fits
    protocol.BUFFER = Budget(max(config.tuning.body_buffer_bytes, config.gantt.max_body_bytes))
    if options.workers > 1 and options.metrics_dir is not None:
        protocol.SPREAD = Spread(os.path.join(options.metrics_dir, "connections"), worker,
                                          options.workers)
    uv = uvicorn.Config(app, loop="uvloop", http=BoundedHttpToolsProtocol, lifespan="on", access_log=False,
                        log_level=options.log_level, timeout_graceful_shutdown=5, timeout_keep_alive=5)
    server = _uvicorn_server(uv)
    # uvicorn shuts down gracefully on SIGTERM/SIGINT, then re-raises the signal against the handlers it found;
    # make those no-ops so a clean stop exits 0 rather than "killed by SIGTERM".
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _ignore)
    server.run(sockets=sockets)
    return 0 if server.started else STARTUP_FAILURE


def _refusals(mount: str) -> Callable[[str, int, str, list[tuple[bytes, bytes]]], Any]:
    """Who answers a request the HTTP layer refuses, by its path: the Placement face under its mount."""
    from gantt.placement.api.app import refusal
    from gantt.service.app import placement_paths

    is_placement = placement_paths(mount)
    return lambda path, status, detail, headers: refusal(status, detail, headers) if is_placement(path) else None


def _uvicorn_server(config: Any) -> Any:
    """uvicorn's server, telling the other workers (``connections.Spread``) when this one listens and when it stops.
    (uvicorn is imported when a worker starts, not with this module.)"""
    import uvicorn

    from gantt.base.allocator import freeze_long_lived
    from gantt.service import protocol

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.started:
                freeze_long_lived()
            if self.started and protocol.SPREAD is not None:
                protocol.SPREAD.serving()

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            if protocol.SPREAD is not None:
                protocol.SPREAD.stopped()
            await super().shutdown(sockets)

    return Server(config)


def _ignore(signum: int, frame: Any) -> None:
    pass


def _worker(options: ServeOptions, shared: socket.socket | None, index: int) -> None:
    die_with_parent(signal.SIGTERM)  # a supervisor killed with SIGKILL must not leave its workers serving
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the supervisor decides when workers stop (SIGTERM)
    sock = shared if shared is not None else _listen(options.host, options.port, reuse_port=True)
    sys.exit(_serve_sockets(options, [sock], worker=index))


def serve(options: ServeOptions) -> int:
    """Run until SIGTERM/SIGINT; returns the exit status."""
    check(options)
    check_store(options.store)
    _log_to_stderr(options)
    print(_startup_line(options), flush=True)
    if options.workers == 1:
        if options.fd is not None:
            sock = socket.socket(fileno=options.fd)
        else:
            sock = _listen(options.host, options.port, reuse_port=False)
        print(f"gantt: serving {describe_store(options.store)} on http://{_address(sock)} (pid {os.getpid()})",
              flush=True)
        return _serve_sockets(options, [sock])
    return _supervise(options)


def _log_to_stderr(options: ServeOptions) -> None:
    logging.basicConfig(level=getattr(logging, options.log_level.upper(), logging.WARNING),
                        format="%(asctime)s %(process)d %(name)s %(levelname)s %(message)s")


def _startup_line(options: ServeOptions) -> str:
    """What this service will decide with, said once at start: an operator reads which file and filters apply.
    The store URL's credentials, if any, are not printed."""
    from gantt.compute import filters, weighers
    config = _load(options, log_unused=True)
    fs = config.filter_scheduler
    running = ", ".join(cls.name for cls in filters.pipeline(fs.enabled_filters))
    weighing = ", ".join(cls.name for cls in weighers.resolve(fs.weight_classes))
    named = [f"{name} ({ns.kind})" for name, ns in config.namespaces().items() if name != "compute"]
    return (f"gantt: config {options.config_path or 'none (Nova defaults)'}; store {redact_url(options.store)}; "
            f"filters {running}; weighers {weighing}" + (f"; namespaces {', '.join(named)}" if named else ""))


def _address(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _supervise(options: ServeOptions) -> int:
    ctx = multiprocessing.get_context("spawn")
    shared: socket.socket | None = None
    holder: socket.socket | None = None
    if options.fd is not None:
        shared = socket.socket(fileno=options.fd)
        address = _address(shared)
    elif hasattr(socket, "SO_REUSEPORT"):
        family = socket.AF_INET6 if ":" in options.host else socket.AF_INET
        holder = socket.socket(family, socket.SOCK_STREAM)
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        holder.bind((options.host.strip("[]"), options.port))  # never listens: holds the port, gets no traffic
        options.port = holder.getsockname()[1]
        address = _address(holder)
    else:
        shared = _listen(options.host, options.port, reuse_port=False)
        address = _address(shared)
    # Each worker answers /metrics for all of them from their snapshots here (gantt.service.metrics.Shared).
    options.metrics_dir = tempfile.mkdtemp(prefix="gantt-metrics-")
    stopping = False

    def stop(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    def spawn(index: int) -> multiprocessing.process.BaseProcess:
        # A restarted worker keeps its index: /metrics labels its series with it, not with the pid.
        process = ctx.Process(target=_worker, args=(options, shared, index), name=f"gantt-worker-{index}")
        process.start()
        return process

    workers = [spawn(i) for i in range(options.workers)]
    print(f"gantt: serving {describe_store(options.store)} on http://{address} with {options.workers} workers "
          f"(pids {', '.join(str(w.pid) for w in workers)})", flush=True)
    failures = 0
    status = 0
    while not stopping:
        time.sleep(0.2)
        for i, process in enumerate(workers):
            if process.is_alive() or stopping:
                continue
            if process.exitcode == STARTUP_FAILURE:
                failures += 1
            if failures >= 3 * options.workers:
                print("gantt: workers keep failing to start; giving up", file=sys.stderr, flush=True)
                stopping, status = True, STARTUP_FAILURE
                break
            log.warning("worker %d (pid %s) exited with %s; restarting it", i, process.pid, process.exitcode)
            workers[i] = spawn(i)
    for process in workers:
        if process.is_alive() and process.pid is not None:
            os.kill(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    for process in workers:
        process.join(timeout=max(0.1, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join()
    if holder is not None:
        holder.close()
    shutil.rmtree(options.metrics_dir, ignore_errors=True)
    return status
