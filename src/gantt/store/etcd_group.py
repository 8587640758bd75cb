"""Group commit on etcd: claims from concurrent callers of one store object share one txn (one raft entry, one
fsync, one watch response).

The shared txn has no compares of its own; it carries one nested txn per claim (etcd >= 3.3) with that claim's
compares, puts and failure reads, so a claim that lost its race fails alone and the others land in the same round
trip, with no second one to find or redo the winners. etcd evaluates every nested txn's compares on the state
*before* the shared txn, so two claims whose keys overlap (a node's usage key, a consumer) never share one: both
would pass compares that one after the other would not. The later one waits for the next txn, where it sees the
earlier one's writes.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from dataclasses import dataclass, field

import msgspec

from gantt.model import InvalidRequest, StoreUnavailable
from gantt.store import etcd_wire as wire
from gantt.store.base import Batch, CommitResult
from gantt.store.etcd_client import EtcdClient
from gantt.store.etcd_txn import Transactions, TxnPlan

log = logging.getLogger(__name__)

# etcd's default --max-txn-ops; a nested txn may use what its parent's list leaves over
GROUP_OPS = 128


class _Done:
    """A one-shot signal, set once by the committer and waited on by one caller: a lock held from birth, released
    when set. Cheaper than a threading.Event (a Condition and a lock built per claim, a notify_all to set it):
    those were ~8 % of an instance's GIL time at 1,000 claims/s."""

    __slots__ = ("_flag", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()
        self._flag = False

    def set(self) -> None:
        if not self._flag:
            self._flag = True
            self._lock.release()

    def is_set(self) -> bool:
        return self._flag

    def wait(self, timeout: float) -> bool:
        return self._flag or self._lock.acquire(timeout=timeout)


@dataclass(eq=False)  # found in the queue by identity
class _Pending:
    """A claim waiting for the group committer."""

    batch: Batch
    keys: frozenset[tuple[str, ...]]  # what it compares or writes (claim_keys)
    size: int  # its nested txn's longest list (claim_size)
    done: _Done = field(default_factory=_Done)
    result: CommitResult | None = None
    error: BaseException | None = None
    answered: float = 0.0  # time.perf_counter() when the committer answered it (its caller's wake-up from there)


def claim_keys(batch: Batch) -> frozenset[tuple[str, ...]]:
    """What a claim compares or writes, by node and by consumer: every key of its txn derives from one of them
    (usage keys from nodes; allocation keys and index entries from consumers)."""
    keys: set[tuple[str, ...]] = {("node", e.host, e.node) for e in batch.expect}
    for allocation in batch.allocations:
        keys.add(("consumer", allocation.consumer_uuid))
        keys.update(("node", *node) for node in allocation.nodes())
    return frozenset(keys)


def claim_size(batch: Batch) -> int:
    """An upper bound of the longest list of a claim's txn (compares, puts or failure reads)."""
    parts = sum(len(allocation.nodes()) for allocation in batch.allocations)
    compares = len(batch.expect) + len(batch.allocations)
    puts = len(batch.allocations) + parts + len(batch.expect) + parts  # allocations, index, usage keys
    return max(compares, puts)


class GroupCommit:
    """The queue of one store object's claims and the committer threads that send them, ``max_workers`` txns in
    flight at most. A committer may hold a txn back for claims still on their way (``_linger``): at most ``wait``
    seconds in all, and no longer than ``gap`` without a new claim arriving."""

    def __init__(self, client: EtcdClient, txns: Transactions, *, max_workers: int, wait: float,
                 gap: float) -> None:
        self._client = client
        self._txns = txns
        self._lock = threading.Condition()
        self.queue: collections.deque[_Pending] = collections.deque()
        self._workers = 0
        self._max_workers = max_workers  # txns of grouped claims in flight at once
        self.wait = wait
        self.gap = gap
        self._inside = 0  # callers of commit now (queued, or in a txn in flight)
        self.peak = 0  # the most of them at once since the last txn was taken
        self._idle = 0  # committers waiting for a first claim (woken by any)
        self._target = 0  # the queue length a lingering committer waits for (woken only then)

    def groupable(self, batch: Batch) -> bool:
        return bool(batch.expect and batch.allocations) and not (
            batch.reports or batch.delete_hosts or batch.aggregates or batch.delete_aggregates or batch.releases
            or batch.instances or batch.replaces or batch.providers or batch.generations or batch.records
            or batch.delete_records or batch.consumers or batch.bump_providers or batch.capacity is not None
            or batch.vacated or batch.memberships) and claim_size(batch) <= GROUP_OPS // 2

    def commit(self, batch: Batch) -> CommitResult:
        item = _Pending(batch, claim_keys(batch), claim_size(batch))
        with self._lock:
            self._inside += 1
            self.peak = max(self.peak, self._inside)
        try:
            return self._wait_for(item)
        finally:
            with self._lock:
                self._inside -= 1

    def _wait_for(self, item: _Pending) -> CommitResult:
        with self._lock:
            self.queue.append(item)
            if self._workers < self._max_workers:
                # Counted only once the thread runs: a thread that failed to start must not hold a worker's
                # place, or claims would queue with nobody left to commit them.
                try:
                    threading.Thread(target=self._loop, name="gantt-etcd-commit", daemon=True).start()
                except BaseException:
                    self.queue.remove(item)
                    raise
                self._workers += 1
            elif self._idle or len(self.queue) >= self._target:
                # Not on every claim: each wake-up of a lingering committer costs a context switch and a turn of
                # the GIL, 16 of them per txn otherwise.
                self._lock.notify()
        if not item.done.wait(self.patience()):
            # The committer never answered (a bug or a wedged thread): fail like a lost answer rather than hang a
            # request forever. Still queued: it will never be sent. Taken: it may land, which the caller already
            # handles for any unanswered write (its nodes are re-read before they are claimed again).
            with self._lock:
                queued = item in self.queue
                if queued:
                    self.queue.remove(item)
            self._client.count("group_timeouts")
            log.error("etcd group commit: no answer within %.0fs (%s)", self.patience(),
                      "never sent" if queued else "outcome unknown")
            raise StoreUnavailable("etcd group commit did not answer in time")
        if item.answered:
            self._client.count("group_wake_s", time.perf_counter() - item.answered)
        if item.error is not None:
            raise item.error
        assert item.result is not None
        return item.result

    def patience(self) -> float:
        # A committer's slowest honest answer: the shared txn, then a refused claim retried alone, each call within
        # ``budget``; far beyond that, something is wrong.
        return 10 * self._client.budget + 30

    def _loop(self) -> None:
        while True:
            with self._lock:
                if not self.queue:
                    self._idle += 1
                    self._lock.wait(5.0)
                    self._idle -= 1
                    if not self.queue:
                        self._workers -= 1
                        return
                lingered = time.perf_counter()
                self._linger()
                lingered = time.perf_counter() - lingered
                group = self._take_group()
            self._client.count("group_rounds")
            self._client.count("group_linger_s", lingered)
            try:
                self.commit_group(group)
            except BaseException as exc:  # every claim of a failed call shares its fate (e.g. StoreUnavailable)
                for item in group:
                    if not item.done.is_set():
                        item.error = exc
                        item.done.set()

    def _linger(self) -> None:
        """Hold the next txn back while claims are still on their way. Each txn costs etcd a raft entry, an
        fsync on every member and a watch response whatever it carries (about 1.6 ms of CPU over 3 members
        against 0.2 ms per claim in it, bench/RESULTS-cluster.md), so a txn of 16 claims costs about half as much
        per claim as two of 8. Sent at once when no more callers are about (as many claims queued as callers
        were inside at once during the last cycle: a lone caller never waits); else it waits while claims keep
        arriving (some within each ``gap``), up to ``wait``. Caller holds ``_lock``; the
        claim that fills the queue to what it waits for wakes it."""
        expected, self.peak = self.peak, self._inside
        if len(self.queue) >= expected or not self.wait:
            return
        deadline = time.monotonic() + self.wait
        self._target = expected
        try:
            while len(self.queue) < expected:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                before = len(self.queue)
                if not self._lock.wait(min(self.gap, left)) and len(self.queue) == before:
                    return  # nobody came within the gap: the rest are not on their way
        finally:
            self._target = 0

    def _take_group(self) -> list[_Pending]:
        """The queued claims of the next txn, oldest first: any whose keys overlap one already taken, or that
        would not fit, stays queued in order. Caller holds ``_lock``."""
        group: list[_Pending] = []
        taken: set[tuple[str, ...]] = set()
        widest = 0
        left: collections.deque[_Pending] = collections.deque()
        for item in self.queue:
            # the parent's list holds one nested txn per claim plus last-write; each nested txn gets the rest
            fits = len(group) + 2 + max(widest, item.size) <= GROUP_OPS
            if group and (not fits or not taken.isdisjoint(item.keys)):
                left.append(item)
                continue
            group.append(item)
            taken |= item.keys
            widest = max(widest, item.size)
        self.queue = left
        return group

    def commit_group(self, group: list[_Pending]) -> None:
        live: list[tuple[_Pending, TxnPlan]] = []
        for item in group:
            try:
                plan = self._txns.plan(item.batch)
            except BaseException as exc:
                item.error = exc
                item.done.set()
                continue
            if plan.ops:
                live.append((item, plan))
            else:  # nothing to write (cannot happen for a claim; kept for the contract's sake)
                item.result = CommitResult(revision=plan.read_revision or self._txns.head(), changes=[])
                item.done.set()
        if len(live) == 1:
            self._commit_alone(*live[0])
            return
        if not live:
            return
        request = wire.txn([], [
            *(wire.nested(wire.txn(plan.compares, self._txns.write_ops(plan.ops), self._txns.failure_ops(plan)))
              for _, plan in live),
            self._txns.last_write_op()])
        called = time.perf_counter()
        try:
            resp = self._client.call("TxnBytes", request)
        except InvalidRequest as exc:
            # A cluster that refuses the shared txn (a --max-txn-ops below etcd's default, or a size limit) must
            # not refuse claims that would each pass alone: commit them one by one, as with ?group=0.
            log.warning("etcd refused a shared txn of %d claims (%s): committing them one by one", len(live), exc)
            for item, plan in live:
                self._commit_alone(item, plan)
            return
        self._client.count("group_call_s", time.perf_counter() - called)
        revision = resp.header.revision
        self._client.saw(revision)
        self._client.count("group_commits")
        refused = sum(1 for r in resp.responses[:len(live)] if not r.response_txn.succeeded)
        if refused:
            self._client.count("group_refused", refused)
            if refused < len(live):
                self._client.count("group_split")
        # one response per claim, then last-write's
        for (item, plan), r in zip(live, resp.responses[:len(live)], strict=True):
            nested = r.response_txn
            try:
                if nested.succeeded:
                    self._client.count("commits")
                    item.result = CommitResult(revision=revision, changes=[
                        msgspec.structs.replace(c, revision=revision) for c in plan.changes])
                else:
                    # Refused alone: already ours (a lost answer's retry), held, or a node moved; anything else
                    # (nothing a claim reads changed) is planned and tried again by itself.
                    item.result = self._txns.refused(plan, nested.responses) or self._txns.commit(item.batch)
            except BaseException as exc:
                item.error = exc
            item.answered = time.perf_counter()
            item.done.set()


    def _commit_alone(self, item: _Pending, plan: TxnPlan) -> None:
        """One queued claim in its own txn (a group of one, or a shared txn the cluster refused); its waiter wakes."""
        called = time.perf_counter()
        try:
            item.result = self._txns.commit(item.batch, plan)
        except BaseException as exc:
            item.error = exc
        item.answered = time.perf_counter()
        self._client.count("group_call_s", item.answered - called)
        item.done.set()

