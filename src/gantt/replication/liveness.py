"""Reports that repeat their node's record, acknowledged at once and written later, many in one batch.

``Replica.heartbeat`` takes a report here when nothing but its time moved (as for most reports of a real cloud);
``flush`` writes the pending ones as one batch of touches (``planner._plan_repeat``): each counts for its node's
liveness; its figures, those of the record the replica held, never replace a record the store has written since
(through another worker or server, before this report or after it: its answer went out first, so only the record
the store holds is sure to be no older). Until then every replica, this one too, shows the node as of its
previous report: later by at most ``replica.LIVENESS_DELAY`` plus the feed's delay. A process killed outright
loses up to LIVENESS_DELAY of them (their nodes look as old as their previous report until their next one).
"""

from __future__ import annotations

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
