"""The etcd store's key layout and value encoding, and how a watch event reads as a ``Change``.

Shared by the store's reads and writes (``store.etcd``) and its change feed (``store.etcd_feed``); the layout
itself is described in ``store.etcd``'s docstring.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote, unquote

import msgspec

from gantt.model import Aggregate, Allocation, HostReport, InstanceInfo, NodeKey, Record
from gantt.store.base import Change

encode = msgspec.json.Encoder().encode
decode_host = msgspec.json.Decoder(HostReport).decode
decode_aggregate = msgspec.json.Decoder(Aggregate).decode
decode_allocation = msgspec.json.Decoder(Allocation).decode
decode_instances = msgspec.json.Decoder(InstanceInfo).decode
decode_record = msgspec.json.Decoder(Record).decode

_DELETE = 1  # mvccpb.Event.DELETE


def _revision(change: Change) -> int:
    return change.revision


def prefix_end(prefix: bytes) -> bytes:
    """etcd's range_end for "every key starting with prefix"."""
    end = bytearray(prefix)
    while end:
        if end[-1] < 0xFF:
            end[-1] += 1
            return bytes(end)
        end.pop()
    return b"\0"


_PLAIN = re.compile(r"[A-Za-z0-9_.~-]*").fullmatch  # what quote() leaves as it is


def _q(name: str) -> str:
    # Host names and uuids need no escaping: a match costs ~40 % of quote() (0.8 against 2.0 µs for a uuid), and a
    # claim names ~9 keys.
    return name if _PLAIN(name) else quote(name, safe="")


class Keys:
    """Every key of one store under its prefix; names are percent-encoded, so any name is one path segment."""

    def __init__(self, prefix: str) -> None:
        self.root = (prefix + "/").encode()
        self.end = prefix_end(self.root)
        self.hosts = self.root + b"hosts/"
        self.usage_prefix = self.root + b"usage/"
        self.aggregates = self.root + b"aggregates/"
        self.allocations = self.root + b"allocations/"
        self.instances_prefix = self.root + b"instances/"
        self.records = self.root + b"records/"
        self.placed = self.root + b"placed/"
        self.placed_complete = self.root + b"placed-complete"
        self.last_write = self.root + b"last-write"
        self.live = self.root + b"live/"

    def node(self, host: str, node: str) -> bytes:
        return self.hosts + f"{_q(host)}/{_q(node)}".encode()

    def touched(self, host: str, node: str) -> bytes:
        """The node's liveness key: the time of its last touch (a report that changed nothing but its time)."""
        return self.live + f"{_q(host)}/{_q(node)}".encode()

    def usage(self, host: str, node: str) -> bytes:
        return self.usage_prefix + f"{_q(host)}/{_q(node)}".encode()

    def host_nodes(self, host: str) -> bytes:
        """The prefix of every node key of ``host``."""
        return self.hosts + f"{_q(host)}/".encode()

    def host_usage(self, host: str) -> bytes:
        """The prefix of every usage key of ``host``."""
        return self.usage_prefix + f"{_q(host)}/".encode()

    def allocation(self, consumer: str) -> bytes:
        return self.allocations + _q(consumer).encode()

    def placed_on(self, host: str, node: str) -> bytes:
        """The prefix of the node's index entries: one key per consumer with a part on it."""
        return self.placed + f"{_q(host)}/{_q(node)}/".encode()

    def placement(self, key: NodeKey, consumer: str) -> bytes:
        return self.placed_on(*key) + _q(consumer).encode()

    def aggregate(self, aggregate_id: str) -> bytes:
        return self.aggregates + _q(aggregate_id).encode()

    def instances(self, host: str) -> bytes:
        return self.instances_prefix + _q(host).encode()

    def record(self, kind: str, name: str) -> bytes:
        return self.records + f"{_q(kind)}/{_q(name)}".encode()

    @staticmethod
    def split(key: bytes, prefix: bytes) -> NodeKey:
        """(host, node) of a node or usage key."""
        host, _, node = key[len(prefix):].decode().partition("/")
        return unquote(host), unquote(node)

    @staticmethod
    def name(key: bytes, prefix: bytes) -> str:
        """The consumer or aggregate id of a key."""
        return unquote(key[len(prefix):].decode())

    # ------------------------------------------------------------------------------------- watch events

    def changes(self, events: Any) -> tuple[list[Change], int]:
        """One watch response's events as changes, and the revision of the last event (0: none)."""
        changes: list[Change] = []
        last = 0
        lost: set[int] = set()  # revisions with an allocation event whose old value the watch no longer has
        usage: list[tuple[int, bytes]] = []  # (revision, key) of usage-key puts, made changes only if needed
        placed, usage_prefix, allocations = self.placed, self.usage_prefix, self.allocations
        for ev in events:
            kv = ev.kv
            last = kv.mod_revision
            key: bytes = kv.key
            # Most events of a claim are index entries and usage keys: the replica needs no change for either
            # (a usage key only in the case below), so they skip the decoding.
            if key.startswith(placed):
                continue
            deleted = ev.type == _DELETE
            if key.startswith(usage_prefix):
                if not deleted:
                    usage.append((last, key))
                continue
            prev = ev.prev_kv if ev.HasField("prev_kv") else None
            change = self.change(last, kv, deleted, prev)
            if change is not None:
                changes.append(change)
                if prev is None and (deleted or kv.version > 1) and key.startswith(allocations):
                    lost.add(last)
        if lost and usage:
            # Kept only for a revision in ``lost``: then the replica cannot tell from the allocation change which
            # node it left, and would expect that node's old usage revision until a reload. In event order
            # within the revision, after its other changes (as the replica applies them, it does not matter).
            changes += [Change(revision=rev, kind="usage", node=self.split(key, usage_prefix))
                        for rev, key in usage if rev in lost]
            changes.sort(key=_revision)
        if last and (not changes or changes[-1].revision < last):
            # The newest revision changed nothing a replica holds (a shared claim txn whose every claim lost still
            # writes ``last-write``, which barrier() returns): a node-less "usage" change moves the replica's
            # cursor there, or a replica waiting on that barrier would wait until the next real write.
            changes.append(Change(revision=last, kind="usage"))
        return changes, last

    def change(self, revision: int, kv: Any, deleted: bool, prev: Any) -> Change | None:
        """One key's event; None for usage keys (their revision travels with the change of the same txn)."""
        key: bytes = kv.key
        if key.startswith(self.hosts):
            if deleted:
                return Change(revision=revision, kind="host_deleted", node=self.split(key, self.hosts))
            return Change(revision=revision, kind="host", host=decode_host(kv.value))
        if key.startswith(self.allocations):
            if deleted:
                if prev is not None and prev.value:
                    allocation = decode_allocation(prev.value)
                else:  # history without the old value: the consumer is all the replica needs to drop it
                    allocation = Allocation(consumer_uuid=self.name(key, self.allocations), host="", nodename="",
                                            resources={})
                return Change(revision=revision, kind="allocation_deleted", allocation=allocation)
            replaced = decode_allocation(prev.value) if prev is not None and prev.value else None  # a move
            return Change(revision=revision, kind="allocation", allocation=decode_allocation(kv.value),
                          replaced=replaced)
        if key.startswith(self.aggregates):
            if deleted:
                return Change(revision=revision, kind="aggregate_deleted", aggregate_id=self.name(key, self.aggregates))
            return Change(revision=revision, kind="aggregate", aggregate=decode_aggregate(kv.value))
        if key.startswith(self.records):
            if deleted:
                kind, name = self.split(key, self.records)
                return Change(revision=revision, kind="record_deleted",
                              record=Record(kind=kind, name=name))  # type: ignore[arg-type]  # a records key names a RecordKind (its prefix)
            return Change(revision=revision, kind="record", record=decode_record(kv.value))
        if key.startswith(self.live):  # deleted with its node ("host_deleted" says so) or by a write of its record
            return None if deleted else Change(revision=revision, kind="touch", node=self.split(key, self.live),
                                               at=float(kv.value))
        if key.startswith(self.instances_prefix) and not deleted:
            return Change(revision=revision, kind="instances", instances=decode_instances(kv.value))
        return None
