"""The ASGI app: thin handlers over a ``gantt.replication.replica.Replica``; the domain objects and the store do
the work.

Every handler decodes its input completely (msgspec, so a bad field is a 400 naming it) before it touches
anything, and every write is one store batch: a request is applied whole or not at all.

Calls that decide or touch the store run in a thread pool: a decision is CPU-bound (numpy releases the GIL for
most of it) and a store commit waits on disk; running them off the event loop keeps other requests' I/O moving
and lets concurrent claims reach the store together, where a backend can commit them as one group.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import functools
import hmac
import importlib.resources
import logging
import os
import re
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar
from urllib.parse import urlencode

import anyio
import anyio.to_thread
import msgspec
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gantt.base.ids import request_id as new_request_id
from gantt.base.version import __version__
from gantt.config import GANTT_PATHS, Config, load_config
from gantt.model import (
    MAX_INT64,
    Aggregate,
    CapacityQuestion,
    GanttError,
    HostReport,
    HostStats,
    InvalidRequest,
    NotFound,
    RequestSpec,
    decode,
    valid_name,
)
from gantt.placement.api import Policy, create_placement_app, refusal
from gantt.replication.replica import (  # a write the facade hands to its store, as it builds it
    CONTENDED,
    LIVENESS_DELAY,
    Batch,
    ClaimSteps,
    Replica,
    advance,
)
from gantt.service.metrics import Metrics, Shared
from gantt.service.schemas import (
    MAX_LIMIT,
    PROBLEM_JSON,
    REVISION_HEADER,
    AggregateList,
    AllocationList,
    AllocationView,
    Candidates,
    Health,
    InstancesIn,
    LastWriteError,
    Link,
    MethodNotAllowed,
    PayloadTooLarge,
    ReportBatchIn,
    ReportIn,
    Selections,
    Unauthorized,
    UnsupportedMediaType,
    Written,
    openapi,
    timestamp,
    versions,
)

log = logging.getLogger("gantt.service")
# One line per answer at INFO (``gantt serve --log-level info``): method, path, status, milliseconds, request id.
access_log = logging.getLogger("gantt.access")

T = TypeVar("T")

# A replica that has not read the change feed for this long answers /health with 503 "degraded".
STALE_AFTER = 10.0


def env_count(name: str, default: int, minimum: int) -> int:
    """A whole-number tuning setting from the environment (README, "Tuning by environment"): one that is not a
    whole number of at least ``minimum`` stops the start with a message naming it, never runs on a guess."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip().replace("_", ""))
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise ValueError(f"{name}={raw!r}: expected a whole number of at least {minimum}")
    return value


# How many decisions/commits may run at once: enough concurrent commits for the store to group them, few enough
# that CPU-bound decisions do not thrash the GIL. Not yet tuned by bench/http_api.py; GANTT_THREADS overrides it.
THREADS = env_count("GANTT_THREADS", 16, 1)
# Placements are decided on the event loop (``Service.claim``) up to this many rows, where a decision takes half a
# millisecond or less; above, on the worker's one decider thread (``Decider``), where a decision's 1-4 ms (a
# million rows) would hold every connection's reads and answers behind it. At 100,000 hosts with reports streaming
# the loop decided with a lower placement p99 than the decider (47-50 ms against 55-61, bench/RESULTS-mixed.md):
# each hop to the decider and back waited for the other thread's turn at the interpreter lock.
LOOP_DECISION_ROWS = env_count("GANTT_LOOP_DECISION_ROWS", 200_000, 0)
# How many decider threads a worker runs for those larger tables; placements take them in turn. 0: decided on
# the handler threads instead, each blocked in its own commit (what a decider saves: bench/RESULTS-mixed.md).
DECIDERS = env_count("GANTT_DECIDERS", 1, 0)
# Bytes of request bodies a worker holds at once over all its connections (gantt.service.protocol.Budget; never
# less than [gantt] max_body_bytes): many clients each within the body limit cannot together pin its memory.
BODY_BUFFER = env_count("GANTT_BODY_BUFFER_BYTES", 64 * 1024 * 1024, 1)
# A body with a run of 19 digits may carry an integer past int64. Found by mapping every digit to "9" and looking
# for 19 of them: a regex search for \d{19} cost ~11 us per host report (900 bytes), this ~1 us.
_ALL_NINES = bytes.maketrans(b"0123456789", b"9" * 10)
_NINETEEN = b"9" * 19


def _long_digits(raw: bytes) -> bool:
    return _NINETEEN in raw.translate(_ALL_NINES)


_ENCODER = msgspec.json.Encoder()


class Decider:
    """One thread with an event loop of its own, where placements too big to decide on the service's loop are
    decided (``Service.decide``): the claim steps run there as they would on the service's loop (the same
    ``Service.claim``, commits handed to the store's writer, a step asking for ``THREAD`` sent to the handler
    pool), and the answer goes back with one wake-up of the service's loop.

    Decided on the 16 handler threads instead, each decision's numpy passes handed the GIL among up to 16
    deciders, each blocked in its own commit: profiled at 100,000 hosts, ~24 context switches per placement in
    the handler threads alone (bench/RESULTS-mixed.md). One decider interleaves its placements at their commits
    as the loop does, and leaves the service's loop free to read and answer meanwhile."""

    def __init__(self, name: str = "gantt-decider") -> None:
        try:
            import uvloop  # the service's own kind of loop (gantt serve runs uvicorn on uvloop)

            self.loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
        except ImportError:
            self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    async def drive(self, work: Awaitable[T]) -> T:
        """Run ``work`` (a coroutine) on the decider's loop; its answer or error is this call's. Cancelling the
        caller does not stop it, as a handler thread's call is not stopped: a placement under way commits."""
        caller = asyncio.get_running_loop()
        answer: asyncio.Future[T] = caller.create_future()

        def settle(task: asyncio.Task[T]) -> None:
            if task.cancelled():  # the decider stopped (the service is closing)
                answer.cancel()
                return
            error = task.exception()  # taken even when nobody waits: asyncio logs an error never taken
            if answer.cancelled():
                return
            if error is not None:
                answer.set_exception(error)
            else:
                answer.set_result(task.result())

        def start() -> None:
            task = self.loop.create_task(work)  # type: ignore[arg-type]
            task.add_done_callback(lambda task: caller.call_soon_threadsafe(settle, task))

        self.loop.call_soon_threadsafe(start)
        return await answer

    def close(self) -> None:
        with contextlib.suppress(RuntimeError):  # already closed
            self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self.loop.close()


class Service:
    """What the handlers share: the replica, the token, limits and counters."""

    def __init__(self, replica: Replica | None, config: Config, token: str | None, worker: int = 0,
                 metrics_dir: str | None = None) -> None:
        self._replica = replica
        self.config = config
        self.token = token
        self.max_body = config.gantt.max_body_bytes
        self.metrics = Metrics(worker)
        self.shared = Shared(metrics_dir, self.metrics) if metrics_dir is not None else None
        self.pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()  # the loop and the decider may both ask for the pool first
        self._deciders: list[Decider] = []
        self._turn = 0  # the decider the next placement goes to, of ``_deciders``
        # The named namespaces served beside this (the default) one, as /health shows them: set by
        # gantt.service.namespaces, which builds them
        self.named_health: Callable[[], dict[str, dict[str, Any]]] | None = None
        self._liveness_timer: asyncio.TimerHandle | None = None  # the next write of repeated reports, if due
        self._liveness_tasks: set[asyncio.Task[None]] = set()

    @property
    def replica(self) -> Replica:
        if self._replica is None:
            raise GanttError("the service is not started")
        return self._replica

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        # The loop's own executor hand-off, not anyio.to_thread: measured on 2 busy cores, anyio's costs 50 us of
        # CPU and ~200 us of wall time per call under 16 concurrent requests (its limiter, cancel scope and worker
        # queue), the executor's 15-30 us, and every write and decision takes one such hop.
        pool = self.pool
        if pool is None:
            with self._pool_lock:
                if self.pool is None:
                    self.pool = ThreadPoolExecutor(THREADS, thread_name_prefix="gantt-handler")
                pool = self.pool
        return await asyncio.get_running_loop().run_in_executor(pool, partial(fn, *args))

    async def decide(self, steps: ClaimSteps[T]) -> T:
        """``claim`` driven on a decider's loop (``Decider``; ``DECIDERS`` of them, in turn), for tables too big to
        decide on this one."""
        deciders = self._deciders
        if not deciders:
            with self._pool_lock:
                if not self._deciders:
                    self._deciders = [Decider("gantt-decider" if DECIDERS == 1 else f"gantt-decider-{i}")
                                      for i in range(DECIDERS)]
                deciders = self._deciders
        self._turn = (self._turn + 1) % len(deciders)
        return await deciders[self._turn].drive(self.claim(steps, decider=True))

    async def write(self, batch: Batch) -> int:
        """A write without a thread of ours: where the store has a writer of its own (SQLite), the loop hands it
        the batch and waits; the commit's changes are applied here. Profiled per host report, the hop to a
        handler thread and back was two of the four thread wake-ups and about a tenth of the server's CPU."""
        replica = self.replica
        future = replica.write_on_loop(batch)
        if future is None:
            return await self.run(replica.write, batch)
        result = await future
        if not replica.uncontended():
            # the feed is applying a batch under the table lock: apply ours on a thread, not stall the loop
            return (await self.run(replica.written, batch, result)).revision
        return replica.written(batch, result).revision

    def heartbeat(self, report: HostReport) -> bool:
        """``replica.heartbeat`` (a report that repeats its node's record, taken to be written later), with the
        write of what it took due LIVENESS_DELAY after the first: one batch, on a handler thread, for all the
        reports repeated meanwhile, where each cost a commit hand-off, a catch-up and an apply on the loop."""
        if not self.replica.heartbeat(report):
            return False
        if self._liveness_timer is None:
            self._liveness_timer = asyncio.get_running_loop().call_later(LIVENESS_DELAY, self._liveness_due)
        return True

    def _liveness_due(self) -> None:
        task = asyncio.ensure_future(self._write_liveness())
        self._liveness_tasks.add(task)
        task.add_done_callback(self._liveness_tasks.discard)

    async def _write_liveness(self) -> None:
        try:
            await self.run(self.replica.flush_liveness)
        except GanttError as exc:  # kept by the replica: tried again after the same delay
            log.warning("repeated host reports not written (%s); retrying in %.2f s", exc, LIVENESS_DELAY)
        finally:
            self._liveness_timer = None
            if isinstance(self._replica, Replica) and self._replica.liveness_pending():
                self._liveness_timer = asyncio.get_running_loop().call_later(LIVENESS_DELAY, self._liveness_due)

    async def claim(self, steps: ClaimSteps[T], decider: bool = False) -> T:
        """Claim steps (``Replica.select_steps``) driven on the running loop (the service's, or the decider's:
        ``decide``): decided here, each commit handed to the store's own writer while the loop waits on its
        future, applied here. A step asking for a thread (a claim waiting for another on the same node, a
        conflict's catch-up) sends the rest to a handler thread.

        Deciding on a handler thread cost a hop there and back per placement, and 16 deciders handing the GIL
        to one another: profiled with 2 workers, the handler threads took half of the server's CPU."""
        replica = self.replica
        value: Any = None
        error: Exception | None = None
        while True:
            done, step = advance(steps, value, error)
            if done:
                return step  # type: ignore[no-any-return]
            value = error = None
            if step is CONTENDED and decider:
                # Profiled at 100,000 hosts with two workers, the hop a decider made to a handler thread whenever
                # the feed held the lock was a fifth of its time: waiting for the lock here costs less.
                continue
            if not isinstance(step, Batch):  # THREAD, or CONTENDED on the service's loop
                return await self.run(replica.run_claims, steps)
            # A future of this loop: the writer completes a group's with one wake-up, where a thread-safe future
            # wrapped for the loop cost a Condition, a chained callback and a wake-up per claim (~4 % of the
            # loop's time per placement, profiled).
            future = replica.write_on_loop(step)
            assert future is not None, "claim steps are driven here only where the store has its own writer"
            try:
                value = await future
            except Exception as exc:  # raised where the commit was asked for, as Replica.run_claims does
                error = exc

    async def fresh(self, scope: Scope) -> GanttError | None:
        """Read your writes across processes (``--workers N``, or several services on one file): before a request
        is served, the replica catches up to every revision the store held when it arrived, so a write another
        worker acknowledged is seen here too. One indexed read of the store's head per request where the store
        can tell it locally (SQLite; ``Store.shared_head``), the feed read only when it moved; the error that
        stopped the catch-up, if any, which the request is answered with.

        Not for a host report (the hottest route): it writes a whole record and reads nothing back, and the store
        compares it with the record the store holds, not the replica's. Under two workers' writes the head's read
        costs ~45 us of CPU (each read transaction finds the WAL moved and reads its page again), ~3 % of a
        placement, but ~6 % of a report."""
        replica: Any = self._replica
        path = scope["path"]
        if replica is None or _open(path) or path in _UNREAD:
            return None
        try:
            head = replica.behind()
            if head is not None:
                if isinstance(replica, Replica) and replica.reads_in_place and replica.uncontended():
                    replica.catch_up_to(head)
                else:  # the feed holds the table lock (or the store may wait): not on the loop
                    await self.run(replica.catch_up_to, head)
        except GanttError as exc:
            return exc
        return None

    async def sync(self) -> int:
        """``replica.sync()``: in place where the store has its own writer (SQLite: one read of the head, then
        the feed from the file), else on a handler thread (etcd: a round trip)."""
        replica = self.replica
        if replica.reads_in_place and replica.uncontended():
            return replica.sync()
        return await self.run(replica.sync)  # nor while the feed applies under the table lock: not on the loop

    def close(self) -> None:
        for decider in self._deciders:
            decider.close()
        self._deciders = []
        if self._liveness_timer is not None:
            self._liveness_timer.cancel()
            self._liveness_timer = None
        if isinstance(self._replica, Replica):  # what was acknowledged is written before the service goes
            try:
                self._replica.flush_liveness()
            except GanttError as exc:
                log.error("closing: repeated host reports not written: %s", exc)
        if self.pool is not None:
            self.pool.shutdown(wait=False)
            self.pool = None

    async def body(self, request: Request, type_: type[T]) -> T:
        """Read and decode a JSON body: 415 if it is not JSON, 413 if too big, 400 naming the bad field.

        The headers are read in one pass over the raw list and the body straight from ``receive``: Starlette's
        ``Headers`` (a scan per lookup) and its ``stream()`` generator cost 18 us per request, three times the
        decoding itself. The answers are theirs: the first of repeated headers, latin-1 values, a disconnect
        raised as ``ClientDisconnect``."""
        encoding = media = declared = None
        for name, value in request.scope["headers"]:
            if name == b"content-type":
                media = value if media is None else media
            elif name == b"content-length":
                declared = value if declared is None else declared
            elif name == b"content-encoding":
                encoding = value if encoding is None else encoding
        coding = encoding.decode("latin-1").strip().lower() if encoding is not None else "identity"
        if coding not in ("", "identity"):
            raise UnsupportedMediaType(f"Content-Encoding {coding!r} is not accepted: send the JSON as is",
                                       field="content-encoding")
        kind = media.decode("latin-1").split(";", 1)[0].strip().lower() if media is not None else ""
        if kind != "application/json" and not (kind.startswith("application/") and kind.endswith("+json")):
            raise UnsupportedMediaType(f"expected application/json, got {kind or 'no content type'}",
                                       field="content-type")
        if declared is not None:
            length = declared.decode("latin-1")
            if _DIGITS.fullmatch(length) and int(length) > self.max_body:
                raise PayloadTooLarge(f"body of {length} bytes exceeds the limit of {self.max_body}")
        chunks: list[bytes] = []
        size = 0
        receive = request.receive
        while True:
            message = await receive()
            if message["type"] == "http.request":
                chunk = message.get("body", b"")
                if chunk:
                    size += len(chunk)
                    if size > self.max_body:  # chunked bodies declare no length: count as they arrive
                        raise PayloadTooLarge(f"body exceeds the limit of {self.max_body} bytes")
                    chunks.append(chunk)
                if not message.get("more_body", False):
                    break
            elif message["type"] == "http.disconnect":
                raise ClientDisconnect()
        raw = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        value = decode(raw, type_)
        if _long_digits(raw):
            # Python ints are unbounded but no column or store is; only bodies with 19+ digit runs pay for this.
            _check_ints(msgspec.json.decode(raw), "$")
        return value


_DIGITS = re.compile(r"[0-9]{1,9}")  # ASCII only: str.isdigit() takes '²' and '٣'


def _check_ints(value: Any, path: str) -> None:
    if isinstance(value, bool):
        return
    if isinstance(value, int):
        if abs(value) > MAX_INT64:
            raise InvalidRequest(f"integer out of range (at {path})", field=path)
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_ints(item, f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_ints(item, f"{path}[{i}]")


# The query parameters each path takes; any other is a 400, as an unknown body field is: a mistyped ``?nod=``
# on DELETE /v1/hosts/{host} would otherwise delete every node of the host instead of one.
_QUERY: dict[str, frozenset[str]] = {"/v1/hosts/{host}": frozenset({"node"}),
                                     "DELETE /v1/hosts/{host}": frozenset({"node", "force"}),
                                     "/v1/candidates": frozenset({"limit"}),
                                     "/v1/hosts": frozenset({"limit", "marker"}),
                                     "/v1/allocations": frozenset({"limit", "marker"})}
# ``limit`` is a number, checked by its handler; a hosts ``marker`` is "host/node", checked by its handler
_NAME_PARAMETERS = frozenset({"node"})
# The most items one page may ask for (Nova's [api] max_limit default); without ``limit`` a listing is whole.
MAX_PAGE = 1000
# The overview's heat map shows at most this many nodes (the most used): enough to see a cloud's shape, small
# enough to poll every few seconds.
OVERVIEW_HOSTS = 2000


def _query(request: Request) -> dict[str, str]:
    """The request's query parameters, each known to its route and given at most once."""
    if not request.scope.get("query_string"):
        return {}  # every hot request: no QueryParams to parse out of nothing
    route = request.scope.get("route")
    path = route.path if route is not None else ""
    allowed = _QUERY.get(f"{request.method} {path}") or _QUERY.get(path, frozenset())
    seen: dict[str, str] = {}
    for name, value in request.query_params.multi_items():
        if name not in allowed:
            known = ", ".join(sorted(allowed)) or "none"
            raise InvalidRequest(f"unknown query parameter {name[:64]!r} (this call takes: {known})",
                                 field=name[:64])
        if name in seen:
            raise InvalidRequest(f"query parameter {name!r} given more than once", field=name)
        if name in _NAME_PARAMETERS:
            _check_name(name, value)
        seen[name] = value
    return seen


def _check_name(parameter: str, value: str) -> None:
    """A path or query parameter names what a body created with a Name: held to the same limits, an over-long
    one is refused as a body field would be rather than looked up (and echoed back whole in a 404)."""
    if not valid_name(value):
        raise InvalidRequest(f"{parameter} must be 1-255 characters, without '/' or control characters, and not "
                             f"'.' or '..' (got {len(value)} characters)", field=parameter)


def _limit(query: dict[str, str], maximum: int) -> int | None:
    raw = query.get("limit")
    if raw is None:
        return None
    if not _DIGITS.fullmatch(raw) or not 1 <= int(raw) <= maximum:
        raise InvalidRequest(f"limit must be an integer from 1 to {maximum}", field="limit")
    return int(raw)


def _page(items: list[T], key: Callable[[T], str], query: dict[str, str], path: str) -> tuple[list[T], list[Link]]:
    """One page of ``items`` (sorted by ``key``): those after the item whose key is ``marker``, at most ``limit``
    of them, and a ``next`` link when more follow. A marker that names no item is a 400, as in Nova."""
    limit = _limit(query, MAX_PAGE)
    marker = query.get("marker")
    start = 0
    if marker is not None:
        keys = [key(item) for item in items]
        start = bisect.bisect_left(keys, marker)
        if start == len(keys) or keys[start] != marker:
            raise InvalidRequest(f"marker {marker[:300]!r} names nothing in this listing (it is the last item's "
                                 "key of the page before)", field="marker")
        start += 1
    if limit is None:
        return items[start:], []
    page = items[start:start + limit]
    links = []
    if start + limit < len(items):
        links.append(Link(rel="next", href=f"{path}?{urlencode({'limit': limit, 'marker': key(page[-1])})}"))
    return page, links


def host_key(host: str, nodename: str) -> str:
    """How a node is named in one string (a hosts ``marker``): the host, or "host/node" for a node of another
    name; names hold no '/'."""
    return host if nodename == host else f"{host}/{nodename}"


def _deleted(revision: int) -> Response:
    # 204 carries no body: the revision that holds the delete (a client may wait for a replica to reach it)
    # travels in a header.
    return Response(status_code=204, headers={REVISION_HEADER: str(revision)})


def _json(value: Any, status: int = 200) -> Response:
    return Response(_ENCODER.encode(value), status_code=status, media_type="application/json")


def _problem(error: GanttError, headers: dict[str, str] | None = None) -> Response:
    return Response(_ENCODER.encode(error.to_problem()), status_code=error.status, media_type=PROBLEM_JSON,
                    headers=headers)


def _svc(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


# ------------------------------------------------------------------------------------------- handlers


async def health(request: Request) -> Response:
    svc = _svc(request)
    replica = svc.replica
    lag = replica.lag
    write_error = replica.last_write_error  # cleared by the store's next successful write
    status = "ok" if lag < STALE_AFTER and write_error is None else "degraded"
    named = svc.named_health() if svc.named_health is not None else None
    if named and any(one["status"] != "ok" for one in named.values()):
        status = "degraded"  # a namespace this service serves cannot be served now
    code = 200 if status == "ok" else 503
    if not authorized(request.scope, svc.token.encode() if svc.token else None):
        # A load balancer needs the status only; where the store is, which process answers and what the last
        # write error said are for operators.
        return _json({"status": status}, code)
    counters = replica.counters()
    body = Health(status=status, version=__version__, pid=os.getpid(), store=replica.url,
                  revision=replica.revision, hosts=counters["hosts"], hosts_up=counters["hosts_up"],
                  seconds_since_sync=round(lag, 3),
                  last_write_error=LastWriteError.of(write_error) if write_error is not None else None,
                  namespaces=named)
    return _json(body, code)


async def metrics(request: Request) -> Response:
    svc = _svc(request)
    # Off the event loop: summing capacity and usage per zone is a pass over every node (ms at 100,000).
    render = svc.shared.answer if svc.shared is not None else svc.metrics.render
    return Response(await svc.run(render, svc.replica), media_type="text/plain; version=0.0.4")


async def version_document(request: Request) -> Response:
    return _json(versions())


async def openapi_document(request: Request) -> Response:
    return _json(request.app.state.openapi)


async def report(request: Request) -> Response:
    svc = _svc(request)
    body = await svc.body(request, ReportIn)
    host_report = HostReport.of(list(body.name) if isinstance(body.name, tuple) else body.name, body.stats)
    batch = svc.replica.report_batch(host_report)
    if svc.heartbeat(host_report):
        # The replica holds these figures already, at the revision it answers with; only the time is written later.
        return _json(Written(revision=svc.replica.revision))
    return _json(Written(revision=await svc.write(batch)))


async def report_batch(request: Request) -> Response:
    svc = _svc(request)
    body = await svc.body(request, ReportBatchIn)
    reports = []
    for i, item in enumerate(body.reports):
        try:
            reports.append(HostReport.of(list(item.name) if isinstance(item.name, tuple) else item.name,
                                         item.stats))
        except InvalidRequest as exc:
            where = f"$.reports[{i}]" + (exc.field[1:] if exc.field and exc.field.startswith("$.stats") else ".name")
            raise InvalidRequest(f"{exc.message} (at {where})", field=where) from None
    if not reports:
        return _json(Written(revision=svc.replica.revision, count=0))
    return _json(Written(revision=await svc.run(svc.replica.report_many, reports), count=len(reports)))


def _host_view(host: dict[str, Any]) -> dict[str, Any]:
    host["updated_at"] = timestamp(host["updated_at"])
    return host


def _node_key(host: dict[str, Any]) -> str:
    return host_key(host["host"], host["nodename"])


def _list_hosts(replica: Replica, query: dict[str, str]) -> bytes:
    hosts = sorted(replica.hosts(), key=_node_key)
    page, links = _page(hosts, _node_key, query, "/v1/hosts")
    return _ENCODER.encode({"hosts": [_host_view(h) for h in page], "hosts_links": links})


async def list_hosts(request: Request) -> Response:
    svc = _svc(request)
    return Response(await svc.run(_list_hosts, svc.replica, _query(request)), media_type="application/json")


async def show_host(request: Request) -> Response:
    svc = _svc(request)
    return _json(_host_view(svc.replica.host(request.path_params["host"], _query(request).get("node"))))


async def update_host(request: Request) -> Response:
    svc = _svc(request)
    node = _query(request).get("node")
    stats = await svc.body(request, HostStats)
    return _json(Written(revision=await svc.run(svc.replica.update_host, request.path_params["host"], node,
                                                 stats)))


async def delete_host(request: Request) -> Response:
    svc = _svc(request)
    query = _query(request)
    force = query.get("force", "false")
    if force not in ("true", "false"):
        raise InvalidRequest(f"force must be true or false, not {force[:32]!r}", field="force")
    return _deleted(await svc.run(partial(svc.replica.delete_host, force=force == "true"),
                                  request.path_params["host"], query.get("node")))


async def list_aggregates(request: Request) -> Response:
    return _json(AggregateList(aggregates=_svc(request).replica.aggregates()))


async def show_aggregate(request: Request) -> Response:
    return _json(_svc(request).replica.aggregate(request.path_params["id"]))


async def put_aggregate(request: Request) -> Response:
    svc = _svc(request)
    aggregate = await svc.body(request, Aggregate)
    if aggregate.key != request.path_params["id"]:
        raise InvalidRequest(f"id {aggregate.id!r} does not match the path's {request.path_params['id']!r}",
                             field="$.id")
    return _json(Written(revision=await svc.run(svc.replica.update_aggregate, aggregate)))


async def delete_aggregate(request: Request) -> Response:
    svc = _svc(request)
    return _deleted(await svc.run(svc.replica.delete_aggregate, request.path_params["id"]))


async def select_destinations(request: Request) -> Response:
    svc = _svc(request)
    spec = await svc.body(request, RequestSpec)
    with svc.metrics.deciding():
        replica = svc.replica
        # A store that commits in its caller (etcd), or no deciders: a handler thread decides and waits for it.
        if replica.reads_in_place and replica.node_count <= LOOP_DECISION_ROWS:
            answer = await svc.claim(replica.select_steps(spec, request.state.request_id))
        elif replica.reads_in_place and DECIDERS:
            answer = await svc.decide(replica.select_steps(spec, request.state.request_id))
        else:
            answer = await svc.run(replica.select_destinations, spec, request.state.request_id)
    return _json(Selections(selections=answer))


def _candidates(replica: Replica, spec: RequestSpec, limit: int | None) -> Candidates:
    return Candidates(candidates=replica.candidates(spec, limit), explanation=replica.explain(spec))


async def candidates(request: Request) -> Response:
    svc = _svc(request)
    limit = _limit(_query(request), MAX_LIMIT)
    spec = await svc.body(request, RequestSpec)
    return _json(await svc.run(_candidates, svc.replica, spec, limit))


async def capacity(request: Request) -> Response:
    svc = _svc(request)
    question = await svc.body(request, CapacityQuestion)
    return _json(await svc.run(svc.replica.capacity, question))


async def overview(request: Request) -> Response:
    svc = _svc(request)
    return _json(await svc.run(svc.replica.overview, OVERVIEW_HOSTS))


def _list_allocations(replica: Replica, query: dict[str, str]) -> AllocationList:
    allocations = sorted(replica.allocations(), key=lambda a: a.consumer_uuid)
    page, links = _page(allocations, lambda a: a.consumer_uuid, query, "/v1/allocations")
    return AllocationList(allocations=[AllocationView.of(a) for a in page], allocations_links=links)


async def list_allocations(request: Request) -> Response:
    svc = _svc(request)
    return _json(await svc.run(_list_allocations, svc.replica, _query(request)))


async def show_allocation(request: Request) -> Response:
    return _json(AllocationView.of(_svc(request).replica.allocation(request.path_params["consumer"])))


async def release(request: Request) -> Response:
    svc = _svc(request)
    revision = await svc.write(svc.replica.release_batch(request.path_params["consumer"]))
    # The answer is a revision this replica has applied that holds the release. Where the write's own catch-up
    # has brought the replica there (SQLite: the store hands a process its own revisions from memory), that is
    # it, without sync()'s read of the store's head per release; else sync() reads the feed up to every commit
    # before now, ours included.
    applied = svc.replica.revision
    return _deleted(applied if applied >= revision else await svc.sync())


async def confirm_move(request: Request) -> Response:
    svc = _svc(request)
    return _json(AllocationView.of(await svc.run(svc.replica.confirm_move, request.path_params["migration"])))


async def revert_move(request: Request) -> Response:
    svc = _svc(request)
    return _json(AllocationView.of(await svc.run(svc.replica.revert_move, request.path_params["migration"])))


async def update_instances(request: Request) -> Response:
    svc = _svc(request)
    body = await svc.body(request, InstancesIn)
    fn = svc.replica.sync_instance_info if request.method == "PUT" else svc.replica.update_instance_info
    return _json(Written(revision=await svc.run(fn, request.path_params["host"], body.instances)))


async def delete_instance(request: Request) -> Response:
    svc = _svc(request)
    return _deleted(await svc.run(svc.replica.delete_instance_info, request.path_params["host"],
                                  request.path_params["instance"]))


def _route(path: str, endpoint: Callable[[Request], Awaitable[Response]], methods: list[str]) -> Route:
    """A route whose handler runs only if every path parameter is a name and every query parameter is one the
    path takes (``_QUERY``)."""

    @functools.wraps(endpoint)
    async def checked(request: Request) -> Response:
        for name, value in request.path_params.items():
            _check_name(name, value)
        _query(request)
        return await endpoint(request)

    return Route(path, checked, methods=methods)


ROUTES = [
    _route("/", version_document, methods=["GET"]),
    _route("/health", health, methods=["GET"]),
    _route("/metrics", metrics, methods=["GET"]),
    _route("/openapi.json", openapi_document, methods=["GET"]),
    _route("/v1/resource-stats", report, methods=["POST"]),
    _route("/v1/resource-stats/batch", report_batch, methods=["POST"]),
    _route("/v1/hosts", list_hosts, methods=["GET"]),
    _route("/v1/hosts/{host}", show_host, methods=["GET"]),
    _route("/v1/hosts/{host}", update_host, methods=["PATCH"]),
    _route("/v1/hosts/{host}", delete_host, methods=["DELETE"]),
    _route("/v1/aggregates", list_aggregates, methods=["GET"]),
    _route("/v1/aggregates/{id}", show_aggregate, methods=["GET"]),
    _route("/v1/aggregates/{id}", put_aggregate, methods=["PUT"]),
    _route("/v1/aggregates/{id}", delete_aggregate, methods=["DELETE"]),
    _route("/v1/select_destinations", select_destinations, methods=["POST"]),
    _route("/v1/candidates", candidates, methods=["POST"]),
    _route("/v1/capacity", capacity, methods=["POST"]),
    _route("/v1/overview", overview, methods=["GET"]),
    _route("/v1/allocations", list_allocations, methods=["GET"]),
    _route("/v1/allocations/{consumer}", show_allocation, methods=["GET"]),
    _route("/v1/allocations/{consumer}", release, methods=["DELETE"]),
    _route("/v1/migrations/{migration}/confirm", confirm_move, methods=["POST"]),
    _route("/v1/migrations/{migration}/revert", revert_move, methods=["POST"]),
    _route("/v1/instances/{host}", update_instances, methods=["POST", "PUT"]),
    _route("/v1/instances/{host}/{instance}", delete_instance, methods=["DELETE"]),
]


# ------------------------------------------------------------------------------------- the live view

UI = "/ui"  # the page and its assets: no token (they hold no data); the page asks /v1/overview with one
# (pyproject's package-data ships these kinds of files)
_UI_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
             ".css": "text/css; charset=utf-8"}
# Nothing inline, nothing from elsewhere: the page runs only its own files and talks only to this service.
_UI_HEADERS = {"Content-Security-Policy": "default-src 'self'; img-src 'self' data:; base-uri 'none'; "
                                          "form-action 'none'; frame-ancestors 'none'",
               "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "Cache-Control": "no-cache"}


def _ui_assets() -> dict[str, tuple[bytes, str]]:
    """The page's files as the package ships them (src/gantt/service/ui), read once."""
    folder = importlib.resources.files("gantt.service") / "ui"
    assets = {}
    for item in folder.iterdir():
        suffix = os.path.splitext(item.name)[1]
        if item.is_file() and suffix in _UI_TYPES:
            assets[item.name] = (item.read_bytes(), _UI_TYPES[suffix])
    return assets


async def ui_asset(request: Request) -> Response:
    if request.url.path == UI:
        # The page names its files and the API relative to itself (ui/ → ui/app.js, ../v1/overview), so that it
        # works behind a proxy that serves Gantt under a path prefix; that needs the address to end in "/". The
        # redirect is relative too (a proxy's prefix is not ours to know); the browser keeps a #token= fragment.
        return Response(status_code=308, headers={"Location": "ui/", **_UI_HEADERS})
    name = request.path_params.get("asset", "index.html")
    found = request.app.state.ui.get(name)
    if found is None:
        raise NotFound(f"no such path {request.url.path}")
    body, media_type = found
    return Response(body, media_type=media_type, headers=_UI_HEADERS)


PAGES = [
    _route(UI, ui_asset, methods=["GET"]),
    _route(UI + "/", ui_asset, methods=["GET"]),
    _route(UI + "/{asset}", ui_asset, methods=["GET"]),
]


# ----------------------------------------------------------------------------------- errors and guard


async def _gantt_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, GanttError)
    if exc.status >= 500:
        log.warning("%s %s: %s", request.method, request.url.path, exc)
    return _problem(exc)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 405:
        # Starlette's Allow names the methods of the first route that matched the path only; a path served by
        # several routes (GET and DELETE /v1/hosts/{host}) must list them all (RFC 9110 §15.5.6).
        allowed = _allowed_methods(request.scope)
        return _problem(MethodNotAllowed(f"{request.method} is not allowed on {request.url.path}"),
                        headers={**(exc.headers or {}), "Allow": ", ".join(allowed)})
    if exc.status_code == 404:
        return _problem(NotFound(f"no such path {request.url.path}"))
    error = GanttError(exc.detail)
    error.status = exc.status_code
    error.title = exc.detail
    return _problem(error, headers=dict(exc.headers or {}))


def _allowed_methods(scope: Scope) -> list[str]:
    methods: set[str] = set()
    for route in (*ROUTES, *PAGES):
        match, _ = route.matches(scope)
        if match is not Match.NONE and route.methods:
            methods |= route.methods
    return sorted(methods)


async def _unexpected(request: Request, exc: Exception) -> Response:
    # Starlette's outermost layer answers with this, then re-raises to Guard, which logs and counts it.
    return _problem(GanttError("unexpected server error; it has been logged"))


_OPEN = ("/", "/health")  # version discovery and the load balancer's probe need no token
_UNREAD = frozenset({"/metrics", "/v1/resource-stats"})  # served without catching up first (Service.fresh)


def _open(path: str) -> bool:
    return path in _OPEN or path == UI or path.startswith(UI + "/")


def placement_paths(mount: str) -> Callable[[str], bool]:
    """Which paths are the Placement face's (``[gantt] placement_mount``): those under the mount, or, mounted at
    the root, every path but Gantt's own (GANTT_PATHS), "/" included (Placement's version document there)."""
    if mount == "/":
        return lambda path: path.split("/", 2)[1] not in GANTT_PATHS
    return lambda path: path == mount or path.startswith(mount + "/")


# The routes that carry a cloud's load (host reports, placements, releases). Profiled under load, Starlette's
# layers around one of these requests (two middlewares, a regex match against every route in order, two
# exception-handling wrappers) were about a third of the event loop's CPU per host report.
HOT = frozenset({("POST", "/v1/resource-stats"), ("POST", "/v1/select_destinations"),
                 ("DELETE", "/v1/allocations/{consumer}")})


class HotRoutes:
    """The hot routes served without Starlette's middleware and router: the same route objects match them, the
    same endpoints (with their checks) answer, and a refusal is rendered by the same ``_gantt_error``, so bodies
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
            return await route.endpoint(request)  # type: ignore[no-any-return]
        except GanttError as exc:
            return await _gantt_error(request, exc)


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
    return getattr(default, "lane", None)


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
        self.lane: Lane | None = None  # set by create_app where the hot routes are served

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
        if self._expected is not None and not _open(scope["path"]) and not self.is_placement(scope["path"]) \
                and not authorized(scope, self._expected):
            return _problem(Unauthorized("a valid bearer token is required"), headers={"WWW-Authenticate": "Bearer"})
        return None

    async def stale(self, scope: Scope) -> Response | None:
        """The refusal of a request this worker cannot bring its replica up to date for (``Service.fresh``), in
        the error format of the face it asked."""
        error = await self.service.fresh(scope)
        if error is None:
            return None
        if error.status >= 500:
            log.warning("%s %s: %s", scope.get("method"), scope.get("path"), error)
        if self.is_placement(scope["path"]):
            status, headers, body = refusal(error.status, str(error.message), scope["headers"])
            return Response(body, status_code=status, headers={k.decode(): v.decode() for k, v in headers
                                                               if k != b"x-openstack-request-id"})  # Guard's
        return _problem(error)

    def failed(self, scope: Scope, request_id: str) -> Response:
        """An exception that reached this layer (a bug): logged, counted, and answered with a 500 problem."""
        self.service.metrics.unhandled += 1
        log.exception("unexpected error on %s %s (%s)", scope.get("method"), scope.get("path"), request_id)
        return _problem(GanttError("unexpected server error; it has been logged"))

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


# ---------------------------------------------------------------------------------------------- factory


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
        GanttError: _gantt_error, HTTPException: _http_error, Exception: _unexpected}
    app = Starlette(routes=[*ROUTES, *PAGES], exception_handlers=handlers, lifespan=lifespan)
    # No 307 to the path with(out) a slash: Starlette builds its Location from the request's Host header.
    app.router.redirect_slashes = False
    app.state.service = service
    app.state.openapi = openapi()
    app.state.ui = _ui_assets()
    mount = config.gantt.placement_mount
    placement = create_placement_app(lambda: service.replica, service.run, token, "" if mount == "/" else mount,
                                     policy=Policy.of(config.oslo_policy), cors=config.cors,
                                     max_body=service.max_body)
    is_placement = placement_paths(mount)
    hot = HotRoutes(app, ROUTES) if hot_routes else None
    guard = Guard(Dispatch(app, placement, is_placement, hot), service, is_placement)
    if hot is not None and not any(is_placement(path) for _, path in HOT):
        guard.lane = Lane(guard, hot)
    return guard


def app_from_env() -> ASGIApp:
    """uvicorn factory (``--factory gantt.service.app:app_from_env``): GANTT_STORE, GANTT_CONFIG, GANTT_TOKEN."""
    config = load_config(os.environ.get("GANTT_CONFIG") or None)
    if config.namespace:  # this app serves the default namespace only: refuse rather than drop the others
        raise GanttError("the configuration declares namespaces: use --factory "
                         "gantt.service.namespaces:app_from_env, which serves them all")
    return create_app(config=config, store=os.environ.get("GANTT_STORE") or config.gantt.store)
