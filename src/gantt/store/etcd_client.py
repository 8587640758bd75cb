"""The etcd client of a store: one gRPC channel per member, every unary call with a deadline, moved on to the
next member when one fails, and the store's counters.

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

Faults
    A member that refuses, times out or has no leader is skipped for the next one; each call attempt has a short
    deadline (``timeout``) and the whole call a budget (``budget``), after which ``StoreUnavailable`` is raised
    (HTTP 503): with no quorum, a commit fails in about ``budget`` seconds and writes nothing. A timeout is
    ambiguous (etcd may still apply the txn later); that is safe: claims are conditional and keyed by consumer,
    so a retry either conflicts or finds the allocation (idempotency), and nothing is ever overcommitted.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

import grpc
from aetcd.rpc import rpc_pb2 as pb
from aetcd.rpc import rpc_pb2_grpc as rpc

from gantt.model import InvalidRequest, StoreUnavailable
from gantt.store.base import Compacted
from gantt.store.etcd_feed import LEADER, FutureRevision

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
    # Where a claim's commit waits (seconds, summed; per round or per claim in bench/cluster.py): the committer
    # holding a txn back for claims on their way, its call to etcd (the round trip, and the interpreter lock
    # taken back after it), and a caller's wake-up once answered (until it runs again: the lock, under load).
    group_rounds: int = 0  # txns the committer sent (shared or of one claim)
    group_linger_s: float = 0.0
    group_call_s: float = 0.0
    group_wake_s: float = 0.0


class EtcdClient:
    """Unary calls to an etcd cluster (``endpoints``): each attempt within ``timeout``, the whole call within
    ``budget``; ranges read ``page`` keys at a time."""

    def __init__(self, endpoints: list[str], *, timeout: float, budget: float, page: int) -> None:
        self.endpoints = endpoints
        self.timeout = timeout
        self.budget = budget
        self.page = page
        self.stats = EtcdStats()
        self._stats_lock = threading.Lock()
        self._lock = threading.Lock()
        self._channels: list[grpc.Channel | None] = [None] * len(endpoints)
        self._kv: list[Any] = [None] * len(endpoints)
        self.current = 0  # the member calls go to first
        # Newest revision of a change under our prefix that we know exists (our commits, the writes that beat
        # our claims): the feed's read barrier.
        self.known = 0
        self.closed = False

    def count(self, name: str, n: float = 1) -> None:
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

    def channel(self, i: int) -> grpc.Channel:
        self._stub(i)
        channel = self._channels[i]
        assert channel is not None
        return channel

    def saw(self, revision: int) -> None:
        if revision > self.known:
            self.known = revision

    def call(self, method: str, request: Any, *, timeout: float | None = None,
             budget: float | None = None) -> Any:
        """One unary KV call, moving on to the next member on failure until ``budget`` is spent."""
        if self.closed:
            raise StoreUnavailable("store is closed")
        timeout = timeout or self.timeout
        deadline = time.monotonic() + (budget or self.budget)
        n = len(self.endpoints)
        i = self.current
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
                    self.current = i
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
                    self.count("unavailable")
                    raise StoreUnavailable(f"etcd {self.endpoints[i]}: {code.name} {details}") from None
                last = exc
                failures += 1
                self.count("failovers")
                i = (i + 1) % n
                if failures % n == 0:  # every member refused: an election may be under way, wait a little
                    time.sleep(min(0.05 * (failures // n), 0.25, max(deadline - time.monotonic(), 0)))
        self.count("unavailable")
        detail = f"{last.code().name} {last.details()}" if last is not None else "no time left"
        raise StoreUnavailable(f"etcd cluster {','.join(self.endpoints)} unavailable: {detail}")

    def range_pages(self, key: bytes, end: bytes, revision: int = 0, *,
                    keys_only: bool = False) -> tuple[int, list[Any]]:
        """Every key in [key, end) at one revision (the current one when 0), page by page."""
        kvs: list[Any] = []
        start = key
        while True:
            resp = self.call("Range", pb.RangeRequest(key=start, range_end=end, limit=self.page,
                                                      revision=revision, keys_only=keys_only),
                             timeout=max(self.timeout, 10.0), budget=max(self.budget, 30.0))
            if revision == 0:
                revision = resp.header.revision
            kvs.extend(resp.kvs)
            if not resp.more or not resp.kvs:
                return revision, kvs
            start = resp.kvs[-1].key + b"\0"

    def ranges(self, requests: list[Any]) -> list[Any]:
        """Several ranges, read-only txns of at most 100 (etcd's default --max-txn-ops is 128); their responses."""
        out: list[Any] = []
        for start in range(0, len(requests), 100):
            resp = self.call("Txn", pb.TxnRequest(success=[pb.RequestOp(request_range=r)
                                                           for r in requests[start:start + 100]]))
            out += [r.response_range for r in resp.responses]
        return out

    def close(self) -> None:
        self.closed = True
        for channel in self._channels:
            if channel is not None:
                channel.close()
