"""One batch in SQL, inside the writer's open transaction: the planner's reads of the state before it (``Reads``),
the writing of its plan (``write``), and the rows a group writes once for all its batches (``Later``)."""

from __future__ import annotations

import sqlite3
from typing import Any

import msgspec

from gantt.model import Aggregate, Allocation, HostReport, NodeKey, Record
from gantt.store import planner
from gantt.store.base import Change, Expect, lifted
from gantt.store.sqlite_file import DEC_AGG, DEC_ALLOC, DEC_GENERATION, DEC_HOST, DEC_RECORD, ENC

# Nodes whose liveness one statement reads (``Reads.liveness``): two parameters each.
LIVENESS_KEYS = 1000


class Torn(Exception):
    """A batch failed part way through its writes in a group written without savepoints."""


class Later:
    """The rows of a group that no batch of it reads back (its feed rows) or that the planner reads through this
    overlay (the nodes' usage revisions), written once for the whole group: one statement each per group instead
    of one each per batch."""

    __slots__ = ("changes", "revisions")

    def __init__(self) -> None:
        self.revisions: dict[NodeKey, int] = {}
        self.changes: list[tuple[int, int, str, bytes]] = []

    def write(self, conn: sqlite3.Connection | sqlite3.Cursor) -> None:
        if self.revisions:
            conn.executemany("INSERT INTO node_revisions (host, node, revision) VALUES (?, ?, ?) ON CONFLICT "
                             "(host, node) DO UPDATE SET revision=excluded.revision",
                             [(h, n, rev) for (h, n), rev in self.revisions.items()])
        if self.changes:
            conn.executemany("INSERT INTO changes (revision, seq, kind, payload) VALUES (?, ?, ?, ?)", self.changes)


def write(conn: sqlite3.Connection | sqlite3.Cursor, p: planner.Plan, rev: int,
           later: Later | None = None) -> tuple[list[Change], int]:
    """Write what the planner decided (``planner.plan``, which raises StoreConflict, ConsumerHeld or NotFound
    before anything is written) as revision ``rev``; returns its changes and how many of its touches were too
    fresh to write (``CommitResult.quiet``). With ``later``, the usage revisions and feed rows are left to it."""
    if not p.changes:
        return [], p.quiet
    ex = conn.execute

    def many(sql: str, rows: list[tuple[Any, ...]]) -> None:
        # Each statement, even one with no rows, releases and takes back the GIL: with handler threads waiting
        # for it, that is a thread switch. Most batches leave most of these lists empty.
        if rows:
            conn.executemany(sql, rows)

    many("INSERT INTO liveness (host, node, at) VALUES (?, ?, ?) ON CONFLICT (host, node) DO UPDATE SET at=excluded.at",
         [(*key, at) for key, at in p.touches.items()])
    for key, report in p.hosts.items():
        if report is None:
            ex("DELETE FROM hosts WHERE host=? AND node=?", key)
        else:
            ex("INSERT INTO hosts (host, node, data) VALUES (?, ?, ?) "
               "ON CONFLICT (host, node) DO UPDATE SET data=excluded.data", (*key, ENC.encode(report)))
    # a node's touch goes with it, and is older than a record written now (store.base: lifted)
    many("DELETE FROM liveness WHERE host=? AND node=?", list(p.hosts))
    for aggregate_id, aggregate in p.aggregates.items():
        if aggregate is None:
            ex("DELETE FROM aggregates WHERE id=?", (aggregate_id,))
        else:
            ex("INSERT INTO aggregates (id, data) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET data=excluded.data",
               (aggregate_id, ENC.encode(aggregate)))
    for consumer, allocation in p.allocations.items():
        if consumer in p.unindexed:
            ex("DELETE FROM allocation_parts WHERE consumer=?", (consumer,))
        if allocation is None:
            ex("DELETE FROM allocations WHERE consumer=?", (consumer,))
        else:
            ex("INSERT INTO allocations (consumer, host, node, data) VALUES (?, ?, ?, ?) ON CONFLICT (consumer) "
               "DO UPDATE SET host=excluded.host, node=excluded.node, data=excluded.data",
               (consumer, allocation.host, allocation.nodename, ENC.encode(allocation)))
            # The first part is the row's own (host, node); the index of the further ones, for allocations_on.
            many("INSERT INTO allocation_parts (consumer, host, node) VALUES (?, ?, ?)",
                 [(consumer, part.host, part.nodename) for part in allocation.extra])
    many("INSERT INTO instances (host, data) VALUES (?, ?) ON CONFLICT (host) DO UPDATE SET data=excluded.data",
         [(host, ENC.encode(info)) for host, info in p.instances.items()])
    for (kind, name), record in p.records.items():
        if record is None:
            ex("DELETE FROM records WHERE kind=? AND name=?", (kind, name))
        else:
            ex("INSERT INTO records (kind, name, data) VALUES (?, ?, ?) "
               "ON CONFLICT (kind, name) DO UPDATE SET data=excluded.data", (kind, name, ENC.encode(record)))
    changes = [msgspec.structs.replace(c, revision=rev) for c in p.changes]
    rows = [(rev, seq, c.kind, ENC.encode(c)) for seq, c in enumerate(changes)]
    if later is not None:
        later.revisions.update(dict.fromkeys(p.bumped, rev))
        later.changes += rows
        return changes, p.quiet
    many("INSERT INTO node_revisions (host, node, revision) VALUES (?, ?, ?) "
         "ON CONFLICT (host, node) DO UPDATE SET revision=excluded.revision", [(h, n, rev) for h, n in p.bumped])
    many("INSERT INTO changes (revision, seq, kind, payload) VALUES (?, ?, ?, ?)", rows)
    return changes, p.quiet


class Reads:
    """The planner's reads, inside the writer's open transaction (so they and the writes are one atomic step)."""

    def __init__(self, conn: sqlite3.Connection | sqlite3.Cursor, head: int, later: Later | None = None, *,
                 records: bool = True) -> None:
        self._ex = conn.execute
        self._head = head
        self._nodes: dict[NodeKey, tuple[int, bytes | None]] = {}
        # Whether the batch reads nodes' records too (its provider generations): else an ``expect`` (every claim)
        # reads the usage revision alone. Reading the record with it walked the hosts table and its index for a
        # blob nobody used: most of the pages a claim read, and with two processes writing, SQLite's page cache
        # starts each group empty, so every one of them was a read from the file.
        self._records = records
        # A release asks for its allocation twice (the check, then the plan): one statement and one decode.
        self._allocations: dict[str, Allocation | None] = {}
        self._later = later  # revisions written earlier in the group, not yet in the table

    def head(self) -> int:
        return self._head

    def expect_holds(self, expect: Expect) -> bool:
        return self._node((expect.host, expect.node))[0] == expect.revision

    def _node(self, key: NodeKey) -> tuple[int, bytes | None]:
        """A node's usage revision and stored record, in one statement (each is a GIL hand-over): a provider write
        asks both of the same node, its ``expect`` and its generation. Kept for the batch being planned: nothing
        is written until the planner is done."""
        known = self._nodes.get(key)
        if known is None:
            if self._records:
                row = self._ex("SELECT (SELECT revision FROM node_revisions WHERE host=?1 AND node=?2), "
                               "(SELECT data FROM hosts WHERE host=?1 AND node=?2)", key).fetchone()
            else:
                row = self._ex("SELECT (SELECT revision FROM node_revisions WHERE host=?1 AND node=?2), NULL",
                               key).fetchone()
            revision = self._later.revisions.get(key) if self._later is not None else None
            known = self._nodes[key] = (revision if revision is not None else row[0] or 0, row[1])
        return known

    def liveness(self, keys: list[NodeKey]) -> dict[NodeKey, tuple[int, float | None]]:
        # One statement per LIVENESS_KEYS nodes: a statement per node was a fifth of what the writer spent per
        # repeated report, and SQLite takes at most 32,766 parameters per statement.
        found: dict[NodeKey, tuple[int, float | None]] = {}
        for start in range(0, len(keys), LIVENESS_KEYS):
            part = keys[start:start + LIVENESS_KEYS]
            rows = self._ex("WITH k (host, node) AS (VALUES " + ", ".join(["(?, ?)"] * len(part)) + ") "
                            "SELECT k.host, k.node, r.revision, l.at FROM k "
                            "LEFT JOIN node_revisions r ON r.host = k.host AND r.node = k.node "
                            "LEFT JOIN liveness l ON l.host = k.host AND l.node = k.node",
                            [name for key in part for name in key])
            for host, node, revision, at in rows:
                found[(host, node)] = (revision or 0, at)
        if self._later is not None:
            for key in keys:
                revision = self._later.revisions.get(key)
                if revision is not None:
                    found[key] = (revision, found[key][1])
        return found

    def host(self, key: NodeKey) -> HostReport | None:
        row = self._ex("SELECT h.data, l.at FROM hosts h LEFT JOIN liveness l ON l.host = h.host AND l.node = h.node "
                       "WHERE h.host=? AND h.node=?", key).fetchone()
        return lifted(DEC_HOST.decode(row[0]), row[1]) if row else None

    def generation(self, key: NodeKey) -> int | None:
        if self._records:
            data = self._node(key)[1]
        else:
            row = self._ex("SELECT data FROM hosts WHERE host=? AND node=?", key).fetchone()
            data = row[0] if row else None
        if data is None:
            return None
        provider = DEC_GENERATION.decode(data).provider
        return provider.generation if provider is not None else 0

    def nodes_of(self, host: str, node: str | None) -> list[NodeKey]:
        if node is None:
            return [(h, n) for h, n in self._ex("SELECT host, node FROM hosts WHERE host=? ORDER BY rowid", (host,))]
        found = self._ex("SELECT 1 FROM hosts WHERE host=? AND node=?", (host, node)).fetchone()
        return [(host, node)] if found else []

    def has_aggregate(self, aggregate_id: str) -> bool:
        return self._ex("SELECT 1 FROM aggregates WHERE id=?", (aggregate_id,)).fetchone() is not None

    def aggregate(self, aggregate_id: str) -> Aggregate | None:
        row = self._ex("SELECT data FROM aggregates WHERE id=?", (aggregate_id,)).fetchone()
        return DEC_AGG.decode(row[0]) if row else None

    def allocation(self, consumer: str) -> Allocation | None:
        if consumer in self._allocations:
            return self._allocations[consumer]
        row = self._ex("SELECT data FROM allocations WHERE consumer=?", (consumer,)).fetchone()
        found = self._allocations[consumer] = DEC_ALLOC.decode(row[0]) if row else None
        return found

    def unbooked(self, consumer: str) -> bool:
        return self._ex("SELECT 1 FROM allocations WHERE consumer=?", (consumer,)).fetchone() is None

    def allocations_on(self, nodes: set[NodeKey]) -> list[Allocation]:
        found: dict[str, bytes] = {}
        for host, node in nodes:
            found.update(self._ex("SELECT consumer, data FROM allocations WHERE host=? AND node=?", (host, node)))
            found.update(self._ex("SELECT a.consumer, a.data FROM allocation_parts p JOIN allocations a "
                                  "ON a.consumer = p.consumer WHERE p.host=? AND p.node=?", (host, node)))
        return [DEC_ALLOC.decode(data) for data in found.values()]

    def aggregates_with(self, host: str) -> list[Aggregate]:
        found = (DEC_AGG.decode(data) for (data,) in self._ex("SELECT data FROM aggregates"))
        return [a for a in found if host in a.hosts]

    def record(self, key: tuple[str, str]) -> Record | None:
        row = self._ex("SELECT data FROM records WHERE kind=? AND name=?", key).fetchone()
        return DEC_RECORD.decode(row[0]) if row else None
