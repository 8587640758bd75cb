"""One Batch turned into one Plan: the store contract's checks and effects, written once for every backend.

A backend supplies *reads* of its state before the batch (``Reads``) and carries the resulting ``Plan`` out in
its own medium (dicts, SQL, an etcd txn). Everything that decides — what conflicts, what is missing, which
report is stale, which node a change bumps, which changes the feed gets and in what order — lives here, so the
three backends cannot drift apart; the contract suite (``tests/store/test_contract.py``) is the safety net.
Placement's rules about a provider's inventories (what it offers, whether a write leaves room, what is held over
its capacity) are the provider model's (``gantt.resources.providers``); the planner applies them to the batch.

Two reads may be *guards* instead of reads: a backend that cannot read and write atomically (etcd) answers
"holds" for an ``expect`` and "not booked" for a claimed consumer, and turns each into a compare of its
transaction; when the compare fails it raises the same error the planner would have (StoreConflict,
ConsumerHeld). Backends that plan inside their own transaction (memory, SQLite) read for real.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

import msgspec

from gantt.model import (
    Aggregate,
    Allocation,
    AllocationPart,
    ConsumerConflict,
    GenerationConflict,
    HostReport,
    InstanceInfo,
    NodeKey,
    NotFound,
    Record,
    aggregate_node,
    group_node,
    merge_nodes,
    merge_reports,
    repeats,
)
from gantt.resources import providers
from gantt.store.base import Batch, Change, ConsumerHeld, Expect, HostInUse, RepeatOf, StoreConflict


class Reads(Protocol):
    """A backend's state before the batch, as the planner needs it."""

    def head(self) -> int:
        """The last committed revision (ConsumerHeld names it: the holding allocation exists there)."""

    def expect_holds(self, expect: Expect) -> bool:
        """The node's usage revision is still ``expect.revision`` (0: never written)."""

    def host(self, key: NodeKey) -> HostReport | None:
        """The node's record, its ``reported_at`` that of the last touch the backend keeps for it, if any
        (``store.base.lifted``)."""

    def nodes_of(self, host: str, node: str | None) -> list[NodeKey]:
        """The stored nodes of ``host`` (every one when ``node`` is None, else that one if stored)."""

    def has_aggregate(self, aggregate_id: str) -> bool: ...

    # Optional: ``generation(key)``, the provider generation the store holds for a node (None: no node, 0: a node
    # Placement has not written), read without the whole record; without it the planner decodes ``host(key)``.
    # Optional: ``liveness(keys)``, for each node its usage revision (0: never written) and the time of its last
    # touch (None: none kept), read without the records and in one go; without it a report in ``Batch.repeat_of``
    # is planned from ``host(key)``.

    def aggregate(self, aggregate_id: str) -> Aggregate | None:
        """The aggregate as stored (a backend without atomic reads guards it: a change meanwhile fails the
        commit, which the backend plans again)."""

    def allocation(self, consumer: str) -> Allocation | None: ...

    def unbooked(self, consumer: str) -> bool:
        """The consumer holds no allocation (a claim's precondition)."""

    def allocations_on(self, nodes: set[NodeKey]) -> list[Allocation]:
        """Every allocation with a part on these nodes (host deletion, a capacity check)."""

    def aggregates_with(self, host: str) -> list[Aggregate]:
        """Every aggregate ``host`` is a member of (a merge; a backend without atomic reads guards them all)."""

    def record(self, key: tuple[str, str]) -> Record | None: ...


@dataclass
class Plan:
    """What one batch does, for a backend to write. Changes carry revision 0; the backend stamps its own.

    Each mapping holds the final state of what the batch touches: a value to store, or None to delete.
    ``bumped`` lists the nodes (and server-group pseudo-nodes) whose usage revision moves to the batch's;
    ``deleted_nodes`` those of them that are gone (a backend that keys usage per node may drop them).
    """

    changes: list[Change] = field(default_factory=list)
    hosts: dict[NodeKey, HostReport | None] = field(default_factory=dict)
    aggregates: dict[str, Aggregate | None] = field(default_factory=dict)
    allocations: dict[str, Allocation | None] = field(default_factory=dict)
    instances: dict[str, InstanceInfo] = field(default_factory=dict)
    records: dict[tuple[str, str], Record | None] = field(default_factory=dict)
    bumped: dict[NodeKey, None] = field(default_factory=dict)  # a dict: ordered, no duplicates
    touches: dict[NodeKey, float] = field(default_factory=dict)  # node -> liveness time to keep (no record write)
    quiet: int = 0  # touches within the batch's touch_interval: nothing to write
    deleted_nodes: set[NodeKey] = field(default_factory=set)
    # Consumers whose stored record, replaced or deleted here, had parts on further nodes (a backend that indexes
    # those parts by node drops the old entries; every other consumer has none to drop).
    unindexed: set[str] = field(default_factory=set)
    # Nodes written here whose capacity may have gone below their allocations (``_plan_held_over``)
    reshaped: set[NodeKey] = field(default_factory=set)

    def _leaving(self, allocation: Allocation) -> None:
        if allocation.extra:
            self.unindexed.add(allocation.consumer_uuid)

    def _bump(self, allocation: Allocation) -> None:
        for key in allocation.nodes():
            self.bumped[key] = None
        if allocation.group:  # the group's policy was checked against this member's node
            self.bumped[group_node(allocation.group)] = None


def plan(batch: Batch, reads: Reads) -> Plan:
    """Check ``batch`` against ``reads`` (raising before anything is planned) and plan its effects.

    Raises StoreConflict (an ``expect`` failed), ConsumerHeld (a claim names a booked consumer; outside a move a
    booking is never moved), NotFound (a release, move or deletion names something the store does not hold).
    """
    _check(batch, reads)
    out = Plan()
    _plan_reports(batch, reads, out)
    _plan_providers(batch, out)
    _plan_merges(batch, reads, out)
    _plan_host_deletions(batch, reads, out)
    for aggregate in batch.aggregates:
        out.aggregates[aggregate.key] = aggregate
        out.bumped[aggregate_node(aggregate.key)] = None
        out.changes.append(Change(revision=0, kind="aggregate", aggregate=aggregate))
    for aggregate_id in batch.delete_aggregates:
        out.aggregates[aggregate_id] = None
        out.bumped[aggregate_node(aggregate_id)] = None
        out.changes.append(Change(revision=0, kind="aggregate_deleted", aggregate_id=aggregate_id))
    _plan_memberships(batch, reads, out)
    _plan_allocations(batch, reads, out)
    _plan_held_over(batch, reads, out)
    _check_capacity(batch, reads, out)
    _check_vacated(batch, reads, out)
    _plan_generation_bumps(batch, reads, out)
    for info in batch.instances:
        out.instances[info.host] = info
        out.changes.append(Change(revision=0, kind="instances", instances=info))
    _plan_records(batch, out)
    return out


def _check(batch: Batch, reads: Reads) -> None:
    conflicts = [(e.host, e.node) for e in batch.expect if not reads.expect_holds(e)]
    if conflicts:
        raise StoreConflict(conflicts)
    replaces = set(batch.replaces)
    held = [a.consumer_uuid for a in batch.allocations
            if a.consumer_uuid not in replaces and not reads.unbooked(a.consumer_uuid)]
    if held:
        raise ConsumerHeld(held, reads.head())
    for consumer in batch.replaces:
        if reads.allocation(consumer) is None:
            raise NotFound(f"no allocation for consumer {consumer!r} to move", field="consumer_uuid")
    if not batch.lenient_releases:
        for consumer in batch.releases:
            if reads.allocation(consumer) is None:
                raise NotFound(f"no allocation for consumer {consumer!r}", field="consumer_uuid")
    for aggregate_id in batch.delete_aggregates:
        if not reads.has_aggregate(aggregate_id):
            raise NotFound(f"no such aggregate {aggregate_id!r}", field="id")
    for host, node in batch.delete_hosts:
        if not reads.nodes_of(host, node):
            raise NotFound(f"no such host {host!r}", field="host")
    # A backend may read a generation without decoding (and validating) the node's whole record: that decode was
    # most of the planner's work per provider write.
    generation_of = getattr(reads, "generation", None) or (lambda key: _generation(reads.host(key)))
    stale = [(g.host, g.node) for g in batch.generations if generation_of((g.host, g.node)) != g.generation]
    if stale:
        raise GenerationConflict(stale)
    for kind, name in batch.delete_records:
        if reads.record((kind, name)) is None:
            raise NotFound(f"no such {kind} {name!r}", field="name")
    for expected in batch.consumers:
        holding = reads.allocation(expected.consumer)
        generation = None if holding is None else holding.placement_generation()
        if generation != expected.generation:
            raise ConsumerConflict(expected.consumer, generation, expected.generation)


def _plan_memberships(batch: Batch, reads: Reads, out: Plan) -> None:
    for member in batch.memberships:
        key = member.aggregate
        current = out.aggregates[key] if key in out.aggregates else reads.aggregate(key)
        if current is None:
            if not member.join:
                continue
            current = Aggregate(id=key, uuid=key)
        inside = member.host in current.hosts
        if inside == member.join:
            continue
        hosts = [*current.hosts, member.host] if member.join else [h for h in current.hosts if h != member.host]
        changed = msgspec.structs.replace(current, hosts=hosts)
        out.aggregates[key] = changed
        out.bumped[aggregate_node(key)] = None
        out.changes.append(Change(revision=0, kind="aggregate", aggregate=changed))


def _generation(record: HostReport | None) -> int | None:
    """The provider generation the store holds for a node: None when there is no node, 0 for a node Placement
    has not written yet."""
    if record is None:
        return None
    return record.provider.generation if record.provider is not None else 0


def _plan_providers(batch: Batch, out: Plan) -> None:
    for record in batch.providers:
        key = (record.host, record.nodename)
        out.hosts[key] = record
        out.bumped[key] = None
        out.changes.append(Change(revision=0, kind="host", host=record))
        out.reshaped.add(key)  # Placement's inventory writes and reshapes may lower capacity under allocations


def _plan_held_over(batch: Batch, reads: Reads, out: Plan) -> None:
    """Placement lets a write lower a provider's capacity below what its allocations hold (it logs the provider
    over capacity), and so does Gantt, for Placement's inventories and a host's own reports alike; no allocation
    write may then take it further (``_check_capacity``). The record keeps what was held then (``held_over``), so
    that ``gantt audit`` tells that state from an overcommit; a write that leaves the node within capacity clears
    it. Counted from the allocations after the batch (a reshape moves them in the same commit)."""
    if not out.reshaped:
        return
    ratios = batch.capacity.default_ratios if batch.capacity is not None else {}
    keys = [key for key in out.reshaped if out.hosts.get(key) is not None]
    held = reads.allocations_on(set(keys)) if keys else []
    after = [a for a in held if a.consumer_uuid not in out.allocations]
    after += [a for a in out.allocations.values() if a is not None]
    for key in keys:
        record = out.hosts[key]
        assert record is not None
        over = providers.over_capacity(record, ratios, after)
        if (over or None) != record.held_over:
            # in place: the record is this batch's own (merged here, or built for it), and its change carries it
            record.held_over = over or None


def _plan_records(batch: Batch, out: Plan) -> None:
    for record in batch.records:
        out.records[record.key] = record
        out.changes.append(Change(revision=0, kind="record", record=record))
    for kind, name in batch.delete_records:
        gone = Record(kind=kind, name=name)
        out.records[(kind, name)] = None
        out.changes.append(Change(revision=0, kind="record_deleted", record=gone))


def _plan_reports(batch: Batch, reads: Reads, out: Plan) -> None:
    repeat_of = {(r.host, r.node): r for r in batch.repeat_of}
    liveness = getattr(reads, "liveness", None) if repeat_of else None
    held = liveness(list(repeat_of)) if liveness is not None else {}  # read before this batch writes anything
    for report in batch.reports:
        key = (report.host, report.nodename)
        seen = repeat_of.get(key)
        if seen is not None and key not in out.hosts and key not in out.touches:
            _plan_repeat(batch, reads, out, key, seen, held.get(key), report)
            continue
        written = key in out.hosts
        old = out.hosts[key] if written else reads.host(key)
        if old is None and batch.existing_only:
            continue  # deleted after the report arrived, as if the report had been written at once, before
        # In the store's order: the last report written is the node's, whatever the clocks of the servers that
        # stamped them say (``merge_reports``).
        merged = merge_reports(old, report)
        # The batch's one report's body repeats the record it leaves (merged with it, or repeating it).
        body = batch.body if len(batch.reports) == 1 and not batch.merges else None
        if not written and old is not None and repeats(old, merged):
            # A host whose numbers did not move (most reports of a real cloud): its liveness is all that changed.
            # Rewriting the record and sending it through the feed would cost a full write and a full apply on
            # every replica per report; a touch keeps the time apart, and moves no usage revision because usage
            # did not change. Within touch_interval of the time already held, not even that is written: the node
            # then looks up to that much older everywhere alike, a small fraction of service_down_time.
            _plan_touch(batch, out, key, old.reported_at, merged.reported_at, body)
            continue
        out.touches.pop(key, None)
        out.hosts[key] = merged
        out.bumped[key] = None
        out.changes.append(Change(revision=0, kind="host", host=merged, digest=body))
        if old is not None and merged.stats is not old.stats and providers.capacity_lowered(old, merged):
            out.reshaped.add(key)


def _plan_merges(batch: Batch, reads: Reads, out: Plan) -> None:
    """One node under two names made one (``Merge``), after the batch's reports: the record at the new name is
    both merged (``merge_nodes``), the allocations' parts on the old name move to the new one, the old name goes
    (a replica applies the moved allocations whether it sees the old name deleted before them or after)."""
    for merge in batch.merges:
        gone, into = (merge.host, merge.node), (merge.into_host, merge.into_node)
        src = _held(gone, reads, out)
        dst = _held(into, reads, out)
        if gone == into or src is None or dst is None or _uuid(src) != merge.uuid or _uuid(dst) != merge.uuid:
            continue  # merged by another writer already, or no longer the same node
        if into in out.touches:  # a report of the batch repeated the record: the merged record carries its time
            dst = msgspec.structs.replace(dst, reported_at=max(dst.reported_at or 0.0, out.touches.pop(into)))
        merged = merge_nodes(src, dst)
        out.changes = [c for c in out.changes if not (c.kind == "host" and c.host is not None
                                                      and (c.host.host, c.host.nodename) in (gone, into))]
        out.hosts[into] = merged
        out.bumped[into] = None
        out.reshaped.add(into)
        out.changes.append(Change(revision=0, kind="host", host=merged))
        _follow_aggregates(src, dst, reads, out)
        for allocation in reads.allocations_on({gone}):
            # (as read with the node's, which a backend guards: not ``reads.allocation``, which etcd reads only
            # for the consumers a batch names)
            current = out.allocations.get(allocation.consumer_uuid, allocation)
            if current is None:
                continue  # released by this batch
            moved = _renamed(current, gone, into)
            out._leaving(current)
            out.allocations[allocation.consumer_uuid] = moved
            out._bump(moved)
            out.changes.append(Change(revision=0, kind="allocation", allocation=moved, replaced=current))
        out.hosts[gone] = None
        out.touches.pop(gone, None)
        out.deleted_nodes.add(gone)
        out.bumped[gone] = None
        out.changes.append(Change(revision=0, kind="host_deleted", node=gone))


def _follow_aggregates(src: HostReport, dst: HostReport, reads: Reads, out: Plan) -> None:
    """A node created through Placement (its host and node are its uuid) is a member of the aggregates Placement
    gave it by that host name: as one node of its compute host it is a member by the host's name."""
    if not (src.host == src.nodename == _uuid(src)) or src.host == dst.host:
        return
    for stored in reads.aggregates_with(src.host):
        key = stored.key
        current = out.aggregates.get(key, stored)
        if current is None or src.host not in current.hosts:
            continue
        hosts = [h for h in current.hosts if h != src.host]
        changed = msgspec.structs.replace(current, hosts=[*hosts, dst.host] if dst.host not in hosts else hosts)
        out.aggregates[key] = changed
        out.bumped[aggregate_node(key)] = None
        out.changes.append(Change(revision=0, kind="aggregate", aggregate=changed))


def _held(key: NodeKey, reads: Reads, out: Plan) -> HostReport | None:
    return out.hosts[key] if key in out.hosts else reads.host(key)


def _uuid(record: HostReport) -> str | None:
    return record.provider.uuid if record.provider is not None else record.stats.uuid


def _renamed(allocation: Allocation, gone: NodeKey, into: NodeKey) -> Allocation:
    """The allocation with its parts on ``gone`` on ``into`` (summed with a part there): the same provider, so
    the NUMA cells and PCI devices of its claim, and its consumer generation, stay."""
    parts: dict[NodeKey, dict[str, int]] = {}
    for key, resources in allocation.parts():
        at = parts.setdefault(into if key == gone else key, {})
        for rc, amount in resources.items():
            at[rc] = at.get(rc, 0) + amount
    (first, resources), *rest = parts.items()
    return msgspec.structs.replace(
        allocation, host=first[0], nodename=first[1], resources=resources,
        extra=[AllocationPart(host=key[0], nodename=key[1], resources=r) for key, r in rest])


def _plan_repeat(batch: Batch, reads: Reads, out: Plan, key: NodeKey, seen: RepeatOf,
                 held: tuple[int, float | None] | None, report: HostReport) -> None:
    """A report a replica acknowledged before writing it (``Replica.heartbeat``) because it repeated the record
    that replica held at usage revision ``seen.revision``: it is written as a touch, never as a record.

    While the store still holds that revision, it holds that record, and the touch is planned from the revision
    and the liveness time alone (reading and decoding the record, merging the report into it and comparing the
    two was most of what a repeated report cost the store's writer). Otherwise the record may have been rewritten
    since, by a report taken through another server before this one or after it (the acknowledgement came
    first, so the store's order cannot tell): the record the store holds stands, and this report counts for the
    node's liveness only, so that a newer report is never rolled back. Where it was the older one (the replica's
    view was behind by the feed's delay when it came), the host's next report, compared with a view caught up
    by then, is written in full."""
    body = seen.body
    if held is not None and seen.revision > 0 and held[0] == seen.revision:
        touched_at = held[1]
        held_at: float | None = seen.reported_at if touched_at is None else touched_at
    else:
        old = reads.host(key)
        if old is None:
            return  # deleted after the report arrived, as if the report had been written at once, before
        held_at = old.reported_at
        body = None  # the record may hold other figures than the body's now
    if report.reported_at is not None:
        _plan_touch(batch, out, key, held_at, report.reported_at, body)


def _plan_touch(batch: Batch, out: Plan, key: NodeKey, held_at: float | None, at: float | None,
                body: bytes | None = None) -> None:
    """A report of ``key`` stamped ``at`` that repeats the record the store holds, its time ``held_at``; ``body``:
    the digest of that report's body, when known.

    Quiet (nothing written) only within ``touch_interval`` after the time held: a report stamped earlier than
    that comes through a server whose clock is behind the one that wrote it (or stepped back), and is written, so
    that a node reporting through that server is never taken for silent."""
    assert at is not None
    if held_at is not None and 0.0 <= at - held_at < batch.touch_interval:
        out.quiet += 1
    else:
        out.touches[key] = at
        out.changes.append(Change(revision=0, kind="touch", node=key, at=at, digest=body))


def _plan_host_deletions(batch: Batch, reads: Reads, out: Plan) -> None:
    doomed: list[NodeKey] = []
    for host, node in batch.delete_hosts:
        keys = dict.fromkeys(reads.nodes_of(host, node))
        keys.update(dict.fromkeys(k for k, v in out.hosts.items()  # added earlier in this batch
                                  if v is not None and k[0] == host and (node is None or k[1] == node)))
        for key in keys:
            if key in out.deleted_nodes:
                continue
            doomed.append(key)
            out.deleted_nodes.add(key)
            out.hosts[key] = None
            out.touches.pop(key, None)  # its liveness goes with it (backends drop what they keep for a deleted node)
            out.bumped[key] = None
            out.changes.append(Change(revision=0, kind="host_deleted", node=key))
    if not doomed:
        return
    gone = set(doomed)
    held = reads.allocations_on(gone)
    if held and batch.refuse_held_hosts:
        refused = next(key for key in doomed if any(key in a.nodes() for a in held))
        raise HostInUse(refused, sorted(a.consumer_uuid for a in held))
    for allocation in held:
        # A node's parts of allocations go with it ("host_deleted" tells replicas so, and they drop every
        # consumer with a part there); a consumer's parts on other nodes are not the deleted node's to free, so
        # what is left of it is written again, and announced after the deletion.
        out._leaving(allocation)
        kept = _without(allocation, gone)
        out.allocations[allocation.consumer_uuid] = kept
        if kept is not None:
            out._bump(kept)
            out.changes.append(Change(revision=0, kind="allocation", allocation=kept, replaced=allocation))


def _without(allocation: Allocation, gone: set[NodeKey]) -> Allocation | None:
    """The allocation without its parts on ``gone`` (None: nothing is left). When its first part goes, the next
    becomes first, without the NUMA cells and PCI devices the first node's claim held; the consumer generation
    moves on, as on any change of a consumer's allocations."""
    parts = [(key, resources) for key, resources in allocation.parts() if key not in gone]
    if not parts:
        return None
    (first, resources), rest = parts[0], parts[1:]
    changes: dict[str, object] = {}
    if first != (allocation.host, allocation.nodename):
        changes = {"host": first[0], "nodename": first[1], "resources": dict(resources), "numa": None, "pci": [],
                   "confirmed": False}
    if allocation.consumer_generation is not None:
        changes["consumer_generation"] = allocation.consumer_generation + 1
    return msgspec.structs.replace(
        allocation, extra=[AllocationPart(host=key[0], nodename=key[1], resources=dict(r)) for key, r in rest],
        **changes)


def _current(consumer: str, reads: Reads, out: Plan) -> Allocation | None:
    return out.allocations[consumer] if consumer in out.allocations else reads.allocation(consumer)


def _plan_allocations(batch: Batch, reads: Reads, out: Plan) -> None:
    replaces = set(batch.replaces)
    for allocation in batch.allocations:
        old = _current(allocation.consumer_uuid, reads, out) if allocation.consumer_uuid in replaces else None
        if old is not None:  # a move: the node it leaves changes too
            out._bump(old)
            out._leaving(old)
        out.allocations[allocation.consumer_uuid] = allocation
        out._bump(allocation)
        out.changes.append(Change(revision=0, kind="allocation", allocation=allocation, replaced=old))
    for consumer in batch.releases:
        gone = _current(consumer, reads, out)
        if gone is None:
            continue  # lenient, or went with its node in this batch
        out.allocations[consumer] = None
        out._bump(gone)
        out._leaving(gone)
        out.changes.append(Change(revision=0, kind="allocation_deleted", allocation=gone))


def _check_capacity(batch: Batch, reads: Reads, out: Plan) -> None:
    """Placement's rule on write (``providers.check_room``), for every node the batch's allocations touch, counted
    from the allocations alone, as Placement does: a host's own reported usage is the replica's concern."""
    if batch.capacity is None or not batch.allocations:
        return
    nodes = list(dict.fromkeys(key for a in batch.allocations for key in a.nodes()))
    held = reads.allocations_on(set(nodes))
    for key in nodes:
        record = out.hosts[key] if key in out.hosts else reads.host(key)
        if record is None:
            raise NotFound(f"Allocation for resource provider '{key[1]}' that does not exist.", field="allocations")
        before = providers.used(held, key)
        after = providers.used([a for a in held if a.consumer_uuid not in out.allocations], key)
        for allocation in out.allocations.values():
            if allocation is not None:
                for rc, amount in allocation.on(key).items():
                    after[rc] = after.get(rc, 0) + amount
        providers.check_room(record, batch.capacity.default_ratios, (a.on(key) for a in batch.allocations),
                             before, after)


def _check_vacated(batch: Batch, reads: Reads, out: Plan) -> None:
    """No allocation, once the batch has landed, uses an inventory the batch removes."""
    if not batch.vacated:
        return
    nodes = {(host, node) for host, node, _ in batch.vacated}
    after = [a for a in reads.allocations_on(nodes) if a.consumer_uuid not in out.allocations]
    after += [a for a in out.allocations.values() if a is not None]
    for host, node, rc in batch.vacated:
        if any(a.on((host, node)).get(rc) for a in after):
            record = out.hosts[(host, node)] if (host, node) in out.hosts else reads.host((host, node))
            found = providers.view(record) if record is not None else None
            raise providers.InventoryInUse(
                f"Inventory for '{rc}' on resource provider '{found.uuid if found else node}' in use.",
                field="inventories")


def _plan_generation_bumps(batch: Batch, reads: Reads, out: Plan) -> None:
    """Move the named providers' generations on, from what the store holds (Placement bumps every provider an
    allocation write touches, so a client holding an older generation learns of it)."""
    for key in dict.fromkeys(batch.bump_providers):
        record = out.hosts[key] if key in out.hosts else reads.host(key)
        found = providers.view(record) if record is not None else None
        if found is None:
            raise NotFound(f"Allocation for resource provider '{key[1]}' that does not exist.", field="allocations")
        bumped = providers.bumped(found, time.time())
        # One change per node and revision: a replica applies the last record of a node once per revision.
        out.changes = [c for c in out.changes if not (c.kind == "host" and c.host is not None
                                                      and (c.host.host, c.host.nodename) == key)]
        out.hosts[key] = bumped
        out.bumped[key] = None
        out.changes.append(Change(revision=0, kind="host", host=bumped))
