"""Several Gantt instances (Replicas) on one etcd cluster: threads, processes, and an instance killed -9."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import pytest

from gantt.model import NoValidHost, StoreUnavailable
from gantt.replication.audit import audit
from gantt.replication.replica import Replica
from gantt.store.base import Snapshot
from gantt.store.etcd import EtcdStore
from tests.conftest import host_stats
from tests.etcd.worker import config
from tests.test_moves import moves_through_two_replicas

pytestmark = pytest.mark.etcd
ROOT = Path(__file__).resolve().parents[2]


def seed_hosts(url: str, n: int, vcpus: int) -> None:
    with EtcdStore(url) as store:
        r = Replica(store, config(0)).start(follow=False)
        for i in range(n):
            r.update_resource_stats(f"h{i}", host_stats(vcpus=vcpus, memory_mb=65536))


def check_store(url: str, capacity: int, sizes: dict[str, int] | None = None) -> list[str]:
    """Audit clean, and every request's allocations all there or all absent; returns the request ids."""
    with EtcdStore(url) as store:
        snap = store.snapshot()
    assert audit(snap) == []
    assert len(snap.allocations) <= capacity
    per_request = collections.Counter(a.request_id for a in snap.allocations)
    if sizes is not None:
        for request_id, count in per_request.items():
            assert count == sizes.get(request_id, count), f"partial request {request_id}: {count}"
    return list(per_request)


def wait_for(predicate: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def place_as_a_client(replica: Replica, spec: dict[str, object]) -> bool:
    """Placed (True) or NoValidHost (False), retrying like a client (the same UUIDs) while an overloaded test
    machine makes the store unavailable."""
    for _ in range(50):
        try:
            replica.select_destinations(spec)
            return True
        except NoValidHost:
            return False
        except StoreUnavailable:
            time.sleep(0.1)
    return False


@pytest.mark.parametrize("group", ["?group=0", ""], ids=["one-txn-per-claim", "group-commit"])
def test_replicas_in_threads_fill_the_cloud_without_overcommit(store_url: str, group: str) -> None:
    seed_hosts(store_url, 6, vcpus=8)  # 48 vCPUs for 3 instances x 4 threads asking for 1-3 vCPUs
    stores = [EtcdStore(store_url + group) for _ in range(3)]
    replicas = [Replica(s, config(i)).start() for i, s in enumerate(stores)]
    placed: list[tuple[str, int]] = []
    lock = threading.Lock()

    def burst(replica: Replica, k: int) -> None:
        for j in range(30):
            n = 1 + (j + k) % 3  # multi-instance requests too
            rid = f"r{k}-{j}"
            spec = {"flavor": {"vcpus": 1, "memory_mb": 64, "root_gb": 1}, "num_instances": n,
                    "request_id": rid, "instance_uuids": [f"{rid}-{i}" for i in range(n)]}
            if place_as_a_client(replica, spec):
                with lock:
                    placed.append((rid, n))

    threads = [threading.Thread(target=burst, args=(replicas[k % 3], k)) for k in range(12)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        sizes = dict(placed)
        ids = check_store(store_url, capacity=48, sizes=sizes)
        assert sorted(ids) == sorted(sizes)  # nothing placed that the callers were not told about
        assert sum(sizes.values()) >= 46  # the cloud filled up (a few 2-3 instance requests may not fit)
        # every store-level conflict was handled by the replica: re-validated on the same nodes, or (when a node
        # filled up) handed back to the engine to decide again
        revalidated = sum(r.revalidations for r in replicas)
        assert revalidated >= sum(s.stats.claim_conflicts for s in stores)
        # every instance converges on the same view through the feed
        for r in replicas:
            wait_for(lambda r=r: len(r.table.allocations()) == sum(sizes.values()))
    finally:
        for r, s in zip(replicas, stores, strict=True):
            r.stop()
            s.close()


def _spawn(url: str, seed: int, instances: int, max_requests: int = 10_000) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'src'}"}
    return subprocess.Popen([sys.executable, "-m", "tests.etcd.worker", url, "--seed", str(seed),
                             "--instances", str(instances), "--max-requests", str(max_requests)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_replicas_in_separate_processes_never_overcommit(store_url: str) -> None:
    seed_hosts(store_url, 8, vcpus=6)  # 48 vCPUs
    procs = [_spawn(store_url, seed, instances=1 + seed % 2) for seed in range(3)]
    sizes: dict[str, int] = {}
    for p in procs:
        out, err = p.communicate(timeout=90)
        assert p.returncode == 0, err[-2000:]
        for line in out.splitlines():
            if line.startswith("placed "):
                _, rid, n = line.split()
                sizes[rid] = int(n)
    ids = check_store(store_url, capacity=48, sizes=sizes)
    assert sorted(ids) == sorted(sizes)
    assert sum(sizes.values()) >= 47


def _settled_snapshot(store_url: str, quiet: float = 0.5, timeout: float = 15.0) -> Snapshot:
    deadline = time.monotonic() + timeout
    with EtcdStore(store_url) as store:
        snap = store.snapshot()
        while time.monotonic() < deadline:
            time.sleep(quiet)
            again = store.snapshot()
            if again.revision == snap.revision:
                return again
            snap = again
    raise AssertionError(f"the store kept changing for {timeout} s after the worker was killed")


def test_instance_killed_mid_burst_leaves_no_partial_request(store_url: str) -> None:
    seed_hosts(store_url, 40, vcpus=16)  # room for far more than the worker places before the kill
    proc = _spawn(store_url, seed=1, instances=4)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    lines = 0
    for line in proc.stdout:  # let it get going, then kill it between any two instructions
        lines += line.startswith("placed ")
        if lines >= 15:
            break
    time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    # A txn the worker sent just before it died may still be applied by etcd after the kill: read the store once
    # it has stopped moving, or a later reader legitimately sees more (whole) requests than this snapshot.
    snap = _settled_snapshot(store_url)
    assert audit(snap) == []
    per_request = collections.Counter(a.request_id for a in snap.allocations)
    assert len(per_request) >= 15
    assert set(per_request.values()) == {4}, per_request  # every request whole: one txn each
    # A new instance starts from the store and keeps placing.
    with EtcdStore(store_url) as store:
        r = Replica(store, config(9)).start(follow=False)
        assert len(r.table.allocations()) == len(snap.allocations)
        r.select_destinations({"flavor": {"vcpus": 1, "memory_mb": 64, "root_gb": 1}, "num_instances": 4})


def test_moves_through_two_replicas_on_etcd(store_url: str) -> None:
    """Twin moves of one instance on two instances give one answer; of a confirm and a revert, one lands."""
    stores = [EtcdStore(store_url), EtcdStore(store_url)]
    try:
        moves_through_two_replicas(*stores)
    finally:
        for s in stores:
            s.close()


def test_the_same_request_on_two_instances_at_once_answers_one_booking(store_url: str) -> None:
    """Issue 10: on etcd, the same request sent at the same moment to two instances gave one answer and one 409
    "claims kept conflicting" in 22 of 100 pairs. The loser must answer the winner's booking."""
    seed_hosts(store_url, 6, vcpus=64)
    stores = [EtcdStore(store_url), EtcdStore(store_url)]
    try:
        replicas = [Replica(s, config(i)).start() for i, s in enumerate(stores)]
        for pair in range(40):
            spec = {"flavor": {"vcpus": 1, "memory_mb": 256}, "instance_uuids": [f"pair-{pair}"]}
            answers: list[object] = [None, None]
            barrier = threading.Barrier(2)

            def ask(i: int, spec: dict[str, object] = spec, answers: list[object] = answers,
                    barrier: threading.Barrier = barrier) -> None:
                barrier.wait()
                try:
                    answers[i] = replicas[i].select_destinations(spec)[0][0].host
                except Exception as exc:  # reported below, with the pair
                    answers[i] = exc

            threads = [threading.Thread(target=ask, args=(i,)) for i in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert isinstance(answers[0], str) and answers[0] == answers[1], (pair, answers)
        held = {a.consumer_uuid: a.host for a in stores[0].snapshot().allocations}
        assert len(held) == 40
        for replica in replicas:
            replica.stop()
    finally:
        for s in stores:
            s.close()


def test_a_move_whose_old_value_the_watch_lost_still_moves_the_left_node(store: EtcdStore) -> None:
    """When etcd's watch no longer has an overwritten allocation's old value (its history was compacted while
    the watcher lagged), the allocation change cannot say which node the instance left: the usage keys of that
    revision are sent instead, so the replica does not expect the left node's old revision until a reload."""
    from aetcd.rpc import kv_pb2

    from gantt.model import Allocation
    from gantt.store.etcd_keys import encode

    def put(key: bytes, value: bytes, revision: int, version: int, prev: bytes | None = None) -> kv_pb2.Event:
        event = kv_pb2.Event(type=kv_pb2.Event.PUT, kv=kv_pb2.KeyValue(
            key=key, value=value, mod_revision=revision, create_revision=revision - version + 1, version=version))
        if prev is not None:
            event.prev_kv.CopyFrom(kv_pb2.KeyValue(key=key, value=prev, mod_revision=revision - 1))
        return event

    source = Allocation(consumer_uuid="vm", host="h1", nodename="h1", resources={"VCPU": 1})
    moved = Allocation(consumer_uuid="vm", host="h2", nodename="h2", resources={"VCPU": 1})
    migration = Allocation(consumer_uuid="mig", host="h1", nodename="h1", resources={"VCPU": 1},
                           instance_uuid="vm")
    def events(with_prev: bool) -> list[kv_pb2.Event]:
        return [put(store.keys.allocation("mig"), encode(migration), 9, 1),
                put(store.keys.allocation("vm"), encode(moved), 9, 2,
                    encode(source) if with_prev else None),
                put(store.keys.usage("h1", "h1"), b"", 9, 3), put(store.keys.usage("h2", "h2"), b"", 9, 3)]

    changes, last = store.keys.changes(events(with_prev=True))
    assert last == 9 and [c.kind for c in changes] == ["allocation", "allocation"]  # the feed stays lean
    assert changes[1].replaced == source

    changes, _ = store.keys.changes(events(with_prev=False))
    assert changes[1].replaced is None
    assert {c.node for c in changes if c.kind == "usage"} == {("h1", "h1"), ("h2", "h2")}
    replica = Replica(store, config(0))
    replica.apply(changes)
    assert replica.node_revisions[("h1", "h1")] == 9  # the node the instance left


def test_workers_of_one_instance_split_its_hosts_and_never_overcommit(store_url: str) -> None:
    """``gantt serve --workers 2`` on etcd: each worker a replica of its own following the feed, with its share of
    the instance's subset slot (``Config.for_worker``); their claims are compare-and-sets like any instance's."""
    seed_hosts(store_url, 8, vcpus=6)  # 48 vCPUs
    stores = [EtcdStore(store_url) for _ in range(2)]
    replicas = [Replica(s, config(5).for_worker(w, 2)).start() for w, s in enumerate(stores)]
    placed: list[tuple[str, int]] = []
    lock = threading.Lock()
    try:
        for w, replica in enumerate(replicas):  # alone, a worker picks among its own half of the equal hosts
            [[first, *_]] = replica.select_destinations({"flavor": {"vcpus": 1, "memory_mb": 64, "root_gb": 1},
                                                         "request_id": f"first-{w}",
                                                         "instance_uuids": [f"first-{w}"]})
            assert zlib.crc32(first.host.encode()) % 2 == w
            placed.append((f"first-{w}", 1))

        def burst(replica: Replica, k: int) -> None:
            for j in range(40):
                rid = f"w{k}-{j}"
                spec = {"flavor": {"vcpus": 1, "memory_mb": 64, "root_gb": 1}, "request_id": rid,
                        "instance_uuids": [rid]}
                if not place_as_a_client(replica, spec):
                    return
                with lock:
                    placed.append((rid, 1))

        threads = [threading.Thread(target=burst, args=(replicas[k % 2], k)) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        sizes = dict(placed)
        ids = check_store(store_url, capacity=48, sizes=sizes)
        assert sorted(ids) == sorted(sizes)  # every acknowledged claim is in the store, nothing else is
        assert len(sizes) == 48  # the cloud filled up
        for r in replicas:
            wait_for(lambda r=r: len(r.table.allocations()) == 48)
    finally:
        for r, s in zip(replicas, stores, strict=True):
            r.stop()
            s.close()
