"""The truth, the change feed, and each scheduler instance's replica.

Model (design §1 with a store in the middle):

- **The truth** is one authoritative HostTable: what the hosts really have. It plays the store.
- **The feed** is the truth's change log with virtual timestamps: every allocation and release (captured by a
  ``HostTable.subscribe`` listener, so no path is missed), every host report and every heartbeat.
- **A replica** per scheduler instance replays the feed *lazily*: just before its scheduler decides at time ``t``
  it applies every entry stamped ``<= t - lag``. That is the configured staleness, exactly, and it batches the sync
  (entries are applied in one go per decision, not pushed to every replica on every change), so a replica costs
  one dictionary operation plus a few row updates per change, never a copy of 100,000 rows.
- **A gantt claim** (``ClaimThroughTable.claim``) is a compare-and-set on the truth, then applied to the replica.
  On a conflict the replica refreshes that node from the truth and raises ``ClaimRejected``: the real engine's
  ``_place_one`` then moves to its next candidate, as the design asks. (The engine's commit hook would redo the
  whole ranking per conflict; claiming through keeps a conflict as cheap as one CAS.)
- **Nova classic** replicas are plain HostTables: the engine's local claim is Nova's ``consume_from_request`` on
  the scheduler's in-memory view; the truth learns of the placement only when the compute host builds it.

Heartbeats are vectorized: a heartbeat is a report naming nothing (``HostReport(host)``), whose only effect on a
HostTable is ``updated_at = now`` and a usage-version bump. At 100,000 hosts reporting every minute that is
1,700 reports/s per table; going through ``HostTable.update`` one by one on the truth and every replica would
cost more than the decisions, so ``heartbeat`` uses ``HostTable.heartbeat``, which writes those two columns for a
batch of rows in one step.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gantt.compute.pci import PciRequest
from gantt.compute.scheduler import Scheduler
from gantt.compute.state import ClaimRejected, HostTable
from gantt.model import Allocation, HostReport, NodeKey, NotFound
from gantt.sim.cloud import CloudLayout
from gantt.sim.workload import Request


@dataclass(slots=True)
class SchedulerInstance:
    """One scheduler instance: its Scheduler over its replica table, how far it has read the feed, and the
    requests waiting for it."""

    index: int
    lag: float
    scheduler: Scheduler
    table: HostTable
    cursor: int = 0
    alive: bool = True
    busy: bool = False
    queue: deque[Request] = field(default_factory=deque)
    decisions: int = 0


def load_snapshot(table: HostTable, truth: HostTable, layout: CloudLayout, fenced: list[HostReport]) -> None:
    """What a (re)starting scheduler instance loads into its empty ``table``: a snapshot of the store (the hosts,
    every allocation, the fenced hosts' reports, each host's last heartbeat). It then follows the feed from its
    current end."""
    layout.populate(table)
    for allocation in truth.allocations():
        HostTable.put_allocation(table, allocation)
    for report in fenced:
        table.update(report)
    live = truth.col("updated_at")
    for value in np.unique(live):
        heartbeat(table, np.flatnonzero(live == value), float(value))


# Feed entry kinds
ALLOC, RELEASE, REPORT, HEARTBEAT = 0, 1, 2, 3


def heartbeat(table: HostTable, rows: np.ndarray, now: float) -> None:
    """``HostTable.update(HostReport(host))`` for many rows at once (see the module docstring)."""
    table.heartbeat(rows, now)


class Feed:
    """The truth's change log; replicas keep a cursor into it."""

    def __init__(self, truth: HostTable, clock: Any) -> None:
        self.entries: list[tuple[float, int, Any]] = []
        self.base = 0  # absolute index of entries[0] (the head is trimmed once every replica has read it)
        self.clock = clock
        truth.subscribe(self._on_change)

    def _on_change(self, kind: str, obj: Any) -> None:
        if kind == "allocation":
            self.entries.append((self.clock(), ALLOC, obj))
        elif kind == "allocation_deleted":
            self.entries.append((self.clock(), RELEASE, obj))

    def report(self, report: HostReport) -> None:
        self.entries.append((self.clock(), REPORT, report))

    def heartbeat(self, rows: np.ndarray) -> None:
        self.entries.append((self.clock(), HEARTBEAT, rows))

    @property
    def end(self) -> int:
        return self.base + len(self.entries)

    def trim(self, upto: int) -> None:
        drop = upto - self.base
        if drop > 0:
            del self.entries[:drop]
            self.base = upto


def replay(table: HostTable, feed: Feed, cursor: int, until: float) -> int:
    """Apply feed entries stamped ``<= until`` from ``cursor``; returns the new cursor."""
    entries = feed.entries
    i = cursor - feed.base
    end = len(entries)
    put = HostTable.put_allocation
    drop = HostTable.release
    held = table.allocation
    while i < end:
        stamp, kind, obj = entries[i]
        if stamp > until:
            break
        if kind == ALLOC:
            put(table, obj)
        elif kind == RELEASE:
            mine = held(obj.consumer_uuid)
            # A refresh may have gone ahead of the feed; only drop what is still there and the same placement.
            if mine is not None and mine.host == obj.host and mine.nodename == obj.nodename:
                drop(table, obj.consumer_uuid)
        elif kind == HEARTBEAT:
            heartbeat(table, obj, stamp)
        else:
            table.update(obj, now=stamp)
        i += 1
    return feed.base + i


def refresh_node(replica: HostTable, truth: HostTable, key: NodeKey) -> None:
    """Make the replica's allocations on one node what the truth has now (after a conflict)."""
    theirs = truth.node_allocations(key)
    mine = replica.node_allocations(key)
    for consumer in mine - theirs:
        HostTable.release(replica, consumer)
    for consumer in theirs - mine:
        allocation = truth.allocation(consumer)
        assert allocation is not None
        HostTable.put_allocation(replica, allocation)


class ClaimThroughTable(HostTable):
    """A gantt scheduler's replica: the engine's claims go to the truth first (compare-and-set)."""

    def __init__(self, truth: HostTable, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.truth = truth
        self.conflicts = 0

    def claim(self, key: NodeKey, allocation: Allocation, *, limits: dict[str, float] | None = None,
              pci: Sequence[PciRequest] = (), pci_parts: bool = False) -> Allocation:
        held = self.allocation(allocation.consumer_uuid)
        if held is not None:
            return held
        try:
            # The truth checks room against what really is (and chooses the PCI devices); the limits (per-aggregate
            # ratios) travel with it.
            self.truth.claim(key, allocation, limits=limits, pci=pci, pci_parts=pci_parts)
        except ClaimRejected:
            self.conflicts += 1
            refresh_node(self, self.truth, key)
            raise
        # The truth committed it: record without a second check (our stale view must not veto it).
        self.put_allocation(allocation)
        return allocation

    def release(self, consumer_uuid: str) -> Allocation:
        """The engine's rollback (all-or-nothing multi-instance requests): undo on the truth as well."""
        allocation = super().release(consumer_uuid)
        with contextlib.suppress(NotFound):
            self.truth.release(consumer_uuid)
        return allocation
