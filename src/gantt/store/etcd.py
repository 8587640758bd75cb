"""EtcdStore: the store contract on an etcd v3 cluster, so that many Gantt instances share one state.

URL: ``etcd://host:port[,host:port…][/prefix][?timeout=1.0&budget=2.0]`` (prefix defaults to ``/gantt``).

Client choice
    grpcio's *synchronous* channels with the etcd v3 protobuf stubs that aetcd ships (``aetcd.rpc``); aetcd's
    own asyncio client is not used. Why:
    - The Store interface is synchronous and called from many threads (HTTP workers, the replica's feed
      thread). grpc sync channels are thread-safe and multiplex every call over one HTTP/2 connection per
      member; bridging to an asyncio client would add a private event loop thread, a hop per call and a second
      place where cancellation and deadlines can go wrong.
    - Every unary call gets a real gRPC deadline, which is what makes quorum loss fail fast (etcd blocks
      linearizable requests while it has no leader). Calls also carry etcd's ``hasleader`` metadata, so a member
      that knows it has no leader refuses at once ("etcdserver: no leader") instead of hanging.
    - Watch is a native stream with exact revisions, ``prev_kv`` and compaction reported as
      ``compact_revision``. The JSON gateway over httpx would need base64 for every key and value and a
      chunked-JSON streaming parser for watch, and gives no per-call deadline semantics beyond HTTP timeouts.
    - The generated stubs were made with protobuf 5.27 gencode and load cleanly (no warning) on the installed
      protobuf runtime (7.x); grpcio and protobuf are pinned with ranges in pyproject.toml.

Key layout (under the prefix; host, node, aggregate and consumer names are percent-encoded)
    hosts/<host>/<node>     merged HostReport (msgspec JSON)
    usage/<host>/<node>     empty value; its *mod revision* is the node's usage revision (Expect.revision).
                            Written by every txn that changes what the node has in use: a report, an allocation
                            put or released on it. Deleted with the node (mod revision 0 = "never written").
    aggregates/<id>         Aggregate
    allocations/<consumer>  Allocation
    instances/<host>        InstanceInfo

Revisions are etcd's store revision: one per txn, so one per committed Batch.

Writes
    A Batch is one etcd txn. A claim (``expect`` + ``allocations``) needs no read: it compares the usage keys'
    mod revisions with what the replica saw (and that the consumers hold nothing yet) and puts the allocations
    and the usage keys together; a multi-instance request is one txn, so all of it or none. Batches that must
    read first (host reports are merged on write, releases and deletions need the record) read in one txn,
    then commit guarded by the mod revisions they read, and read again on a conflict (``stats.rmw_retries``).

Feed
    ``changes`` is served from a watch stream buffered in this object (one stream, started lazily at the
    revision the caller asks for; reconnects to the next member resume from the last revision seen, so no
    event is lost). A compacted start revision raises ``Compacted`` and the replica re-snapshots.
    ``changes`` first waits (bounded) until the stream has delivered the newest revision under our prefix that
    this object knows exists (its own commits, the mod revision of the usage key that beat a claim), so a
    catch-up after a conflict really returns the change that beat us.

Faults
    A member that refuses, times out or has no leader is skipped for the next one; each call attempt has a short
    deadline (``timeout``) and the whole call a budget (``budget``), after which ``StoreUnavailable`` is raised
    (HTTP 503): with no quorum, a commit fails in about ``budget`` seconds and writes nothing. A timeout is
    ambiguous (etcd may still apply the txn later); that is safe: claims are conditional and keyed by consumer,
    so a retry either conflicts or finds the allocation (idempotency), and nothing is ever overcommitted.
"""

from __future__ import annotations

import bisect
import collections
import contextlib
import logging
import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

import grpc
import msgspec
from aetcd.rpc import rpc_pb2 as pb
from aetcd.rpc import rpc_pb2_grpc as rpc

from gantt.model import (
    Aggregate,
    Allocation,
    HostReport,
    InstanceInfo,
    InvalidRequest,
    NodeKey,
    StoreUnavailable,
)
from gantt.store import planner
from gantt.store.base import (
    Batch,
    Change,
    CommitResult,
    Compacted,
    ConsumerHeld,
    Expect,
    NodeRevision,
    Snapshot,
    Store,
    StoreConflict,
)

log = logging.getLogger(__name__)

_LEADER = (("hasleader", "true"),)  # etcd refuses at once when the member has no leader, instead of blocking
_CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", 256 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    # Detect a dead member under an idle watch; etcd's default --grpc-keepalive-min-time is 5 s.
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 3_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    # A restarted member must be usable again within a second, not after gRPC's default 1..120 s backoff.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1_000),
    ("grpc.enable_retries", 0),
]
_RETRYABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED,
              grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL}

_EQUAL = pb.Compare.EQUAL
_MOD = pb.Compare.MOD

_encode = msgspec.json.Encoder().encode
_dec_host = msgspec.json.Decoder(HostReport).decode
_dec_aggregate = msgspec.json.Decoder(Aggregate).decode
_dec_allocation = msgspec.json.Decoder(Allocation).decode
_dec_instances = msgspec.json.Decoder(InstanceInfo).decode


def _q(name: str) -> str:
    return quote(name, safe="")


def _prefix_end(prefix: bytes) -> bytes:
    """etcd's range_end for "every key starting with prefix"."""
    end = bytearray(prefix)
    while end:
        if end[-1] < 0xFF:
            end[-1] += 1
            return bytes(end)
        end.pop()
    return b"\0"


@dataclass
class EtcdStats:
    """Store-specific counters (the engine counts its own conflicts in ``Engine.stats``)."""

    commits: int = 0
    claim_conflicts: int = 0  # txns refused because an Expect no longer held
    rmw_retries: int = 0  # read-modify-write txns re-read because the record changed in between
    failovers: int = 0  # calls moved on to another member
    unavailable: int = 0  # calls that gave up (StoreUnavailable)
    watch_reconnects: int = 0
    watch_events: int = 0
    barrier_waits: int = 0  # changes() calls that had to wait for the stream to reach a known revision
    resets: int = 0  # feed restarted at an older revision than it buffered
    group_commits: int = 0  # txns that carried several claims


@dataclass
class _Plan:
    """One Batch turned into a txn."""

    compares: list[Any] = field(default_factory=list)
    ops: dict[bytes, bytes | None] = field(default_factory=dict)  # key -> value to put, None: delete
    changes: list[Change] = field(default_factory=list)
    expects: list[tuple[NodeKey, bytes, int]] = field(default_factory=list)  # node, usage key, revision
    claimed: list[bytes] = field(default_factory=list)  # allocation keys that must be absent
    read_revision: int = 0


@dataclass
class _Pending:
    """A claim waiting for the group committer."""

    batch: Batch
    done: threading.Event = field(default_factory=threading.Event)
    result: CommitResult | None = None
    error: BaseException | None = None


class _Reset(Exception):
    """This stream was replaced (restart at another revision, compaction, close): its thread ends."""


class _FutureRevision(Exception):
    """A read at a revision etcd has not reached yet."""


class _StreamEnded(Exception):
    """etcd canceled the watch (e.g. the member lost its leader): reconnect elsewhere."""


class EtcdStore(Store):
    def __init__(self, url: str, *, timeout: float | None = None, budget: float | None = None,
                 history: int = 200_000, page: int = 2_000) -> None:
        parts = urlsplit(url)
        if parts.scheme != "etcd" or not parts.netloc:
            raise ValueError(f"etcd store URL must look like etcd://host:port[,host:port…][/prefix]: {url!r}")
        self.url = url
        self.endpoints = [ep.strip() for ep in parts.netloc.split(",") if ep.strip()]
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        # Per attempt and per call: short enough that losing quorum fails a request in about `budget` seconds.
        self.timeout = float(timeout if timeout is not None else query.get("timeout", 1.0))
        self.budget = float(budget if budget is not None else query.get("budget", 2.0))
        prefix = (parts.path or "/gantt").rstrip("/") or "/gantt"
        self.prefix = prefix
        self._root = (prefix + "/").encode()
        self._range_end = _prefix_end(self._root)
        self._k_hosts = self._root + b"hosts/"
        self._k_usage = self._root + b"usage/"
        self._k_aggs = self._root + b"aggregates/"
        self._k_allocs = self._root + b"allocations/"
        self._k_insts = self._root + b"instances/"
        self.page = page
        # Concurrent claims of this instance share txns (see _group_commit). Opt-in (``?group=1``): it doubles one
        # instance's claim throughput, but one benchmark run under extreme contention stalled with it on and
        # the cause is not found yet (bench/RESULTS-cluster.md).
        self.group_commit = query.get("group", "0") in ("1", "true", "yes")
        self._group_lock = threading.Condition()
        self._group_queue: collections.deque[_Pending] = collections.deque()
        self._group_workers = 0
        self._group_max_workers = int(query.get("group_workers", 2))
        self.stats = EtcdStats()
        self._stats_lock = threading.Lock()
        self._lock = threading.Lock()
        self._channels: list[grpc.Channel | None] = [None] * len(self.endpoints)
        self._kv: list[Any] = [None] * len(self.endpoints)
        self._current = 0
        # Newest revision of a change under our prefix that we know exists (our commits, the writes that beat
        # our claims): the feed's read barrier.
        self._known = 0
        self._closed = False
        # feed
        self._history = history
        self._cond = threading.Condition()
        self._feed_gen = 0
        self._feed_thread: threading.Thread | None = None
        self._feed_call: Any = None
        self._feed_requests: queue.SimpleQueue[Any] | None = None
        self._feed_base = 0  # every change with revision > base (and <= head) is in the buffer
        self._feed_head = 0
        self._feed_revs: list[int] = []
        self._feed_buf: list[Change] = []
        self._feed_compacted: int | None = None
        self._feed_connected = False

    # ------------------------------------------------------------------------------------------ plumbing

    def _count(self, name: str, n: int = 1) -> None:
        with self._stats_lock:
            setattr(self.stats, name, getattr(self.stats, name) + n)

    def _stub(self, i: int) -> Any:
        kv = self._kv[i]
        if kv is None:
            with self._lock:
                if self._kv[i] is None:
                    channel = grpc.insecure_channel(self.endpoints[i], options=_CHANNEL_OPTIONS)
                    self._channels[i] = channel
                    self._kv[i] = rpc.KVStub(channel)
                kv = self._kv[i]
        return kv

    def _channel(self, i: int) -> grpc.Channel:
        self._stub(i)
        channel = self._channels[i]
        assert channel is not None
        return channel

    def _saw(self, revision: int) -> None:
        if revision > self._known:
            self._known = revision

    def _call(self, method: str, request: Any, *, timeout: float | None = None,
              budget: float | None = None) -> Any:
        """One unary KV call, moving on to the next member on failure until ``budget`` is spent."""
        if self._closed:
            raise StoreUnavailable("store is closed")
        timeout = timeout or self.timeout
        deadline = time.monotonic() + (budget or self.budget)
        n = len(self.endpoints)
        i = self._current
        failures = 0
        last: grpc.RpcError | None = None
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0.005:
                break
            try:
                response = getattr(self._stub(i), method)(request, timeout=min(timeout, remaining),
                                                          metadata=_LEADER)
                if failures:
                    self._current = i
                return response
            except grpc.RpcError as exc:
                code, details = exc.code(), exc.details() or ""
                if "compacted" in details:
                    raise Compacted(f"etcd: {details}") from None
                if code == grpc.StatusCode.OUT_OF_RANGE:
                    raise _FutureRevision(details) from None
                if code == grpc.StatusCode.INVALID_ARGUMENT:
                    raise InvalidRequest(f"etcd refused the request: {details}") from None
                if code not in _RETRYABLE:
                    self._count("unavailable")
                    raise StoreUnavailable(f"etcd {self.endpoints[i]}: {code.name} {details}") from None
                last = exc
                failures += 1
                self._count("failovers")
                i = (i + 1) % n
                if failures % n == 0:  # every member refused: an election may be under way, wait a little
                    time.sleep(min(0.05 * (failures // n), 0.25, max(deadline - time.monotonic(), 0)))
        self._count("unavailable")
        detail = f"{last.code().name} {last.details()}" if last is not None else "no time left"
        raise StoreUnavailable(f"etcd cluster {','.join(self.endpoints)} unavailable: {detail}")

    # --------------------------------------------------------------------------------------------- keys

    def _node_key(self, host: str, node: str) -> bytes:
        return self._k_hosts + f"{_q(host)}/{_q(node)}".encode()

    def _usage_key(self, host: str, node: str) -> bytes:
        return self._k_usage + f"{_q(host)}/{_q(node)}".encode()

    def _alloc_key(self, consumer: str) -> bytes:
        return self._k_allocs + _q(consumer).encode()

    def _agg_key(self, aggregate_id: str) -> bytes:
        return self._k_aggs + _q(aggregate_id).encode()

    def _inst_key(self, host: str) -> bytes:
        return self._k_insts + _q(host).encode()

    @staticmethod
    def _split(rest: bytes) -> NodeKey:
        host, _, node = rest.decode().partition("/")
        return unquote(host), unquote(node)

    # ---------------------------------------------------------------------------------------------- reads

    def _range_pages(self, key: bytes, end: bytes, revision: int = 0, *,
                     keys_only: bool = False) -> tuple[int, list[Any]]:
        """Every key in [key, end) at one revision (the current one when 0), page by page."""
        kvs: list[Any] = []
        start = key
        while True:
            resp = self._call("Range", pb.RangeRequest(key=start, range_end=end, limit=self.page,
                                                       revision=revision, keys_only=keys_only),
                              timeout=max(self.timeout, 10.0), budget=max(self.budget, 30.0))
            if revision == 0:
                revision = resp.header.revision
            kvs.extend(resp.kvs)
            if not resp.more or not resp.kvs:
                return revision, kvs
            start = resp.kvs[-1].key + b"\0"

    def snapshot(self) -> Snapshot:
        for _ in range(5):
            try:
                revision, kvs = self._range_pages(self._root, self._range_end)
            except Compacted:
                continue  # compacted between pages: read again at the new head
            hosts: list[HostReport] = []
            aggregates: list[Aggregate] = []
            allocations: list[Allocation] = []
            instances: list[InstanceInfo] = []
            node_revisions: list[NodeRevision] = []
            for kv in kvs:
                key: bytes = kv.key
                if key.startswith(self._k_hosts):
                    hosts.append(_dec_host(kv.value))
                elif key.startswith(self._k_usage):
                    host, node = self._split(key[len(self._k_usage):])
                    node_revisions.append(NodeRevision(host, node, kv.mod_revision))
                elif key.startswith(self._k_allocs):
                    allocations.append(_dec_allocation(kv.value))
                elif key.startswith(self._k_aggs):
                    aggregates.append(_dec_aggregate(kv.value))
                elif key.startswith(self._k_insts):
                    instances.append(_dec_instances(kv.value))
            return Snapshot(revision=revision, hosts=hosts, aggregates=aggregates, allocations=allocations,
                            instances=instances, node_revisions=node_revisions)
        raise StoreUnavailable("snapshot kept being compacted away")

    def head(self) -> int:
        """The cluster's current revision (a linearizable read)."""
        return int(self._call("Range", pb.RangeRequest(key=self._root, count_only=True)).header.revision)

    def barrier(self) -> int:
        """The newest revision of a key under our prefix (a linearizable read). Not ``head()``: the cluster's
        revision moves with other prefixes' writes too, which our feed never delivers."""
        resp = self._call("Range", pb.RangeRequest(key=self._root, range_end=self._range_end, limit=1, keys_only=True,
                                                   sort_order=pb.RangeRequest.DESCEND,
                                                   sort_target=pb.RangeRequest.MOD))
        newest = int(resp.kvs[0].mod_revision) if resp.kvs else 0
        self._saw(newest)  # so changes() waits for the stream to deliver it
        return newest

    def compact(self, revision: int) -> None:
        """Drop history up to ``revision`` (operators normally let etcd's --auto-compaction do it)."""
        self._call("Compact", pb.CompactionRequest(revision=revision, physical=True), timeout=10, budget=10)

    # --------------------------------------------------------------------------------------------- writes

    def commit(self, batch: Batch) -> CommitResult:
        try:
            if self.group_commit and batch.expect and batch.allocations and not (
                    batch.reports or batch.delete_hosts or batch.aggregates or batch.delete_aggregates
                    or batch.releases or batch.instances or batch.replaces):
                result = self._group_commit(batch)
            else:
                result = self._commit(batch)
        except StoreUnavailable as exc:  # no quorum, no member reachable, or the budget spent
            self._note_write(exc)
            raise
        if result.changes:
            self._note_write(None)
        return result

    # Group commit: claims from concurrent callers of this instance share one txn (one raft entry, one fsync,
    # one watch event batch). Each claim keeps its own compares, so a claim is still all or nothing; when the
    # shared txn fails, the failure ranges tell which claims conflicted, and the others go again at once.
    _GROUP_OPS = 120  # etcd's default --max-txn-ops is 128, per list (compares, success, failure)

    def _group_commit(self, batch: Batch) -> CommitResult:
        item = _Pending(batch)
        with self._group_lock:
            self._group_queue.append(item)
            if self._group_workers < self._group_max_workers:
                self._group_workers += 1
                threading.Thread(target=self._group_loop, name="gantt-etcd-commit", daemon=True).start()
            else:
                self._group_lock.notify()
        item.done.wait()
        if item.error is not None:
            raise item.error
        assert item.result is not None
        return item.result

    def _group_loop(self) -> None:
        while True:
            with self._group_lock:
                if not self._group_queue:
                    self._group_lock.wait(5.0)
                    if not self._group_queue:
                        self._group_workers -= 1
                        return
                group: list[_Pending] = []
                ops = 0
                while self._group_queue:
                    size = 2 * (len(self._group_queue[0].batch.allocations) + len(self._group_queue[0].batch.expect))
                    if group and ops + size > self._GROUP_OPS:
                        break
                    group.append(self._group_queue.popleft())
                    ops += size
            try:
                self._commit_group(group)
            except BaseException as exc:  # every claim of a failed call shares its fate (e.g. StoreUnavailable)
                for item in group:
                    if not item.done.is_set():
                        item.error = exc
                        item.done.set()

    def _commit_group(self, group: list[_Pending]) -> None:
        plans = [self._plan(item.batch) for item in group]
        while group:
            if len(group) == 1:
                try:
                    group[0].result = self._commit(group[0].batch, plans[0])
                except BaseException as exc:
                    group[0].error = exc
                group[0].done.set()
                return
            compares = [c for plan in plans for c in plan.compares]
            ops: dict[bytes, bytes | None] = {}
            for plan in plans:
                ops.update(plan.ops)
            failure, spans = [], []
            for plan in plans:
                start = len(failure)
                failure += self._failure_ops(plan)
                spans.append((start, len(failure)))
            resp = self._call("Txn", pb.TxnRequest(compare=compares, success=self._success_ops(ops),
                                                   failure=failure))
            if resp.succeeded:
                revision = resp.header.revision
                self._saw(revision)
                self._count("commits", len(group))
                self._count("group_commits")
                for item, plan in zip(group, plans, strict=True):
                    item.result = CommitResult(revision=revision, changes=[
                        msgspec.structs.replace(c, revision=revision) for c in plan.changes])
                    item.done.set()
                return
            again: list[_Pending] = []
            again_plans: list[_Plan] = []
            for item, plan, (a, b) in zip(group, plans, spans, strict=True):
                responses = resp.responses[a:b]
                mine = self._already_applied(plan, responses)
                held = None if mine else self._held(plan, responses)
                conflicts = [] if mine or held else self._conflicts(plan, responses)
                if mine:
                    item.result = CommitResult(revision=mine, changes=[
                        msgspec.structs.replace(c, revision=mine) for c in plan.changes])
                    item.done.set()
                elif held is not None:
                    self._count("claim_conflicts")
                    item.error = held
                    item.done.set()
                elif conflicts:
                    self._count("claim_conflicts")
                    item.error = StoreConflict(conflicts)
                    item.done.set()
                else:
                    again.append(item)
                    again_plans.append(plan)
            if len(again) == len(group):  # no single culprit (e.g. two claims expecting one node differently)
                again, again_plans = again[:1], again_plans[:1]
                for item in group[1:]:
                    self._group_requeue(item)
            group, plans = again, again_plans

    def _group_requeue(self, item: _Pending) -> None:
        with self._group_lock:
            self._group_queue.appendleft(item)
            self._group_lock.notify()

    def _failure_ops(self, plan: _Plan) -> list[Any]:
        ops = [pb.RequestOp(request_range=pb.RangeRequest(key=usage, keys_only=True))
               for _, usage, _ in plan.expects]
        ops += [pb.RequestOp(request_range=pb.RangeRequest(key=key)) for key in plan.claimed]
        return ops

    @staticmethod
    def _success_ops(ops: dict[bytes, bytes | None]) -> list[Any]:
        return [pb.RequestOp(request_put=pb.PutRequest(key=k, value=v)) if v is not None
                else pb.RequestOp(request_delete_range=pb.DeleteRangeRequest(key=k)) for k, v in ops.items()]

    def _conflicts(self, plan: _Plan, responses: Any) -> list[NodeKey]:
        conflicts: list[NodeKey] = []
        for (node, _, expected), r in zip(plan.expects, responses[:len(plan.expects)], strict=True):
            actual = r.response_range.kvs[0].mod_revision if r.response_range.kvs else 0
            if actual != expected and node not in conflicts:
                conflicts.append(node)
            self._saw(actual)
        return conflicts

    def _held(self, plan: _Plan, responses: Any) -> ConsumerHeld | None:
        """The claim's consumers that another writer booked first (a claim never moves a booking)."""
        held: list[str] = []
        revision = 0
        for key, r in zip(plan.claimed, responses[len(plan.expects):], strict=True):
            if r.response_range.kvs:
                revision = max(revision, r.response_range.kvs[0].mod_revision)
                held.append(unquote(key[len(self._k_allocs):].decode()))
        if not held:
            return None
        self._saw(revision)
        return ConsumerHeld(held, revision)

    def _commit(self, batch: Batch, plan: _Plan | None = None) -> CommitResult:
        attempts = 32
        for _ in range(attempts):
            plan = plan or self._plan(batch)
            if not plan.ops:
                return CommitResult(revision=plan.read_revision or self.head(), changes=[])
            resp = self._call("Txn", pb.TxnRequest(compare=plan.compares, success=self._success_ops(plan.ops),
                                                   failure=self._failure_ops(plan)))
            if resp.succeeded:
                revision = resp.header.revision
                self._saw(revision)
                self._count("commits")
                return CommitResult(revision=revision,
                                    changes=[msgspec.structs.replace(c, revision=revision) for c in plan.changes])
            mine = self._already_applied(plan, resp.responses)
            if mine:
                self._saw(mine)
                self._count("commits")
                return CommitResult(revision=mine,
                                    changes=[msgspec.structs.replace(c, revision=mine) for c in plan.changes])
            held = self._held(plan, resp.responses)
            if held is not None:
                self._count("claim_conflicts")
                raise held
            conflicts = self._conflicts(plan, resp.responses)
            if conflicts:
                self._count("claim_conflicts")
                raise StoreConflict(conflicts)
            self._count("rmw_retries")
            plan = None
        raise StoreUnavailable(f"gave up after {attempts} read-modify-write conflicts (heavy write contention)")

    def _already_applied(self, plan: _Plan, responses: Any) -> int:
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

    def _plan(self, batch: Batch) -> _Plan:
        """Read what the batch needs in one txn, plan it (``store.planner``), and turn the plan into a txn whose
        compares guard every read: the txn commits only if nothing it read has changed since."""
        txn = _Plan()
        reads = _Reads(self, batch, txn)
        decided = planner.plan(batch, reads)
        for key, report in decided.hosts.items():
            txn.ops[self._node_key(*key)] = None if report is None else _encode(report)
        for aggregate_id, aggregate in decided.aggregates.items():
            txn.ops[self._agg_key(aggregate_id)] = None if aggregate is None else _encode(aggregate)
        for consumer, allocation in decided.allocations.items():
            txn.ops[self._alloc_key(consumer)] = None if allocation is None else _encode(allocation)
        for host, info in decided.instances.items():
            txn.ops[self._inst_key(host)] = _encode(info)
        for key in decided.bumped:  # a usage key's mod_revision is the node's usage revision
            txn.ops[self._usage_key(*key)] = None if key in decided.deleted_nodes else b""
        txn.changes = decided.changes
        return txn

    # ----------------------------------------------------------------------------------------------- feed

    def _events_to_changes(self, events: Any) -> tuple[list[Change], int]:
        """One watch response's events as changes, and the revision of the last event (0: none)."""
        changes: list[Change] = []
        last = 0
        lost: set[int] = set()  # revisions with an allocation event whose old value the watch no longer has
        for ev in events:
            last = ev.kv.mod_revision
            prev = ev.prev_kv if ev.HasField("prev_kv") else None
            deleted = ev.type == 1  # mvccpb.Event.DELETE
            change = self._to_change(last, ev.kv, deleted, prev)
            if change is not None:
                changes.append(change)
                if change.kind.startswith("allocation") and prev is None and (deleted or ev.kv.version > 1):
                    lost.add(last)
            elif not deleted and ev.kv.key.startswith(self._k_usage):
                # Kept only for a revision in ``lost``: then the replica cannot tell from the allocation change
                # which node it left, and would expect that node's old usage revision until a reload.
                changes.append(Change(revision=last, kind="usage", node=self._split(ev.kv.key[len(self._k_usage):])))
        return [c for c in changes if c.kind != "usage" or c.revision in lost], last

    def _to_change(self, revision: int, kv: Any, deleted: bool, prev: Any) -> Change | None:
        key: bytes = kv.key
        if key.startswith(self._k_hosts):
            if deleted:
                return Change(revision=revision, kind="host_deleted", node=self._split(key[len(self._k_hosts):]))
            return Change(revision=revision, kind="host", host=_dec_host(kv.value))
        if key.startswith(self._k_allocs):
            if deleted:
                if prev is not None and prev.value:
                    allocation = _dec_allocation(prev.value)
                else:  # history without the old value: the consumer is all the replica needs to drop it
                    allocation = Allocation(consumer_uuid=unquote(key[len(self._k_allocs):].decode()),
                                            host="", nodename="", resources={})
                return Change(revision=revision, kind="allocation_deleted", allocation=allocation)
            replaced = _dec_allocation(prev.value) if prev is not None and prev.value else None  # a move
            return Change(revision=revision, kind="allocation", allocation=_dec_allocation(kv.value),
                          replaced=replaced)
        if key.startswith(self._k_aggs):
            if deleted:
                return Change(revision=revision, kind="aggregate_deleted",
                              aggregate_id=unquote(key[len(self._k_aggs):].decode()))
            return Change(revision=revision, kind="aggregate", aggregate=_dec_aggregate(kv.value))
        if key.startswith(self._k_insts) and not deleted:
            return Change(revision=revision, kind="instances", instances=_dec_instances(kv.value))
        return None  # usage keys: their revision travels with the host/allocation change of the same txn

    def changes(self, since: int, timeout: float = 1.0) -> list[Change]:
        target = self._known
        now = time.monotonic()
        deadline = now + max(timeout, 0.0)
        # Wait for the stream to reach what etcd already told us exists, so a catch-up after a conflict sees the
        # change that beat us; bounded, so an outage cannot hold the caller for long.
        barrier = now + max(timeout, 1.0)
        with self._cond:
            restart = (self._feed_thread is None or since < self._feed_base
                       or (self._feed_compacted is not None and since >= self._feed_compacted - 1))
        if restart:
            # etcd reports a compacted start revision only ~100 ms after the watch is created: ask first, so that
            # changes(old, timeout=0) raises Compacted at once instead of returning an empty list.
            with contextlib.suppress(_FutureRevision):
                self._call("Range", pb.RangeRequest(key=self._root, count_only=True, revision=since + 1))
        with self._cond:
            if restart:
                if self._feed_thread is not None and since < self._feed_base:
                    self._count("resets")
                self._start_feed(since)
            waited = False
            while True:
                if self._feed_compacted is not None:
                    raise Compacted(f"revision {since} is compacted (etcd compacted up to "
                                    f"{self._feed_compacted}); re-snapshot")
                now = time.monotonic()
                head = self._feed_head
                if head >= target:
                    if (self._feed_revs and self._feed_revs[-1] > since) or now >= deadline:
                        break
                    remaining = deadline - now
                else:
                    if now >= barrier:
                        break
                    waited = True
                    remaining = barrier - now
                self._cond.wait(remaining)
            if waited:
                self._count("barrier_waits")
            start = bisect.bisect_right(self._feed_revs, since)
            return self._feed_buf[start:]

    def _start_feed(self, since: int) -> None:
        """(Re)start the watch stream at ``since + 1`` with an empty buffer. Caller holds ``_cond``."""
        self._stop_feed_locked()
        self._feed_gen += 1
        self._feed_base = self._feed_head = since
        self._feed_revs = []
        self._feed_buf = []
        self._feed_compacted = None
        self._feed_connected = False
        thread = threading.Thread(target=self._feed_loop, args=(self._feed_gen,), name="gantt-etcd-watch",
                                  daemon=True)
        self._feed_thread = thread
        thread.start()

    def _stop_feed_locked(self) -> None:
        self._feed_gen += 1
        call, requests = self._feed_call, self._feed_requests
        self._feed_call = self._feed_requests = None
        if requests is not None:
            requests.put(None)
        if call is not None:
            with contextlib.suppress(Exception):
                call.cancel()
        self._feed_thread = None

    def _feed_loop(self, gen: int) -> None:
        backoff = 0.05
        i = self._current
        while not self._closed:
            with self._cond:
                if gen != self._feed_gen:
                    return
                start = self._feed_head + 1
                requests: queue.SimpleQueue[Any] = queue.SimpleQueue()
                requests.put(pb.WatchRequest(create_request=pb.WatchCreateRequest(
                    key=self._root, range_end=self._range_end, start_revision=start, prev_kv=True)))
                self._feed_requests = requests
                call = rpc.WatchStub(self._channel(i)).Watch(_drain(requests), metadata=_LEADER)
                self._feed_call = call
            try:
                self._consume(gen, call)
                reason = "stream closed"
            except _Reset:
                return
            except grpc.RpcError as exc:
                reason = f"{exc.code().name} {exc.details()}"
            except _StreamEnded as exc:
                reason = str(exc)
            except Exception:  # a bug or an undecodable value: log it, keep the feed alive
                log.exception("etcd watch on %s failed", self.endpoints[i])
                reason = "error"
            with self._cond:
                if gen != self._feed_gen or self._closed:
                    return
                had_connected, self._feed_connected = self._feed_connected, False
            log.info("etcd watch on %s ended (%s); resuming from revision %d on the next member",
                     self.endpoints[i], reason, self._feed_head + 1)
            self._count("watch_reconnects")
            i = (i + 1) % len(self.endpoints)
            # Right after a working stream broke, try the next member at once; back off while none answers.
            backoff = 0.05 if had_connected else min(backoff * 2, 1.0)
            time.sleep(backoff)

    def _consume(self, gen: int, call: Iterator[Any]) -> None:
        for resp in call:
            if resp.compact_revision:
                with self._cond:
                    if gen == self._feed_gen:
                        self._feed_compacted = resp.compact_revision
                        self._cond.notify_all()
                log.warning("etcd watch: revision %d is compacted", resp.compact_revision)
                raise _Reset
            if resp.canceled:  # e.g. the member lost its leader: the caller reconnects elsewhere
                raise _StreamEnded(f"watch canceled: {resp.cancel_reason}")
            if resp.created:
                with self._cond:
                    self._feed_connected = True
                continue
            changes, last = self._events_to_changes(resp.events)
            with self._cond:
                if gen != self._feed_gen:
                    raise _Reset
                # Complete through the last event's revision: etcd sends a revision's events together. An
                # event-less response (progress) is not trusted: etcd 3.4 answers a progress request with the
                # current revision even while the watcher is still catching up (fixed in 3.4.24 / 3.5.8).
                if resp.events:
                    self._feed_head = max(self._feed_head, last)
                if changes:
                    self._feed_buf.extend(changes)
                    self._feed_revs.extend(c.revision for c in changes)
                    if len(self._feed_buf) > self._history * 5 // 4:
                        self._trim()
                self._cond.notify_all()
            if changes:
                self._count("watch_events", len(changes))

    def _trim(self) -> None:
        """Keep about ``history`` changes, cutting at a revision boundary. Caller holds ``_cond``."""
        drop = len(self._feed_buf) - self._history
        cut_rev = self._feed_revs[drop - 1]
        cut = bisect.bisect_right(self._feed_revs, cut_rev)
        del self._feed_buf[:cut]
        del self._feed_revs[:cut]
        self._feed_base = cut_rev

    # -------------------------------------------------------------------------------------------- closing

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._cond:
            self._stop_feed_locked()
            self._cond.notify_all()
        for channel in self._channels:
            if channel is not None:
                channel.close()


def _drain(requests: queue.SimpleQueue[Any]) -> Iterator[Any]:
    """The watch stream's request side: the create request, then nothing until None ends the stream."""
    while True:
        item = requests.get()
        if item is None:
            return
        yield item


class _Reads:
    """The planner's reads: fetched in one txn up front, each guarded by a compare of the commit's txn.

    A claim's ``expect`` and its consumers' absence are not read at all: they become compares (a usage key's
    mod_revision, an allocation key's mod_revision 0), so a claim costs one round trip; when a compare fails,
    ``EtcdStore._commit`` raises the error the planner would have raised.
    """

    def __init__(self, store: EtcdStore, batch: Batch, txn: _Plan) -> None:
        self._s, self._txn = store, txn
        k = store
        wanted: list[tuple[str, Any, bytes, bytes | None]] = []  # (what, id, key, range_end)
        wanted += [("host", (r.host, r.nodename), k._node_key(r.host, r.nodename), None) for r in batch.reports]
        for host, node in batch.delete_hosts:
            # The usage keys are read only for their guard: a claim landing on a doomed node fails the txn.
            if node is None:
                prefix = k._k_hosts + f"{_q(host)}/".encode()
                usage = k._k_usage + f"{_q(host)}/".encode()
                wanted += [("nodes", (host, None), prefix, _prefix_end(prefix)),
                           ("usage", (host, None), usage, _prefix_end(usage))]
            else:
                wanted += [("nodes", (host, node), k._node_key(host, node), None),
                           ("usage", (host, node), k._usage_key(host, node), None)]
        wanted += [("agg", a, k._agg_key(a), None) for a in batch.delete_aggregates]
        wanted += [("alloc", c, k._alloc_key(c), None) for c in [*batch.releases, *batch.replaces]]
        self._found: dict[tuple[str, Any], list[Any]] = {}
        if not wanted:
            return
        resp = k._call("Txn", pb.TxnRequest(success=[
            pb.RequestOp(request_range=pb.RangeRequest(key=key, range_end=end or b"")) for _, _, key, end in wanted]))
        txn.read_revision = resp.header.revision
        for (what, ident, key, end), r in zip(wanted, resp.responses, strict=True):
            kvs = list(r.response_range.kvs)
            if (what, ident) in self._found:
                continue  # read twice (a consumer released and moved): one guard is enough
            self._found[(what, ident)] = kvs
            if end is None:  # guard a single key: unchanged since read (0: still absent)
                txn.compares.append(pb.Compare(key=key, target=_MOD, result=_EQUAL,
                                               mod_revision=kvs[0].mod_revision if kvs else 0))
            else:  # guard a prefix: nothing in it changed or appeared since the read
                txn.compares.append(pb.Compare(key=key, range_end=end, target=_MOD, result=pb.Compare.LESS,
                                               mod_revision=txn.read_revision + 1))

    def head(self) -> int:
        return self._txn.read_revision or self._s.head()

    def expect_holds(self, expect: Expect) -> bool:
        usage = self._s._usage_key(expect.host, expect.node)
        self._txn.expects.append(((expect.host, expect.node), usage, expect.revision))
        self._txn.compares.append(pb.Compare(key=usage, target=_MOD, result=_EQUAL, mod_revision=expect.revision))
        return True

    def host(self, key: NodeKey) -> HostReport | None:
        kvs = self._found[("host", key)]
        return _dec_host(kvs[0].value) if kvs else None

    def nodes_of(self, host: str, node: str | None) -> list[NodeKey]:
        return [self._s._split(kv.key[len(self._s._k_hosts):]) for kv in self._found[("nodes", (host, node))]]

    def has_aggregate(self, aggregate_id: str) -> bool:
        return bool(self._found[("agg", aggregate_id)])

    def allocation(self, consumer: str) -> Allocation | None:
        kvs = self._found[("alloc", consumer)]
        return _dec_allocation(kvs[0].value) if kvs else None

    def unbooked(self, consumer: str) -> bool:
        key = self._s._alloc_key(consumer)
        self._txn.claimed.append(key)
        self._txn.compares.append(pb.Compare(key=key, target=_MOD, result=_EQUAL, mod_revision=0))
        return True

    def allocations_on(self, nodes: set[NodeKey]) -> list[Allocation]:
        # Allocations are keyed by consumer: a scan (host deletion is rare; the guards on the nodes' keys make
        # it safe against a concurrent claim there, which bumps a usage key the txn deletes).
        _, kvs = self._s._range_pages(self._s._k_allocs, _prefix_end(self._s._k_allocs), self._txn.read_revision)
        found = [_dec_allocation(kv.value) for kv in kvs]
        return [a for a in found if (a.host, a.nodename) in nodes]
