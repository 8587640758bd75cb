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
- Claims: the engine claims on the local table, then commits through ``gantt.replication.claims``.
- An operation (a placement, a write, a Placement façade's write) is written once as steps
  (``gantt.replication.steps``) and run by ``run`` (in the caller's thread) or ``perform`` (from an event loop:
  the replica chooses the loop, a decider's loop or a handler thread), never driven by its caller.
"""

from __future__ import annotations

import functools
import gc
import logging
import queue
import time
from collections.abc import Callable
from typing import Any, TypeVar

from gantt.base import clocks
from gantt.base.allocator import freeze_long_lived
from gantt.compute.commit import Attempts, ClaimConflict, TableReplaced
from gantt.compute.scheduler import Scheduler
from gantt.compute.state import HostTable
from gantt.config import Config
from gantt.model import (
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
    Utilization,
    check_reserved,
    decode,
    repeated_by,
)
from gantt.model.activity import Activity, Overview
from gantt.replication.audit import load_snapshot
from gantt.replication.changes import apply_locked
from gantt.replication.claims import Claims
from gantt.replication.driver import Runtime, drive_here, drive_on_loop
from gantt.replication.follower import Follower
from gantt.replication.liveness import Bodies, Liveness
from gantt.replication.naming import reports_batch, write_reports
from gantt.replication.steps import CONTENDED, OFF_LOOP, Steps, writing
from gantt.resources.catalog import Catalog
from gantt.resources.providers import ProviderIndex
from gantt.store.base import (
    Batch,
    Change,
    CommitResult,
    Expect,
    RepeatOf,
    Store,
    StoreConflict,
)
from gantt.store.urls import open_store

log = logging.getLogger(__name__)

T = TypeVar("T")

# From this many rows a (re)load freezes the heap out of the cyclic collector's way (see ``Replica.load``).
GC_FREEZE_ROWS = 10_000

# A report that changes nothing but its time is written (as a touch, store.base) at most this often, as a fraction
# of service_down_time: 10 s at the default 60 s, the period of Nova's own service heartbeat. Every replica sees
# the same written times, so a host silent for service_down_time is down everywhere at the same moment, at most
# this fraction early; a host reporting every few seconds costs one small write per period instead of one per
# report. Claims left unlisted past claim_timeout expire on the written reports, so up to as much later.
TOUCH_FRACTION = 1 / 6
# A report that repeats its node's record (``Replica.heartbeat``) is acknowledged at once and written with the
# others of up to this many seconds in one batch (the service's timer calls ``Replica.flush_liveness``): every
# replica learns the node's new report time this much later at most (plus the feed's delay), << service_down_time.
LIVENESS_DELAY = 0.25
# How many reloads (a table swapped in from a snapshot) one request rides out, deciding again on each new table,
# before the last one's TableReplaced goes through to the caller. Reloads are rare (a compaction past a lagging
# follower, an unanswered commit), but they come in runs: a feed cut to its last few revisions while followers lag
# reloaded one replica four times during one request (tests/store/test_replicas_racing.py, under CI's load).
DECISION_RELOADS = 10


class Replica(Follower):
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
        # Reports that repeat their node's record, acknowledged and not yet written (``heartbeat``).
        self._liveness = Liveness(self.store, self.write, lambda: self._touch_interval)
        self.revalidations = 0  # store conflicts resolved by re-checking the same nodes (no new decision)
        # What each host runs per the last instance-info write (the store keeps only the latest list per host),
        # so that Nova's additive update_instance_info / delete_instance_info can be written as a full list.
        self.instance_info: dict[str, list[str]] = {}
        self._claims = Claims(self)
        # Placement's view of the same records: providers by uuid and name, and the custom classes and traits.
        self.providers = ProviderIndex()
        self.bodies = Bodies()  # host report bodies known to repeat their node's record, by digest
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
        """A scheduler deciding on ``table``: its engine's caches and memos start empty with the table they describe,
        and its commit hook knows the table its claims were made on (``TableReplaced`` after a reload)."""
        return Scheduler(self.config, table=table, commit=functools.partial(self.commit_claims, table),
                         commit_steps=functools.partial(self._claims.commit_steps, table),
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
        load_snapshot(table, snap)
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
                        apply_locked(self, table, changes, own)
                    break
        if len(table) >= 2 * self._frozen_rows:
            self._freeze_if_grown()

    # ----------------------------------------------------------------------------------------- operations

    def commit_claims(self, table: HostTable, allocations: list[Allocation], attempts: Attempts) -> None:
        """The engine's commit hook, in the caller's thread (``Claims.commit_steps`` run here)."""
        self.run(self._claims.commit_steps(table, allocations, attempts))

    def run(self, steps: Steps[T]) -> T:
        """Run an operation (``gantt.replication.steps``) here: every commit, write and sync made in this thread."""
        return drive_here(self, steps)

    async def perform(self, steps: Steps[T], runtime: Runtime, *, decision: bool = False) -> T:
        """Run an operation from the running event loop, where it costs least, and answer there:

        - a store that commits in its caller (etcd: a round trip): the whole of it on a handler thread;
        - a store with a writer of its own (SQLite): on this loop, each commit handed to the writer while the loop
          waits on its future (a hop to a handler thread and back was two of a write's four thread wake-ups), the
          rest on a handler thread from the first step that may block;
        - ``decision``: a placement's, which over a table of more than ``runtime.loop_decision_rows`` rows goes to
          a decider's loop (a decision there takes 1-4 ms, which would hold every connection of this loop), or
          to a handler thread where the runtime has no deciders.
        """
        if not self.store.queued_commits:
            return await runtime.run(self.run, steps)
        if decision and len(self.table) > runtime.loop_decision_rows:
            if not runtime.deciders:
                return await runtime.run(self.run, steps)
            return await runtime.on_decider(drive_on_loop(self, steps, runtime.run, waits_for_lock=True))
        return await drive_on_loop(self, steps, runtime.run)

    async def caught_up(self, runtime: Runtime, head: int | None = None) -> int:
        """``sync`` (or ``catch_up_to(head)``, ``behind``'s answer) from the running loop: in place where the store
        has its own writer and local feed (SQLite: one read of the head, then the feed from the file) and no other
        thread holds the table's lock; else on a handler thread (etcd's round trip, or the feed applying a batch
        under the lock). Returns the revision reached."""
        if self.store.queued_commits and self._uncontended():
            return self._reach(head)
        return await runtime.run(self._reach, head)

    def _reach(self, head: int | None) -> int:
        if head is None:
            return self.sync()
        self.catch_up_to(head)
        return self.revision

    def _uncontended(self) -> bool:
        """Whether no other thread holds the table lock now (the feed applying a batch, a long read): steps on the
        loop go on on a thread rather than stall every connection. A glance: the lock may be taken a moment later."""
        lock = self.table.lock
        if not lock.acquire(blocking=False):
            return False
        lock.release()
        return True

    # --------------------------------------------------------------------------------------------- writes

    def write(self, batch: Batch) -> int:
        """Commit a batch and apply its changes here at once (read your own writes). Returns the revision."""
        return self._write(batch).revision

    def _write(self, batch: Batch) -> CommitResult:
        return self._written(batch, self.store.commit(batch))

    def _written(self, batch: Batch, result: CommitResult) -> CommitResult:
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
                self.catch_up(head=result.revision)  # committed: no read of the store's head for it
            except GanttError as exc:
                log.debug("catch-up after a write: %s", exc)
        # Only a feed that has not brought our revision yet (etcd's may lag its commit) leaves the write to be
        # applied from its own result, for reading our own writes. Applied before the feed, as it was, every write
        # went into the table twice (HostTable.update is a third of what a replica spends per provider write).
        if self.revision < result.revision:
            self.apply(result.changes, own="write")
        return result

    def writing(self, batch: Batch) -> Steps[int]:
        return writing(batch)  # ``write`` as an operation, for ``perform``

    def report(self, report: HostReport | dict[str, Any]) -> int:
        return write_reports(self, self.report_batch(report).reports, self._touch_interval)

    def report_batch(self, report: HostReport | dict[str, Any]) -> Batch:
        """What ``report`` writes."""
        report = decode(report, HostReport)
        if report.reported_at is None:
            report.reported_at = self.clock()
        return reports_batch(self, [report], self._touch_interval)  # with its merges: one node, one record

    def heartbeat(self, report: HostReport, stats: HostStats | None = None,
                  body: bytes | None = None) -> HostStats | None:
        """Take ``report`` (stamped; ``body``: its digest, liveness.Bodies) to be written later with others if it
        repeats its node's record (only its time moved; or ``stats``, still held): the record's stats; else None."""
        if self.store.last_write_error is not None:
            return None  # a store that failed to write (or lost its file): written now, refused if it must be
        key = (report.host, report.nodename)
        # The node's usage revision, then its record as applied (reads of one dict entry each: no lock). In this
        # order, the record is at least as new as the revision (``changes._apply_one``): named with the report,
        # the revision lets the store take it for a touch without reading the record (``RepeatOf``).
        revision = self.node_revisions.get(key, 0)
        view = self.providers.by_key.get(key)
        if view is None or self.providers.twins_of(view.uuid, key):
            return None  # no record, one without a uuid (none to compare with), or one to merge (naming.py)
        old = view.record
        if stats is not None:  # as repeats() would find: the same merge into the same record, at another time
            if old.stats is not stats or old.reported_at in (None, report.reported_at) or report.provider:
                return None
        elif not repeated_by(old, report):
            self._liveness.drop(key)
            return None
        assert old.reported_at is not None  # repeats() holds
        self._liveness.take(report, RepeatOf(key[0], key[1], revision, old.reported_at, body), old.stats)
        return old.stats

    def liveness_pending(self) -> int:
        return self._liveness.pending()

    def flush_liveness(self) -> int:
        """Write the reports ``heartbeat`` took, as one batch. Returns how many."""
        return self._liveness.flush()

    def stop(self) -> None:
        try:
            self.flush_liveness()
        except GanttError as exc:
            log.error("stopping: %d repeated report(s) not written: %s", self._liveness.pending(), exc)
        super().stop()

    def update_resource_stats(self, name: str | list[str], stats: dict[str, Any]) -> int:
        return self.report(HostReport.of(name, stats))

    def report_many(self, reports: list[HostReport]) -> int:
        """Several host reports as one atomic batch (all applied or none)."""
        now = self.clock()
        for report in reports:
            if report.reported_at is None:
                report.reported_at = now
        return write_reports(self, reports, self._touch_interval)

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
        return self.run(self.selecting(spec, request_id))

    def selecting(self, spec: Any, request_id: str | None = None) -> Steps[list[list[Selection]]]:
        """``select_destinations`` as an operation, for ``perform(..., decision=True)``: decided where it is run,
        committed by its driver."""
        spec = decode(spec, RequestSpec, path="$")
        named = spec.request_id or request_id
        if not self._uncontended():
            yield CONTENDED  # the feed is applying a batch under the table lock
        try:
            answer = yield from self._select(spec)
        except NoValidHost as error:
            self.activity.refused(spec, error, named)
            raise
        self.activity.decided(answer, named)
        return answer

    def _select(self, spec: RequestSpec) -> Steps[list[list[Selection]]]:
        if spec.migration_uuid or (spec.instance_uuids
                                   and any(self.table.allocation(uuid) is not None for uuid in spec.instance_uuids)):
            # A repeat is answered from the table without a commit: read the feed up to now first (sync, not
            # catch_up: a store may serve its own recent revisions before another process's newer ones), so that
            # a booking another instance has released meanwhile is not handed out as if it still held. A move
            # reads it too: the booking it moves may have been made on another instance an instant ago.
            if not self.store.queued_commits:  # a sync that may wait for a round trip: not on the loop
                yield OFF_LOOP
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
            if not self.store.queued_commits:  # a sync that may wait for a round trip: not on the loop
                yield OFF_LOOP
            if self.sync() == before:
                raise
            return (yield from self._decide(spec))

    def _decide(self, spec: RequestSpec) -> Steps[list[list[Selection]]]:
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
