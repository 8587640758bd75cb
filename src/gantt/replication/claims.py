"""A claim's commit: one conditional batch for every instance of a request, as steps (``gantt.replication.steps``).

The engine claims on the local table (the in-process compare-and-set), then commits through ``Claims.commit_steps``
(its commit hook, bound to the table it claimed on). Under the table lock that re-validates each node (nothing
over capacity with every local hold counted) and records the node's usage revision *as that state saw it*; the
store commits the allocations only if those revisions still hold. A loser catches up from the feed and the engine
decides again. A commit that went unanswered leaves its nodes unusable (``Replica._dirty``) until the follower
has re-snapshotted, so a lost answer cannot hide a booking.
"""

from __future__ import annotations

import logging
import threading
from typing import Protocol

from gantt.compute.commit import Attempts, ClaimConflict, TableReplaced
from gantt.compute.state import HostTable
from gantt.model import GROUP_HOST, Allocation, GanttError, NodeKey, StoreUnavailable, group_node
from gantt.replication.steps import CONTENDED, OFF_LOOP, Commit, Steps
from gantt.store.base import Batch, Change, ConsumerHeld, Expect, StoreConflict

log = logging.getLogger(__name__)


class Claimant(Protocol):
    """What a claim's commit reads and moves of its replica (``Replica``)."""

    revalidations: int  # store conflicts resolved by re-checking the same nodes (no new decision)
    node_revisions: dict[NodeKey, int]
    _dirty: set[NodeKey]

    @property
    def table(self) -> HostTable: ...

    def apply(self, changes: list[Change], *, own: str | None = None, since: int | None = None) -> None: ...

    def catch_up(self, timeout: float = 0.0) -> int: ...

    def _catch_up_to(self, revision: int, timeout: float = 5.0) -> None: ...

    def _uncontended(self) -> bool: ...


class Claims:
    """The claim commits of one replica, and the claim in flight on each node."""

    def __init__(self, replica: Claimant) -> None:
        self.replica = replica
        self._held: dict[NodeKey, threading.Lock] = {}  # node -> the claim commit in flight on it (held)
        self._lock = threading.Lock()

    def commit_steps(self, table: HostTable, allocations: list[Allocation], attempts: Attempts) -> Steps[None]:
        """The engine's commit hook (``Replica.commit_claims`` runs it in place): as steps, so that the event loop
        may drive a placement whose commit the store's own writer makes (SQLite): no handler thread, no hand-off
        of the GIL among deciders. ``table``: the one the engine claimed on (bound when the scheduler is built);
        ``attempts``: the request's conflict budget, which re-validations here spend too."""
        keys = list(dict.fromkeys((a.host, a.nodename) for a in allocations))
        # Held from here until this claim is committed and applied (a lock, not an Event: a placement builds one
        # and rarely anyone waits on it; an Event and its Condition cost ~3 % of a placement on the loop).
        mine = threading.Lock()
        mine.acquire()
        # One claim commit at a time per node within this replica: a second claim on a node whose first commit is
        # still in flight would expect the node's old usage revision and lose to our own first claim. Waiting
        # until the first has committed and been applied lets the second expect the revision it produced.
        while True:
            with self._lock:
                busy = [self._held[key] for key in keys if key in self._held]
                if not busy:
                    for key in keys:
                        self._held[key] = mine
                    break
            yield OFF_LOOP  # the wait below blocks: never on the event loop
            for held in busy:
                held.acquire()  # released when that claim is done
                held.release()
        try:
            yield from self._commit_steps(table, allocations, attempts)
        finally:
            with self._lock:
                for key in keys:
                    if self._held.get(key) is mine:
                        del self._held[key]
            mine.release()

    def _commit_steps(self, table: HostTable, allocations: list[Allocation], attempts: Attempts) -> Steps[None]:
        """Commit the request's allocations; on a conflict, re-validate the same nodes before giving up.

        A conflict only says a node's usage moved (another instance claimed or released there), not that our
        claim no longer fits. So: catch up from the feed, check the nodes again with every allocation now known
        counted, and re-commit expecting the revisions that state carries. Only a node that really filled up
        sends the engine back to decide again, which keeps re-decisions rare under contention.
        """
        replica = self.replica
        while True:
            if not replica._uncontended():
                yield CONTENDED
            expects = self._expects(table, allocations)
            try:
                result = yield Commit(Batch(expect=list(expects.values()), allocations=allocations,
                                            replaces=[a.consumer_uuid for a in allocations if a.migration_uuid]))
            except ConsumerHeld as exc:
                # Another instance booked these consumers first: their booking is the answer, never ours. Catch
                # up until this replica holds it, so the engine's next round finds and returns it.
                replica.revalidations += 1
                yield OFF_LOOP  # catching up may wait for the feed
                replica._catch_up_to(exc.revision)
                if table is not replica.table:
                    # A reload meanwhile: the booking is in the new table, not in ours, which still holds our own
                    # local claims of these consumers (the engine would answer with them): decide on the new one.
                    raise TableReplaced("the replica re-read its store while this request was committed") from None
                raise ClaimConflict(str(exc), held=exc.consumers) from None
            except StoreConflict as exc:
                yield OFF_LOOP  # rare (another instance claimed on these nodes): the catch-up below may wait
                if any(key[0] == GROUP_HOST for key in exc.keys):
                    # Another member of a server group was placed or released meanwhile: the policy must be
                    # decided again on the state that includes it (capacity alone cannot be re-validated).
                    try:
                        replica.catch_up()
                    except GanttError as feed_exc:
                        log.warning("catch-up after conflict failed: %s", feed_exc)
                    raise ClaimConflict(str(exc), exc.keys) from None
                replica.revalidations += 1
                try:
                    replica.catch_up()
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
                    with replica.table.lock:
                        replica._dirty.update(expects)
                raise
            if not replica._uncontended():
                # Committed; the feed holds the table lock (a batch of other instances' changes): our result is
                # applied on a thread, as the decision would have been, rather than stall the loop behind it.
                yield CONTENDED
            replica.apply(result.changes, own="claim")
            return

    def _expects(self, table: HostTable, allocations: list[Allocation]) -> dict[NodeKey, Expect]:
        """Under the table lock: every node still has room (our local holds counted), and the usage revision that
        state reflects, which the store must still hold for the commit to land."""
        replica = self.replica
        expects: dict[NodeKey, Expect] = {}
        with table.lock:
            if table is not replica.table:  # a reload swapped tables (under this lock) since the engine claimed
                raise TableReplaced("the replica re-read its store while this request was decided")
            for allocation in allocations:
                key = (allocation.host, allocation.nodename)
                if table.allocation(allocation.consumer_uuid) is not allocation:
                    # the feed brought another booking (or the release) of this consumer: decide again from it
                    raise ClaimConflict(f"{allocation.consumer_uuid} changed meanwhile", [key])
                if not table.within_capacity(key, allocation):
                    raise ClaimConflict(f"{key[0]}/{key[1]} no longer has room", [key])
                if key in replica._dirty:  # 503 until the follower has re-read the store
                    raise StoreUnavailable(f"{key[0]}/{key[1]}: an earlier commit went unanswered; resynchronizing")
                expects[key] = Expect(key[0], key[1], replica.node_revisions.get(key, 0))
                for part in allocation.extra:  # PCI devices, request groups: on their providers
                    node = (part.host, part.nodename)
                    if not table.within_capacity(node):  # a re-validation counts the parts' providers too
                        raise ClaimConflict(f"{node[0]}/{node[1]} no longer has room", [node])
                    expects[node] = Expect(node[0], node[1], replica.node_revisions.get(node, 0))
                if allocation.group:
                    group = group_node(allocation.group)
                    expects[group] = Expect(group[0], group[1], replica.node_revisions.get(group, 0))
        return expects
