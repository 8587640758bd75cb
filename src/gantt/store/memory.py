"""MemoryStore: the store contract in one process's memory. The reference the other backends are tested against."""

from __future__ import annotations

import threading

from gantt.model import Aggregate, Allocation, HostReport, InstanceInfo, NodeKey, NotFound, group_node, merge_reports
from gantt.store.base import (
    Batch,
    Change,
    CommitResult,
    Compacted,
    ConsumerHeld,
    NodeRevision,
    Snapshot,
    Store,
    StoreConflict,
)


class MemoryStore(Store):
    def __init__(self, history: int = 100_000) -> None:
        self.url = "memory://"
        self._cond = threading.Condition()
        self._revision = 0
        self._history: list[Change] = []
        self._history_limit = history
        self._hosts: dict[NodeKey, HostReport] = {}
        self._node_revisions: dict[NodeKey, int] = {}
        self._aggregates: dict[str, Aggregate] = {}
        self._allocations: dict[str, Allocation] = {}
        self._instances: dict[str, InstanceInfo] = {}

    def snapshot(self) -> Snapshot:
        with self._cond:
            return Snapshot(
                revision=self._revision,
                hosts=list(self._hosts.values()),
                aggregates=list(self._aggregates.values()),
                allocations=list(self._allocations.values()),
                instances=list(self._instances.values()),
                node_revisions=[NodeRevision(h, n, r) for (h, n), r in self._node_revisions.items()],
            )

    def changes(self, since: int, timeout: float = 1.0) -> list[Change]:
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
            rev = self._revision + 1
            conflicts = [(e.host, e.node) for e in batch.expect
                         if self._node_revisions.get((e.host, e.node), 0) != e.revision]
            if conflicts:
                raise StoreConflict(conflicts)
            replaces = set(batch.replaces)
            held = [a.consumer_uuid for a in batch.allocations
                    if a.consumer_uuid in self._allocations and a.consumer_uuid not in replaces]
            if held:
                raise ConsumerHeld(held, self._revision)
            for consumer in batch.replaces:
                if consumer not in self._allocations:
                    raise NotFound(f"no allocation for consumer {consumer!r} to move", field="consumer_uuid")
            if not batch.lenient_releases:
                for consumer in batch.releases:
                    if consumer not in self._allocations:
                        raise NotFound(f"no allocation for consumer {consumer!r}", field="consumer_uuid")
            for aggregate_id in batch.delete_aggregates:
                if aggregate_id not in self._aggregates:
                    raise NotFound(f"no such aggregate {aggregate_id!r}", field="id")
            for host, node in batch.delete_hosts:
                if not any(k[0] == host and (node is None or k[1] == node) for k in self._hosts):
                    raise NotFound(f"no such host {host!r}", field="host")
            changes: list[Change] = []
            for report in batch.reports:
                key = (report.host, report.nodename)
                merged = merge_reports(self._hosts.get(key), report)
                if merged is None:
                    continue  # stale
                self._hosts[key] = merged
                self._node_revisions[key] = rev
                changes.append(Change(revision=rev, kind="host", host=merged))
            for host, node in batch.delete_hosts:
                for key in [k for k in self._hosts if k[0] == host and (node is None or k[1] == node)]:
                    del self._hosts[key]
                    self._node_revisions[key] = rev
                    for consumer in [c for c, a in self._allocations.items() if (a.host, a.nodename) == key]:
                        del self._allocations[consumer]
                    changes.append(Change(revision=rev, kind="host_deleted", node=key))
            for aggregate in batch.aggregates:
                self._aggregates[aggregate.key] = aggregate
                changes.append(Change(revision=rev, kind="aggregate", aggregate=aggregate))
            for aggregate_id in batch.delete_aggregates:
                del self._aggregates[aggregate_id]
                changes.append(Change(revision=rev, kind="aggregate_deleted", aggregate_id=aggregate_id))
            for allocation in batch.allocations:
                old = self._allocations.get(allocation.consumer_uuid)
                if old is not None:  # a move: the node it leaves changes too
                    self._node_revisions[(old.host, old.nodename)] = rev
                    if old.group:
                        self._node_revisions[group_node(old.group)] = rev
                self._allocations[allocation.consumer_uuid] = allocation
                self._node_revisions[(allocation.host, allocation.nodename)] = rev
                if allocation.group:
                    self._node_revisions[group_node(allocation.group)] = rev
                changes.append(Change(revision=rev, kind="allocation", allocation=allocation, replaced=old))
            for consumer in batch.releases:
                gone = self._allocations.pop(consumer, None)
                if gone is not None:
                    self._node_revisions[(gone.host, gone.nodename)] = rev
                    if gone.group:
                        self._node_revisions[group_node(gone.group)] = rev
                    changes.append(Change(revision=rev, kind="allocation_deleted", allocation=gone))
            for info in batch.instances:
                self._instances[info.host] = info
                changes.append(Change(revision=rev, kind="instances", instances=info))
            if not changes:
                return CommitResult(revision=self._revision, changes=[])
            self._revision = rev
            self._history.extend(changes)
            if len(self._history) > self._history_limit:
                del self._history[: len(self._history) - self._history_limit]
            self._cond.notify_all()
            return CommitResult(revision=rev, changes=changes)
