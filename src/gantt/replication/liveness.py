"""Reports that repeat their node's record, acknowledged at once and written later, many in one batch; and the
bodies known to repeat it (``Bodies``).

``Replica.heartbeat`` takes a report here when nothing but its time moved (as for most reports of a real cloud);
``flush`` writes the pending ones as one batch of touches (``planner._plan_repeat``): each counts for its node's
liveness; its figures, those of the record the replica held, never replace a record the store has written since
(through another worker or server, before this report or after it: its answer went out first, so only the record
the store holds is sure to be no older). Until then every replica, this one too, shows the node as of its
previous report: later by at most ``replica.LIVENESS_DELAY`` plus the feed's delay. A process killed outright
loses up to LIVENESS_DELAY of them (their nodes look as old as their previous report until their next one).
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable

from gantt.model import HostReport, HostStats, NodeKey
from gantt.store.base import Batch, RepeatOf, Store


class Liveness:
    """The reports taken and not yet written, by node (a later one of a node replaces the earlier)."""

    def __init__(self, store: Store, write: Callable[[Batch], int], touch_interval: Callable[[], float]) -> None:
        self._store = store
        self._write = write
        self._touch_interval = touch_interval
        self._pending: dict[NodeKey, tuple[HostReport, RepeatOf]] = {}
        self._lock = threading.Lock()  # taking the pending reports to write
        self._writing = threading.Lock()  # one batch of them written at a time, in order

    def take(self, report: HostReport, seen: RepeatOf, stats: HostStats) -> None:
        """``report`` repeats the record ``seen`` names, whose ``stats`` it is given to wait with: the decoded copy
        (its lists and dicts) goes now, rather than outlive the young collections until the flush."""
        report.stats = stats
        with self._lock:
            self._pending[(report.host, report.nodename)] = (report, seen)

    def drop(self, key: NodeKey) -> None:
        """The node's report is written now, and it says the node is alive: a taken one, older, is not needed."""
        with self._lock:
            self._pending.pop(key, None)

    def pending(self) -> int:
        return len(self._pending)

    def flush(self) -> int:
        """Write the reports taken, as one batch (as many as the store takes in one). Returns how many."""
        with self._writing:
            with self._lock:
                taken, self._pending = list(self._pending.values()), {}
            size = self._store.reports_per_batch or max(1, len(taken))
            for start in range(0, len(taken), size):
                part = taken[start:start + size]
                try:
                    self._write(Batch(reports=[report for report, _ in part], touch_interval=self._touch_interval(),
                                      existing_only=True, repeat_of=[seen for _, seen in part]))
                except Exception:
                    with self._lock:  # kept for the next attempt, unless the node reported since
                        for report, seen in taken[start:]:
                            self._pending.setdefault((report.host, report.nodename), (report, seen))
                    raise
            return len(taken)


class Bodies:
    """Host report bodies known, by their digest, to repeat their node's record: taken again without decoding.

    Most reports of a real cloud repeat their host's last one byte for byte. The service takes such a body from
    its digest (``Service.report_again``) while the node's record still holds the very stats object the body was
    found to repeat: any write of the record but a touch replaces that object, so an entry goes stale by itself
    and is never taken for a repeat of figures it does not repeat. A replica learns a body by taking it the long
    way (decoded and compared: a repeat, or written) in the worker it reached, and from the change feed in every
    worker: a flushed repeat's touch and a written report's record carry the digest of their body
    (``Change.digest``) where the store planned them from the record that body repeats. With ``gantt serve
    --workers 2`` and connections shared by many hosts, a host's next report reaches the other worker about half
    of the time; learned only where it was taken, it was decoded there again.

    One body per node (the last one learned), holding the record's stats. Read without a lock on the event loop;
    learned under one, from the loop and from the feed's thread."""

    def __init__(self) -> None:
        self._by_digest: dict[bytes, HostReport] = {}
        self._of_node: dict[NodeKey, bytes] = {}
        self._lock = threading.Lock()

    def get(self, digest: bytes) -> HostReport | None:
        """The node's report the body is (no time, no provider), holding the stats of the record it repeats."""
        return self._by_digest.get(digest)

    def __len__(self) -> int:
        return len(self._by_digest)

    def keep(self, key: NodeKey, digest: bytes, report: HostReport, stats: HostStats | None = None) -> None:
        """Body ``digest`` reports ``report`` (a copy is kept: no time, no provider), which repeats the record whose
        stats are ``stats`` (or its own)."""
        held = report.stats if stats is None else stats
        known = self._by_digest.get(digest)
        if known is not None and known.stats is held and self._of_node.get(key) == digest:
            return  # known already, for the same record's stats (a touch of a node whose body is known: most)
        kept = copy.copy(report)
        kept.reported_at = kept.provider = kept.held_over = None
        kept.stats = held  # the record's: a decoded copy of every host's stats would be ~KBs a host more
        with self._lock:
            old = self._of_node.get(key)
            if old is not None and old != digest:
                self._by_digest.pop(old, None)
            self._by_digest[digest] = kept
            self._of_node[key] = digest

    def forget(self, key: NodeKey) -> None:
        """The node's record was written from no known body, or deleted: its entry would only hold dead stats."""
        with self._lock:
            old = self._of_node.pop(key, None)
            if old is not None:
                self._by_digest.pop(old, None)
