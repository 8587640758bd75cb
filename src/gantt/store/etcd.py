"""EtcdStore: the store contract on an etcd v3 cluster, so that many Gantt instances share one state.

URL: ``etcd://host:port[,host:port…][/prefix][?timeout=1.0&budget=2.0&group=1&group_workers=1&group_wait_ms=3&
group_gap_ms=1]`` (prefix defaults to ``/gantt``; ``timeout`` and ``budget``: ``etcd_client``; group commit, on by
default: ``etcd_group``).

The store's parts, each in a module of its own: the client (``etcd_client``: channels, deadlines, failover, the
counters), the commit transaction (``etcd_txn``: a batch planned against guarded reads, one txn), group commit
(``etcd_group``: concurrent claims in one txn, each nested), the feed (``etcd_feed``: one watch stream, buffered,
resumed on the next member without losing an event) and the keys (``etcd_keys``, with the reading of watch events
as changes). Revisions are etcd's store revision: one per txn, so one per committed Batch.

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
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from aetcd.rpc import rpc_pb2 as pb

from gantt.model import Aggregate, Allocation, HostReport, InstanceInfo, NodeKey, Record, StoreUnavailable
from gantt.model.namespaces import DEFAULT, check_name, etcd_prefix
from gantt.store.base import Batch, Change, CommitResult, Compacted, NodeRevision, Snapshot, Store, lifted
from gantt.store.etcd_client import EtcdClient
from gantt.store.etcd_feed import WatchFeed
from gantt.store.etcd_group import GroupCommit
from gantt.store.etcd_keys import (
    Keys,
    decode_aggregate,
    decode_allocation,
    decode_host,
    decode_instances,
    decode_record,
)
from gantt.store.etcd_txn import Transactions


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


class EtcdStore(Store):
    def __init__(self, url: str, *, timeout: float | None = None, budget: float | None = None,
                 history: int = 200_000, page: int = 2_000, namespace: str = DEFAULT) -> None:
        parts = urlsplit(url)
        if parts.scheme != "etcd" or not parts.netloc:
            raise ValueError(f"etcd store URL must look like etcd://host:port[,host:port…][/prefix]: {url!r}")
        self.url = url
        self.endpoints = [ep.strip() for ep in parts.netloc.split(",") if ep.strip()]
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        self.namespace = check_name(namespace)
        prefix = etcd_prefix((parts.path or "/gantt").rstrip("/") or "/gantt", namespace)
        self.prefix = prefix
        self.keys = Keys(prefix)
        # Per attempt and per call: short enough that losing quorum fails a request in about `budget` seconds.
        self._client = EtcdClient(self.endpoints, page=page,
                                  timeout=float(timeout if timeout is not None else query.get("timeout", 1.0)),
                                  budget=float(budget if budget is not None else query.get("budget", 2.0)))
        self.stats = self._client.stats
        self._txns = Transactions(self._client, self.keys)
        # Concurrent claims of this instance share txns (``etcd_group``); ``?group=0`` commits each alone.
        self.group_commit = _flag(query, "group", True)
        workers = query.get("group_workers", "1")
        if not workers.isdigit() or int(workers) < 1:
            raise ValueError(f"etcd store URL: group_workers must be a whole number >= 1, not {workers!r}")
        # How long a committer may hold a txn back for claims still on their way: at most ``group_wait_ms`` in
        # all, and no longer than ``group_gap_ms`` without a new claim arriving. ``group_wait_ms=0`` sends at
        # once. (8 ms made larger txns still, but left one instance idle while its txn was in flight:
        # bench/RESULTS-cluster.md.)
        self._group = GroupCommit(self._client, self._txns, max_workers=int(workers),
                                  wait=_millis(query, "group_wait_ms", 3.0), gap=_millis(query, "group_gap_ms", 1.0))
        client = self._client
        self._feed = WatchFeed(self.keys, self.endpoints, channel=client.channel, call=client.call,
                               count=client.count, known=lambda: client.known, current=lambda: client.current,
                               history=history)

    # ---------------------------------------------------------------------------------------------- reads

    def snapshot(self) -> Snapshot:
        for _ in range(5):
            try:
                revision, kvs = self._client.range_pages(self.keys.root, self.keys.end)
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
        return self._txns.head()

    def barrier(self) -> int:
        """The revision of our prefix's last commit (a linearizable read): every commit also writes ``last-write``.
        Not ``head()``: the cluster's revision moves with other prefixes' writes too, which our feed never
        delivers. A store no commit has written it in yet: the newest key's revision, which etcd finds by
        sorting every key under the prefix (milliseconds per 10,000 keys, on every sync)."""
        resp = self._client.call("Range", pb.RangeRequest(key=self.keys.last_write, keys_only=True))
        if not resp.kvs:
            resp = self._client.call("Range", pb.RangeRequest(key=self.keys.root, range_end=self.keys.end, limit=1,
                                                              keys_only=True, sort_order=pb.RangeRequest.DESCEND,
                                                              sort_target=pb.RangeRequest.MOD))
        newest = int(resp.kvs[0].mod_revision) if resp.kvs else 0
        self._client.saw(newest)  # so changes() waits for the stream to deliver it
        return newest

    def changes(self, since: int, timeout: float = 1.0, *, head: int | None = None) -> list[Change]:
        return self._feed.changes(since, timeout)

    def compact(self, revision: int) -> None:
        """Drop history up to ``revision`` (operators normally let etcd's --auto-compaction do it)."""
        self._client.call("Compact", pb.CompactionRequest(revision=revision, physical=True), timeout=10, budget=10)

    # --------------------------------------------------------------------------------------------- writes

    reports_per_batch = 32  # a report is up to 3 operations (its record's and liveness key's compares, a put)

    def commit(self, batch: Batch) -> CommitResult:
        try:
            if self.group_commit and self._group.groupable(batch):
                result = self._group.commit(batch)
            else:
                result = self._txns.commit(batch)
        except StoreUnavailable as exc:  # no quorum, no member reachable, or the budget spent
            self._note_write(exc)
            raise
        if result.changes:
            self._note_write(None)
        return result

    def close(self) -> None:
        if self._client.closed:
            return
        self._client.closed = True
        self._feed.close()
        self._client.close()
