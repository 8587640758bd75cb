"""The store interface: snapshot with revision, change feed from a revision, conditional write of a batch.

Every backend (memory, sqlite, etcd) implements exactly this; the replica (``gantt.replication.replica``) is the only
caller that turns it into HostTable state. The engine never sees a store.

Revisions
- The store numbers every committed batch (``revision``, strictly increasing). Each change in the feed carries
  the revision of the batch that made it.
- Each node has a *usage revision*: the revision of the last batch that changed what the node has in use (its
  report, an allocation put or deleted on it, an allocation moved away from it, its deletion). A claim is a
  batch with ``expect`` entries: it commits only if every named node's usage revision is still what the replica
  saw, so two schedulers can never consume the same capacity: the loser gets ``StoreConflict`` naming the
  nodes, catches up, and decides again.

Contract for backends
- ``commit`` is atomic (all of the batch or none) and durable before it returns.
- ``changes(since)`` returns every change with revision > ``since`` in revision order, waiting up to ``timeout``
  seconds for one to arrive; ``Compacted`` when ``since`` is older than the history the backend keeps (the
  replica then re-snapshots).
- Host reports are merged on write (``gantt.model.merge_reports``); the feed and snapshots carry merged records.
- A report that changes nothing but its time (the host's numbers did not move: most reports of a real cloud) is
  a *touch*: the backend keeps the node's liveness time apart from its record (a small row or key), the feed
  carries a ``touch`` change of a few bytes, and the node's usage revision does not move (so no claim in flight
  conflicts with it). Reads and snapshots show the record with ``reported_at`` lifted to that time, so the
  touch is a report in every respect but cost; a write of the record drops the node's touch (the last write
  wins: reports are ordered by the store, never by the clocks that stamped them). A touch within
  ``Batch.touch_interval`` after the time the store holds writes nothing at all (``CommitResult.quiet``). See
  the planner's ``_plan_reports``.
- ``last_write_error``: the store could not write (a full disk, an I/O error, no quorum), as opposed to refusing
  a batch (``StoreConflict``, ``ConsumerHeld``, ``NotFound``). Set when a commit fails so, cleared by the next
  commit that is written; ``/health`` reports it. A backend whose writes cannot fail (memory) leaves it None.
"""

from __future__ import annotations

import abc
import asyncio
import time
from concurrent.futures import Future
from typing import Literal

import msgspec
from msgspec import Struct, field

from gantt.model import (
    Aggregate,
    Allocation,
    Conflict,
    GanttError,
    HostReport,
    InstanceInfo,
    NodeKey,
    Record,
    RecordKind,
    WriteFailure,
    prepare_types,
)


class StoreConflict(GanttError):
    """An ``expect`` did not hold: another writer changed these nodes since the replica saw them."""

    status = 409
    title = "Conflict"

    def __init__(self, keys: list[NodeKey]) -> None:
        super().__init__(f"usage changed on {len(keys)} node(s): " + ", ".join(f"{h}/{n}" for h, n in keys[:5]))
        self.keys = keys


class HostInUse(Conflict):
    """A host to delete still holds allocations, and the batch asked to refuse then (``refuse_held_hosts``)."""

    def __init__(self, node: NodeKey, consumers: list[str]) -> None:
        shown = ", ".join(consumers[:5]) + (", …" if len(consumers) > 5 else "")
        super().__init__(f"host {node[0]!r} node {node[1]!r} holds allocations of {len(consumers)} consumer(s) "
                         f"({shown}); release them first, or delete with force to remove the host's parts of "
                         "them (their parts on other hosts stay)", field="host")
        self.node = node
        self.consumers = consumers


class ConsumerHeld(GanttError):
    """A claim named a consumer that already holds an allocation in the store (booked by another instance).

    The claim changes nothing: a booking is never moved by a race. ``revision`` is a store revision at which
    the holding allocation exists; a replica that has caught up to it answers with that allocation instead.
    """

    status = 409
    title = "Conflict"

    def __init__(self, consumers: list[str], revision: int) -> None:
        super().__init__(f"{len(consumers)} consumer(s) already hold an allocation: " + ", ".join(consumers[:5]))
        self.consumers = consumers
        self.revision = revision


class Compacted(GanttError):
    """The feed no longer reaches back to the requested revision; re-snapshot."""

    status = 410
    title = "Compacted"


# gc=False (here and below): a batch, its changes and their parts are made per write and per feed read, and
# never form a cycle (model.hosts; tests/test_untracked.py).
class Expect(Struct, array_like=True, gc=False):
    host: str
    node: str
    revision: int  # 0: the node has never been written


class RepeatOf(Struct, array_like=True, gc=False):
    """A replica took a report of this node for a repeat of the record it held when the node's usage revision was
    ``revision`` (``Replica.heartbeat``), that record's time (lifted by the touches it had applied) being
    ``reported_at``. Every write of a node's record moves its usage revision, so a store that still holds that
    revision holds that record: it may plan the report's touch from the revision and its liveness time alone,
    without reading the record (``planner._plan_repeat``). Any other revision: the touch is planned from the
    record the store holds, which stands (the report was answered before it was written, so the store cannot
    tell whether a record written since is older or newer than it)."""

    host: str
    node: str
    revision: int
    reported_at: float
    body: bytes | None = None  # the digest of the report's body, for its touch to carry (``Change.digest``)


class Generation(Struct, array_like=True, gc=False):
    """A provider generation a batch expects the store to hold for a node (None: the node must not exist)."""

    host: str
    node: str
    generation: int | None


class ConsumerGeneration(Struct, array_like=True, gc=False):
    """The consumer generation a batch expects the store to hold for a consumer (None: it holds no allocation;
    an allocation never written through Placement is at 0)."""

    consumer: str
    generation: int | None


class Membership(Struct, array_like=True, gc=False):
    """A host joins (``join``) or leaves an aggregate, applied by the store to the aggregate it holds at commit:
    two writers adding members to one aggregate cannot drop each other's (Placement's provider aggregates, from
    any number of processes). Joining an aggregate the store does not hold creates it, its id and uuid
    ``aggregate``; leaving one it does not hold, or joining one already joined, changes nothing."""

    aggregate: str
    host: str
    join: bool


class Merge(Struct, array_like=True, gc=False):
    """The record of node ``(host, node)`` is the node ``(into_host, into_node)`` under another name: both carry
    resource provider ``uuid``. The store makes them one at ``into`` (``model.merge_nodes``), moving the parts of
    allocations on the old name to the new one (the consumers' generations stay: Placement sees nothing move) and
    deleting the old name; the aggregates whose members name a node created through Placement by its host (its
    uuid) name its compute host instead. Skipped when either record is gone or no longer carries ``uuid``."""

    host: str
    node: str
    into_host: str
    into_node: str
    uuid: str


class Capacity(Struct, array_like=True, gc=False):
    """Check every node a batch's allocations touch for room, as Placement does on write (``store.planner``).
    ``default_ratios``: the allocation ratio of a class a host's classic fields imply without naming one."""

    default_ratios: dict[str, float] = field(default_factory=dict)


class Batch(Struct, omit_defaults=True, gc=False):
    """One atomic write. Empty lists are the common case; a claim uses ``expect`` + ``allocations``."""

    expect: list[Expect] = field(default_factory=list)
    reports: list[HostReport] = field(default_factory=list)
    delete_hosts: list[tuple[str, str | None]] = field(default_factory=list)  # node None: every node of host
    aggregates: list[Aggregate] = field(default_factory=list)
    delete_aggregates: list[str] = field(default_factory=list)
    memberships: list[Membership] = field(default_factory=list)  # after ``aggregates``, on what they leave
    allocations: list[Allocation] = field(default_factory=list)
    releases: list[str] = field(default_factory=list)  # consumer UUIDs
    instances: list[InstanceInfo] = field(default_factory=list)  # replaces what the host runs
    # Releases of consumers the store does not hold are an error unless this is set (expiry races are benign).
    lenient_releases: bool = False
    # A node of ``delete_hosts`` that an allocation has a part on: HostInUse when this is set (Placement's rule),
    # else that part goes and the consumer keeps its parts on other nodes (its allocation goes when none is left).
    refuse_held_hosts: bool = False
    # Consumers whose current allocation an entry of ``allocations`` replaces (a move, or its revert): each must
    # hold one (NotFound otherwise), and the node it leaves counts as changed. Any other consumer in
    # ``allocations`` that holds one is ConsumerHeld: outside a move, a booking is never moved.
    replaces: list[str] = field(default_factory=list)
    # Placement's writes: whole node records put as they are (not merged like reports: Placement replaces a
    # provider's inventories, traits and aggregates as a whole), each allowed only while the store holds the
    # generation ``generations`` names for it (GenerationConflict otherwise).
    providers: list[HostReport] = field(default_factory=list)
    generations: list[Generation] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)
    delete_records: list[tuple[RecordKind, str]] = field(default_factory=list)  # (kind, name); NotFound if absent
    # Placement's allocation writes: each consumer's stored generation must be as named (ConsumerConflict
    # otherwise), and the written allocations move it on; the providers named move their generation on
    # (NotFound when gone); ``capacity``: every node the allocations touch must have room for them.
    # Refuse the whole batch (ReplicaBehind) if another process has committed after this revision: what the
    # replica checked in its memory (a new provider's name is free) may be stale. Set only for a store that
    # says ``checks_freshness``; a replica behind another process's writes then catches up once, not per write.
    fresh_as_of: int | None = None
    consumers: list[ConsumerGeneration] = field(default_factory=list)
    bump_providers: list[tuple[str, str]] = field(default_factory=list)
    capacity: Capacity | None = None
    # (host, node, class): inventories this batch removes; no allocation may use them once it has landed
    # (InventoryInUse otherwise), checked after the allocations it writes (Placement's reshaper).
    vacated: list[tuple[str, str, str]] = field(default_factory=list)
    # A report that changes nothing but its time, arriving less than this many seconds after the time the store
    # holds for its node, is not written at all (the replica sets a fraction of service_down_time).
    touch_interval: float = 0.0
    # The reports repeat records a replica held when they arrived (``Replica.flush_liveness``, written later): one
    # whose node the store no longer holds was deleted since, and is not written (it would bring the node back).
    existing_only: bool = False
    # What the replica compared ``reports`` with, for those it took for repeats (a store may plan them from this).
    repeat_of: list[RepeatOf] = field(default_factory=list)
    # Nodes known under two names, made one after the batch's reports (``Merge``).
    merges: list[Merge] = field(default_factory=list)
    # The digest of the body of the batch's one report (a host's POST), carried by the change it makes.
    body: bytes | None = None


ChangeKind = Literal["host", "host_deleted", "aggregate", "aggregate_deleted", "allocation",
                     "allocation_deleted", "instances", "usage", "record", "record_deleted", "touch"]


class Change(Struct, omit_defaults=True, gc=False):
    revision: int
    kind: ChangeKind
    host: HostReport | None = None  # kind "host": the merged record
    # kind "host_deleted"; kind "usage": this node's usage revision moved and no other change of the revision
    # says so (etcd sends it when its watch lost an overwritten or deleted allocation's old value)
    # (kind "usage" without a node: this revision changed nothing a replica holds; only its cursor moves)
    node: tuple[str, str] | None = None
    aggregate: Aggregate | None = None  # kind "aggregate"
    aggregate_id: str | None = None  # kind "aggregate_deleted"
    allocation: Allocation | None = None  # kind "allocation" / "allocation_deleted"
    replaced: Allocation | None = None  # kind "allocation" of a move: what the consumer held before (if known)
    instances: InstanceInfo | None = None  # kind "instances"
    record: Record | None = None  # kind "record" / "record_deleted"
    at: float | None = None  # kind "touch": ``node`` reported at this time, and nothing else changed
    # kinds "host" and "touch": the digest of a report body that repeats the record as this change leaves it (the
    # report it was planned from), for every replica to take that body again without decoding it (liveness.Bodies)
    digest: bytes | None = None


class NodeRevision(Struct, array_like=True, gc=False):
    host: str
    node: str
    revision: int


class Snapshot(Struct, gc=False):
    revision: int
    hosts: list[HostReport]
    aggregates: list[Aggregate]
    allocations: list[Allocation]
    instances: list[InstanceInfo]
    node_revisions: list[NodeRevision]
    records: list[Record] = field(default_factory=list)


class CommitResult(Struct, gc=False):
    revision: int
    changes: list[Change]
    quiet: int = 0  # touches not written: the node's liveness was fresher than ``Batch.touch_interval``


def lifted(record: HostReport, touched_at: float | None) -> HostReport:
    """A node's record as reads and snapshots show it: its report time is that of its last touch, if it has one.

    A touch kept is newer, in the store's order, than the record (a write of the record drops it), whichever of
    the two times is the larger: servers' clocks differ, and the store orders reports, not their clocks."""
    if touched_at is None or record.reported_at == touched_at:
        return record
    return msgspec.structs.replace(record, reported_at=touched_at)


class Store(abc.ABC):
    """A narrow, synchronous, thread-safe interface; see the module docstring for the contract."""

    url: str = ""
    namespace: str = "compute"  # the partition this object reads and writes (gantt.model.namespaces)
    last_write_error: WriteFailure | None = None
    write_failures: int = 0  # commits the store could not write, since this handle opened (/metrics)

    def _note_write(self, error: BaseException | str | None) -> None:
        """Record a commit's outcome: ``error`` when the store could not write, None when it wrote."""
        self.last_write_error = None if error is None else WriteFailure(time.time(), str(error))
        if error is not None:
            self.write_failures += 1

    @abc.abstractmethod
    def snapshot(self) -> Snapshot: ...

    @abc.abstractmethod
    def changes(self, since: int, timeout: float = 1.0, *, head: int | None = None) -> list[Change]:
        """Every change after ``since``, waiting up to ``timeout`` for one. ``head``: a revision the caller knows
        is committed (the head it has just read, or its own write's): a store that would read its head first, to
        learn whether there is anything to read, may take this instead."""

    @abc.abstractmethod
    def commit(self, batch: Batch) -> CommitResult: ...

    def commit_on_loop(self, batch: Batch, loop: asyncio.AbstractEventLoop) -> asyncio.Future[CommitResult]:
        """``commit_soon``, its outcome a future of ``loop`` (the running loop of the caller, who awaits it)."""
        return asyncio.wrap_future(self.commit_soon(batch), loop=loop)

    # True when ``commit_soon`` hands the batch to a writer of the store's own and returns at once (a caller on
    # an event loop may then wait for the future without a thread of its own); False when it commits in place.
    queued_commits = False
    # True when the store refuses a batch whose ``fresh_as_of`` another process has written past.
    checks_freshness = False
    # A batch written for many callers at once (``Replica.flush_liveness``) carries at most this many reports: a
    # store whose batches have a size limit (etcd's --max-txn-ops) says so; None, no limit.
    reports_per_batch: int | None = None

    def commit_soon(self, batch: Batch) -> Future[CommitResult]:
        """``commit``, with its outcome as a future. Here it is committed before this returns."""
        future: Future[CommitResult] = Future()
        try:
            future.set_result(self.commit(batch))
        except BaseException as exc:
            future.set_exception(exc)
        return future

    @abc.abstractmethod
    def barrier(self) -> int:
        """A revision the feed reaches once it holds every change committed before this call (by any writer):
        a replica that has applied the feed up to it has read its own and everyone's earlier writes."""

    def shared_head(self) -> int | None:
        """The newest revision committed by any process, where one cheap local read tells it (SQLite: a one-row
        read of the file); None where no such read exists (memory: one process holds it all; etcd: it would be a
        round trip). A replica reads it before each request so that a write another process acknowledged is
        seen by the next request here (``Follower.behind``)."""
        return None

    def shared_changes(self, since: int) -> list[Change] | None:
        """Every change after ``since`` committed by any process, where one cheap local read gives them all (SQLite:
        one read of the file's feed); None where no such read exists, or more follow than one read takes (then
        ``shared_head`` and ``changes`` up to it). A request's catch-up in one read where it took two: the head,
        then the feed up to it (``Replica.caught_up_now``)."""
        return None

    def close(self) -> None:  # noqa: B027 - optional for backends without resources
        """Release connections and files."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


prepare_types(globals())  # build msgspec type info before any thread decodes (see model.prepare_types)
