"""EtcdStore: the store contract on an etcd v3 cluster, so that many Gantt instances share one state.

URL: ``etcd://host:port[,host:port…][/prefix][?timeout=1.0&budget=2.0&group=1&group_workers=1&group_wait_ms=3&
group_gap_ms=1]`` (prefix defaults to ``/gantt``; group commit, on by default, is described under Writes).

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
    live/<host>/<node>      the time of the node's last touch (a report that changed nothing but its time), a
                            number: a few bytes written and watched instead of the whole record (store.base)
    usage/<host>/<node>     empty value; its *mod revision* is the node's usage revision (Expect.revision).
                            Written by every txn that changes what the node has in use: a report, an allocation
                            put or released on it. Deleted with the node (mod revision 0 = "never written").
    aggregates/<id>         Aggregate
    allocations/<consumer>  Allocation
    placed/<host>/<node>/<consumer>
                            empty value: the consumer's allocation has a part on that node. Written in the txn that
                            writes the allocation, so a capacity check (or a host's deletion) reads the allocations
                            on a few nodes without scanning every consumer's. An entry may outlive its allocation's
                            part there (a writer that did not know the old record); readers skip and drop those.
    last-write              empty value, put by every commit: its mod revision is the prefix's last commit (barrier)
    placed-complete         present once every allocation has its entries (written when the first reader finds
                            the store fresh, or after indexing an older store's allocations); until then readers
                            scan ``allocations/``. Every instance sharing a store must maintain the index: a
                            version older than the index, still running, would write allocations it cannot see.
    instances/<host>        InstanceInfo

Revisions are etcd's store revision: one per txn, so one per committed Batch.

Writes
    A Batch is one etcd txn. A claim (``expect`` + ``allocations``) needs no read: it compares the usage keys'
    mod revisions with what the replica saw (and that the consumers hold nothing yet) and puts the allocations
    and the usage keys together; a multi-instance request is one txn, so all of it or none. Batches that must
    read first (host reports are merged on write, releases and deletions need the record) read in one txn,
    then commit guarded by the mod revisions they read, and read again on a conflict (``stats.rmw_retries``).
    Claims of concurrent callers share one txn, each as a nested txn of its own (``_group_commit``; ``?group=0``
    turns it off): one raft entry for many claims, and a refused claim fails alone.

Feed
    ``store.etcd_feed``: one watch stream, buffered, resumed on the next member without losing an event. Key
    layout and the reading of watch events as changes: ``store.etcd_keys``.

Faults
    A member that refuses, times out or has no leader is skipped for the next one; each call attempt has a short
    deadline (``timeout``) and the whole call a budget (``budget``), after which ``StoreUnavailable`` is raised
    (HTTP 503): with no quorum, a commit fails in about ``budget`` seconds and writes nothing. A timeout is
    ambiguous (etcd may still apply the txn later); that is safe: claims are conditional and keyed by consumer,
    so a retry either conflicts or finds the allocation (idempotency), and nothing is ever overcommitted.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

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
    Record,
    StoreUnavailable,
)
from gantt.model.namespaces import DEFAULT, check_name, etcd_prefix
from gantt.store import etcd_wire as wire
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
    lifted,
)
from gantt.store.etcd_feed import LEADER, FutureRevision, WatchFeed
from gantt.store.etcd_keys import (
    Keys,
    decode_aggregate,
    decode_allocation,
    decode_host,
    decode_instances,
    decode_record,
    encode,
    prefix_end,
)

log = logging.getLogger(__name__)

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
    group_commits: int = 0  # txns that carried several claims (each in its own nested txn)
    group_refused: int = 0  # claims refused inside such a txn (their own compares failed)
    group_split: int = 0  # such txns where some claims landed and others were refused
    group_timeouts: int = 0  # claims whose committer did not answer in time (StoreUnavailable; should stay 0)


@dataclass
class _Plan:
    """One Batch turned into a txn."""

    compares: list[bytes] = field(default_factory=list)  # Compare messages, encoded (store.etcd_wire)
    ops: dict[bytes, bytes | None] = field(default_factory=dict)  # key -> value to put, None: delete
    changes: list[Change] = field(default_factory=list)
    expects: list[tuple[NodeKey, bytes, int]] = field(default_factory=list)  # node, usage key, revision
    claimed: list[bytes] = field(default_factory=list)  # allocation keys that must be absent
    read_revision: int = 0
    stale: list[bytes] = field(default_factory=list)  # index entries read that no longer match their allocation
    quiet: int = 0  # touches too fresh to write (CommitResult.quiet)


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
    keys: frozenset[tuple[str, ...]]  # what it compares or writes (_claim_keys)
    size: int  # its nested txn's longest list (_claim_size)
    done: _Done = field(default_factory=_Done)
    result: CommitResult | None = None
    error: BaseException | None = None


def _flag(query: dict[str, str], name: str, default: bool) -> bool:
    value = query.get(name)
    if value is None:
        return default
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"etcd store URL: {name} must be 1 or 0 (true/false, yes/no, on/off), not {value!r}")


def _millis(query: dict[str, str], name: str, default: float) -> float:
    """A duration in milliseconds from the URL, as seconds."""
    value = query.get(name)
    if value is None:
        return default / 1000
    try:
        ms = float(value)
    except ValueError:
        ms = -1.0
    if not 0 <= ms <= 1000:
        raise ValueError(f"etcd store URL: {name} must be a number of milliseconds from 0 to 1000, not {value!r}")
    return ms / 1000


def _claim_keys(batch: Batch) -> frozenset[tuple[str, ...]]:
    """What a claim compares or writes, by node and by consumer: every key of its txn derives from one of them
    (usage keys from nodes; allocation keys and index entries from consumers)."""
    keys: set[tuple[str, ...]] = {("node", e.host, e.node) for e in batch.expect}
    for allocation in batch.allocations:
        keys.add(("consumer", allocation.consumer_uuid))
        keys.update(("node", *node) for node in allocation.nodes())
    return frozenset(keys)


def _claim_size(batch: Batch) -> int:
    """An upper bound of the longest list of a claim's txn (compares, puts or failure reads)."""
    parts = sum(len(allocation.nodes()) for allocation in batch.allocations)
    compares = len(batch.expect) + len(batch.allocations)
    puts = len(batch.allocations) + parts + len(batch.expect) + parts  # allocations, index, usage keys
    return max(compares, puts)


class EtcdStore(Store):
    def __init__(self, url: str, *, timeout: float | None = None, budget: float | None = None,
                 history: int = 200_000, page: int = 2_000, namespace: str = DEFAULT) -> None:
        parts = urlsplit(url)
        if parts.scheme != "etcd" or not parts.netloc:
            raise ValueError(f"etcd store URL must look like etcd://host:port[,host:port…][/prefix]: {url!r}")
        self.url = url
        self.endpoints = [ep.strip() for ep in parts.netloc.split(",") if ep.strip()]
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        # Per attempt and per call: short enough that losing quorum fails a request in about `budget` seconds.
        self.timeout = float(timeout if timeout is not None else query.get("timeout", 1.0))
        self.budget = float(budget if budget is not None else query.get("budget", 2.0))
        self.namespace = check_name(namespace)
        prefix = etcd_prefix((parts.path or "/gantt").rstrip("/") or "/gantt", namespace)
        self.prefix = prefix
        self.keys = Keys(prefix)
        self.page = page
        # Concurrent claims of this instance share txns (see _group_commit); ``?group=0`` commits each alone.
        self.group_commit = _flag(query, "group", True)
        self._group_lock = threading.Condition()
        self._group_queue: collections.deque[_Pending] = collections.deque()
        self._group_workers = 0
        workers = query.get("group_workers", "1")
        if not workers.isdigit() or int(workers) < 1:
            raise ValueError(f"etcd store URL: group_workers must be a whole number >= 1, not {workers!r}")
        self._group_max_workers = int(workers)  # txns of grouped claims in flight at once
        # How long a committer may hold a txn back for claims still on their way (_linger): at most ``wait`` in
        # all, and no longer than ``gap`` without a new claim arriving. ``group_wait_ms=0`` sends at once. (8 ms
        # made larger txns still, but left one instance idle while its txn was in flight: bench/RESULTS-cluster.md.)
        self._group_wait = _millis(query, "group_wait_ms", 3.0)
        self._group_gap = _millis(query, "group_gap_ms", 1.0)
        self._group_inside = 0  # callers of _group_commit now (queued, or in a txn in flight)
        self._group_peak = 0  # the most of them at once since the last txn was taken
        self._group_idle = 0  # committers waiting for a first claim (woken by any)
        self._group_target = 0  # the queue length a lingering committer waits for (woken only then)
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
        self._indexed = 0  # placed-complete's revision once seen: from there on, allocations_on reads the index
        self._feed = WatchFeed(self.keys, self.endpoints, channel=self._channel, call=self._call, count=self._count,
                               known=lambda: self._known, current=lambda: self._current, history=history)

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
                    stub = rpc.KVStub(channel)
                    # Commits send a TxnRequest already encoded (store.etcd_wire): no serializer.
                    stub.TxnBytes = channel.unary_unary("/etcdserverpb.KV/Txn", request_serializer=None,
                                                        response_deserializer=pb.TxnResponse.FromString)
                    self._kv[i] = stub
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
                                                          metadata=LEADER)
                if failures:
                    self._current = i
                return response
            except grpc.RpcError as exc:
                code, details = exc.code(), exc.details() or ""
                if "compacted" in details:
                    raise Compacted(f"etcd: {details}") from None
                if code == grpc.StatusCode.OUT_OF_RANGE:
                    raise FutureRevision(details) from None
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

    def _ranges(self, requests: list[Any]) -> list[Any]:
        """Several ranges, read-only txns of at most 100 (etcd's default --max-txn-ops is 128); their responses."""
        out: list[Any] = []
        for start in range(0, len(requests), 100):
            resp = self._call("Txn", pb.TxnRequest(success=[pb.RequestOp(request_range=r)
                                                            for r in requests[start:start + 100]]))
            out += [r.response_range for r in resp.responses]
        return out

    def snapshot(self) -> Snapshot:
        for _ in range(5):
            try:
                revision, kvs = self._range_pages(self.keys.root, self.keys.end)
            except Compacted:
                continue  # compacted between pages: read again at the new head
            hosts: list[HostReport] = []
            aggregates: list[Aggregate] = []
            allocations: list[Allocation] = []
            instances: list[InstanceInfo] = []
            records: list[Record] = []
            node_revisions: list[NodeRevision] = []
            touched: dict[NodeKey, float] = {}
            for kv in kvs:
                key: bytes = kv.key
                if key.startswith(self.keys.hosts):
                    hosts.append(decode_host(kv.value))
                elif key.startswith(self.keys.usage_prefix):
                    host, node = self.keys.split(key, self.keys.usage_prefix)
                    node_revisions.append(NodeRevision(host, node, kv.mod_revision))
                elif key.startswith(self.keys.allocations):
                    allocations.append(decode_allocation(kv.value))
                elif key.startswith(self.keys.aggregates):
                    aggregates.append(decode_aggregate(kv.value))
                elif key.startswith(self.keys.instances_prefix):
                    instances.append(decode_instances(kv.value))
                elif key.startswith(self.keys.records):
                    records.append(decode_record(kv.value))
                elif key.startswith(self.keys.live):
                    touched[self.keys.split(key, self.keys.live)] = float(kv.value)
            if touched:
                hosts = [lifted(h, touched.get((h.host, h.nodename))) for h in hosts]
            return Snapshot(revision=revision, hosts=hosts, aggregates=aggregates, allocations=allocations,
                            instances=instances, node_revisions=node_revisions, records=records)
        raise StoreUnavailable("snapshot kept being compacted away")

    def head(self) -> int:
        """The cluster's current revision (a linearizable read)."""
        return int(self._call("Range", pb.RangeRequest(key=self.keys.root, count_only=True)).header.revision)

    def barrier(self) -> int:
        """The revision of our prefix's last commit (a linearizable read): every commit also writes ``last-write``.
        Not ``head()``: the cluster's revision moves with other prefixes' writes too, which our feed never
        delivers. A store no commit has written it in yet: the newest key's revision, which etcd finds by
        sorting every key under the prefix (milliseconds per 10,000 keys, on every sync)."""
        resp = self._call("Range", pb.RangeRequest(key=self.keys.last_write, keys_only=True))
        if not resp.kvs:
            resp = self._call("Range", pb.RangeRequest(key=self.keys.root, range_end=self.keys.end, limit=1,
                                                       keys_only=True, sort_order=pb.RangeRequest.DESCEND,
                                                       sort_target=pb.RangeRequest.MOD))
        newest = int(resp.kvs[0].mod_revision) if resp.kvs else 0
        self._saw(newest)  # so changes() waits for the stream to deliver it
        return newest

    def changes(self, since: int, timeout: float = 1.0) -> list[Change]:
        return self._feed.changes(since, timeout)

    def compact(self, revision: int) -> None:
        """Drop history up to ``revision`` (operators normally let etcd's --auto-compaction do it)."""
        self._call("Compact", pb.CompactionRequest(revision=revision, physical=True), timeout=10, budget=10)

    # --------------------------------------------------------------------------------------------- writes

    def commit(self, batch: Batch) -> CommitResult:
        try:
            if self.group_commit and self._groupable(batch):
                result = self._group_commit(batch)
            else:
                result = self._commit(batch)
        except StoreUnavailable as exc:  # no quorum, no member reachable, or the budget spent
            self._note_write(exc)
            raise
        if result.changes:
            self._note_write(None)
        return result

    # Group commit: claims from concurrent callers of this instance share one etcd txn (one raft entry, one
    # fsync, one watch response). The shared txn has no compares of its own; it carries one nested txn per claim
    # (etcd >= 3.3) with that claim's compares, puts and failure reads, so a claim that lost its race fails
    # alone and the others land in the same round trip, with no second one to find or redo the winners.
    # etcd evaluates every nested txn's compares on the state *before* the shared txn, so two claims whose keys
    # overlap (a node's usage key, a consumer) never share one: both would pass compares that one after the
    # other would not. The later one waits for the next txn, where it sees the earlier one's writes.
    _GROUP_OPS = 128  # etcd's default --max-txn-ops; a nested txn may use what its parent's list leaves over
    reports_per_batch = 32  # a report is up to 3 operations (its record's and liveness key's compares, a put)

    def _groupable(self, batch: Batch) -> bool:
        return bool(batch.expect and batch.allocations) and not (
            batch.reports or batch.delete_hosts or batch.aggregates or batch.delete_aggregates or batch.releases
            or batch.instances or batch.replaces or batch.providers or batch.generations or batch.records
            or batch.delete_records or batch.consumers or batch.bump_providers or batch.capacity is not None
            or batch.vacated or batch.memberships) and _claim_size(batch) <= self._GROUP_OPS // 2

    def _group_commit(self, batch: Batch) -> CommitResult:
        item = _Pending(batch, _claim_keys(batch), _claim_size(batch))
        with self._group_lock:
            self._group_inside += 1
            self._group_peak = max(self._group_peak, self._group_inside)
        try:
            return self._group_wait_for(item)
        finally:
            with self._group_lock:
                self._group_inside -= 1

    def _group_wait_for(self, item: _Pending) -> CommitResult:
        with self._group_lock:
            self._group_queue.append(item)
            if self._group_workers < self._group_max_workers:
                # Counted only once the thread runs: a thread that failed to start must not hold a worker's
                # place, or claims would queue with nobody left to commit them.
                try:
                    threading.Thread(target=self._group_loop, name="gantt-etcd-commit", daemon=True).start()
                except BaseException:
                    self._group_queue.remove(item)
                    raise
                self._group_workers += 1
            elif self._group_idle or len(self._group_queue) >= self._group_target:
                # Not on every claim: each wake-up of a lingering committer costs a context switch and a turn of
                # the GIL, 16 of them per txn otherwise.
                self._group_lock.notify()
        if not item.done.wait(self._group_patience()):
            # The committer never answered (a bug or a wedged thread): fail like a lost answer rather than hang a
            # request forever. Still queued: it will never be sent. Taken: it may land, which the caller already
            # handles for any unanswered write (its nodes are re-read before they are claimed again).
            with self._group_lock:
                queued = item in self._group_queue
                if queued:
                    self._group_queue.remove(item)
            self._count("group_timeouts")
            log.error("etcd group commit: no answer within %.0fs (%s)", self._group_patience(),
                      "never sent" if queued else "outcome unknown")
            raise StoreUnavailable("etcd group commit did not answer in time")
        if item.error is not None:
            raise item.error
        assert item.result is not None
        return item.result

    def _group_patience(self) -> float:
        # A committer's slowest honest answer: the shared txn, then a refused claim retried alone, each call within
        # ``budget``; far beyond that, something is wrong.
        return 10 * self.budget + 30

    def _group_loop(self) -> None:
        while True:
            with self._group_lock:
                if not self._group_queue:
                    self._group_idle += 1
                    self._group_lock.wait(5.0)
                    self._group_idle -= 1
                    if not self._group_queue:
                        self._group_workers -= 1
                        return
                self._linger()
                group = self._take_group()
            try:
                self._commit_group(group)
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
        arriving (some within each ``group_gap_ms``), up to ``group_wait_ms``. Caller holds ``_group_lock``; the
        claim that fills the queue to what it waits for wakes it."""
        expected, self._group_peak = self._group_peak, self._group_inside
        if len(self._group_queue) >= expected or not self._group_wait:
            return
        deadline = time.monotonic() + self._group_wait
        self._group_target = expected
        try:
            while len(self._group_queue) < expected:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                before = len(self._group_queue)
                if not self._group_lock.wait(min(self._group_gap, left)) and len(self._group_queue) == before:
                    return  # nobody came within the gap: the rest are not on their way
        finally:
            self._group_target = 0

    def _take_group(self) -> list[_Pending]:
        """The queued claims of the next txn, oldest first: any whose keys overlap one already taken, or that
        would not fit, stays queued in order. Caller holds ``_group_lock``."""
        group: list[_Pending] = []
        taken: set[tuple[str, ...]] = set()
        widest = 0
        left: collections.deque[_Pending] = collections.deque()
        for item in self._group_queue:
            # the parent's list holds one nested txn per claim plus last-write; each nested txn gets the rest
            fits = len(group) + 2 + max(widest, item.size) <= self._GROUP_OPS
            if group and (not fits or not taken.isdisjoint(item.keys)):
                left.append(item)
                continue
            group.append(item)
            taken |= item.keys
            widest = max(widest, item.size)
        self._group_queue = left
        return group

    def _commit_group(self, group: list[_Pending]) -> None:
        live: list[tuple[_Pending, _Plan]] = []
        for item in group:
            try:
                plan = self._plan(item.batch)
            except BaseException as exc:
                item.error = exc
                item.done.set()
                continue
            if plan.ops:
                live.append((item, plan))
            else:  # nothing to write (cannot happen for a claim; kept for the contract's sake)
                item.result = CommitResult(revision=plan.read_revision or self.head(), changes=[])
                item.done.set()
        if len(live) == 1:
            self._commit_alone(*live[0])
            return
        if not live:
            return
        try:
            resp = self._call("TxnBytes", wire.txn([], [
                *(wire.nested(wire.txn(plan.compares, self._write_ops(plan.ops), self._failure_ops(plan)))
                  for _, plan in live),
                self._last_write_op()]))
        except InvalidRequest as exc:
            # A cluster that refuses the shared txn (a --max-txn-ops below etcd's default, or a size limit) must
            # not refuse claims that would each pass alone: commit them one by one, as with ?group=0.
            log.warning("etcd refused a shared txn of %d claims (%s): committing them one by one", len(live), exc)
            for item, plan in live:
                self._commit_alone(item, plan)
            return
        revision = resp.header.revision
        self._saw(revision)
        self._count("group_commits")
        refused = sum(1 for r in resp.responses[:len(live)] if not r.response_txn.succeeded)
        if refused:
            self._count("group_refused", refused)
            if refused < len(live):
                self._count("group_split")
        for (item, plan), r in zip(live, resp.responses, strict=True):
            nested = r.response_txn
            try:
                if nested.succeeded:
                    self._count("commits")
                    item.result = CommitResult(revision=revision, changes=[
                        msgspec.structs.replace(c, revision=revision) for c in plan.changes])
                else:
                    # Refused alone: already ours (a lost answer's retry), held, or a node moved; anything else
                    # (nothing a claim reads changed) is planned and tried again by itself.
                    item.result = self._refused(plan, nested.responses) or self._commit(item.batch)
            except BaseException as exc:
                item.error = exc
            item.done.set()

    def _failure_ops(self, plan: _Plan) -> list[bytes]:
        ops = [wire.read(usage, keys_only=True) for _, usage, _ in plan.expects]
        ops += [wire.read(key) for key in plan.claimed]
        return ops

    def _success_ops(self, ops: dict[bytes, bytes | None]) -> list[bytes]:
        return [*self._write_ops(ops), self._last_write_op()]

    def _write_ops(self, ops: dict[bytes, bytes | None]) -> list[bytes]:
        return [wire.put(k, v) if v is not None else wire.delete(k) for k, v in ops.items()]

    def _commit_alone(self, item: _Pending, plan: _Plan) -> None:
        """One queued claim in its own txn (a group of one, or a shared txn the cluster refused); its waiter wakes."""
        try:
            item.result = self._commit(item.batch, plan)
        except BaseException as exc:
            item.error = exc
        item.done.set()

    def _last_write_op(self) -> bytes:
        return wire.put(self.keys.last_write)  # barrier() reads its revision

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
                held.append(self.keys.name(key, self.keys.allocations))
        if not held:
            return None
        self._saw(revision)
        return ConsumerHeld(held, revision)

    def _commit(self, batch: Batch, plan: _Plan | None = None) -> CommitResult:
        attempts = 32
        for _ in range(attempts):
            plan = plan or self._plan(batch)
            if not plan.ops:
                return CommitResult(revision=plan.read_revision or self.head(), changes=[], quiet=plan.quiet)
            resp = self._call("TxnBytes", wire.txn(plan.compares, self._success_ops(plan.ops),
                                                   self._failure_ops(plan)))
            if resp.succeeded:
                revision = resp.header.revision
                self._saw(revision)
                self._count("commits")
                return CommitResult(revision=revision, quiet=plan.quiet,
                                    changes=[msgspec.structs.replace(c, revision=revision) for c in plan.changes])
            result = self._refused(plan, resp.responses)
            if result is not None:
                return result
            plan = None
        raise StoreUnavailable(f"gave up after {attempts} read-modify-write conflicts (heavy write contention)")

    def _refused(self, plan: _Plan, responses: Any) -> CommitResult | None:
        """A refused txn read through its failure branch: the claim was applied already (an earlier attempt whose
        answer was lost), or ConsumerHeld / StoreConflict; None when only a guarded read moved (read again)."""
        mine = self._already_applied(plan, responses)
        if mine:
            self._saw(mine)
            self._count("commits")
            return CommitResult(revision=mine, quiet=plan.quiet,
                                changes=[msgspec.structs.replace(c, revision=mine) for c in plan.changes])
        held = self._held(plan, responses)
        if held is not None:
            self._count("claim_conflicts")
            raise held
        conflicts = self._conflicts(plan, responses)
        if conflicts:
            self._count("claim_conflicts")
            raise StoreConflict(conflicts)
        self._count("rmw_retries")
        return None

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

    def _index_complete(self) -> int:
        """The revision from which ``placed/`` lists every allocation's parts (0: not yet); the first time, make
        it so if it can."""
        if self._indexed:
            return self._indexed
        found = self._call("Range", pb.RangeRequest(key=self.keys.placed_complete)).kvs
        if found:
            self._indexed = found[0].mod_revision
            return self._indexed
        revision, kvs = self._range_pages(self.keys.allocations, prefix_end(self.keys.allocations))
        entries = [pb.RequestOp(request_put=pb.PutRequest(key=self.keys.placement(node, allocation.consumer_uuid)))
                   for allocation in map(decode_allocation, (kv.value for kv in kvs)) for node in allocation.nodes()]
        for start in range(0, len(entries), 100):  # entries are hints (readers check them): no guard needed
            self._call("Txn", pb.TxnRequest(success=entries[start:start + 100]))
        # Complete only if no allocation was written since the read (a writer of this version indexes its own, but
        # one of an older version would not): else the scan stays, and the next reader tries again.
        done = self._call("Txn", pb.TxnRequest(compare=[
            pb.Compare(key=self.keys.allocations, range_end=prefix_end(self.keys.allocations), target=_MOD,
                       result=pb.Compare.LESS, mod_revision=revision + 1),
            pb.Compare(key=self.keys.placed_complete, target=_MOD, result=_EQUAL, mod_revision=0)],
            success=[pb.RequestOp(request_put=pb.PutRequest(key=self.keys.placed_complete, value=b"1"))],
            failure=[pb.RequestOp(request_range=pb.RangeRequest(key=self.keys.placed_complete))]))
        if done.succeeded:
            self._indexed = done.header.revision
        elif done.responses[0].response_range.kvs:  # another instance completed it
            self._indexed = done.responses[0].response_range.kvs[0].mod_revision
        if entries:
            log.info("etcd store %s: indexed %d allocation parts by node (%s)", self.prefix, len(entries),
                     "complete" if self._indexed else "writes meanwhile: scanning until a later try")
        return self._indexed

    def _plan(self, batch: Batch) -> _Plan:
        """Read what the batch needs in one txn, plan it (``store.planner``), and turn the plan into a txn whose
        compares guard every read: the txn commits only if nothing it read has changed since."""
        txn = _Plan()
        reads = _Reads(self, batch, txn)
        decided = planner.plan(batch, reads)
        for key, at in decided.touches.items():
            txn.ops[self.keys.touched(*key)] = encode(at)
        for key, report in decided.hosts.items():
            txn.ops[self.keys.node(*key)] = None if report is None else encode(report)
            txn.ops[self.keys.touched(*key)] = None  # the record is newer than its touch (store.base: lifted)
        for aggregate_id, aggregate in decided.aggregates.items():
            txn.ops[self.keys.aggregate(aggregate_id)] = None if aggregate is None else encode(aggregate)
        for stale in txn.stale:
            txn.ops[stale] = None
        for consumer, allocation in decided.allocations.items():
            txn.ops[self.keys.allocation(consumer)] = None if allocation is None else encode(allocation)
            before = reads.before(consumer)
            after = set(allocation.nodes()) if allocation is not None else set()
            for node in before.nodes() if before is not None else ():
                if node not in after:
                    txn.ops[self.keys.placement(node, consumer)] = None
            for node in after:  # put even when present: a store indexed late heals itself
                txn.ops[self.keys.placement(node, consumer)] = b""
        for host, info in decided.instances.items():
            txn.ops[self.keys.instances(host)] = encode(info)
        for (kind, name), record in decided.records.items():
            txn.ops[self.keys.record(kind, name)] = None if record is None else encode(record)
        for key in decided.bumped:  # a usage key's mod_revision is the node's usage revision
            txn.ops[self.keys.usage(*key)] = None if key in decided.deleted_nodes else b""
        txn.changes = decided.changes
        txn.quiet = decided.quiet
        return txn

    # -------------------------------------------------------------------------------------------- closing

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._feed.close()
        for channel in self._channels:
            if channel is not None:
                channel.close()


class _Reads:
    """The planner's reads: fetched in one txn up front, each guarded by a compare of the commit's txn.

    A claim's ``expect`` and its consumers' absence are not read at all: they become compares (a usage key's
    mod_revision, an allocation key's mod_revision 0), so a claim costs one round trip; when a compare fails,
    ``EtcdStore._commit`` raises the error the planner would have raised.
    """

    def __init__(self, store: EtcdStore, batch: Batch, txn: _Plan) -> None:
        self._s, self._txn = store, txn
        k = store.keys
        wanted: list[tuple[str, Any, bytes, bytes | None]] = []  # (what, id, key, range_end)
        wanted += [("host", (r.host, r.nodename), k.node(r.host, r.nodename), None) for r in batch.reports]
        wanted += [("live", (r.host, r.nodename), k.touched(r.host, r.nodename), None) for r in batch.reports]
        for host, node in batch.delete_hosts:
            # The usage keys are read only for their guard: a claim landing on a doomed node fails the txn.
            if node is None:
                prefix, usage = k.host_nodes(host), k.host_usage(host)
                wanted += [("nodes", (host, None), prefix, prefix_end(prefix)),
                           ("usage", (host, None), usage, prefix_end(usage))]
            else:
                wanted += [("nodes", (host, node), k.node(host, node), None),
                           ("usage", (host, node), k.usage(host, node), None)]
        wanted += [("agg", a, k.aggregate(a), None) for a in [*batch.delete_aggregates,
                                                              *(m.aggregate for m in batch.memberships)]]
        wanted += [("alloc", c, k.allocation(c), None)
                   for c in [*batch.releases, *batch.replaces, *(e.consumer for e in batch.consumers)]]
        # Placement's allocation writes read the records of the providers they bump or check for room.
        checked = [key for a in batch.allocations for key in a.nodes()] if batch.capacity is not None else []
        wanted += [("host", key, k.node(*key), None) for key in [*checked, *batch.bump_providers]]
        # A generation is read from the node's record; the record's guard makes the check atomic with the write.
        wanted += [("host", (g.host, g.node), k.node(g.host, g.node), None) for g in batch.generations]
        wanted += [("record", key, k.record(*key), None) for key in batch.delete_records]
        self._found: dict[tuple[str, Any], list[Any]] = {}
        self._before: dict[str, Allocation] = {}
        if not wanted:
            return
        resp = store._call("Txn", pb.TxnRequest(success=[
            pb.RequestOp(request_range=pb.RangeRequest(key=key, range_end=end or b"")) for _, _, key, end in wanted]))
        txn.read_revision = resp.header.revision
        for (what, ident, key, end), r in zip(wanted, resp.responses, strict=True):
            kvs = list(r.response_range.kvs)
            if (what, ident) in self._found:
                continue  # read twice (a consumer released and moved): one guard is enough
            self._found[(what, ident)] = kvs
            if end is None:  # guard a single key: unchanged since read (0: still absent)
                txn.compares.append(wire.compare_mod(key, kvs[0].mod_revision if kvs else 0))
            else:  # guard a prefix: nothing in it changed or appeared since the read
                txn.compares.append(wire.compare_mod(key, txn.read_revision + 1, wire.LESS, end))

    def head(self) -> int:
        return self._txn.read_revision or self._s.head()

    def expect_holds(self, expect: Expect) -> bool:
        usage = self._s.keys.usage(expect.host, expect.node)
        self._txn.expects.append(((expect.host, expect.node), usage, expect.revision))
        self._txn.compares.append(wire.compare_mod(usage, expect.revision))
        return True

    def host(self, key: NodeKey) -> HostReport | None:
        kvs = self._found[("host", key)]
        if not kvs:
            return None
        live = self._found.get(("live", key))  # read for reports only: the others do not look at the time
        return lifted(decode_host(kvs[0].value), float(live[0].value) if live else None)

    def nodes_of(self, host: str, node: str | None) -> list[NodeKey]:
        return [self._s.keys.split(kv.key, self._s.keys.hosts) for kv in self._found[("nodes", (host, node))]]

    def has_aggregate(self, aggregate_id: str) -> bool:
        return bool(self._found[("agg", aggregate_id)])

    def aggregate(self, aggregate_id: str) -> Aggregate | None:
        kvs = self._found[("agg", aggregate_id)]
        return decode_aggregate(kvs[0].value) if kvs else None

    def allocation(self, consumer: str) -> Allocation | None:
        kvs = self._found[("alloc", consumer)]
        return decode_allocation(kvs[0].value) if kvs else None

    def record(self, key: tuple[str, str]) -> Record | None:
        kvs = self._found[("record", key)]
        return decode_record(kvs[0].value) if kvs else None

    def unbooked(self, consumer: str) -> bool:
        key = self._s.keys.allocation(consumer)
        self._txn.claimed.append(key)
        self._txn.compares.append(wire.compare_mod(key, 0))
        return True

    def allocations_on(self, nodes: set[NodeKey]) -> list[Allocation]:
        keys, revision = self._s.keys, self._txn.read_revision
        complete = self._s._index_complete()
        if complete and (revision == 0 or complete <= revision):  # this plan reads at a revision it covers
            found = self._indexed_on(nodes)
        else:  # allocations are keyed by consumer: without the index, a scan
            _, kvs = self._s._range_pages(keys.allocations, prefix_end(keys.allocations), revision)
            found = [decode_allocation(kv.value) for kv in kvs]
        # What was read holds at commit only if no allocation on these nodes changed since: each such change
        # moves the node's usage key (a capacity check reads this too, not only a host's deletion), and writes
        # the index entries too, in the same txn.
        for host, node in sorted(nodes):
            self._txn.compares.append(wire.compare_mod(keys.usage(host, node), revision + 1, wire.LESS))
        on = [a for a in found if any(key in nodes for key in a.nodes())]
        self._before.update((a.consumer_uuid, a) for a in on)
        return on

    def _indexed_on(self, nodes: set[NodeKey]) -> list[Allocation]:
        """The allocations the nodes' index entries name, read at the txn's read revision; entries whose
        allocation has no part there any more are marked for deletion with the commit."""
        keys, revision = self._s.keys, self._txn.read_revision
        ordered = sorted(nodes)
        prefixes = [keys.placed_on(*node) for node in ordered]
        listed = self._s._ranges([pb.RangeRequest(key=p, range_end=prefix_end(p), keys_only=True, revision=revision)
                                  for p in prefixes])
        entries: dict[str, list[tuple[NodeKey, bytes]]] = {}
        for node, r in zip(ordered, listed, strict=True):
            for kv in r.kvs:
                entries.setdefault(keys.name(kv.key, keys.placed_on(*node)), []).append((node, kv.key))
        if not entries:
            return []
        consumers = list(entries)
        read = self._s._ranges([pb.RangeRequest(key=keys.allocation(c), revision=revision) for c in consumers])
        found: list[Allocation] = []
        for consumer, r in zip(consumers, read, strict=True):
            kvs = r.kvs
            allocation = decode_allocation(kvs[0].value) if kvs else None
            parts = set(allocation.nodes()) if allocation is not None else set()
            self._txn.stale += [key for node, key in entries[consumer] if node not in parts]
            if allocation is not None and parts & nodes:
                found.append(allocation)
        return found

    def before(self, consumer: str) -> Allocation | None:
        """The consumer's stored allocation, if this plan read it (to drop the index entries it leaves)."""
        if consumer in self._before:
            return self._before[consumer]
        kvs = self._found.get(("alloc", consumer))
        return decode_allocation(kvs[0].value) if kvs else None
