"""Follower: what every in-memory replica of one store partition does to stay current with it.

A replica (compute's ``Replica``, a volume namespace's ``VolumeReplica``) builds its state from a snapshot
(``load``) and applies the partition's change feed from its ``revision`` on (``apply``); this base owns the rest,
the same for both: the follower thread and its back-off when the store is out, re-snapshotting when the feed was
compacted past our revision, ``sync`` up to the store's head, and the figures ``/health`` reads (lag, the store's
URL and last write error). ``revision`` is the feed's cursor: only ``apply`` (or a load) moves it.

A base class, not a mixin nor a held object: a replica *is* a follower of its partition (its ``sync``, ``lag`` and
``close`` are the replica's own, read by the service and the tests), and the contract is two abstract methods
(``load``, ``apply``) and two hooks, which the follower thread calls back; nothing else is borrowed either way.
"""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from typing import Any, Self

from gantt.model import StoreUnavailable, WriteFailure
from gantt.store.base import Change, Compacted, Store
from gantt.store.urls import redact_url

log = logging.getLogger(__name__)


class Follower(ABC):
    FEED_THREAD = "gantt-feed"  # the follower thread's name, as py-spy and faulthandler show it

    def __init__(self, store: Store, clock: Callable[[], float]) -> None:
        self.store = store
        self.clock = clock
        self.revision = 0
        # time.monotonic() of the last successful read of the feed: a step of the wall clock is no lag (/health)
        self.last_sync = 0.0
        self.feed_errors = 0
        self.resyncs = 0
        self._stop = threading.Event()
        self._follower: threading.Thread | None = None
        self._owns_store = False  # set by start_owning(): close() then closes the store too

    # What each replica defines: its state from a snapshot, and the feed's changes applied to it.

    @abstractmethod
    def load(self) -> None:
        """(Re)build the state from ``store.snapshot()`` and set ``revision`` to the snapshot's."""

    @abstractmethod
    def apply(self, changes: list[Change], *, since: int | None = None) -> None:
        """``since``: the cursor the feed was read from. A reload that moved the cursor back meanwhile (its snapshot
        is older than what had been applied to the table it replaced) leaves a gap before these changes: they are
        dropped, and the next read starts at the cursor."""

    def _before_read(self) -> None:
        """Each round of the follower thread, before it reads the feed (a replica's own upkeep; none here)."""
        return None

    def _after_read(self) -> None:
        """Each round of the follower thread, after it applied what the feed had (none here)."""
        return None

    # ------------------------------------------------------------------------------------------ lifecycle

    def start(self, *, follow: bool = True) -> Self:
        self.load()
        if follow:
            self._follower = threading.Thread(target=self._follow, name=self.FEED_THREAD, daemon=True)
            self._follower.start()
        return self

    def start_owning(self, *, follow: bool = True) -> Self:
        """``start()`` a replica that owns its store from here on (``close()`` closes it too); a replica that
        fails to start closes the store at once, so an ``open()`` that raises leaks no connection."""
        try:
            self._owns_store = True
            return self.start(follow=follow)
        except BaseException:
            self.store.close()
            raise

    def stop(self) -> None:
        self._stop.set()
        if self._follower is not None:
            self._follower.join(timeout=5)

    def close(self) -> None:
        """Stop following the feed; close the store too if ``open()`` opened it."""
        self.stop()
        if self._owns_store:
            self.store.close()

    def _follow(self) -> None:
        backoff = 0.05
        while not self._stop.is_set():
            try:
                self._before_read()
                self.catch_up(timeout=0.5)
                self._after_read()
                backoff = 0.05
            except Exception as exc:  # the feed must survive store outages; it resumes from self.revision
                self.feed_errors += 1
                log.warning("%s change feed: %s; retrying in %.2fs", self.store.namespace, exc, backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 2.0)

    # ------------------------------------------------------------------------------------------ the feed

    def catch_up(self, timeout: float = 0.0, head: int | None = None) -> int:
        """Apply whatever the feed has beyond our revision (waiting up to ``timeout``); returns how many.
        ``head``: a revision known to be committed (``Store.changes``), which spares the store reading its own."""
        since = self.revision
        try:
            changes = self.store.changes(since, timeout=timeout) if head is None \
                else self.store.changes(since, timeout=timeout, head=head)
        except Compacted:
            log.warning("%s change feed compacted past revision %d: re-snapshotting", self.store.namespace,
                        self.revision)
            self.resyncs += 1
            self.load()
            return 0
        self.apply(changes, since=since)
        self.last_sync = time.monotonic()
        return len(changes)

    def sync(self) -> int:
        """Apply the feed up to every change committed before this call, by any instance; returns the revision.
        (``catch_up`` applies what the feed has delivered so far, which on etcd may lag a commit by a moment.)"""
        self._catch_up_to(self.store.barrier())
        return self.revision

    def behind(self) -> int | None:
        """The store's head revision if it is past this replica's (another process wrote since), where the store
        can tell by a cheap local read (``Store.shared_head``); else None. One indexed read when nothing moved."""
        head = self.store.shared_head()
        return head if head is not None and head > self.revision else None

    def read_now(self) -> tuple[int, list[Change]] | None:
        """(the cursor, every change committed after it by any process) in one local read of the store
        (``Store.shared_changes``), for ``apply_read``; None where the store has no such read, more follow than
        one read takes, or the feed was compacted past the cursor: then ``behind`` and ``catch_up_to`` (which
        re-snapshots)."""
        since = self.revision
        try:
            changes = self.store.shared_changes(since)
        except Compacted:
            return None
        return None if changes is None else (since, changes)

    def apply_read(self, since: int, changes: list[Change]) -> None:
        """Apply what ``read_now`` read from ``since`` (nothing when the cursor has moved past it meanwhile)."""
        if changes:
            self.apply(changes, since=since)
        self.last_sync = time.monotonic()

    async def read_in(self, offload: Callable[..., Awaitable[Any]]) -> bool:
        """A request's catch-up from the running loop in one read of the store (``read_now``), applied here where
        no other thread holds the state's lock, else on a handler thread (``offload``) rather than stall the loop
        behind the feed; False where the store has no such read (the caller then reads its head and catches up
        to it)."""
        read = self.read_now()
        if read is None:
            return False
        if self._uncontended():
            self.apply_read(*read)
        else:
            await offload(self.apply_read, *read)
        return True

    def _uncontended(self) -> bool:
        """Whether no other thread holds the state's lock now (a replica with a lock says; none here)."""
        return True

    def catch_up_to(self, revision: int, timeout: float = 5.0) -> None:
        """Apply the feed up to ``revision`` (``behind``'s answer): StoreUnavailable if it cannot within
        ``timeout``."""
        self._catch_up_to(revision, timeout)

    def _catch_up_to(self, revision: int, timeout: float = 5.0) -> None:
        """Apply the feed until it has reached ``revision``; StoreUnavailable if it cannot within ``timeout``."""
        deadline = time.monotonic() + timeout
        while self.revision < revision:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise StoreUnavailable(f"change feed did not reach revision {revision} within {timeout:.0f}s")
            # ``revision`` is committed (a head read, a write's): the store need not read its head again
            self.catch_up(timeout=min(remaining, 0.5), head=revision)

    # ---------------------------------------------------------------------------------------- for /health

    @property
    def url(self) -> str:
        """The store's URL, credentials hidden (it goes to logs and ``/health``)."""
        return redact_url(self.store.url)

    @property
    def last_write_error(self) -> WriteFailure | None:
        """The last write the store could not make, until a later one succeeds (``/health``)."""
        return self.store.last_write_error

    @property
    def lag(self) -> float:
        """Seconds since the change feed was last read."""
        return max(0.0, time.monotonic() - self.last_sync)
