"""The ledger: every allocation, who holds what on which node, and what is still counted in flight.

Accounting (design §1): per node and resource class ``used = reported + in flight``. An allocation counts in
flight (the ``inflight`` columns) until it is *confirmed*: its node's report lists its consumer, or, on a node that
never lists instances, ``claim_timeout`` has passed (the report alone counts it from then on) or a caller that
knows the report shows it says so (``confirm_shown``: Nova's seam, once instance info listed it and the node's row
was read since; on a node whose usage is its allocations, only its NUMA cells and PCI devices stop counting). A
scheduler claim that a listing node leaves unlisted past ``claim_timeout`` is released (the build never happened).
Any other allocation (written through the Placement face, or a move's migration hold: ``held_until_released``)
ends only by a release or a rewrite, as in Placement: on a listing node it counts on top of the report for as long
as the node does not list its consumer.

Claims are compare-and-sets under the table's lock: the node still exists and still has room. A move (design §6)
books the destination for the instance and keeps the source held under the migration's UUID until confirm or
revert, in one step.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Sequence
from typing import Any

import msgspec

from gantt.compute.numa import with_claims
from gantt.compute.pci import PciRequest, Pool, Room, take
from gantt.compute.state import pci_providers
from gantt.compute.state.columns import Columns
from gantt.compute.state.instances import InstanceIndex
from gantt.compute.state.rejected import ClaimRejected, SourceMoved
from gantt.model import Allocation, AllocationPart, Conflict, NodeKey, NotFound, PciTaken

log = logging.getLogger(__name__)


def held_until_released(allocation: Allocation) -> bool:
    """Whether only a release or a rewrite may end this allocation, never ``claim_timeout``: one written through
    the Placement face (it has a consumer generation: a migration's hold, a port's bandwidth, an instance Nova
    claimed itself; Placement never drops an allocation by itself) or a move's hold on its source (design §6:
    dropped by confirm, given back by revert). Only the scheduler's own claims expire, whose build may never
    have happened."""
    return allocation.consumer_generation is not None or allocation.instance_uuid is not None


class Ledger:
    def __init__(self, columns: Columns, instances: InstanceIndex, *, lock: threading.RLock,
                 clock: Callable[[], float], claim_timeout: float, touched: Callable[[int], None],
                 changed: Callable[[str, Any], None],
                 on_expire: Callable[[list[Allocation]], None] | None = None) -> None:
        self._columns = columns
        self._instances = instances
        self._lock = lock
        self._clock = clock
        self.claim_timeout = claim_timeout
        self._touched = touched  # the table journals a row whose usage changed
        self._changed = changed  # and announces each allocation put or dropped
        # With a shared store, expiry must be a store write (every replica must agree): the owner passes this hook
        # and releases through the store; without it the ledger drops expired claims itself.
        self._on_expire = on_expire
        self._allocations: dict[str, Allocation] = {}
        # Child providers' nodes by uuid (the intake keeps it): a pci_in_placement claim's devices are held there
        self.child_providers: dict[str, NodeKey] = {}
        # ... and where each sits: (its node, parent uuid, root uuid), for request groups (gantt.compute.groups)
        self.child_tree: dict[str, tuple[NodeKey, str, str]] = {}
        # consumer -> when this table first held its allocation, on the table's clock: a claim's age for
        # claim_timeout. Not ``created_at``, the claiming server's wall clock, which another server's may be behind
        # or ahead of, and which steps; an allocation loaded from a snapshot is as old as the load (the safe side:
        # it counts in flight for longer, never shorter).
        self._seen: dict[str, float] = {}
        # The audit's table (``replica.audit_table``) judges claims as the service that has run since they were
        # made does: as old as ``created_at`` says (the safe side of a restart is the scheduler's, not the audit's,
        # whose "safe" would be flagging a settled claim as an overcommit).
        self.ages_from_creation = False
        self._node_allocations: dict[NodeKey, set[str]] = {}
        # server group -> the consumers claimed under its hard policy (Allocation.group), wherever they run
        self._group_allocations: dict[str, set[str]] = {}
        self.expired_claims = 0
        self.settled_claims = 0  # claims on nodes that never list instances, left to the reports after the timeout
        # Unconfirmed allocations whose NUMA cells and PCI devices their node's report shows already
        # (``confirm_shown`` on a node whose usage is its allocations): those parts no longer count on top of it
        self._shown: set[str] = set()

    # ------------------------------------------------------------------------------------------- reading

    def __contains__(self, consumer: object) -> bool:
        return consumer in self._allocations

    def allocation(self, consumer: str) -> Allocation | None:
        return self._allocations.get(consumer)

    def allocations(self) -> Collection[Allocation]:
        return self._allocations.values()

    def node_allocations(self, key: NodeKey) -> frozenset[str]:
        return frozenset(self._node_allocations.get(key, ()))

    def holds(self, key: NodeKey) -> bool:
        """Whether some allocation counts on the node."""
        return bool(self._node_allocations.get(key))

    def group_allocations(self, group: str) -> set[str]:
        return set(self._group_allocations.get(group, ()))

    def fits(self, row: int, resources: dict[str, int], limits: dict[str, float] | None = None) -> str | None:
        """None if the node can take ``resources`` now; else the first resource class that does not fit."""
        columns = self._columns
        rc = columns.rc
        # Python floats (``item``), not numpy scalars: the same IEEE values and comparisons at a fraction of the
        # cost (a decision asks this of the claimed node and of each alternate).
        for name, amount in resources.items():
            if amount <= 0:
                continue
            j = columns.rc_index.get(name)
            if j is None or not columns.has_inventory.item(row, j):
                return name
            if rc["free"].item(row, j) < amount - 1e-9:
                return name
            if amount < rc["min_unit"].item(row, j) or amount > rc["max_unit"].item(row, j):
                return name
            step = rc["step_size"].item(row, j)
            if step == 0 or amount % step:  # numpy's remainder by 0 is NaN (a refusal), Python's an error
                return name
            if limits and name in limits:
                used = rc["reported"].item(row, j) + rc["inflight"].item(row, j)
                if used + amount > limits[name] + 1e-9:
                    return name
        return None

    def within_capacity(self, key: NodeKey, allocation: Allocation | None = None) -> bool:
        """The node exists and no class of it is counted beyond its capacity (every allocation known counted),
        and no two claims pin one of its CPUs; no PCI pool is held beyond its count, of those ``allocation``
        takes from when it is given (a claim on other pools makes no over-count worse: a node's report that
        shows an earlier claim's devices used while the claim still counts in flight, until it is confirmed,
        must not refuse every later claim there)."""
        columns = self._columns
        row = columns.row_of.get(key)
        if row is None or (columns.rc["free"][row, : len(columns.rc_index)] < -1e-9).any() \
                or columns.cols["numa_overbooked"][row]:
            return False
        if allocation is None:
            return columns.pci_within_capacity(row)
        taken = {tuple(sorted(t.pool.items())) for t in allocation.pci}
        return not any(pool in taken for pool, _, _ in columns.pci_overbooked(row))

    def migration(self, migration_uuid: str) -> Allocation:
        """The allocation holding a move's source, under the migration's UUID."""
        held = self._allocations.get(migration_uuid)
        if held is None:
            raise NotFound(f"no move in progress under migration {migration_uuid!r}", field="migration_uuid")
        if held.instance_uuid is None:
            raise Conflict(f"{migration_uuid!r} is a consumer, not a migration", field="migration_uuid")
        return held

    def revertible(self, migration_uuid: str) -> tuple[Allocation, Allocation]:
        """(the source held, the instance's allocation) of a move that can still be reverted: the instance is
        where this move put it (not released, not moved on by a later move)."""
        held = self.migration(migration_uuid)
        moved = self._allocations.get(held.instance_uuid or "")
        if moved is None or moved.migration_uuid != migration_uuid:
            raise Conflict(f"instance {held.instance_uuid!r} no longer holds the allocation of migration "
                           f"{migration_uuid!r}; confirm drops its source", field="migration_uuid")
        return held, moved

    @staticmethod
    def reverted(held: Allocation) -> Allocation:
        """The instance's allocation a revert gives back: the source, as the migration holds it."""
        assert held.instance_uuid is not None
        return msgspec.structs.replace(held, consumer_uuid=held.instance_uuid, instance_uuid=None,
                                       migration_uuid=None, confirmed=False)

    # ------------------------------------------------------------------------------------------ claiming

    def claim(self, key: NodeKey, allocation: Allocation, *, limits: dict[str, float] | None = None,
              pci: Sequence[PciRequest] = (), pci_parts: bool = False) -> Allocation:
        """Consume ``allocation.resources`` (and the PCI devices ``pci`` asks for) on node ``key`` atomically, or
        raise ClaimRejected. ``pci_parts`` (``[filter_scheduler] pci_in_placement``): the flavor's devices are
        allocated on their Placement providers too (``_pci_parts``).

        The compare: the node still exists and still has room. A consumer that already holds an allocation gets
        it back.
        """
        with self._lock:
            held = self._allocations.get(allocation.consumer_uuid)
            if held is not None:
                return held
            row = self._row_with_room(key, allocation.resources, limits, allocation, pci, pci_parts)
            self._insert(row, key, allocation, claimed=True)
            self._changed("allocation", allocation)
            return allocation

    def _row_with_room(self, key: NodeKey, resources: dict[str, int], limits: dict[str, float] | None,
                       allocation: Allocation, pci: Sequence[PciRequest], pci_parts: bool = False) -> int:
        """The node's row, if it still exists and can take ``resources`` now; else ClaimRejected. The PCI devices
        ``pci`` asks for are chosen from the pools the node has left and recorded on ``allocation``; the NUMA
        cells, CPUs and pages ``allocation.numa`` names must still be free."""
        row = self._columns.row_of.get(key)
        if row is None:
            raise ClaimRejected(f"{key} is gone")
        missing = self.fits(row, resources, limits)
        if missing is not None:
            raise ClaimRejected(f"{key} has no room for {missing}")
        for part in allocation.extra:  # the request groups' providers the caller chose (gantt.compute.groups)
            part_row = self._columns.row_of.get((part.host, part.nodename))
            if part_row is None or self.fits(part_row, part.resources) is not None:
                raise ClaimRejected(f"{key}: provider {part.host}/{part.nodename} has no room for {part.resources}")
        affinity = None
        if allocation.numa:
            cells = self._columns.numa[row]
            if cells is None or not with_claims(cells, allocation.numa)[1]:
                raise ClaimRejected(f"{key} no longer has the NUMA cells, CPUs or pages the claim names")
            # the devices come from the pools the fit chose them on (Nova's apply_requests with the guest's cells)
            affinity = cells.affinity([c.cell for c in allocation.numa])
        if pci:
            pools = self._columns.pci_pools(row)
            rooms = self.pci_rooms(pools) if any(r.in_placement for r in pci) else None
            taken = take(pools, pci, affinity, rooms)
            if taken is None:
                raise ClaimRejected(f"{key} has no room for the PCI devices asked")
            allocation.pci = [PciTaken(pool=dict(pool), count=count) for pool, count in taken]
            if pci_parts:
                allocation.extra = [*allocation.extra, *pci_providers.parts(
                    key, pci, taken, self._columns, self.child_providers, self.fits)]
        return row

    def pci_rooms(self, pools: Sequence[Pool]) -> dict[str, Room]:
        """The room of the Placement providers the pools' ``rp_uuid`` tags name (``pci_providers.rooms``)."""
        return pci_providers.rooms(self._columns, self.child_providers, pools)

    def put_allocation(self, allocation: Allocation) -> None:
        """Record an allocation decided elsewhere (another instance's claim arriving through the change feed).

        No capacity check: the store already committed it. Idempotent per consumer.
        """
        with self._lock:
            held = self._allocations.get(allocation.consumer_uuid)
            if held is allocation:
                return  # our own claim, applied from its commit's result: recorded and counted already
            if held is not None:
                if held.parts() == allocation.parts() and held.confirmed == allocation.confirmed \
                        and held.group == allocation.group and held.migration_uuid == allocation.migration_uuid \
                        and held.instance_uuid == allocation.instance_uuid and held.pci == allocation.pci:
                    # Same accounting; but the record is now the store's: a local claim of ours that happens to
                    # equal it must not be rolled back as ours (rollbacks go by identity).
                    if held is not allocation:
                        allocation.created_at = allocation.created_at or held.created_at
                        self._allocations[allocation.consumer_uuid] = allocation
                    return
                self._drop(allocation.consumer_uuid)
            self._place_recorded(allocation)
            self._changed("allocation", allocation)

    def move(self, key: NodeKey, allocation: Allocation, source: Allocation, *,
             limits: dict[str, float] | None = None, pci: Sequence[PciRequest] = (),
             pci_parts: bool = False, doubled: bool = False) -> Allocation:
        """Move ``source``'s consumer to node ``key`` as ``allocation``, holding the source for the migration.

        One compare-and-set: the consumer still holds ``source``, the migration holds nothing yet, the node has
        room for the whole new allocation (the source keeps its resources until confirm or revert, as Nova's
        migration-based allocations do, also on the same node). Returns the migration's allocation.

        ``doubled`` (an evacuation): the consumer keeps its source in the same allocation instead (``_double``),
        and that allocation is returned.
        """
        migration = allocation.migration_uuid
        assert migration is not None
        with self._lock:
            if self._allocations.get(source.consumer_uuid) is not source:
                raise SourceMoved(f"{source.consumer_uuid} moved meanwhile")
            if migration in self._allocations:  # a twin request made this move: answer with it
                raise SourceMoved(f"migration {migration} holds an allocation already")
            row = self._row_with_room(key, allocation.resources, limits, allocation, pci, pci_parts)
            if doubled:
                return self._double(row, key, allocation, source)
            held = msgspec.structs.replace(source, consumer_uuid=migration, migration_uuid=None,
                                           instance_uuid=source.consumer_uuid, confirmed=False)
            shown = self._is_shown(source)
            self._drop(source.consumer_uuid)
            self._place_recorded(held)
            if shown:
                self._still_shown(held)
            self._insert(row, key, allocation)
            self._changed("allocation", allocation)
            self._changed("allocation", held)
            return held

    def _double(self, row: int, key: NodeKey, allocation: Allocation, source: Allocation) -> Allocation:
        """An evacuation, booked as Nova's scheduler books one (its report client's
        ``_move_operation_alloc_request``): one allocation of the instance on the destination and on every node
        its source holds, with the source's amounts there (a destination part on a node the source holds already,
        a shared provider's, is not added). Its source's compute drops that part when it comes back up (Placement:
        the instance's allocations rewritten without it), its destination's if the rebuild fails there; until
        then it counts in flight on those nodes. The destination comes first: the instance runs there now. The
        source's NUMA cells and PCI devices are no longer counted on its node, whose host is down (Nova's API
        evacuates from no other)."""
        held = {node for node, _ in source.parts()}
        allocation.extra = [*(AllocationPart(host=node[0], nodename=node[1], resources=dict(resources))
                              for node, resources in source.parts() if node != key),
                            *(part for part in allocation.extra if (part.host, part.nodename) not in held)]
        self._drop(source.consumer_uuid)
        self._insert(row, key, allocation)
        self._changed("allocation", allocation)
        return allocation

    def unmove(self, allocation: Allocation, held: Allocation, source: Allocation) -> bool:
        """Undo ``move`` while nothing else has replaced its allocations (a failed commit). Whether it did."""
        with self._lock:
            if self._allocations.get(allocation.consumer_uuid) is not allocation:
                return False
            self._drop(allocation.consumer_uuid)
            shown = False
            if self._allocations.get(held.consumer_uuid) is held:
                shown = self._is_shown(held)
                self._drop(held.consumer_uuid)
            source.confirmed = False  # derived again on insertion
            self._place_recorded(source)
            if shown:
                self._still_shown(source)
            self._changed("allocation", source)
            return True

    def release(self, consumer_uuid: str) -> Allocation:
        with self._lock:
            if consumer_uuid not in self._allocations:
                raise NotFound(f"no allocation for consumer {consumer_uuid!r}", field="consumer_uuid")
            alloc = self._drop(consumer_uuid)
            self._changed("allocation_deleted", alloc)
            return alloc

    # --------------------------------------------------------------------------------------- bookkeeping

    def _place_recorded(self, allocation: Allocation) -> None:
        """Insert an allocation without a capacity check (it is held already, under another consumer)."""
        key = (allocation.host, allocation.nodename)
        row = self._columns.row_of.get(key)
        if row is None:
            self._index(allocation)
        else:
            self._insert(row, key, allocation)

    def _index(self, allocation: Allocation) -> None:
        consumer = allocation.consumer_uuid
        self._allocations[consumer] = allocation
        if consumer not in self._seen:
            now = self._clock()
            self._seen[consumer] = min(allocation.created_at or now, now) if self.ages_from_creation else now
        node_allocations = self._node_allocations
        for key in allocation.nodes():
            holders = node_allocations.get(key)
            if holders is None:
                node_allocations[key] = {consumer}
            else:
                holders.add(consumer)
        if allocation.group:
            self._group_allocations.setdefault(allocation.group, set()).add(allocation.consumer_uuid)
        for part in allocation.extra:  # on the nodes that list no instances: in flight for as long as held
            row = self._columns.row_of.get((part.host, part.nodename))
            if row is not None:
                self._add_inflight(row, part.resources, +1, instance=False)

    def _insert(self, row: int, key: NodeKey, allocation: Allocation, claimed: bool = False) -> None:
        if not allocation.created_at:
            allocation.created_at = self._clock()
        now = self._clock()
        seen = self._seen.setdefault(allocation.consumer_uuid,
                                     min(allocation.created_at, now) if self.ages_from_creation else now)
        updated_at = self._columns.cols["updated_at"].item(row)
        listed = allocation.listed_as in self._instances.reported_instances(row)
        if listed and (allocation.migration_uuid or claimed):
            # A moved instance the node already lists (a resize on the same host, a revert's source), or a claim
            # made now for one it lists (Nova's conductor moved its old allocation to the migration through
            # Placement before asking): only a report made after the claim counts what it now holds; until then
            # it is in flight.
            listed = updated_at > seen
        # On a node that never lists instances, a claim older than the timeout is settled, as settle_unlisted
        # would have done (an allocation put back on a node that came back).
        # (The time first: a fresh claim is newer than its node's last report, and the test reads no more rows.)
        settled = updated_at - seen > self.claim_timeout and self._settles(row)
        if listed or settled:
            allocation.confirmed = True
        self._index(allocation)
        self._instances.place(row, key[0], allocation.consumer_uuid)
        if not allocation.confirmed:
            self._add_inflight(row, allocation.resources, +1, pci=allocation.pci)
            if allocation.numa:
                self.count_numa(row, key)
        else:
            self._touched(row)

    def _drop(self, consumer_uuid: str) -> Allocation:
        alloc = self._allocations.pop(consumer_uuid)
        self._seen.pop(consumer_uuid, None)
        if alloc.group:
            members = self._group_allocations.get(alloc.group)
            if members is not None:
                members.discard(consumer_uuid)
                if not members:
                    del self._group_allocations[alloc.group]
        for key in alloc.nodes():
            holders = self._node_allocations.get(key)
            if holders is not None:
                holders.discard(consumer_uuid)
                if not holders:
                    del self._node_allocations[key]  # an empty set per node that ever held a claim adds up at scale
        shown = consumer_uuid in self._shown
        self._shown.discard(consumer_uuid)
        row = self._columns.row_of.get((alloc.host, alloc.nodename))
        if row is not None:
            self._instances.unplace(row, alloc.host, consumer_uuid)
            if not alloc.confirmed:
                self._add_inflight(row, alloc.resources, -1, pci=None if shown else alloc.pci)
                if alloc.numa and not shown:
                    self.count_numa(row, (alloc.host, alloc.nodename))
        for part in alloc.extra:
            row = self._columns.row_of.get((part.host, part.nodename))
            if row is not None:
                self._add_inflight(row, part.resources, -1, instance=False)
        return alloc

    def count_numa(self, row: int, key: NodeKey) -> None:
        """Count the NUMA claims of the node's unconfirmed allocations on top of its reported cells."""
        claims = []
        for consumer in self._node_allocations.get(key, ()):
            alloc = self._allocations[consumer]
            if alloc.numa and not alloc.confirmed and (alloc.host, alloc.nodename) == key \
                    and consumer not in self._shown:
                claims.extend(alloc.numa)
        self._columns.count_numa_claims(row, claims)
        self._touched(row)

    def _add_inflight(self, row: int, resources: dict[str, int], sign: int, *, instance: bool = True,
                      pci: list[PciTaken] | None = None) -> None:
        self._columns.add_inflight(row, resources, sign, instance=instance)
        if pci:
            self._columns.add_pci_inflight(row, ((tuple(sorted(t.pool.items())), t.count) for t in pci), sign)
        self._touched(row)

    def _settles(self, row: int) -> bool:
        """Claims on this node stop counting in flight after ``claim_timeout``: it never lists instances but
        reports its usage, which then includes them. A node that reports no usage (a provider Placement wrote) is
        accounted by its allocations alone, for as long as they are held."""
        return bool(not self._columns.reports_instances[row] and self._columns.reports_usage[row])

    # ------------------------------------------------------------------------------- the table's rows

    def restore_row(self, row: int, key: NodeKey) -> None:
        """A node came back: the allocations that outlived its removal count on its new row again."""
        held = self._node_allocations.get(key)
        if not held:
            # The new row holds its never-reported values, which are what counting no claims on no cells would
            # write: skip that (a third of loading a large table), journal the row all the same.
            self._touched(row)
            return
        for consumer in held:
            alloc = self._allocations[consumer]
            if (alloc.host, alloc.nodename) != key:  # a further part of it: in flight on this row
                self._add_inflight(row, alloc.on(key), +1, instance=False)
                continue
            self._instances.add(row, (consumer,))
            self._shown.discard(consumer)  # the new row's report has not been seen to show it
            if not alloc.confirmed:
                self._add_inflight(row, alloc.resources, +1, pci=alloc.pci)
        self.count_numa(row, key)

    def drop_node(self, key: NodeKey) -> None:
        """The node is being removed: so are the allocations on it."""
        for consumer in list(self._node_allocations.get(key, ())):
            self._drop(consumer)

    def confirm_listed(self, row: int, key: NodeKey, reported: frozenset[str], now: float) -> None:
        """A report of a node that lists its instances: confirm the allocations it lists, expire the scheduler's
        claims left unlisted past ``claim_timeout``. An allocation held until released that the node does not
        list stays in flight: the node's reported usage covers what it lists, and nothing else (a migration's
        hold is confirmed by listing the migration, or for a Gantt move, the instance)."""
        expired: list[Allocation] = []
        for consumer in list(self._node_allocations.get(key, ())):
            alloc = self._allocations[consumer]
            if alloc.confirmed or (alloc.host, alloc.nodename) != key:
                continue
            if alloc.listed_as in reported:
                self._confirm(row, key, alloc)  # the report's topology has its cells and CPUs now
            elif alloc.created_at and now - self._seen.get(consumer, now) > self.claim_timeout \
                    and not held_until_released(alloc):
                log.warning("claim of %s on %s/%s unconfirmed after %.0f s: released",
                            consumer, key[0], key[1], now - self._seen.get(consumer, now))
                expired.append(alloc)
        if expired:
            self.expired_claims += len(expired)
            if self._on_expire is not None:
                self._on_expire(expired)
            else:
                for alloc in expired:
                    self._drop(alloc.consumer_uuid)

    def settle_unlisted(self, row: int, key: NodeKey, now: float) -> None:
        """Claims on a node that never lists its instances stop counting in flight after ``claim_timeout``.

        Such a node's reported usage (``vcpus_used`` …) includes an instance once it is built, and nothing says
        when: until ``claim_timeout`` a claim is counted on top (twice once built: safe), after it the build has
        happened or failed and the report is the truth. The allocation itself stays until it is released.
        """
        if not self._columns.reports_usage[row]:
            return
        for consumer in list(self._node_allocations.get(key, ())):
            alloc = self._allocations[consumer]
            if (alloc.host, alloc.nodename) != key:
                continue
            if not alloc.confirmed and alloc.created_at and now - self._seen.get(consumer, now) > self.claim_timeout:
                self._confirm(row, key, alloc)
                self.settled_claims += 1

    def _confirm(self, row: int, key: NodeKey, alloc: Allocation) -> None:
        """The node's report counts the allocation now: nothing of it counts in flight any more."""
        alloc.confirmed = True
        shown = alloc.consumer_uuid in self._shown
        self._shown.discard(alloc.consumer_uuid)
        self._add_inflight(row, alloc.resources, -1, pci=None if shown else alloc.pci)
        if alloc.numa and not shown:
            self.count_numa(row, key)

    def confirm_shown(self, host: str, consumers: Collection[str], *, dry: bool = False
                      ) -> dict[NodeKey, list[str]]:
        """The nodes of ``host`` show these consumers' allocations in their reports, which list no instances (the
        caller knows: Nova's instance info listed them after the compute applied their claims, and the nodes'
        rows were read since). On a node that reports its usage they are confirmed, as a listing report confirms
        them; on one whose usage is its allocations (Placement set its inventories) their resources keep
        counting, as Placement counts them, and only their NUMA cells and PCI devices stop counting on top of the
        report's topology and pools. Returns the consumers that changed, by node; ``dry``: those that would (an
        allocation elsewhere, confirmed or shown already, or with nothing the report could show is left alone)."""
        wanted: dict[NodeKey, list[str]] = {}
        for consumer in dict.fromkeys(consumers):
            alloc = self._allocations.get(consumer)
            if alloc is None or alloc.host != host or alloc.confirmed or consumer in self._shown:
                continue
            key = (alloc.host, alloc.nodename)
            row = self._columns.row_of.get(key)
            if row is not None and (self._columns.reports_usage[row] or alloc.numa or alloc.pci):
                wanted.setdefault(key, []).append(consumer)
        if not dry:
            for key, held in wanted.items():
                for consumer in held:
                    self._show(self._columns.row_of[key], key, self._allocations[consumer])
        return wanted

    def _is_shown(self, alloc: Allocation) -> bool:
        """Whether the node's report counts the allocation (wholly, or its NUMA cells and PCI devices)."""
        return alloc.confirmed or alloc.consumer_uuid in self._shown

    def _still_shown(self, alloc: Allocation) -> None:
        """``alloc`` holds what an allocation its node's report counted held there (a move's hold on its source,
        a failed move's source given back): the report still counts it, on a node whose reports list no instances
        (a listing node's list decides): a cell's row keeps a moving instance's usage on its source until the
        move is confirmed. Counted on top, the source's NUMA cells or PCI devices would be held twice, and no claim
        on that node could commit."""
        key = (alloc.host, alloc.nodename)
        row = self._columns.row_of.get(key)
        if row is not None and not self._is_shown(alloc) and not self._columns.reports_instances[row]:
            self._show(row, key, alloc)

    def _show(self, row: int, key: NodeKey, alloc: Allocation) -> None:
        if self._columns.reports_usage[row]:
            self._confirm(row, key, alloc)
            return
        self._shown.add(alloc.consumer_uuid)
        if alloc.pci:
            self._columns.add_pci_inflight(row, ((tuple(sorted(t.pool.items())), t.count) for t in alloc.pci), -1)
            self._touched(row)
        if alloc.numa:
            self.count_numa(row, key)
