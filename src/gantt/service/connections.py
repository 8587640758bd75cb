"""What one worker of ``gantt serve`` holds over all its connections, and how it shares them with the others: the
request bodies in progress (``Budget``, within ``[tuning] body_buffer_bytes``) and its part of the keep-alive
connections among ``--workers N`` (``Spread``). The HTTP protocol (``gantt.service.protocol``) counts with them."""

from __future__ import annotations

import mmap
import os
import struct
import time

_SLOT = struct.Struct("=qq")  # a worker's pid (0: not serving) and its open connections, minus those leaving


class Spread:
    """Keeps ``gantt serve --workers N``'s keep-alive connections evenly shared between the workers.

    Whichever way the kernel hands out connections (a shared listening socket: the first worker to call accept
    takes every connection waiting; SO_REUSEPORT: a hash of the client's address), a few long-lived clients can
    all land on one worker. Measured with 32 connections and 2 workers on a shared socket: splits of 32/0 and
    25/7, so one core decided while the other idled, and the same code placed 480-1,150 per s run to run. Each
    worker publishes how many connections it holds in a small file shared by the workers (one slot each, written
    by its owner only); a worker holding two or more than the emptiest live one answers the next request on one
    of its connections with ``Connection: close``, a standard HTTP/1.1 ending that clients follow by reconnecting,
    and the new connection lands on a worker the kernel picks. A run of connections moved that way converges to
    an even split: every move lowers the gap, and none happens once it is below two.
    """

    LIVENESS = 1.0  # seconds a peer's pid is believed alive between checks

    def __init__(self, path: str, index: int, workers: int) -> None:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            size = workers * _SLOT.size
            if os.fstat(fd).st_size < size:
                os.ftruncate(fd, size)  # every worker asks for the same size: whoever comes first makes it
            self._map = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        self.index = index
        self.workers = workers
        self.pid = 0
        self.open = 0
        self.leaving = 0
        self._alive: dict[int, float] = {}  # peer pid -> monotonic time it was last seen alive

    def serving(self) -> None:
        """Listening from now on: peers count this worker (and may send it connections) from here."""
        self.pid = os.getpid()
        self._publish()

    def stopped(self) -> None:
        self.pid = 0
        self._publish()

    def opened(self) -> None:
        self.open += 1
        self._publish()

    def closed(self, leaving: bool) -> None:
        self.open -= 1
        if leaving:
            self.leaving -= 1
        self._publish()

    def should_leave(self) -> bool:
        """Whether the connection now answering a request should close after it (and counts as gone from here)."""
        mine = self.open - self.leaving
        fewest = None
        for i in range(self.workers):
            if i == self.index:
                continue
            pid, count = _SLOT.unpack_from(self._map, i * _SLOT.size)
            if pid and (fewest is None or count < fewest) and mine - count >= 2 and self._is_alive(pid):
                fewest = count
        if fewest is None:
            return False
        self.leaving += 1
        self._publish()
        return True

    def _is_alive(self, pid: int) -> bool:
        # A worker killed without its clean stop leaves its slot behind until the supervisor's replacement writes
        # it again; connections sent its way would only come back here.
        now = time.monotonic()
        seen = self._alive.get(pid)
        if seen is not None and now - seen < self.LIVENESS:
            return True
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # exists, under another user: not ours to judge
        self._alive[pid] = now
        return True

    def _publish(self) -> None:
        _SLOT.pack_into(self._map, self.index * _SLOT.size, self.pid, self.open - self.leaving)


class Budget:
    """The request bodies one worker holds at once, over all its connections: a request's declared length (a
    chunked one's bytes as they come) is taken when its head is read, and given back when it is answered or its
    connection ends. A request that would pass ``limit`` is refused (503) before its body is read: many clients
    each sending a body within the limit cannot together pin the worker's memory."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0

    def take(self, size: int) -> bool:
        if size and self.held + size > self.limit:
            return False
        self.held += size
        return True

    def give(self, size: int) -> None:
        self.held -= size
