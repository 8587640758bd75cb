"""The runtime behind the handlers (``Service``): the replica they share, the pool of handler threads, the decider
threads (``Decider``) and loops where placements are decided, the write and catch-up hand-offs, and the body
decoder.

Calls that decide or touch the store run in a thread pool: a decision is CPU-bound (numpy releases the GIL for
most of it) and a store commit waits on disk; running them off the event loop keeps other requests' I/O moving
and lets concurrent claims reach the store together, where a backend can commit them as one group.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hashlib
import logging
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

import msgspec
from starlette.requests import ClientDisconnect, Request

from gantt.config import Config
from gantt.model import MAX_INT64, GanttError, HostReport, HostStats, InvalidRequest, decode
from gantt.placement.facade import Placement
from gantt.replication.replica import (  # type: ignore[attr-defined]  # Batch: the store's, not re-exported
    LIVENESS_DELAY,
    Batch,
    Replica,
)
from gantt.service.metrics import Metrics, Shared
from gantt.service.queries import DIGITS
from gantt.service.schemas import PayloadTooLarge, UnsupportedMediaType

log = logging.getLogger("gantt.service")

T = TypeVar("T")


# A body with a run of 19 digits may carry an integer past int64. Found by mapping every digit to "9" and looking
# for 19 of them: a regex search for \d{19} cost ~11 us per host report (900 bytes), this ~1 us.
_ALL_NINES = bytes.maketrans(b"0123456789", b"9" * 10)
_NINETEEN = b"9" * 19


def _long_digits(raw: bytes) -> bool:
    return _NINETEEN in raw.translate(_ALL_NINES)


class Decider:
    """One thread with an event loop of its own, where placements too big to decide on the service's loop are
    decided (``Service.on_decider``, as ``Replica.perform`` asks): the claim steps run there as they would on the
    service's loop (the same driver, commits handed to the store's writer, a step asking for ``OFF_LOOP`` sent to
    the handler pool), and the answer goes back with one wake-up of the service's loop.

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

    async def drive(self, work: Coroutine[Any, Any, T]) -> T:
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
            task = self.loop.create_task(work)
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
    """What the handlers share: the replica, its Placement façade, the token, limits and counters; and the
    runtime a replica runs its operations with (``gantt.replication.driver.Runtime``: the handler threads, the
    deciders)."""

    def __init__(self, replica: Replica | None, config: Config, token: str | None, worker: int = 0,
                 metrics_dir: str | None = None) -> None:
        self._replica = replica
        self.config = config
        self.token = token
        self.max_body = config.gantt.max_body_bytes
        self.tuning = config.tuning  # the threads and deciders below (gantt.config.tuning)
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
        self._placement: Placement | None = None

    @property
    def replica(self) -> Replica:
        if self._replica is None:
            raise GanttError("the service is not started")
        return self._replica

    @property
    def placement(self) -> Placement:
        """The Placement façade over the replica: one per replica (it keeps the creates in flight), built beside it
        the first time it is asked for, and again when the replica is replaced (a namespace started anew)."""
        replica = self.replica
        placement = self._placement
        if placement is None or placement.replica is not replica:
            placement = self._placement = Placement(replica)
        return placement

    @property
    def loop_decision_rows(self) -> int:
        return self.tuning.loop_decision_rows

    @property
    def deciders(self) -> int:
        return self.tuning.deciders

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        # The loop's own executor hand-off, not anyio.to_thread: measured on 2 busy cores, anyio's costs 50 us of
        # CPU and ~200 us of wall time per call under 16 concurrent requests (its limiter, cancel scope and worker
        # queue), the executor's 15-30 us, and every write and decision takes one such hop.
        pool = self.pool
        if pool is None:
            with self._pool_lock:
                if self.pool is None:
                    self.pool = ThreadPoolExecutor(self.tuning.threads, thread_name_prefix="gantt-handler")
                pool = self.pool
        return await asyncio.get_running_loop().run_in_executor(pool, partial(fn, *args))

    async def on_decider(self, work: Coroutine[Any, Any, T]) -> T:
        """``work`` (a coroutine: a placement's steps and their loop driver) run on a decider's loop (``Decider``;
        ``[tuning] deciders`` of them, in turn), for tables too big to decide on this one."""
        deciders = self._deciders
        if not deciders:
            with self._pool_lock:
                if not self._deciders:
                    count = self.tuning.deciders
                    self._deciders = [Decider("gantt-decider" if count == 1 else f"gantt-decider-{i}")
                                      for i in range(count)]
                deciders = self._deciders
        self._turn = (self._turn + 1) % len(deciders)
        return await deciders[self._turn].drive(work)

    async def write(self, batch: Batch) -> int:
        """A write run by the replica (``Replica.perform``): where the store has a writer of its own (SQLite), the
        loop hands it the batch and waits, and the commit's changes are applied here. Profiled per host report,
        the hop to a handler thread and back was two of the four thread wake-ups and about a tenth of the
        server's CPU."""
        replica = self.replica
        return await replica.perform(replica.writing(batch), self)

    def heartbeat(self, report: HostReport, stats: HostStats | None = None,
                  body: bytes | None = None) -> HostStats | None:
        """``replica.heartbeat`` (a report that repeats its node's record, taken to be written later; the record's
        stats it repeats, else None), with the write of what it took due LIVENESS_DELAY after the first: one batch,
        on a handler thread, for all the reports repeated meanwhile, where each cost a commit hand-off, a catch-up
        and an apply on the loop."""
        repeated = self.replica.heartbeat(report, stats, body)
        if repeated is not None and self._liveness_timer is None:
            self._liveness_timer = asyncio.get_running_loop().call_later(LIVENESS_DELAY, self._liveness_due)
        return repeated

    def report_again(self, digest: bytes) -> bool:
        """A host report whose body is byte for byte one known to repeat its node's record (``replica.bodies``:
        taken the long way here, or learned from the feed), taken again as a repeat stamped now without decoding or
        comparing it, while its node's record still holds the very stats object it repeated (any write of the
        record since, but a touch, replaced it). False: the caller decodes it and takes the long way. Most reports
        of a real cloud repeat their host's last one exactly, and decoding, checking and comparing one (~900
        bytes, as nova-compute sends) was most of its cost here."""
        seen = self.replica.bodies.get(digest)
        if seen is None:
            return False
        again = copy.copy(seen)  # the one taken before may still wait in the liveness batch
        again.reported_at = self.replica.clock()
        return self.heartbeat(again, seen.stats, digest) is not None

    def remember(self, digest: bytes, report: HostReport, repeated: HostStats | None) -> None:
        """After the long way: ``report`` (body ``digest``) repeated the record's stats ``repeated``, or is to be
        written (None: the body its record was written from, if any, is forgotten; the write's change brings this
        one back, in every worker)."""
        key = (report.host, report.nodename)
        if repeated is not None:
            self.replica.bodies.keep(key, digest, report, repeated)
        else:
            self.replica.bodies.forget(key)

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

    async def fresh(self) -> GanttError | None:
        """Read your writes across processes (``--workers N``, or several services on one file): before a request
        is served, the replica catches up to every revision the store held when it arrived, so a write another
        worker acknowledged is seen here too. One indexed read of the store's head per request where the store
        can tell it locally (SQLite; ``Store.shared_head``), the feed read only when it moved; the error that
        stopped the catch-up, if any, which the request is answered with.

        ``Guard`` asks for it before every request but those that read nothing of the replica's (``guard._UNREAD``).
        Not for a host report (the hottest route): it writes a whole record and reads nothing back, and the store
        compares it with the record the store holds, not the replica's. Under two workers' writes the head's read
        costs ~45 us of CPU (each read transaction finds the WAL moved and reads its page again), ~3 % of a
        placement, but ~6 % of a report."""
        replica: Any = self._replica
        if replica is None:
            return None
        try:
            # Every change committed before now in one read (SQLite), where the head's read and then the feed's
            # were two read transactions, each finding the WAL moved under another worker's writes
            if isinstance(replica, Replica) and await replica.read_in(self.run):
                return None
            head = replica.behind()
            if head is not None:
                if isinstance(replica, Replica):  # in place where that is cheap, else on a handler thread
                    await replica.caught_up(self, head)
                else:
                    await self.run(replica.catch_up_to, head)
        except GanttError as exc:
            return exc
        return None

    async def sync(self) -> int:
        """``replica.sync()`` from the loop (``Replica.caught_up``: in place where it is cheap)."""
        return await self.replica.caught_up(self)

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
        """Read and decode a JSON body: 415 if it is not JSON, 413 if too big, 400 naming the bad field."""
        return decoded(await self.raw_body(request), type_)

    async def raw_body(self, request: Request) -> bytes:
        """Read a JSON body, not decoded: 415 if it is not JSON, 413 if too big.

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
        if media == b"application/json":  # as every client of the hot routes sends it: nothing to parse
            kind = "application/json"
        else:
            kind = media.decode("latin-1").split(";", 1)[0].strip().lower() if media is not None else ""
        if kind != "application/json" and not (kind.startswith("application/") and kind.endswith("+json")):
            raise UnsupportedMediaType(f"expected application/json, got {kind or 'no content type'}",
                                       field="content-type")
        if declared is not None:
            length = declared.decode("latin-1")
            if DIGITS.fullmatch(length) and int(length) > self.max_body:
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
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def decoded(raw: bytes, type_: type[T]) -> T:
    """A JSON body decoded as ``type_``: 400 naming the bad field."""
    value = decode(raw, type_)
    if _long_digits(raw):
        # Python ints are unbounded but no column or store is; only bodies with 19+ digit runs pay for this.
        _check_ints(msgspec.json.decode(raw), "$")
    return value


def body_digest(raw: bytes) -> bytes:
    """What ``Service.report_again`` knows a body by: 128 bits of BLAKE2b, so that no host can send a body taken
    for another's (a 64-bit hash could be made to collide); ~2 us for a host report."""
    return hashlib.blake2b(raw, digest_size=16).digest()


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
