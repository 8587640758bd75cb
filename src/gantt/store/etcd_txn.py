"""The commit transaction of an etcd store: a batch planned (``store.planner``) against reads fetched in one txn
up front, then sent as one txn whose compares guard every read; a refused txn read back through its failure
branch.

A claim (``expect`` + ``allocations``) needs no read: it compares the usage keys' mod revisions with what the
replica saw (and that the consumers hold nothing yet) and puts the allocations and the usage keys together; a
multi-instance request is one txn, so all of it or none. Batches that must read first (host reports are merged
on write, releases and deletions need the record) read in one txn, then commit guarded by the mod revisions they
read, and read again on a conflict (``stats.rmw_retries``).
"""

from __future__ import annotations

import logging
import operator
from dataclasses import dataclass, field
from typing import Any

import msgspec
from aetcd.rpc import rpc_pb2 as pb

from gantt.model import Aggregate, Allocation, HostReport, NodeKey, Record, StoreUnavailable, group_node
from gantt.store import etcd_wire as wire
from gantt.store import planner
from gantt.store.base import Batch, Change, CommitResult, ConsumerHeld, Expect, StoreConflict, lifted
from gantt.store.etcd_client import EtcdClient
from gantt.store.etcd_keys import (
    Keys,
    decode_aggregate,
    decode_allocation,
    decode_host,
    decode_record,
    encode,
    prefix_end,
)

log = logging.getLogger(__name__)

_EQUAL = pb.Compare.EQUAL
_MOD = pb.Compare.MOD
# A plain claim sets these two fields of its Batch and leaves every other at its default (each default is falsy)
_CLAIM_FIELDS = ("expect", "allocations")
_OTHER_FIELDS = operator.attrgetter(*(f for f in Batch.__struct_fields__ if f not in _CLAIM_FIELDS))


def plain_claim(batch: Batch) -> bool:
    """A batch of allocations (and the usage revisions they expect) and nothing else: no read, no replace."""
    return bool(batch.allocations) and not any(_OTHER_FIELDS(batch))  # read in C: asked once per claim


@dataclass
class TxnPlan:
    """One Batch turned into a txn."""

    compares: list[bytes] = field(default_factory=list)  # Compare messages, encoded (store.etcd_wire)
    ops: dict[bytes, bytes | None] = field(default_factory=dict)  # key -> value to put, None: delete
    changes: list[Change] = field(default_factory=list)
    expects: list[tuple[NodeKey, bytes, int]] = field(default_factory=list)  # node, usage key, revision
    claimed: list[bytes] = field(default_factory=list)  # allocation keys that must be absent
    read_revision: int = 0
    stale: list[bytes] = field(default_factory=list)  # index entries read that no longer match their allocation
    quiet: int = 0  # touches too fresh to write (CommitResult.quiet)


class Transactions:
    """Batches turned into txns and committed, on one prefix (``keys``) of the cluster ``client`` calls."""

    def __init__(self, client: EtcdClient, keys: Keys) -> None:
        self.client = client
        self.keys = keys
        self._indexed = 0  # placed-complete's revision once seen: from there on, allocations_on reads the index

    def head(self) -> int:
        """The cluster's current revision (a linearizable read)."""
        return int(self.client.call("Range", pb.RangeRequest(key=self.keys.root, count_only=True)).header.revision)

    def commit(self, batch: Batch, plan: TxnPlan | None = None) -> CommitResult:
        attempts = 32
        for _ in range(attempts):
            plan = plan or self.plan(batch)
            if not plan.ops:
                return CommitResult(revision=plan.read_revision or self.head(), changes=[], quiet=plan.quiet)
            resp = self.client.call("TxnBytes", wire.txn(plan.compares, self.success_ops(plan.ops),
                                                   self.failure_ops(plan)))
            if resp.succeeded:
                revision = resp.header.revision
                self.client.saw(revision)
                self.client.count("commits")
                return CommitResult(revision=revision, quiet=plan.quiet,
                                    changes=[msgspec.structs.replace(c, revision=revision) for c in plan.changes])
            result = self.refused(plan, resp.responses)
            if result is not None:
                return result
            plan = None
        raise StoreUnavailable(f"gave up after {attempts} read-modify-write conflicts (heavy write contention)")

    def refused(self, plan: TxnPlan, responses: Any) -> CommitResult | None:
        """A refused txn read through its failure branch: the claim was applied already (an earlier attempt whose
        answer was lost), or ConsumerHeld / StoreConflict; None when only a guarded read moved (read again)."""
        mine = self._already_applied(plan, responses)
        if mine:
            self.client.saw(mine)
            self.client.count("commits")
            return CommitResult(revision=mine, quiet=plan.quiet,
                                changes=[msgspec.structs.replace(c, revision=mine) for c in plan.changes])
        held = self._held(plan, responses)
        if held is not None:
            self.client.count("claim_conflicts")
            raise held
        conflicts = self._conflicts(plan, responses)
        if conflicts:
            self.client.count("claim_conflicts")
            raise StoreConflict(conflicts)
        self.client.count("rmw_retries")
        return None

    def _already_applied(self, plan: TxnPlan, responses: Any) -> int:
        """A claim that "conflicts" with itself: an earlier attempt timed out but was applied. Its revision, or 0."""
        if not plan.claimed:
            return 0
        revisions = set()
        for key, r in zip(plan.claimed, responses[len(plan.expects):], strict=True):
            kvs = r.response_range.kvs
            if not kvs or kvs[0].value != plan.ops.get(key):
                return 0
            revisions.add(kvs[0].mod_revision)
        return revisions.pop() if len(revisions) == 1 else 0

    def index_complete(self) -> int:
        """The revision from which ``placed/`` lists every allocation's parts (0: not yet); the first time, make
        it so if it can."""
        if self._indexed:
            return self._indexed
        found = self.client.call("Range", pb.RangeRequest(key=self.keys.placed_complete)).kvs
        if found:
            self._indexed = found[0].mod_revision
            return self._indexed
        revision, kvs = self.client.range_pages(self.keys.allocations, prefix_end(self.keys.allocations))
        entries = [pb.RequestOp(request_put=pb.PutRequest(key=self.keys.placement(node, allocation.consumer_uuid)))
                   for allocation in map(decode_allocation, (kv.value for kv in kvs)) for node in allocation.nodes()]
        for start in range(0, len(entries), 100):  # entries are hints (readers check them): no guard needed
            self.client.call("Txn", pb.TxnRequest(success=entries[start:start + 100]))
        # Complete only if no allocation was written since the read (a writer of this version indexes its own, but
        # one of an older version would not): else the scan stays, and the next reader tries again.
        done = self.client.call("Txn", pb.TxnRequest(compare=[
            pb.Compare(key=self.keys.allocations, range_end=prefix_end(self.keys.allocations), target=_MOD,
                       result=pb.Compare.LESS, mod_revision=revision + 1),
            pb.Compare(key=self.keys.placed_complete, target=_MOD, result=_EQUAL, mod_revision=0)],
            success=[pb.RequestOp(request_put=pb.PutRequest(key=self.keys.placed_complete, value=b"1"))],
            failure=[pb.RequestOp(request_range=pb.RangeRequest(key=self.keys.placed_complete))]))
        if done.succeeded:
            self._indexed = done.header.revision
        elif done.responses[0].response_range.kvs:  # another instance completed it
            self._indexed = done.responses[0].response_range.kvs[0].mod_revision
        if entries:
            log.info("etcd store %s: indexed %d allocation parts by node (%s)", self.keys.root.decode().rstrip("/"),
                     len(entries), "complete" if self._indexed else "writes meanwhile: scanning until a later try")
        return self._indexed

    def plan(self, batch: Batch) -> TxnPlan:
        """Read what the batch needs in one txn, plan it (``store.planner``), and turn the plan into a txn whose
        compares guard every read: the txn commits only if nothing it read has changed since."""
        return self.plan_claim(batch) if plain_claim(batch) else self.plan_read(batch)

    def plan_read(self, batch: Batch) -> TxnPlan:
        """``plan`` of any batch: its reads, then ``store.planner``."""
        txn = TxnPlan()
        reads = Reads(self, batch, txn)
        decided = planner.plan(batch, reads)
        for key, at in decided.touches.items():
            txn.ops[self.keys.touched(*key)] = encode(at)
        for key, report in decided.hosts.items():
            txn.ops[self.keys.node(*key)] = None if report is None else encode(report)
            txn.ops[self.keys.touched(*key)] = None  # the record is newer than its touch (store.base: lifted)
        for aggregate_id, aggregate in decided.aggregates.items():
            txn.ops[self.keys.aggregate(aggregate_id)] = None if aggregate is None else encode(aggregate)
        for stale in txn.stale:
            txn.ops[stale] = None
        for consumer, allocation in decided.allocations.items():
            txn.ops[self.keys.allocation(consumer)] = None if allocation is None else encode(allocation)
            before = reads.before(consumer)
            after = set(allocation.nodes()) if allocation is not None else set()
            for node in before.nodes() if before is not None else ():
                if node not in after:
                    txn.ops[self.keys.placement(node, consumer)] = None
            for node in after:  # put even when present: a store indexed late heals itself
                txn.ops[self.keys.placement(node, consumer)] = b""
        for host, info in decided.instances.items():
            txn.ops[self.keys.instances(host)] = encode(info)
        for (kind, name), record in decided.records.items():
            txn.ops[self.keys.record(kind, name)] = None if record is None else encode(record)
        for key in decided.bumped:  # a usage key's mod_revision is the node's usage revision
            txn.ops[self.keys.usage(*key)] = None if key in decided.deleted_nodes else b""
        txn.changes = decided.changes
        txn.quiet = decided.quiet
        return txn

    def plan_claim(self, batch: Batch) -> TxnPlan:
        """``plan`` of a plain claim, without its machinery: what the planner makes of one, and the txn that
        ``plan`` builds from that (tests/etcd/test_claim_plan.py checks them equal on generated claims). A claim
        reads nothing, so its checks are all compares (its nodes' usage revisions, its consumers unbooked), and
        its effects are its allocations, their index entries and their nodes' usage keys. It is most of what the
        group committer does per claim: the generic road (an empty read set built, every planner step run to
        find nothing to do) cost twice as much."""
        txn = TxnPlan()
        keys = self.keys
        for e in batch.expect:  # planner._check: expect_holds
            usage = keys.usage(e.host, e.node)
            txn.expects.append(((e.host, e.node), usage, e.revision))
            txn.compares.append(wire.compare_mod(usage, e.revision))
        for allocation in batch.allocations:  # planner._check: unbooked (nothing replaced)
            key = keys.allocation(allocation.consumer_uuid)
            txn.claimed.append(key)
            txn.compares.append(wire.compare_mod(key, 0))
        decided: dict[str, Allocation] = {}
        bumped: dict[NodeKey, None] = {}
        for allocation in batch.allocations:  # planner._plan_allocations
            decided[allocation.consumer_uuid] = allocation
            bumped.update(dict.fromkeys(allocation.nodes()))
            if allocation.group:
                bumped[group_node(allocation.group)] = None
            txn.changes.append(Change(revision=0, kind="allocation", allocation=allocation))
        for consumer, allocation in decided.items():  # as plan() writes them
            txn.ops[keys.allocation(consumer)] = encode(allocation)
            for node in allocation.nodes():
                txn.ops[keys.placement(node, consumer)] = b""
        for node in bumped:
            txn.ops[keys.usage(*node)] = b""
        return txn

    def failure_ops(self, plan: TxnPlan) -> list[bytes]:
        ops = [wire.read(usage, keys_only=True) for _, usage, _ in plan.expects]
        ops += [wire.read(key) for key in plan.claimed]
        return ops

    def success_ops(self, ops: dict[bytes, bytes | None]) -> list[bytes]:
        return [*self.write_ops(ops), self.last_write_op()]

    def write_ops(self, ops: dict[bytes, bytes | None]) -> list[bytes]:
        return [wire.put(k, v) if v is not None else wire.delete(k) for k, v in ops.items()]

    def last_write_op(self) -> bytes:
        return wire.put(self.keys.last_write)  # barrier() reads its revision

    def _conflicts(self, plan: TxnPlan, responses: Any) -> list[NodeKey]:
        conflicts: list[NodeKey] = []
        for (node, _, expected), r in zip(plan.expects, responses[:len(plan.expects)], strict=True):
            actual = r.response_range.kvs[0].mod_revision if r.response_range.kvs else 0
            if actual != expected and node not in conflicts:
                conflicts.append(node)
            self.client.saw(actual)
        return conflicts

    def _held(self, plan: TxnPlan, responses: Any) -> ConsumerHeld | None:
        """The claim's consumers that another writer booked first (a claim never moves a booking)."""
        held: list[str] = []
        revision = 0
        for key, r in zip(plan.claimed, responses[len(plan.expects):], strict=True):
            if r.response_range.kvs:
                revision = max(revision, r.response_range.kvs[0].mod_revision)
                held.append(self.keys.name(key, self.keys.allocations))
        if not held:
            return None
        self.client.saw(revision)
        return ConsumerHeld(held, revision)


class Reads:
    """The planner's reads: fetched in one txn up front, each guarded by a compare of the commit's txn.

    A claim's ``expect`` and its consumers' absence are not read at all: they become compares (a usage key's
    mod_revision, an allocation key's mod_revision 0), so a claim costs one round trip; when a compare fails,
    ``Transactions.commit`` raises the error the planner would have raised.
    """

    def __init__(self, store: Transactions, batch: Batch, txn: TxnPlan) -> None:
        self._s, self._txn = store, txn
        k = store.keys
        wanted: list[tuple[str, Any, bytes, bytes | None]] = []  # (what, id, key, range_end)
        wanted += [("host", (r.host, r.nodename), k.node(r.host, r.nodename), None) for r in batch.reports]
        wanted += [("live", (r.host, r.nodename), k.touched(r.host, r.nodename), None) for r in batch.reports]
        for host, node in batch.delete_hosts:
            # The usage keys are read only for their guard: a claim landing on a doomed node fails the txn.
            if node is None:
                prefix, usage = k.host_nodes(host), k.host_usage(host)
                wanted += [("nodes", (host, None), prefix, prefix_end(prefix)),
                           ("usage", (host, None), usage, prefix_end(usage))]
            else:
                wanted += [("nodes", (host, node), k.node(host, node), None),
                           ("usage", (host, node), k.usage(host, node), None)]
        wanted += [("agg", a, k.aggregate(a), None) for a in [*batch.delete_aggregates,
                                                              *(m.aggregate for m in batch.memberships)]]
        wanted += [("alloc", c, k.allocation(c), None)
                   for c in [*batch.releases, *batch.replaces, *(e.consumer for e in batch.consumers)]]
        # Placement's allocation writes read the records of the providers they bump or check for room.
        checked = [key for a in batch.allocations for key in a.nodes()] if batch.capacity is not None else []
        wanted += [("host", key, k.node(*key), None) for key in [*checked, *batch.bump_providers]]
        # A generation is read from the node's record; the record's guard makes the check atomic with the write.
        wanted += [("host", (g.host, g.node), k.node(g.host, g.node), None) for g in batch.generations]
        wanted += [("record", key, k.record(*key), None) for key in batch.delete_records]
        for m in batch.merges:  # both names' records (and times)
            for name in ((m.host, m.node), (m.into_host, m.into_node)):
                wanted += [("host", name, k.node(*name), None), ("live", name, k.touched(*name), None)]
        if batch.merges:  # and every aggregate, for those the old name is a member of (a prefix, guarded whole)
            wanted += [("aggs", None, k.aggregates, prefix_end(k.aggregates))]
        self._found: dict[tuple[str, Any], list[Any]] = {}
        self._before: dict[str, Allocation] = {}
        if not wanted:
            return
        resp = store.client.call("Txn", pb.TxnRequest(success=[
            pb.RequestOp(request_range=pb.RangeRequest(key=key, range_end=end or b"")) for _, _, key, end in wanted]))
        txn.read_revision = resp.header.revision
        for (what, ident, key, end), r in zip(wanted, resp.responses, strict=True):
            kvs = list(r.response_range.kvs)
            if (what, ident) in self._found:
                continue  # read twice (a consumer released and moved): one guard is enough
            self._found[(what, ident)] = kvs
            if end is None:  # guard a single key: unchanged since read (0: still absent)
                txn.compares.append(wire.compare_mod(key, kvs[0].mod_revision if kvs else 0))
            else:  # guard a prefix: nothing in it changed or appeared since the read
                txn.compares.append(wire.compare_mod(key, txn.read_revision + 1, wire.LESS, end))

    def head(self) -> int:
        return self._txn.read_revision or self._s.head()

    def expect_holds(self, expect: Expect) -> bool:
        usage = self._s.keys.usage(expect.host, expect.node)
        self._txn.expects.append(((expect.host, expect.node), usage, expect.revision))
        self._txn.compares.append(wire.compare_mod(usage, expect.revision))
        return True

    def host(self, key: NodeKey) -> HostReport | None:
        kvs = self._found[("host", key)]
        if not kvs:
            return None
        live = self._found.get(("live", key))  # read for reports only: the others do not look at the time
        return lifted(decode_host(kvs[0].value), float(live[0].value) if live else None)

    def nodes_of(self, host: str, node: str | None) -> list[NodeKey]:
        return [self._s.keys.split(kv.key, self._s.keys.hosts) for kv in self._found[("nodes", (host, node))]]

    def has_aggregate(self, aggregate_id: str) -> bool:
        return bool(self._found[("agg", aggregate_id)])

    def aggregate(self, aggregate_id: str) -> Aggregate | None:
        kvs = self._found[("agg", aggregate_id)]
        return decode_aggregate(kvs[0].value) if kvs else None

    def aggregates_with(self, host: str) -> list[Aggregate]:
        found = (decode_aggregate(kv.value) for kv in self._found[("aggs", None)])
        return [a for a in found if host in a.hosts]

    def allocation(self, consumer: str) -> Allocation | None:
        kvs = self._found[("alloc", consumer)]
        return decode_allocation(kvs[0].value) if kvs else None

    def record(self, key: tuple[str, str]) -> Record | None:
        kvs = self._found[("record", key)]
        return decode_record(kvs[0].value) if kvs else None

    def unbooked(self, consumer: str) -> bool:
        key = self._s.keys.allocation(consumer)
        self._txn.claimed.append(key)
        self._txn.compares.append(wire.compare_mod(key, 0))
        return True

    def allocations_on(self, nodes: set[NodeKey]) -> list[Allocation]:
        keys, revision = self._s.keys, self._txn.read_revision
        complete = self._s.index_complete()
        if complete and (revision == 0 or complete <= revision):  # this plan reads at a revision it covers
            found = self._indexed_on(nodes)
        else:  # allocations are keyed by consumer: without the index, a scan
            _, kvs = self._s.client.range_pages(keys.allocations, prefix_end(keys.allocations), revision)
            found = [decode_allocation(kv.value) for kv in kvs]
        # What was read holds at commit only if no allocation on these nodes changed since: each such change
        # moves the node's usage key (a capacity check reads this too, not only a host's deletion), and writes
        # the index entries too, in the same txn.
        for host, node in sorted(nodes):
            self._txn.compares.append(wire.compare_mod(keys.usage(host, node), revision + 1, wire.LESS))
        on = [a for a in found if any(key in nodes for key in a.nodes())]
        self._before.update((a.consumer_uuid, a) for a in on)
        return on

    def _indexed_on(self, nodes: set[NodeKey]) -> list[Allocation]:
        """The allocations the nodes' index entries name, read at the txn's read revision; entries whose
        allocation has no part there any more are marked for deletion with the commit."""
        keys, revision = self._s.keys, self._txn.read_revision
        ordered = sorted(nodes)
        prefixes = [keys.placed_on(*node) for node in ordered]
        listed = self._s.client.ranges([pb.RangeRequest(key=p, range_end=prefix_end(p), keys_only=True,
                                                        revision=revision) for p in prefixes])
        entries: dict[str, list[tuple[NodeKey, bytes]]] = {}
        for node, r in zip(ordered, listed, strict=True):
            for kv in r.kvs:
                entries.setdefault(keys.name(kv.key, keys.placed_on(*node)), []).append((node, kv.key))
        if not entries:
            return []
        consumers = list(entries)
        read = self._s.client.ranges([pb.RangeRequest(key=keys.allocation(c), revision=revision) for c in consumers])
        found: list[Allocation] = []
        for consumer, r in zip(consumers, read, strict=True):
            kvs = r.kvs
            allocation = decode_allocation(kvs[0].value) if kvs else None
            parts = set(allocation.nodes()) if allocation is not None else set()
            self._txn.stale += [key for node, key in entries[consumer] if node not in parts]
            if allocation is not None and parts & nodes:
                found.append(allocation)
        return found

    def before(self, consumer: str) -> Allocation | None:
        """The consumer's stored allocation, if this plan read it (to drop the index entries it leaves)."""
        if consumer in self._before:
            return self._before[consumer]
        kvs = self._found.get(("alloc", consumer))
        return decode_allocation(kvs[0].value) if kvs else None
