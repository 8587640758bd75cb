"""The writers of one SQLite file, across processes, queue on a side file's ``flock`` before SQLite's own lock.

SQLite's write lock has no queue: a writer that finds it taken can only retry ``BEGIN IMMEDIATE`` after a sleep
(``sqlite_file.begin_immediate``: every 0.2-1 ms), and with two busy workers most groups began with such a wait,
the retries and their wake-ups costing CPU and the sleep after a release costing time. A blocking ``flock`` on
``<db>-wlock`` instead sleeps in the kernel and wakes as the holder lets go (measured in process, the writer's CPU
per claim fell by a fifth, per release by a third: bench/RESULTS-mixed.md).

A blocking ``flock`` has no timeout, and a holder that stops (SIGSTOP, a debugger) must not hang the other
writers for good: they must fail after ``busy_timeout`` as they do on SQLite's lock (503s, /health degraded).
So the lock is tried without blocking first (uncontended: no cost), and only when it is held does a waiter thread
take the blocking call, the writer waiting for it at most ``busy_timeout``. A waiter that gets the lock after its
writer gave up lets it go at once (or hands it to the writer that asks next). ``flock`` belongs to the open file,
not the thread: the lock the waiter took is the writer's.

The side file only orders the writers that use it: SQLite's lock is still taken after it and still decides
(a writer without it, such as the ``sqlite3`` shell, is waited for in ``begin_immediate`` as before).
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class WriteLock:
    """``flock`` on ``path``, taken within a timeout. One per store object (its writer thread); not reentrant."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None
        self._opened = False
        self._cond = threading.Condition()
        self._waiter: threading.Thread | None = None  # started at the first wait, then kept: one per store
        self._wanted = False  # the writer waits for the waiter to take the lock
        self._handed = False  # the waiter took it for the writer waiting
        self._closing = False
        self.waits = 0  # acquisitions that found the lock held (for tests and benchmarks)

    def _file(self) -> int | None:
        if not self._opened:
            self._opened = True
            try:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except OSError as exc:  # a read-only directory: SQLite's lock alone, as before
                log.warning("sqlite store: no write-lock file %s (%s); writers retry SQLite's lock", self.path, exc)
        return self._fd

    def acquire(self, timeout: float, on_wait: Callable[[], None] | None = None) -> bool:
        """Take the lock within ``timeout`` seconds; False if another holder kept it that long. True also when there
        is no lock file (nothing to order: SQLite's lock decides alone). ``on_wait``: called once, as a wait
        begins."""
        fd = self._file()
        if fd is None:
            return True
        with self._cond:  # (the waiter lets go of a lock it took under it: never of one this call just took)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                pass
            self.waits += 1
            self._wanted = True
            if self._waiter is None:
                self._waiter = threading.Thread(target=self._serve, args=(fd,), name="gantt-sqlite-wlock",
                                                daemon=True)
                self._waiter.start()
            self._cond.notify_all()
            if on_wait is not None:
                on_wait()
            self._cond.wait_for(lambda: self._handed, timeout)
            self._wanted = False
            if self._handed:  # (possibly just as the wait timed out)
                self._handed = False
                return True
            return False

    def _serve(self, fd: int) -> None:
        """The waiter: the blocking ``flock`` for each writer that asks, handed over if it still waits."""
        try:
            while True:
                with self._cond:
                    self._cond.wait_for(lambda: self._wanted or self._closing)
                    if self._closing:
                        return
                fcntl.flock(fd, fcntl.LOCK_EX)  # a stopped holder keeps this thread here, never the writer
                with self._cond:
                    if self._wanted and not self._closing:
                        self._handed = True
                        self._cond.notify_all()
                        continue
                    fcntl.flock(fd, fcntl.LOCK_UN)  # its writer gave up meanwhile, and none waits now
        except OSError as exc:  # not expected: the descriptor stays open while this runs
            log.warning("sqlite store: waiting for %s: %s", self.path, exc)
        finally:
            with self._cond:
                self._waiter = None
                closed = self._closing
            if closed:
                os.close(fd)  # ``close`` left the descriptor to this thread

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        """After the writer's last group. A waiter still blocked on a stopped holder keeps the descriptor until it
        returns (a daemon thread: it does not keep the process alive)."""
        with self._cond:
            fd, self._fd = self._fd, None
            self._closing = True
            waiting = self._waiter is not None
            self._cond.notify_all()
        if fd is not None and not waiting:
            os.close(fd)
