"""What a change of the store does to a replica's state: the feed's changes, and those of its own commits.

Each entity remembers the revision it was last applied at (``Replica._applied``), so a change the replica applied
from its own commit is skipped when the feed brings it again; a node's usage revision moves with every change
that moves it in the store (``_usage_nodes``), which is what a claim expects. ``Replica.apply`` takes the table's
lock and calls ``apply_locked``.
"""

from __future__ import annotations

from typing import Any, Protocol

from gantt.compute.state import HostTable
from gantt.model import NodeKey, NotFound, aggregate_node, group_node
from gantt.replication.liveness import Bodies
from gantt.resources.catalog import Catalog
from gantt.resources.providers import ProviderIndex
from gantt.store.base import Change, lifted


class Held(Protocol):
    """What the changes move in a replica (``Replica``'s own attributes)."""

    revision: int
    providers: ProviderIndex
    bodies: Bodies
    catalog: Catalog
    instance_info: dict[str, list[str]]
    node_revisions: dict[NodeKey, int]
    _applied: dict[tuple[Any, ...], int]


def apply_locked(held: Held, table: HostTable, changes: list[Change], own: str | None) -> None:
    """``Replica.apply``'s work, under the table's lock: ``own`` as there."""
    # Changes at or below the cursor are in the table already: a reload between the feed's read and this apply
    # took a snapshot that holds them, and applied again they would undo what came after it (an allocation
    # released since held again, or one booked since gone: room that is not there).
    loaded = held.revision
    # The cursor moves past a revision once all of its changes are applied: ``sync`` reads it without the
    # lock, and moved at a revision's first change it returned while the feed thread was still adding that
    # revision's rows (a batch of 1,000 reports: a caller's decision then saw the table grow).
    applying = 0
    # Touches (a flush of repeated reports is hundreds in one revision) are applied together: before any
    # other change, and before the cursor moves past their revision.
    touches: list[Change] = []
    for change in changes:
        if change.revision <= loaded:
            continue
        if own is None and applying < change.revision:
            if touches:
                _touch(held, table, touches)
                touches = []
            if applying > held.revision:
                held.revision = applying
            applying = change.revision
        if change.kind == "touch":
            touches.append(change)
            continue
        if touches:
            _touch(held, table, touches)
            touches = []
        _apply_one(held, table, change, bump=own != "write", fed=own is None)
    if touches:
        _touch(held, table, touches)
    if own is None and applying > held.revision:
        held.revision = applying

def _apply_one(held: Held, table: HostTable, change: Change, *, bump: bool = True, fed: bool = False) -> None:
    """``fed``: the change comes from the feed (``apply`` moves the cursor past its revision)."""
    # Read before the change (a release takes the allocation that names its group out of the table), moved
    # after it: ``heartbeat`` reads a node's usage revision before its record, and so never pairs a revision
    # with the record as it was before that revision.
    nodes = _usage_nodes(change, table) if bump else []
    _apply_effect(held, table, change, fed)
    for node in nodes:
        _bump(held, node[0], node[1], change.revision)

def _apply_effect(held: Held, table: HostTable, change: Change, fed: bool = False) -> None:
    rev = change.revision
    kind = change.kind
    if kind == "usage":
        return  # a bump and nothing else
    if kind == "touch":
        _touch(held, table, [change])
        return
    key = _entity(change)
    applied = held._applied
    if applied.get(key, 0) >= rev:
        return
    applied[key] = rev
    try:
        # the changes of every placement and release first: they are most of what a busy feed carries
        if kind == "allocation" and change.allocation is not None:
            table.put_allocation(change.allocation)
        elif kind == "allocation_deleted" and change.allocation is not None:
            table.release(change.allocation.consumer_uuid)
        elif kind == "host" and change.host is not None:
            table.update(change.host, whole=True, observed=True)
            held.providers.put(change.host)
            node = (change.host.host, change.host.nodename)
            if change.digest is not None:  # the body that wrote it, taken again from its digest
                held.bodies.keep(node, change.digest, change.host)
            else:
                held.bodies.forget(node)
        elif kind == "host_deleted" and change.node is not None:
            held.bodies.forget(change.node)
            held.providers.remove(change.node)
            table.remove(change.node[0], change.node[1])
        elif kind == "record" and change.record is not None:
            held.catalog.put(change.record)
        elif kind == "record_deleted" and change.record is not None:
            held.catalog.remove(change.record.key)
        elif kind == "aggregate" and change.aggregate is not None:
            table.update_aggregate(change.aggregate)
        elif kind == "aggregate_deleted" and change.aggregate_id is not None:
            table.delete_aggregate(change.aggregate_id)
        elif kind == "instances" and change.instances is not None:
            held.instance_info[change.instances.host] = list(change.instances.instances)
            table.set_instances(change.instances.host, change.instances.instances, replace=True)
    except NotFound:
        pass  # already gone locally (our own rollback, or a host we never saw): the store is the truth
    if fed and kind == "allocation_deleted":
        # Forgotten, or every consumer ever placed would stay here (a thousand a second, for as long as the
        # process lives): once this revision is applied the cursor is past it, and a change at or below the
        # cursor is never applied again (``apply_locked``), so the entry would only repeat what the cursor
        # says. Not for our own writes: those are applied ahead of the cursor.
        del applied[key]

def _touch(held: Held, table: HostTable, changes: list[Change]) -> None:
    """Apply touch changes, in order."""
    applied = held._applied
    touches: list[tuple[NodeKey, float]] = []
    bodies: list[bytes | None] = []
    for change in changes:
        assert change.node is not None and change.at is not None
        key = ("node", *change.node)
        if applied.get(key, 0) >= change.revision:
            continue  # a later record of the node is applied already (our own write, ahead of the feed)
        applied[key] = change.revision
        touches.append((change.node, change.at))
        bodies.append(change.digest)
    table.touch_many(touches, observed=True)
    providers = held.providers
    for (node, at), body in zip(touches, bodies, strict=True):
        view = providers.by_key.get(node)
        if view is not None:  # Placement's updated_at follows the report time as it would on a rewrite
            record = lifted(view.record, at)
            providers.put(record)
            if body is not None:  # the repeat's body, which repeats the record still: known in every worker
                held.bodies.keep(node, body, record)

def _bump(held: Held, host: str, node: str, revision: int) -> None:
    key = (host, node)
    if held.node_revisions.get(key, 0) < revision:
        held.node_revisions[key] = revision


def _usage_nodes(change: Change, table: HostTable) -> list[NodeKey]:
    """The nodes (and server-group pseudo-nodes) whose usage revision this change moves, as the store counts."""
    # placements and releases first: they are most of what a busy feed carries
    if change.kind in ("allocation", "allocation_deleted") and change.allocation is not None:
        allocation = change.allocation
        nodes = allocation.nodes() if allocation.host else []
        group = allocation.group
        if not allocation.host:
            # A deletion from a feed that kept no old value: it names no node (the feed sends that revision's
            # usage changes instead; a host-less allocation's nodes() would be a phantom node ("", "")), and
            # its group is in our table.
            held = table.allocation(allocation.consumer_uuid)
            group = held.group if held is not None else None
        if group:
            nodes.append(group_node(group))
        if change.kind == "allocation":
            # A move leaves a node: the store moved that node's usage revision too. (Not guessed from the table:
            # a local claim of ours for the same consumer may be in flight there.)
            left = change.replaced
            if left is not None and left.host:
                nodes += [key for key in left.nodes() if key not in nodes]
                if left.group and group_node(left.group) not in nodes:
                    nodes.append(group_node(left.group))
        return nodes
    if change.kind == "host" and change.host is not None:
        return [(change.host.host, change.host.nodename)]
    if change.kind in ("host_deleted", "usage") and change.node is not None:
        return [change.node]
    if change.kind == "aggregate" and change.aggregate is not None:
        return [aggregate_node(change.aggregate.key)]
    if change.kind == "aggregate_deleted" and change.aggregate_id is not None:
        return [aggregate_node(change.aggregate_id)]
    return []


def _entity(change: Change) -> tuple[Any, ...]:
    if change.kind in ("host", "host_deleted"):
        if change.host is not None:
            return ("node", change.host.host, change.host.nodename)
        assert change.node is not None
        return ("node", change.node[0], change.node[1])
    if change.kind in ("aggregate", "aggregate_deleted"):
        return ("aggregate", change.aggregate.key if change.aggregate else change.aggregate_id)
    if change.kind in ("allocation", "allocation_deleted"):
        assert change.allocation is not None
        return ("allocation", change.allocation.consumer_uuid)
    if change.kind in ("record", "record_deleted"):
        assert change.record is not None
        return ("record", *change.record.key)
    assert change.instances is not None
    return ("instances", change.instances.host)


