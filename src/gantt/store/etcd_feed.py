"""The etcd store's change feed: one watch stream, buffered, resumed on the next member when one fails.

``EtcdStore.changes`` is ``WatchFeed.changes``. The stream starts lazily at the revision the caller asks for;
a reconnect resumes from the last revision seen, so no event is lost; a compacted start revision raises
``Compacted`` and the replica re-snapshots. Before answering, ``changes`` waits (bounded) until the stream
has delivered the newest revision the store knows exists (its own commits, the write that beat a claim), so a
catch-up after a conflict really returns the change that beat us.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc
from aetcd.rpc import rpc_pb2 as pb
from aetcd.rpc import rpc_pb2_grpc as rpc

from gantt.store.base import Change, Compacted
from gantt.store.etcd_keys import Keys

log = logging.getLogger("gantt.store.etcd")

LEADER = (("hasleader", "true"),)  # etcd refuses at once when the member has no leader, instead of blocking


class FutureRevision(Exception):
    """A read at a revision etcd has not reached yet."""


class _Reset(Exception):
    """This stream was replaced (restart at another revision, compaction, close): its thread ends."""


class _StreamEnded(Exception):
    """etcd canceled the watch (e.g. the member lost its leader): reconnect elsewhere."""


class WatchFeed:
    """The store's plumbing comes in as callables, so the feed knows nothing of how calls fail over."""

    def __init__(self, keys: Keys, endpoints: list[str], *, channel: Callable[[int], grpc.Channel],
                 call: Callable[[str, Any], Any], count: Callable[..., None], known: Callable[[], int],
                 current: Callable[[], int], history: int) -> None:
        self._keys, self._endpoints = keys, endpoints
        self._channel, self._call, self._count = channel, call, count
        self._known, self._current = known, current
        self._history = history
        self._closed = False
        self._cond = threading.Condition()
        self._gen = 0
        self._thread: threading.Thread | None = None
        self._stream: Any = None
        self._requests: queue.SimpleQueue[Any] | None = None
        self._base = 0  # every change with revision > base (and <= head) is in the buffer
        self._head = 0
        self._revs: list[int] = []
        self._buf: list[Change] = []
        self._compacted: int | None = None
        self._connected = False

    def changes(self, since: int, timeout: float = 1.0) -> list[Change]:
        target = self._known()
        now = time.monotonic()
        deadline = now + max(timeout, 0.0)
        # Wait for the stream to reach what etcd already told us exists, so a catch-up after a conflict sees the
        # change that beat us; bounded, so an outage cannot hold the caller for long.
        barrier = now + max(timeout, 1.0)
        with self._cond:
            restart = (self._thread is None or since < self._base
                       or (self._compacted is not None and since >= self._compacted - 1))
        if restart:
            # etcd reports a compacted start revision only ~100 ms after the watch is created: ask first, so that
            # changes(old, timeout=0) raises Compacted at once instead of returning an empty list.
            with contextlib.suppress(FutureRevision):
                self._call("Range", pb.RangeRequest(key=self._keys.root, count_only=True, revision=since + 1))
        with self._cond:
            if restart:
                if self._thread is not None and since < self._base:
                    self._count("resets")
                self._start(since)
            waited = False
            while True:
                if self._compacted is not None:
                    raise Compacted(f"revision {since} is compacted (etcd compacted up to "
                                    f"{self._compacted}); re-snapshot")
                now = time.monotonic()
                if self._head >= target:
                    if (self._revs and self._revs[-1] > since) or now >= deadline:
                        break
                    remaining = deadline - now
                else:
                    if now >= barrier:
                        break
                    waited = True
                    remaining = barrier - now
                self._cond.wait(remaining)
            if waited:
                self._count("barrier_waits")
            start = bisect.bisect_right(self._revs, since)
            return self._buf[start:]

    def close(self) -> None:
        self._closed = True
        with self._cond:
            self._stop_locked()
            self._cond.notify_all()

    def _start(self, since: int) -> None:
        """(Re)start the watch stream at ``since + 1`` with an empty buffer. Caller holds ``_cond``."""
        self._stop_locked()
        self._gen += 1
        self._base = self._head = since
        self._revs = []
        self._buf = []
        self._compacted = None
        self._connected = False
        thread = threading.Thread(target=self._loop, args=(self._gen,), name="gantt-etcd-watch", daemon=True)
        self._thread = thread
        thread.start()

    def _stop_locked(self) -> None:
        self._gen += 1
        stream, requests = self._stream, self._requests
        self._stream = self._requests = None
        if requests is not None:
            requests.put(None)
        if stream is not None:
            with contextlib.suppress(Exception):
                stream.cancel()
        self._thread = None

    def _loop(self, gen: int) -> None:
        backoff = 0.05
        i = self._current()
        while not self._closed:
            with self._cond:
                if gen != self._gen:
                    return
                requests: queue.SimpleQueue[Any] = queue.SimpleQueue()
                # No prev_kv: etcd would read every event's old value from its backend, for every watcher (with
                # a second instance watching, the leader's CPU per claim doubled), and a claim's keys are new. A
                # release or a move without its old value keeps its txn's usage changes instead (Keys.changes),
                # which name the nodes it left; the replica finds the rest in its table.
                requests.put(pb.WatchRequest(create_request=pb.WatchCreateRequest(
                    key=self._keys.root, range_end=self._keys.end, start_revision=self._head + 1)))
                self._requests = requests
                stream = rpc.WatchStub(self._channel(i)).Watch(_drain(requests), metadata=LEADER)
                self._stream = stream
            try:
                self._consume(gen, stream)
                reason = "stream closed"
            except _Reset:
                return
            except grpc.RpcError as exc:
                reason = f"{exc.code().name} {exc.details()}"
            except _StreamEnded as exc:
                reason = str(exc)
            except Exception:  # a bug or an undecodable value: log it, keep the feed alive
                log.exception("etcd watch on %s failed", self._endpoints[i])
                reason = "error"
            with self._cond:
                if gen != self._gen or self._closed:
                    return
                had_connected, self._connected = self._connected, False
            log.info("etcd watch on %s ended (%s); resuming from revision %d on the next member",
                     self._endpoints[i], reason, self._head + 1)
            self._count("watch_reconnects")
            i = (i + 1) % len(self._endpoints)
            # Right after a working stream broke, try the next member at once; back off while none answers.
            backoff = 0.05 if had_connected else min(backoff * 2, 1.0)
            time.sleep(backoff)

    def _consume(self, gen: int, stream: Iterator[Any]) -> None:
        for resp in stream:
            if resp.compact_revision:
                with self._cond:
                    if gen == self._gen:
                        self._compacted = resp.compact_revision
                        self._cond.notify_all()
                log.warning("etcd watch: revision %d is compacted", resp.compact_revision)
                raise _Reset
            if resp.canceled:  # e.g. the member lost its leader: the caller reconnects elsewhere
                raise _StreamEnded(f"watch canceled: {resp.cancel_reason}")
            if resp.created:
                with self._cond:
                    self._connected = True
                continue
            changes, last = self._keys.changes(resp.events)
            with self._cond:
                if gen != self._gen:
                    raise _Reset
                # Complete through the last event's revision: etcd sends a revision's events together. An
                # event-less response (progress) is not trusted: etcd 3.4 answers a progress request with the
                # current revision even while the watcher is still catching up (fixed in 3.4.24 / 3.5.8).
                if resp.events:
                    self._head = max(self._head, last)
                if changes:
                    self._buf.extend(changes)
                    self._revs.extend(c.revision for c in changes)
                    if len(self._buf) > self._history * 5 // 4:
                        self._trim()
                self._cond.notify_all()
            if changes:
                self._count("watch_events", len(changes))

    def _trim(self) -> None:
        """Keep about ``history`` changes, cutting at a revision boundary. Caller holds ``_cond``."""
        drop = len(self._buf) - self._history
        cut_rev = self._revs[drop - 1]
        cut = bisect.bisect_right(self._revs, cut_rev)
        del self._buf[:cut]
        del self._revs[:cut]
        self._base = cut_rev


def _drain(requests: queue.SimpleQueue[Any]) -> Iterator[Any]:
    """The watch stream's request side: the create request, then nothing until None ends the stream."""
    while True:
        item = requests.get()
        if item is None:
            return
        yield item
