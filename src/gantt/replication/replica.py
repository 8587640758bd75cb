"""Replica: one scheduler instance's full in-memory view of a store, and the claims it commits back.

- Built from ``store.snapshot()``, kept current by a follower thread reading ``store.changes(revision)``.
- Every write (a report, an aggregate, a release) is committed to the store first and applied locally from the
  commit's own changes, so the caller reads its own writes; the feed later brings the same changes and they are
  skipped (each entity remembers the revision it was last applied at).
- ``revision`` is the feed's cursor and only the feed moves it: a commit of ours may land at a revision above
  other instances' changes that the feed has not delivered yet, and those must still be read.
- A node's usage revision (what a claim expects) means "every usage change on this node up to here is in the
  table". The feed keeps that true by applying in order; our own *claims* may move it too (the store checked
  nothing changed in between); our unconditional writes (reports, releases) leave it to the feed.
- A claim whose commit failed without an answer (``StoreUnavailable``: a timeout may still have been applied)
  leaves its nodes unusable until the follower has re-snapshotted, so a lost answer cannot hide a booking.
- Claims: the engine claims on the local table (the in-process compare-and-set), then calls ``commit_claims``.
  Under the table lock that re-validates each node (nothing over capacity with every local hold counted) and
  records the node's usage revision *as that state saw it*; the store commits the allocations only if those
  revisions still hold. A loser catches up from the feed and the engine decides again.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import queue
import threading
import time
from collections.abc import Callable, Generator
from concurrent.futures import Future
from typing import Any, TypeVar

import numpy as np

from gantt.base import clocks
from gantt.base.allocator import freeze_long_lived
from gantt.compute.commit import Attempts, ClaimConflict, TableReplaced
from gantt.compute.scheduler import Scheduler
from gantt.compute.state import HostTable
from gantt.config import Config
from gantt.model import (
    GROUP_HOST,
    Aggregate,
    Allocation,
    Conflict,
    GanttError,
    HostReport,
    HostStats,
    InstanceInfo,
    NodeKey,
    NotFound,
    NoValidHost,
    RequestSpec,
    Selection,
    StoreUnavailable,
    Utilization,
    aggregate_node,
    check_reserved,
    decode,
    group_node,
    merge_reports,
    repeats,
)
from gantt.model.activity import Activity, Overview
from gantt.placement.facade import PlacementFacade
from gantt.replication.follower import Follower
from gantt.replication.steps import CONTENDED, THREAD, advance
from gantt.resources import providers
from gantt.resources.catalog import Catalog
from gantt.resources.providers import ProviderIndex
from gantt.store.base import (
    Batch,
    Change,
    CommitResult,
    ConsumerHeld,
    Expect,
    RepeatOf,
    Snapshot,
    Store,
    StoreConflict,
    lifted,
)
from gantt.store.urls import open_store

log = logging.getLogger(__name__)

T = TypeVar("T")
# A claim (``Replica.commit_claims_steps``) or a placement (``Replica.select_steps``) as steps, so that the event
# loop can drive it where the store has a writer of its own: each Batch it yields asks to commit it, and the
# driver sends back the CommitResult (or throws the commit's error in where it was asked for); THREAD asks to go
# on where blocking is fine (a wait for another claim on the same node, a catch-up that may wait for the feed):
# a driver on the event loop hands the rest to a handler thread (``run_claims``), where THREAD asks nothing.
ClaimSteps = Generator["Batch | str", Any, T]

# From this many rows a (re)load freezes the heap out of the cyclic collector's way (see ``Replica.load``).
GC_FREEZE_ROWS = 10_000

# A report that changes nothing but its time is written (as a touch, store.base) at most this often, as a fraction
# of service_down_time: 10 s at the default 60 s, the period of Nova's own service heartbeat. Every replica sees
# the same written times, so a host silent for service_down_time is down everywhere at the same moment, at most
# this fraction early; a host reporting every few seconds costs one small write per period instead of one per
# report. Claims left unlisted past claim_timeout expire on the written reports, so up to as much later.
TOUCH_FRACTION = 1 / 6
# A report that repeats its node's record (``Replica.heartbeat``) is acknowledged at once and written with the
# others of up to this many seconds in one batch (``Replica.flush_liveness``): every replica learns the node's
# new report time this much later at most (plus the feed's delay), a small fraction of service_down_time.
LIVENESS_DELAY = 0.25
# How many reloads (a table swapped in from a snapshot) one request rides out, deciding again on each new table,
# before the last one's TableReplaced goes through to the caller. Reloads are rare (a compaction past a lagging
# follower, an unanswered commit), but they come in runs: a feed cut to its last few revisions while followers lag
# reloaded one replica four times during one request (tests/store/test_replicas_racing.py, under CI's load).
DECISION_RELOADS = 10


class Replica(Follower, PlacementFacade):
    FEED_THREAD = "gantt-replica-feed"

    def __init__(self, store: Store, config: Config | None = None, *,
                 clock: Callable[[], float] = clocks.wall) -> None:
        Follower.__init__(self, store, clock)
        # Liveness and claim ages are measured on it, from when this replica took each report, touch and claim
        # (its own writes, the feed): no step or skew of a wall clock moves them (gantt.base.clocks).
        self.steady = clocks.steady_for(clock)
        self.config = config or Config()
        self.node_revisions: dict[NodeKey, int] = {}
        self._applied: dict[tuple[Any, ...], int] = {}
        self._expired: queue.SimpleQueue[str] = queue.SimpleQueue()
        # Nodes whose last claim commit had an unknown outcome: not claimable until the next snapshot load.
        self._dirty: set[NodeKey] = set()
        self._frozen_rows = 0  # the table's size when the heap was last frozen (``_freeze_if_grown``)
        self.stale_reports = 0  # reports this replica took that the store wrote nothing for (node deleted since)
        self.touches = 0  # reports that changed nothing but their time: written as touches, or not at all (quiet)
        # Reports that repeat their node's record, acknowledged and not yet written (``heartbeat``): node -> report.
        self._liveness: dict[NodeKey, tuple[HostReport, RepeatOf]] = {}
        self._liveness_lock = threading.Lock()  # taking the pending reports to write
        self._liveness_writing = threading.Lock()  # one batch of them written at a time, in order
        self.revalidations = 0  # store conflicts resolved by re-checking the same nodes (no new decision)
        # What each host runs per the last instance-info write (the store keeps only the latest list per host),
        # so that Nova's additive update_instance_info / delete_instance_info can be written as a full list.
        self.instance_info: dict[str, list[str]] = {}
        self._claiming: dict[NodeKey, threading.Lock] = {}  # node -> the claim commit in flight on it (held)
        self._claiming_lock = threading.Lock()
        # Placement's view of the same records: providers by uuid and name, and the custom classes and traits.
        self.providers = ProviderIndex()
        self._creating: dict[str, set[object]] = {}  # names and uuids of creates in flight (their marks)
        self.catalog = Catalog()
        self.scheduler = self._new_scheduler(self._new_table())
        # This process's last decisions and refusals (GET /v1/overview); kept across reloads, as stats are.
        self.activity = Activity(clock)

    @property
    def table(self) -> HostTable:
        return self.scheduler.table

    def _new_table(self) -> HostTable:
        return HostTable.from_config(self.config, clock=self.steady, on_expire=self._on_expire)

    def _new_scheduler(self, table: HostTable, replaces: Scheduler | None = None) -> Scheduler:
        """A scheduler deciding on ``table``: its engine's caches and memos start empty with the table they
        describe, and its commit hook knows the table its claims were made on (``TableReplaced`` after a
        reload)."""
        return Scheduler(self.config, table=table, commit=functools.partial(self.commit_claims, table),
                         commit_steps=functools.partial(self.commit_claims_steps, table),
                         stats=replaces.engine.stats if replaces is not None else None)

    # ------------------------------------------------------------------------------------------ lifecycle

    @classmethod
    def open(cls, store: str | Store, config: Config | None = None, *, follow: bool = True) -> Replica:
        """A started replica of ``store`` (a URL, see ``open_store``, or a Store), which it owns from here on:
        ``close()`` stops the replica and closes the store."""
        opened = open_store(store) if isinstance(store, str) else store
        try:
            replica = cls(opened, config)
        except BaseException:
            opened.close()
            raise
        return replica.start_owning(follow=follow)

    def load(self) -> None:
        """(Re)build the table from a snapshot and a fresh scheduler on it, and swap them in. A decision in flight
        on the old table commits nothing: its commit hook answers ``TableReplaced`` and it is decided again on
        the new one (``select_destinations``)."""
        snap = self.store.snapshot()
        table = self._new_table()
        applied: dict[tuple[Any, ...], int] = {}
        _load_snapshot(table, snap)
        index = ProviderIndex()
        for record in snap.hosts:
            index.put(record)
        node_revisions = {(nr.host, nr.node): nr.revision for nr in snap.node_revisions}
        scheduler = self._new_scheduler(table, replaces=self.scheduler)
        with self.table.lock:
            self.scheduler = scheduler
            self.providers = index
            self.catalog = Catalog(snap.records)
            self.instance_info = {info.host: list(info.instances) for info in snap.instances}
            self.node_revisions = node_revisions
            self._applied = applied
            self.revision = snap.revision
            self._dirty = set()
        self.last_sync = time.monotonic()
        self._frozen_rows = 0
        self._freeze_if_grown(reload=True)

    def _freeze_if_grown(self, reload: bool = False) -> None:
        """The replica lives as long as the process: once its table reaches ``GC_FREEZE_ROWS`` rows, and again
        each time it has doubled since (hosts registered after the start arrive through the feed), move the
        heap out of the cyclic collector's generations, so a full collection does not walk 100,000 rows in
        the middle of a decision (a p99 spike otherwise, and CPU: at 10,000 hosts registered after the start,
        full collections took 0.035 ms per placement more than with the table frozen). The full collection
        this takes walks the whole heap: worth it for a large table only, since a process that builds many
        small replicas (tests, tools, the simulator) would pay it each time. A (re)load walks the frozen part
        too (the table it replaces is garbage now); growth only what came since the last freeze."""
        rows = len(self.table)
        if rows < GC_FREEZE_ROWS or rows < 2 * self._frozen_rows:
            return
        self._frozen_rows = rows
        if reload:
            gc.unfreeze()
        freeze_long_lived()

    def _before_read(self) -> None:
        if self._dirty:
            self.resyncs += 1
            self.load()

    def _after_read(self) -> None:
        self._flush_expired()

    # --------------------------------------------------------------------------------------------- apply

    def apply(self, changes: list[Change], *, own: str | None = None, since: int | None = None) -> None:
        """Apply changes: from the feed (``own=None``; ``since``: see ``Follower.apply``), or a commit of ours:
        ``"claim"`` (conditional, may move node usage revisions) or ``"write"`` (unconditional, leaves them and the
        cursor to the feed)."""
        while True:
            table = self.table
            with table.lock:
                # A reload swaps the table under the old one's lock: applied to the table it replaced, these
                # changes would be lost with it while the cursor moved past them.
                if table is self.table:
                    if since is None or since <= self.revision:
                        self._apply_locked(table, changes, own)
                    break
        if len(table) >= 2 * self._frozen_rows:
            self._freeze_if_grown()

    def _apply_locked(self, table: HostTable, changes: list[Change], own: str | None) -> None:
        # Changes at or below the cursor are in the table already: a reload between the feed's read and this apply
        # took a snapshot that holds them, and applied again they would undo what came after it (an allocation
        # released since held again, or one booked since gone: room that is not there).
        loaded = self.revision
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
                    self._touch(table, touches)
                    touches = []
                if applying > self.revision:
                    self.revision = applying
                applying = change.revision
            if change.kind == "touch":
                touches.append(change)
                continue
            if touches:
                self._touch(table, touches)
                touches = []
            self._apply_one(table, change, bump=own != "write", fed=own is None)
        if touches:
            self._touch(table, touches)
        if own is None and applying > self.revision:
            self.revision = applying

    def _apply_one(self, table: HostTable, change: Change, *, bump: bool = True, fed: bool = False) -> None:
        """``fed``: the change comes from the feed (``apply`` moves the cursor past its revision)."""
        # Read before the change (a release takes the allocation that names its group out of the table), moved
        # after it: ``heartbeat`` reads a node's usage revision before its record, and so never pairs a revision
        # with the record as it was before that revision.
        nodes = _usage_nodes(change, table) if bump else []
        self._apply_effect(table, change, fed)
        for node in nodes:
            self._bump(node[0], node[1], change.revision)

    def _apply_effect(self, table: HostTable, change: Change, fed: bool = False) -> None:
        rev = change.revision
        kind = change.kind
        if kind == "usage":
            return  # a bump and nothing else
        if kind == "touch":
            self._touch(table, [change])
            return
        key = _entity(change)
        applied = self._applied
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
                self.providers.put(change.host)
            elif kind == "host_deleted" and change.node is not None:
                self.providers.remove(change.node)
                table.remove(change.node[0], change.node[1])
            elif kind == "record" and change.record is not None:
                self.catalog.put(change.record)
            elif kind == "record_deleted" and change.record is not None:
                self.catalog.remove(change.record.key)
            elif kind == "aggregate" and change.aggregate is not None:
                table.update_aggregate(change.aggregate)
            elif kind == "aggregate_deleted" and change.aggregate_id is not None:
                table.delete_aggregate(change.aggregate_id)
            elif kind == "instances" and change.instances is not None:
                self.instance_info[change.instances.host] = list(change.instances.instances)
                table.set_instances(change.instances.host, change.instances.instances, replace=True)
        except NotFound:
            pass  # already gone locally (our own rollback, or a host we never saw): the store is the truth
        if fed and kind == "allocation_deleted":
            # Forgotten, or every consumer ever placed would stay here (a thousand a second, for as long as the
            # process lives): once this revision is applied the cursor is past it, and a change at or below the
            # cursor is never applied again (``_apply_locked``), so the entry would only repeat what the cursor
            # says. Not for our own writes: those are applied ahead of the cursor.
            del applied[key]

    def _touch(self, table: HostTable, changes: list[Change]) -> None:
        """Apply touch changes, in order."""
        applied = self._applied
        touches: list[tuple[NodeKey, float]] = []
        for change in changes:
            assert change.node is not None and change.at is not None
            key = ("node", *change.node)
            if applied.get(key, 0) >= change.revision:
                continue  # a later record of the node is applied already (our own write, ahead of the feed)
            applied[key] = change.revision
            touches.append((change.node, change.at))
        table.touch_many(touches, observed=True)
        providers = self.providers
        for node, at in touches:
            view = providers.by_key.get(node)
            if view is not None:  # Placement's updated_at follows the report time as it would on a rewrite
                providers.put(lifted(view.record, at))

    def _bump(self, host: str, node: str, revision: int) -> None:
        key = (host, node)
        if self.node_revisions.get(key, 0) < revision:
            self.node_revisions[key] = revision

    # -------------------------------------------------------------------------------------------- claims

    def commit_claims(self, table: HostTable, allocations: list[Allocation], attempts: Attempts) -> None:
        """The engine's commit hook: one conditional batch for every instance of a request (all or nothing).

        ``table`` is the one the engine claimed on (bound when the scheduler is built); ``attempts`` the
        request's conflict budget, which re-validations here spend too.
        """
        self.run_claims(self.commit_claims_steps(table, allocations, attempts))

    def run_claims(self, steps: ClaimSteps[T]) -> T:
        """Carry out claim steps (``commit_claims_steps``, ``select_steps``) in this thread: each Batch is
        committed here and its result (or error) goes back where it was asked for; ``THREAD`` needs nothing."""
        value: Any = None
        error: Exception | None = None
        while True:
            done, step = advance(steps, value, error)
            if done:
                return step  # type: ignore[no-any-return]
            value = error = None
            if isinstance(step, Batch):
                try:
                    value = self.store.commit(step)
                except Exception as exc:  # raised where the commit was asked for, as a call would
                    error = exc

    def commit_claims_steps(self, table: HostTable, allocations: list[Allocation], attempts: Attempts,
                            ) -> ClaimSteps[None]:
        """``commit_claims`` as steps (see ``ClaimSteps``), so that the event loop may drive a placement whose
        commit the store's own writer makes (SQLite): no handler thread, no hand-off of the GIL among deciders."""
        keys = list(dict.fromkeys((a.host, a.nodename) for a in allocations))
        # Held from here until this claim is committed and applied (a lock, not an Event: a placement builds one
        # and rarely anyone waits on it; an Event and its Condition cost ~3 % of a placement on the loop).
        mine = threading.Lock()
        mine.acquire()
        # One claim commit at a time per node within this replica: a second claim on a node whose first commit is
        # still in flight would expect the node's old usage revision and lose to our own first claim. Waiting
        # until the first has committed and been applied lets the second expect the revision it produced.
        while True:
            with self._claiming_lock:
                busy = [self._claiming[key] for key in keys if key in self._claiming]
                if not busy:
                    for key in keys:
                        self._claiming[key] = mine
                    break
            yield THREAD  # the wait below blocks: never on the event loop
            for held in busy:
                held.acquire()  # released when that claim is done
                held.release()
        try:
            yield from self._commit_claims_steps(table, allocations, attempts)
        finally:
            with self._claiming_lock:
                for key in keys:
                    if self._claiming.get(key) is mine:
                        del self._claiming[key]
            mine.release()

    def _commit_claims_steps(self, table: HostTable, allocations: list[Allocation], attempts: Attempts,
                             ) -> ClaimSteps[None]:
        """Commit the request's allocations; on a conflict, re-validate the same nodes before giving up.

        A conflict only says a node's usage moved (another instance claimed or released there), not that our
        claim no longer fits. So: catch up from the feed, check the nodes again with every allocation now known
        counted, and re-commit expecting the revisions that state carries. Only a node that really filled up
        sends the engine back to decide again, which keeps re-decisions rare under contention.
        """
        while True:
            if not self.uncontended():
                yield CONTENDED
            expects = self._expects(table, allocations)
            try:
                result = yield Batch(expect=list(expects.values()), allocations=allocations,
                                     replaces=[a.consumer_uuid for a in allocations if a.migration_uuid])
            except ConsumerHeld as exc:
                # Another instance booked these consumers first: their booking is the answer, never ours. Catch
                # up until this replica holds it, so the engine's next round finds and returns it.
                self.revalidations += 1
                yield THREAD  # catching up may wait for the feed
                self._catch_up_to(exc.revision)
                if table is not self.table:
                    # A reload meanwhile: the booking is in the new table, not in ours, which still holds our own
                    # local claims of these consumers (the engine would answer with them): decide on the new one.
                    raise TableReplaced("the replica re-read its store while this request was committed") from None
                raise ClaimConflict(str(exc), held=exc.consumers) from None
            except StoreConflict as exc:
                yield THREAD  # rare (another instance claimed on these nodes): the catch-up below may wait
                if any(key[0] == GROUP_HOST for key in exc.keys):
                    # Another member of a server group was placed or released meanwhile: the policy must be
                    # decided again on the state that includes it (capacity alone cannot be re-validated).
                    try:
                        self.catch_up()
                    except GanttError as feed_exc:
                        log.warning("catch-up after conflict failed: %s", feed_exc)
                    raise ClaimConflict(str(exc), exc.keys) from None
                self.revalidations += 1
                try:
                    self.catch_up()
                except GanttError as feed_exc:
                    log.warning("catch-up after conflict failed: %s", feed_exc)
                if not attempts.spend():
                    raise ClaimConflict(str(exc), exc.keys) from None
                continue  # _expects raises ClaimConflict if a node no longer has room
            except BaseException as exc:
                if not isinstance(exc, GanttError) or isinstance(exc, StoreUnavailable):
                    # Unknown outcome (the store did not answer, or whoever drove these steps dropped them while
                    # the commit was under way): the engine rolls our local claims back, yet the store may hold
                    # them.
                    with self.table.lock:
                        self._dirty.update(expects)
                raise
            if not self.uncontended():
                # Committed; the feed holds the table lock (a batch of other instances' changes): our result is
                # applied on a thread, as the decision would have been, rather than stall the loop behind it.
                yield CONTENDED
            self.apply(result.changes, own="claim")
            return

    @property
    def node_count(self) -> int:
        """How many nodes the replica holds (the service decides small clouds on its event loop)."""
        return len(self.table)

    def uncontended(self) -> bool:
        """Whether no other thread holds the table lock now (the feed applying a batch, a long read): steps on
        the event loop go on on a thread rather than stall every connection behind it. A glance, not a hold: the
        lock may still be taken a moment later, and is then waited for briefly."""
        lock = self.table.lock
        if not lock.acquire(blocking=False):
            return False
        lock.release()
        return True

    def _expects(self, table: HostTable, allocations: list[Allocation]) -> dict[NodeKey, Expect]:
        """Under the table lock: every node still has room (our local holds counted), and the usage revision that
        state reflects, which the store must still hold for the commit to land."""
        expects: dict[NodeKey, Expect] = {}
        with table.lock:
            if table is not self.table:  # a reload swapped tables (under this lock) since the engine claimed
                raise TableReplaced("the replica re-read its store while this request was decided")
            for allocation in allocations:
                key = (allocation.host, allocation.nodename)
                if table.allocation(allocation.consumer_uuid) is not allocation:
                    # the feed brought another booking (or the release) of this consumer: decide again from it
                    raise ClaimConflict(f"{allocation.consumer_uuid} changed meanwhile", [key])
                if not table.within_capacity(key):
                    raise ClaimConflict(f"{key[0]}/{key[1]} no longer has room", [key])
                if key in self._dirty:  # 503 until the follower has re-read the store
                    raise StoreUnavailable(f"{key[0]}/{key[1]}: an earlier commit went unanswered; resynchronizing")
                expects[key] = Expect(key[0], key[1], self.node_revisions.get(key, 0))
                if allocation.group:
                    group = group_node(allocation.group)
                    expects[group] = Expect(group[0], group[1], self.node_revisions.get(group, 0))
        return expects

    # --------------------------------------------------------------------------------------------- writes

    def write(self, batch: Batch) -> int:
        """Commit a batch and apply its changes here at once (read your own writes). Returns the revision."""
        return self._write(batch).revision

    def _write(self, batch: Batch) -> CommitResult:
        return self.written(batch, self.store.commit(batch))

    def write_soon(self, batch: Batch) -> Future[CommitResult] | None:
        """Hand ``batch`` to the store's own writer and return its commit as a future, or None if this store
        commits in the caller (then use ``write``). Whoever waits for the future passes the result to
        ``written`` before answering, as ``write`` does."""
        return self.store.commit_soon(batch) if self.store.queued_commits else None

    def write_on_loop(self, batch: Batch) -> asyncio.Future[CommitResult] | None:
        """``write_soon`` for a caller on the running event loop: a future of that loop (None: ``write`` instead).
        Whoever awaits it passes the result to ``written``."""
        if not self.store.queued_commits:
            return None
        return self.store.commit_on_loop(batch, asyncio.get_running_loop())

    @property
    def reads_in_place(self) -> bool:
        """The store has a writer thread of its own and a local feed (SQLite): a sync costs no round trip, so
        the event loop may run it without a hop to a handler thread."""
        return self.store.queued_commits

    def written(self, batch: Batch, result: CommitResult) -> CommitResult:
        """The second half of a write: apply the committed changes here (read your own writes)."""
        if batch.reports:  # what the store wrote nothing for: reports of nodes deleted meanwhile (existing_only)
            touches = sum(1 for c in result.changes if c.kind == "touch") + result.quiet
            self.touches += touches
            self.stale_reports += len(batch.reports) - touches - sum(1 for c in result.changes if c.kind == "host")
        # Read the feed once, without waiting: applied in order, our write moves its nodes' usage revisions and
        # the cursor, so the next claim on a node just released expects the right revision instead of conflicting
        # until the follower thread gets there. (Cheap: a store serves its own recent revisions.) Not when the
        # feed is applied past our revision already (by a writer of the same group, or the follower): the read
        # would only ask the store for its head, one query per write for nothing.
        if self.revision < result.revision:
            try:
                self.catch_up()
            except GanttError as exc:
                log.debug("catch-up after a write: %s", exc)
        # Only a feed that has not brought our revision yet (etcd's may lag its commit) leaves the write to be
        # applied from its own result, for reading our own writes. Applied before the feed, as it was, every write
        # went into the table twice (HostTable.update is a third of what a replica spends per provider write).
        if self.revision < result.revision:
            self.apply(result.changes, own="write")
        return result

    def report(self, report: HostReport | dict[str, Any]) -> int:
        return self.write(self.report_batch(report))

    def report_batch(self, report: HostReport | dict[str, Any]) -> Batch:
        """What ``report`` writes."""
        report = decode(report, HostReport)
        if report.reported_at is None:
            report.reported_at = self.clock()
        return Batch(reports=[report], touch_interval=self._touch_interval)

    def heartbeat(self, report: HostReport) -> bool:
        """Take ``report`` (as ``report_batch`` stamped it) to be written later with others if it repeats the record
        this replica holds for its node (``model.repeats``: nothing but the time moved, as for most reports of a
        real cloud); False, taking nothing, for any other report, which the caller writes now.

        A taken report is in no store yet: ``flush_liveness`` writes the pending ones as one batch of touches
        (``planner._plan_repeat``): each counts for its node's liveness; its figures, those of the record this
        replica held, never replace a record the store has written since (through another worker or server,
        before this report or after it: its answer went out first, so only the record the store holds is sure
        to be no older). Until then every replica, this one too, shows the node as of its previous report:
        later by at most LIVENESS_DELAY plus the feed's delay. ``stop`` writes what is
        pending; a process killed outright loses up to LIVENESS_DELAY of them (their nodes look as old as their
        previous report until their next one)."""
        if self.store.last_write_error is not None:
            return False  # a store that failed to write (or lost its file): written now, refused if it must be
        key = (report.host, report.nodename)
        # The node's usage revision, then its record as applied (reads of one dict entry each: no lock). In this
        # order, the record is at least as new as the revision (``_apply_one``): named with the report, the
        # revision lets the store take it for a touch without reading the record (``RepeatOf``).
        revision = self.node_revisions.get(key, 0)
        view = self.providers.by_key.get(key)
        if view is None:
            return False  # no record, or one without a uuid: this replica keeps none to compare with
        old = view.record
        merged = merge_reports(old, report)
        with self._liveness_lock:
            if not repeats(old, merged):
                # Written now, and it says the node is alive: a taken report of the node, older, is not needed.
                self._liveness.pop(key, None)
                return False
            assert old.reported_at is not None  # repeats() holds
            self._liveness[key] = (report, RepeatOf(key[0], key[1], revision, old.reported_at))
        return True

    def liveness_pending(self) -> int:
        return len(self._liveness)

    def flush_liveness(self) -> int:
        """Write the reports ``heartbeat`` took, as one batch (see there). Returns how many."""
        with self._liveness_writing:
            with self._liveness_lock:
                taken, self._liveness = list(self._liveness.values()), {}
            size = self.store.reports_per_batch or max(1, len(taken))
            for start in range(0, len(taken), size):
                part = taken[start:start + size]
                try:
                    self.write(Batch(reports=[report for report, _ in part], touch_interval=self._touch_interval,
                                     existing_only=True, repeat_of=[seen for _, seen in part]))
                except Exception:
                    with self._liveness_lock:  # kept for the next attempt, unless the node reported since
                        for report, seen in taken[start:]:
                            self._liveness.setdefault((report.host, report.nodename), (report, seen))
                    raise
            return len(taken)

    def stop(self) -> None:
        try:
            self.flush_liveness()
        except GanttError as exc:
            log.error("stopping: %d repeated report(s) not written: %s", len(self._liveness), exc)
        super().stop()

    def update_resource_stats(self, name: str | list[str], stats: dict[str, Any]) -> int:
        return self.report(HostReport.of(name, stats))

    def report_many(self, reports: list[HostReport]) -> int:
        """Several host reports as one atomic batch (all applied or none)."""
        now = self.clock()
        for report in reports:
            if report.reported_at is None:
                report.reported_at = now
        return self.write(Batch(reports=reports, touch_interval=self._touch_interval))

    @property
    def _touch_interval(self) -> float:
        return self.config.default.service_down_time * TOUCH_FRACTION

    def update_host(self, host: str, node: str | None, stats: HostStats) -> int:
        """An operator's change to a known node (Nova's ``service set --disable``): merged into its record as
        a report is, but it is not a report, so the node's last-report time stays (no ``reported_at``: the merge
        keeps the record's) and a host that has gone quiet is not made to look alive. Without ``node``, every node
        of the host changes."""
        check_reserved(stats, "$")
        host, node = self.node_named(host, node)
        with self.table.lock:
            rows = [self.table.row(host, node)] if node is not None or len(self.table.rows_of_host(host)) <= 1 \
                else sorted(self.table.rows_of_host(host))
            reports = [HostReport(host=host, node=self.table.node_names[row], stats=stats) for row in rows]
        return self._write(Batch(reports=reports)).revision

    def update_aggregate(self, aggregate: Aggregate | dict[str, Any]) -> int:
        return self.write(Batch(aggregates=[decode(aggregate, Aggregate)]))

    def delete_aggregate(self, aggregate_id: int | str) -> int:
        return self.write(Batch(delete_aggregates=[str(aggregate_id)]))

    def delete_host(self, host: str, node: str | None = None, *, force: bool = False) -> int:
        """Delete the node(s): refused (HostInUse) while allocations have parts there, unless ``force``, which
        removes those parts only (a consumer keeps what it holds on other nodes)."""
        return self.write(Batch(delete_hosts=[self.node_named(host, node)], refuse_held_hosts=not force))

    def release(self, consumer_uuid: str) -> Allocation:
        """Release the consumer's allocation (returned, as ``gantt.Scheduler.release`` does)."""
        changes = self._write(self.release_batch(consumer_uuid)).changes
        [gone] = [c.allocation for c in changes if c.kind == "allocation_deleted" and c.allocation is not None]
        return gone

    @staticmethod
    def release_batch(consumer_uuid: str) -> Batch:
        """What ``release`` writes."""
        return Batch(releases=[consumer_uuid])

    def confirm_move(self, migration_uuid: str) -> Allocation:
        """Drop the source a move holds under ``migration_uuid`` (returned).

        The release is strict: of a confirm and a revert racing on two instances, exactly one lands.
        """
        self.sync()  # the move may have been made on another instance an instant ago
        with self.table.lock:
            held = self.table.migration(migration_uuid)
        self.write(Batch(releases=[migration_uuid]))
        return held

    def revert_move(self, migration_uuid: str) -> Allocation:
        """Give the instance back the source held under ``migration_uuid`` and drop its destination, in one batch
        that lands only while the destination is as this replica saw it. Returns the restored allocation."""
        self.sync()
        for _ in range(self.config.gantt.claim_retries + 1):
            with self.table.lock:
                held, moved = self.table.revertible(migration_uuid)
                restored = self.table.reverted(held)
                dest = (moved.host, moved.nodename)
                expect = [Expect(dest[0], dest[1], self.node_revisions.get(dest, 0))]
            try:
                self.write(Batch(expect=expect, allocations=[restored], releases=[migration_uuid],
                                 replaces=[restored.consumer_uuid]))
                return restored
            except StoreConflict:
                self.catch_up()
        raise ClaimConflict(f"the destination of migration {migration_uuid!r} kept changing; try again")

    def sync_instance_info(self, host: str, instances: list[str]) -> int:
        self._known_host(host)
        return self.write(Batch(instances=[InstanceInfo(host=host, instances=list(dict.fromkeys(instances)))]))

    def update_instance_info(self, host: str, instances: list[str]) -> int:
        self._known_host(host)
        merged = list(dict.fromkeys([*self.instance_info.get(host, ()), *instances]))
        return self.write(Batch(instances=[InstanceInfo(host=host, instances=merged)]))

    def delete_instance_info(self, host: str, instance_uuid: str) -> int:
        self._known_host(host)
        current = self.instance_info.get(host, [])
        if instance_uuid not in current:
            raise NotFound(f"instance {instance_uuid!r} is not on host {host!r}", field="instance_uuid")
        return self.write(Batch(instances=[InstanceInfo(host=host, instances=[u for u in current
                                                                            if u != instance_uuid])]))

    def _known_host(self, host: str) -> None:
        # The store accepts instance info for any name; refuse unknown hosts here so a typo is a 404, not a no-op.
        if not self.table.rows_of_host(host):
            raise NotFound(f"no such host {host!r}", field="host")

    def select_destinations(self, spec: Any, request_id: str | None = None) -> list[list[Selection]]:
        """``request_id``: what the caller's transport calls this request (the HTTP x-openstack-request-id),
        shown in the overview's decisions and refusals when the spec names none of its own."""
        return self.run_claims(self.select_steps(spec, request_id))

    def select_steps(self, spec: Any, request_id: str | None = None) -> ClaimSteps[list[list[Selection]]]:
        """``select_destinations`` as steps (``ClaimSteps``): decided where they are driven, committed by the
        driver."""
        spec = decode(spec, RequestSpec, path="$")
        named = spec.request_id or request_id
        if not self.uncontended():
            yield CONTENDED  # the feed is applying a batch under the table lock
        try:
            answer = yield from self._select(spec)
        except NoValidHost as error:
            self.activity.refused(spec, error, named)
            raise
        self.activity.decided(answer, named)
        return answer

    def _select(self, spec: RequestSpec) -> ClaimSteps[list[list[Selection]]]:
        if spec.migration_uuid or (spec.instance_uuids
                                   and any(self.table.allocation(uuid) is not None for uuid in spec.instance_uuids)):
            # A repeat is answered from the table without a commit: read the feed up to now first (sync, not
            # catch_up: a store may serve its own recent revisions before another process's newer ones), so that
            # a booking another instance has released meanwhile is not handed out as if it still held. A move
            # reads it too: the booking it moves may have been made on another instance an instant ago.
            if not self.reads_in_place:
                yield THREAD
            self.sync()
        try:
            return (yield from self._decide(spec))
        except (NoValidHost, Conflict):
            # Nothing fits here, or a move finds nothing to move; but if this replica is behind the feed, the
            # consumers may be booked already (by another instance): then the answer is that booking. Rare path:
            # read the feed up to everything committed before now, and decide again if that changed anything.
            before = self.revision
            if not spec.instance_uuids:
                raise
            if not self.reads_in_place:
                yield THREAD
            if self.sync() == before:
                raise
            return (yield from self._decide(spec))

    def _decide(self, spec: RequestSpec) -> ClaimSteps[list[list[Selection]]]:
        # A reload while the request decides sends it to the new scheduler (nothing was committed on the old one),
        # up to DECISION_RELOADS times; the last one lets the error through.
        for _ in range(DECISION_RELOADS):
            try:
                return (yield from self.scheduler.engine.select_steps(spec))
            except TableReplaced:
                log.info("replica reloaded during a decision: deciding again on the new table")
        return (yield from self.scheduler.engine.select_steps(spec))

    def overview(self, max_hosts: int = 2000) -> Overview:
        """The cloud at a glance: the scheduler's view of hosts, utilization and allocations, and this process's
        last decisions and refusals."""
        glance = self.scheduler.overview(max_hosts)
        glance.revision = self.revision  # the store's, not the table's own counter
        glance.decisions = self.activity.decisions()
        glance.refusals = self.activity.refusals()
        self.activity.sample(glance.classes)
        glance.trend = self.activity.trend()
        return glance

    def candidates(self, spec: Any, limit: int | None = None) -> Any:
        return self.scheduler.candidates(spec, limit)

    def explain(self, spec: Any) -> Any:
        return self.scheduler.explain(spec)

    def capacity(self, question: Any) -> Any:
        return self.scheduler.capacity(question)

    def allocation(self, consumer_uuid: str) -> Allocation:
        return self.scheduler.allocation(consumer_uuid)

    def allocations(self) -> list[Allocation]:
        return self.scheduler.allocations()

    def host(self, host: str, node: str | None = None) -> dict[str, Any]:
        return self._named([self.scheduler.host(*self.node_named(host, node))])[0]

    def hosts(self) -> list[dict[str, Any]]:
        return self._named(self.scheduler.hosts())

    def node_named(self, host: str, node: str | None) -> tuple[str, str | None]:
        """The node ``/v1`` means by ``host``: the host of that name; else, when no host has it, the resource
        provider of that name or uuid (one made through Placement is keyed by its uuid, not the name a person
        knows it by): one node, one name and one uuid, whichever face is asked."""
        with self.table.lock:
            if node is not None or self.table.rows_of_host(host):
                return host, node
            found = self.providers.by_uuid.get(self.providers.by_name.get(host, host))
            return found.key if found is not None else (host, node)

    def _named(self, described: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Each node's resource provider name (Placement's ``name``), None for a node that is no provider."""
        with self.table.lock:
            for one in described:
                found = self.providers.by_key.get((one["host"], one["nodename"]))
                one["name"] = found.name if found is not None else None
        return described

    def hosts_up(self) -> int:
        return self.scheduler.hosts_up()

    def counters(self) -> dict[str, Any]:
        """The scheduler's counters, and the store's write failures seen through this replica."""
        return {**self.scheduler.counters(), "store_write_failures": self.store.write_failures}

    def utilization(self) -> Utilization:
        """Nodes by state, and capacity and usage per availability zone and resource class (``/metrics``)."""
        return self.scheduler.utilization()

    def aggregates(self) -> list[Aggregate]:
        return self.scheduler.aggregates()

    def aggregate(self, aggregate_id: int | str) -> Aggregate:
        return self.scheduler.aggregate(aggregate_id)

    # -------------------------------------------------------------------------------------------- expiry

    def _on_expire(self, expired: list[Allocation]) -> None:
        # Called under the table lock while applying a report: queue, never write to the store from here.
        for allocation in expired:
            self._expired.put(allocation.consumer_uuid)

    def _flush_expired(self) -> None:
        consumers: list[str] = []
        while not self._expired.empty():
            consumers.append(self._expired.get_nowait())
        if consumers:
            self.write(Batch(releases=consumers, lenient_releases=True))


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


def _load_snapshot(table: HostTable, snap: Snapshot) -> None:
    with table.lock:
        for aggregate in snap.aggregates:
            table.update_aggregate(aggregate)
        table.load(snap.hosts, whole=True)
        for allocation in snap.allocations:
            table.put_allocation(allocation)
        for info in snap.instances:
            if table.rows_of_host(info.host):
                table.set_instances(info.host, info.instances, replace=True)


def audit_table(snapshot: Snapshot, config: Config | None = None) -> HostTable:
    """The table a replica of this config builds from ``snapshot``: the audit's accounting is the service's, its
    claims as old as they were made (a replica that has run since they were made counts them so)."""
    table = HostTable.from_config(config or Config())
    table.age_claims_by_creation()
    _load_snapshot(table, snap=snapshot)
    return table


def audit(snapshot: Snapshot, config: Config | None = None) -> list[str]:
    """Rebuild a table from a snapshot exactly as a replica loads one (``_load_snapshot``, the config's
    ``claim_timeout``: a claim its node's reports have settled counts no more) and list what the service's write
    rules cannot have let in. A node and class is over capacity when both ways the service counts it exceed its
    capacity: the scheduler's (reported + in flight: a /v1 claim needs room there) and Placement's (the sum of the
    allocations: a Placement write needs room there, and ignores what the node reports), the latter beyond what
    the node held when a write lowered its capacity under it (``HostReport.held_over``: allowed, as Placement
    allows it). An inventory that reserves more than its total (refused on write) is listed too."""
    table = audit_table(snapshot, config)
    records = {(r.host, r.nodename): r for r in snapshot.hosts}
    problems: list[str] = []
    n = table.n
    for rc, j in table.rc_index.items():
        capacity = table.rc["capacity"][:n, j]
        for row in np.flatnonzero(table.has_inventory[:n, j] & (capacity < 0)).tolist():
            problems.append(f"{table.host_names[row]}/{table.node_names[row]} {rc}: reserved "
                            f"{table.rc['reserved'][row, j]:g} > total {table.rc['total'][row, j]:g}")
        used = table.rc["reported"][:n, j] + table.rc["inflight"][:n, j]
        for row in np.flatnonzero(used > capacity + 1e-9).tolist():
            key = (table.host_names[row], table.node_names[row])
            held = [a for c in table.node_allocations(key) if (a := table.allocation(c)) is not None]
            booked = providers.used(held, key).get(rc, 0)
            record = records.get(key)
            allowed = max(float(capacity[row]), (record.held_over or {}).get(rc, 0) if record is not None else 0)
            if booked <= allowed + 1e-9:
                continue
            problems.append(f"{key[0]}/{key[1]} {rc}: used {used[row]:g} > capacity {capacity[row]:g} "
                            f"({booked:g} allocated)")
    for row in np.flatnonzero(table.col("numa_overbooked")).tolist():
        problems.append(f"{table.host_names[row]}/{table.node_names[row]}: NUMA claims pin a CPU twice (or one "
                        "the node does not have free) or take more huge pages than are free")
    for row in range(n):
        for pool, held, count in table.pci_overbooked(row):
            described = ", ".join(f"{k}={v}" for k, v in pool if v is not None)
            problems.append(f"{table.host_names[row]}/{table.node_names[row]} PCI pool {described}: {held} devices "
                            f"held > {count}")
    for alloc in snapshot.allocations:
        for host, node in alloc.nodes():
            if (host, node) not in table:
                problems.append(f"allocation {alloc.consumer_uuid} on unknown node {host}/{node}")
    return problems
