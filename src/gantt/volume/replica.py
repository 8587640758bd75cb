"""VolumeReplica: a volume namespace's partition of the store followed in memory, as a ``PoolTable``.

The store holds Cinder's pools in its own envelope (the namespace contract): a pool is a node record
(``PoolReport.to_record``: host = Cinder's service host, node = the pool) and a volume's claim is an
``Allocation`` of ``VOLUME_GB`` on it, keyed by the volume id. This replica builds its table from a snapshot and
keeps it current from the namespace's change feed, as the compute replica does:

- a pool's report replaces the pool's figures; claims made before it was taken are then counted by the report
  (Cinder's rule: a capability report newer than a claim speaks for it), claims made since still consume on top
  (a report stamped before a claim may commit after it: reports carry no expect). A report that repeats the
  pool's figures is a store *touch*, and a report all the same: it counts the claims made before it. The pool's
  figures are thus a function of its report and the claims' times alone, the same live and after a restart;
- an allocation consumes its size on its pool (allocated and provisioned GB up, free GB down), a release gives
  it back while no report has come since.

The volume façade (``gantt.volume.facade.Volumes``) holds one and makes its reports, claims and releases.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from gantt.config import VolumeOptions
from gantt.model import Allocation, InvalidRequest, NodeKey
from gantt.replication.follower import Follower
from gantt.store.base import Change, Snapshot, Store
from gantt.volume import capacity
from gantt.volume.model import PoolReport
from gantt.volume.scheduler import VolumeScheduler
from gantt.volume.table import PoolTable

log = logging.getLogger(__name__)

RESOURCE = "VOLUME_GB"


class VolumeReplica(Follower):
    FEED_THREAD = "gantt-volume-feed"

    def __init__(self, store: Store, options: VolumeOptions | None = None, *,
                 clock: Callable[[], float] = time.time) -> None:
        Follower.__init__(self, store, clock)
        self.options = options or VolumeOptions()
        self.scheduler = VolumeScheduler(self.options)
        self.lock = threading.RLock()  # the table, the allocations and the revisions move together under it
        self.table = PoolTable(self.options.max_over_subscription_ratio)
        self.allocations: dict[str, Allocation] = {}
        self.node_revisions: dict[NodeKey, int] = {}
        # the façade's counters (``counters``, /health): its placements, decisions and lost claims
        self.placements = 0
        self.decisions = 0
        self.claim_conflicts = 0
        self.skipped: list[str] = []  # records of the partition that are not volume pools (logged, left alone)

    # ------------------------------------------------------------------------------------------ lifecycle

    @classmethod
    def open(cls, store: Store, options: VolumeOptions | None = None, *, follow: bool = True) -> VolumeReplica:
        """A started replica of ``store`` (a namespace's Store), which it owns from here on."""
        try:
            replica = cls(store, options)
        except BaseException:
            store.close()
            raise
        return replica.start_owning(follow=follow)

    def load(self) -> None:
        snap = self.store.snapshot()
        table, allocations, skipped = build_table(snap, self.options)
        for line in skipped:
            log.warning("volume namespace %s: not a pool record, ignored: %s", self.store.namespace, line)
        with self.lock:
            self.table = table
            self.allocations = allocations
            self.node_revisions = {(nr.host, nr.node): nr.revision for nr in snap.node_revisions}
            self.revision = snap.revision
            self.skipped = skipped
        self.last_sync = time.monotonic()

    # --------------------------------------------------------------------------------------------- apply

    def apply(self, changes: list[Change], *, since: int | None = None) -> None:
        """A revision holds several changes (a backend's pools): the cursor moves once all of them are applied,
        so a revision is never taken for applied when only its first change was, nor seen half-applied.
        ``since``: see ``Follower.apply``."""
        with self.lock:
            if since is not None and since > self.revision:
                return
            applied = self.revision
            for change in changes:
                if change.revision <= applied:
                    continue  # applied already (a claim of ours, applied when it committed)
                self._apply_one(change)
            if changes and changes[-1].revision > self.revision:
                self.revision = changes[-1].revision

    def _bump(self, key: NodeKey, revision: int) -> None:
        if self.node_revisions.get(key, 0) < revision:
            self.node_revisions[key] = revision

    def _apply_one(self, change: Change) -> None:
        table, rev = self.table, change.revision
        if change.kind == "host" and change.host is not None:
            record = change.host
            self._bump((record.host, record.nodename), rev)
            try:
                table.apply(PoolReport.from_record(record))
            except InvalidRequest as exc:
                log.warning("volume namespace %s: not a pool record, ignored: %s", self.store.namespace, exc)
        elif change.kind == "touch" and change.node is not None and change.at is not None:
            # the pool reported its figures unchanged: claims made before are counted by them from now on
            table.touch(change.node[0], change.node[1], change.at)
        elif change.kind in ("host_deleted", "usage") and change.node is not None:
            self._bump(change.node, rev)
            if change.kind == "host_deleted":
                table.remove(*change.node)
        elif change.kind == "allocation" and change.allocation is not None:
            allocation = change.allocation
            self._bump((allocation.host, allocation.nodename), rev)
            self._held(allocation)
        elif change.kind == "allocation_deleted" and change.allocation is not None:
            consumer = change.allocation.consumer_uuid
            held = self.allocations.pop(consumer, None)
            if held is not None:
                self._bump((held.host, held.nodename), rev)
            table.release(consumer)
        # aggregates and instance lists say nothing about a pool's capacity

    def _held(self, allocation: Allocation) -> None:
        """Take an allocation into the table (once: a claim of ours is applied when it commits)."""
        consumer = allocation.consumer_uuid
        previous = self.allocations.get(consumer)
        self.allocations[consumer] = allocation
        if previous is not None and (previous.host, previous.nodename) == (allocation.host, allocation.nodename):
            return
        self.table.release(consumer)
        row = self.table.row(allocation.host, allocation.nodename)
        if row is not None:
            self.table.claim(row, consumer, allocation.resources.get(RESOURCE, 0), at=allocation.created_at)

    def claimed(self, allocation: Allocation, revision: int) -> None:
        """A claim of ours, committed at ``revision``: taken at once, so that the next decision sees the volume (the
        feed's copy is not taken again)."""
        with self.lock:
            self._bump((allocation.host, allocation.nodename), revision)
            self._held(allocation)
            self.placements += 1

    def counters(self) -> dict[str, Any]:
        with self.lock:
            rows = list(self.table.rows.values())
            up = sum(1 for row in rows if self.table.live[row])
            return {"hosts": len(rows), "hosts_up": up, "hosts_disabled": len(rows) - up,
                    "placements": self.placements, "decisions": self.decisions,
                    "claim_conflicts": self.claim_conflicts, "allocations": len(self.allocations)}


def build_table(snap: Snapshot, options: VolumeOptions) -> tuple[PoolTable, dict[str, Allocation], list[str]]:
    """A namespace's pools and claims as a PoolTable: every pool's last report, every stored allocation counted
    on its pool (consumed on top of the report when claimed after it). Also returns the allocations by volume and
    the records that are not pools (described)."""
    table = PoolTable(options.max_over_subscription_ratio)
    skipped = []
    for record in snap.hosts:
        try:
            report = PoolReport.from_record(record)
        except InvalidRequest as exc:
            skipped.append(f"{record.host}/{record.nodename}: {exc.message}")
            continue
        table.apply(report)
    allocations = {}
    for allocation in snap.allocations:
        allocations[allocation.consumer_uuid] = allocation
        row = table.row(allocation.host, allocation.nodename)
        if row is None:
            continue
        # Claimed after the pool's last report (or touch): not in the reported figures yet, so it consumes on
        # top; claimed before: counted by them (the table decides, as it does for the live feed).
        table.claim(row, allocation.consumer_uuid, allocation.resources.get(RESOURCE, 0), at=allocation.created_at)
    return table, allocations, skipped


def audit(snap: Snapshot, options: VolumeOptions | None = None) -> list[str]:
    """What is wrong in a volume namespace's stored state, one line per problem (``gantt audit``):

    - a pool whose figures, with the claims made since its last report consumed on top, are past what Cinder's
      CapacityFilter admits: a thin pool provisioned beyond max_over_subscription_ratio x (total - reserve), a
      thick one with less than nothing free once its reserve is kept (the same factors the filter uses, rounded as
      Cinder rounds). Pools stating 'infinite' or 'unknown' capacity have no limit to pass;
    - an allocation on a pool the namespace does not hold, or that claims no positive VOLUME_GB;
    - a record that is not a pool report.
    """
    table, allocations, skipped = build_table(snap, options or VolumeOptions())
    problems = [f"not a pool record: {line}" for line in skipped]
    n = table.n
    in_flight = np.zeros(n)
    claims = np.zeros(n, dtype=np.int64)
    for held in table.volumes.values():
        claims[held.row] += 1
        if held.in_flight:
            in_flight[held.row] += held.size
    numeric = capacity.numeric(table) & (table.total[:n] > 0)  # rows without a pool are skipped: not in rows
    thin = table.thin[:n] & (table.ratio[:n] >= 1)
    thin_free, thin_total = capacity.factors(table, True)
    thick_free, thick_total = capacity.factors(table, False)
    for (host, pool), row in sorted(table.rows.items()):
        if not numeric[row]:
            continue
        figures = (f"{claims[row]} volume(s) claimed, {in_flight[row]:g} GB of them since the pool's last report")
        if thin[row] and thin_free[row] < -1e-9:
            problems.append(f"pool {host}#{pool}: provisioned {table.provisioned[row]:g} GB > {thin_total[row]:g} GB "
                            f"(max_over_subscription_ratio {table.ratio[row]:g} x (total - reserve)); {figures}")
        elif not thin[row] and thick_free[row] < -1e-9:
            problems.append(f"pool {host}#{pool}: free {thick_free[row]:g} GB once the reserve is kept "
                            f"(thick: free {table.free[row]:g} GB, provisioned {table.provisioned[row]:g} GB of "
                            f"{thick_total[row]:g} GB); {figures}")
    for volume, allocation in sorted(allocations.items()):
        if table.row(allocation.host, allocation.nodename) is None:
            problems.append(f"allocation {volume} on unknown pool {allocation.host}#{allocation.nodename}")
        size = allocation.resources.get(RESOURCE, 0)
        if size <= 0 or set(allocation.resources) != {RESOURCE}:
            problems.append(f"allocation {volume} holds {allocation.resources}, not a positive {RESOURCE} alone")
    return problems
