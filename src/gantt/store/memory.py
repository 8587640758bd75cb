"""MemoryStore: the store contract in one process's memory. The reference the other backends are tested against."""

from __future__ import annotations

import threading

import msgspec

from gantt.model import Aggregate, Allocation, HostReport, InstanceInfo, NodeKey, Record
from gantt.model.namespaces import DEFAULT, check_name
from gantt.store import planner
from gantt.store.base import Batch, Change, CommitResult, Compacted, Expect, NodeRevision, Snapshot, Store, lifted


class MemoryStore(Store):
    def __init__(self, history: int = 100_000, namespace: str = DEFAULT) -> None:
        self.url = "memory://"
        self.namespace = check_name(namespace)  # nothing to partition: each namespace has its own store object
        self._cond = threading.Condition()
        self._revision = 0
        self._history: list[Change] = []
        self._history_limit = history
        self._hosts: dict[NodeKey, HostReport] = {}
        self._node_revisions: dict[NodeKey, int] = {}
        self._aggregates: dict[str, Aggregate] = {}
        self._allocations: dict[str, Allocation] = {}
        self._instances: dict[str, InstanceInfo] = {}
        self._records: dict[tuple[str, str], Record] = {}
        self._touched: dict[NodeKey, float] = {}  # liveness kept apart from the records (base: touches)

    def snapshot(self) -> Snapshot:
        with self._cond:
            return Snapshot(
                revision=self._revision,
                hosts=[lifted(r, self._touched.get(k)) for k, r in self._hosts.items()],
                aggregates=list(self._aggregates.values()),
                allocations=list(self._allocations.values()),
                instances=list(self._instances.values()),
                node_revisions=[NodeRevision(h, n, r) for (h, n), r in self._node_revisions.items()],
                records=list(self._records.values()),
            )

    def changes(self, since: int, timeout: float = 1.0, *, head: int | None = None) -> list[Change]:
        with self._cond:
            if self._history and since < self._history[0].revision - 1:
                raise Compacted(f"revision {since} is compacted; oldest kept is {self._history[0].revision}")
            if since >= self._revision and timeout > 0:
                self._cond.wait_for(lambda: self._revision > since, timeout=timeout)
            return [c for c in self._history if c.revision > since]

    def barrier(self) -> int:
        with self._cond:
            return self._revision

    def commit(self, batch: Batch) -> CommitResult:
        with self._cond:
            p = planner.plan(batch, _Reads(self))
            if not p.changes:
                return CommitResult(revision=self._revision, changes=[], quiet=p.quiet)
            rev = self._revision + 1
            for key, report in p.hosts.items():
                self._touched.pop(key, None)  # the record is newer than its touch (base: lifted)
                if report is None:
                    self._hosts.pop(key, None)
                else:
                    self._hosts[key] = report
            self._touched.update(p.touches)
            for aggregate_id, aggregate in p.aggregates.items():
                if aggregate is None:
                    self._aggregates.pop(aggregate_id, None)
                else:
                    self._aggregates[aggregate_id] = aggregate
            for consumer, allocation in p.allocations.items():
                if allocation is None:
                    self._allocations.pop(consumer, None)
                else:
                    self._allocations[consumer] = allocation
            self._instances.update(p.instances)
            for key, record in p.records.items():
                if record is None:
                    self._records.pop(key, None)
                else:
                    self._records[key] = record
            for key in p.bumped:
                self._node_revisions[key] = rev
            changes = [msgspec.structs.replace(c, revision=rev) for c in p.changes]
            self._revision = rev
            self._history.extend(changes)
            if len(self._history) > self._history_limit:
                del self._history[: len(self._history) - self._history_limit]
            self._cond.notify_all()
            return CommitResult(revision=rev, changes=changes, quiet=p.quiet)


class _Reads:
    """The planner's reads, straight from the dicts (the caller holds the store's lock)."""

    def __init__(self, store: MemoryStore) -> None:
        self._s = store

    def head(self) -> int:
        return self._s._revision

    def expect_holds(self, expect: Expect) -> bool:
        return self._s._node_revisions.get((expect.host, expect.node), 0) == expect.revision

    def liveness(self, keys: list[NodeKey]) -> dict[NodeKey, tuple[int, float | None]]:
        return {key: (self._s._node_revisions.get(key, 0), self._s._touched.get(key)) for key in keys}

    def host(self, key: NodeKey) -> HostReport | None:
        record = self._s._hosts.get(key)
        return None if record is None else lifted(record, self._s._touched.get(key))

    def nodes_of(self, host: str, node: str | None) -> list[NodeKey]:
        if node is not None:
            return [(host, node)] if (host, node) in self._s._hosts else []
        return [k for k in self._s._hosts if k[0] == host]

    def has_aggregate(self, aggregate_id: str) -> bool:
        return aggregate_id in self._s._aggregates

    def aggregate(self, aggregate_id: str) -> Aggregate | None:
        return self._s._aggregates.get(aggregate_id)

    def allocation(self, consumer: str) -> Allocation | None:
        return self._s._allocations.get(consumer)

    def unbooked(self, consumer: str) -> bool:
        return consumer not in self._s._allocations

    def allocations_on(self, nodes: set[NodeKey]) -> list[Allocation]:
        return [a for a in self._s._allocations.values() if any(key in nodes for key in a.nodes())]

    def aggregates_with(self, host: str) -> list[Aggregate]:
        return [a for a in self._s._aggregates.values() if host in a.hosts]

    def record(self, key: tuple[str, str]) -> Record | None:
        return self._s._records.get(key)
