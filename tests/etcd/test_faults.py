"""Faults on a real 3-member cluster: a member killed under the feed, one member lost, quorum lost and back."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from gantt.model import StoreUnavailable
from gantt.replication.audit import audit
from gantt.replication.replica import Replica
from gantt.store.base import Batch
from gantt.store.etcd import EtcdStore
from tests.conftest import host_stats
from tests.etcd.cluster import LocalCluster
from tests.etcd.worker import config
from tests.store.contract import report

pytestmark = pytest.mark.etcd

SPEC = {"flavor": {"vcpus": 1, "memory_mb": 64, "root_gb": 1}}


def follower_of(cluster: LocalCluster, not_: int | None = None) -> int:
    leader = cluster.leader()
    return next(i for i in range(len(cluster.members)) if i != leader and i != not_)


def test_feed_resumes_after_its_member_is_killed_without_losing_events(healthy: LocalCluster,
                                                                       store_url: str) -> None:
    prefix = store_url[store_url.index("/", len("etcd://")):]
    victim = follower_of(healthy)
    others = [i for i in range(3) if i != victim]
    # The reader talks to the victim first; the writer only to the others, so it never notices the kill.
    reader = EtcdStore(healthy.url(prefix, members=[victim, *others]))
    writer = EtcdStore(healthy.url(prefix, members=others))
    try:
        seen: list[int] = []
        since = 0
        written = [writer.commit(Batch(reports=[report(f"h{i}")])).revision for i in range(5)]
        stop = threading.Event()

        def write() -> None:
            i = 5
            while not stop.is_set():
                written.append(writer.commit(Batch(reports=[report(f"h{i}")])).revision)
                i += 1
                time.sleep(0.01)

        def drain(until: float) -> None:
            nonlocal since
            while time.monotonic() < until:
                for c in reader.changes(since, timeout=0.2):
                    seen.append(c.revision)
                    since = c.revision

        drain(time.monotonic() + 0.5)
        assert seen == written
        t = threading.Thread(target=write)
        t.start()
        try:
            drain(time.monotonic() + 0.3)
            healthy.stop(victim, sig=signal.SIGKILL)
            drain(time.monotonic() + 1.5)
        finally:
            stop.set()
            t.join()
        deadline = time.monotonic() + 10
        while since < written[-1] and time.monotonic() < deadline:
            drain(time.monotonic() + 0.2)
        assert seen == written  # every revision once, in order, across the reconnect
        assert reader.stats.watch_reconnects >= 1
    finally:
        reader.close()
        writer.close()


def test_feed_resumes_after_the_whole_cluster_restarts(healthy: LocalCluster, store_url: str) -> None:
    with EtcdStore(store_url) as reader, EtcdStore(store_url) as writer:
        r1 = writer.commit(Batch(reports=[report("a")])).revision
        assert [c.revision for c in reader.changes(0, timeout=5)] == [r1]
        for i in range(3):
            healthy.stop(i, sig=signal.SIGTERM)
        for i in range(3):
            healthy.start(i)
        healthy.wait_healthy(timeout=30)
        deadline = time.monotonic() + 10
        while True:
            try:
                r2 = writer.commit(Batch(reports=[report("b")])).revision
                break
            except StoreUnavailable:
                assert time.monotonic() < deadline
        changes = reader.changes(r1, timeout=10)
        assert [c.revision for c in changes] == [r2]


def _replica(url: str, hosts: int = 4, seed: int = 0) -> tuple[EtcdStore, Replica]:
    store = EtcdStore(url)
    replica = Replica(store, config(seed)).start()
    for i in range(hosts):
        replica.update_resource_stats(f"h{i}", host_stats(vcpus=16))
    return store, replica


def test_losing_one_member_the_service_continues(healthy: LocalCluster, store_url: str) -> None:
    prefix = store_url[store_url.index("/", len("etcd://")):]
    victim = follower_of(healthy)
    # The instance's first endpoint is the member we kill: it must fail over without an error.
    store, replica = _replica(healthy.url(prefix, members=[victim, *[i for i in range(3) if i != victim]]))
    try:
        replica.select_destinations(SPEC)
        healthy.stop(victim)
        for _ in range(10):
            replica.select_destinations(SPEC)
        replica.update_resource_stats("h9", host_stats())
        assert store.stats.failovers >= 1
        # Losing the leader: an election (about a second), then service as before.
        healthy.stop(healthy.leader())
        healthy.start(victim)
        # An election takes about a second; on a 2-core machine running other test workers beside three etcd
        # members, the new leader's first commits and the replica's re-read can take several more.
        deadline = time.monotonic() + 30
        placed = 0
        while placed < 5:
            try:
                replica.select_destinations(SPEC)
                placed += 1
            except StoreUnavailable:
                assert time.monotonic() < deadline, "no service after losing the leader"
        assert audit(store.snapshot()) == []
    finally:
        replica.stop()
        store.close()


def test_quorum_loss_fails_fast_places_nothing_reads_answer_and_recovers(healthy: LocalCluster,
                                                                          store_url: str) -> None:
    store, replica = _replica(store_url)
    other_store, other = _replica(store_url, hosts=0, seed=1)
    try:
        replica.select_destinations(SPEC)
        before = len(store.snapshot().allocations)
        leader = healthy.leader()
        healthy.stop(leader)
        healthy.stop(follower_of(healthy, not_=leader))  # two of three gone
        for _ in range(2):
            t0 = time.monotonic()
            with pytest.raises(StoreUnavailable):
                replica.select_destinations({**SPEC, "instance_uuids": ["during-outage"]})
            assert time.monotonic() - t0 < 3.5
        assert replica.table.allocation("during-outage") is None  # nothing placed locally
        assert store.last_write_error is not None  # what /health reports (503 "degraded")
        # Reads of the replica keep answering.
        assert replica.scheduler.host("h0")["up"]
        assert len(replica.scheduler.candidates(SPEC)) == 4
        # Quorum back: the same instances recover, no restart.
        for i in range(3):
            healthy.start(i)
        healthy.wait_healthy(timeout=30)
        deadline = time.monotonic() + 15
        while True:
            try:
                replica.select_destinations({**SPEC, "instance_uuids": ["after"]})
                break
            except StoreUnavailable:
                assert time.monotonic() < deadline, "no recovery"
                time.sleep(0.1)
        assert store.last_write_error is None  # the claim that went through cleared it
        # A txn whose answer was lost may still land when quorum returns (etcd cannot withdraw a proposal): the
        # caller's retry with the same instance UUID then gets that booking instead of a second one.
        deadline = time.monotonic() + 15
        while True:
            try:  # until the instance has re-read the store after its unanswered commits
                replica.select_destinations({**SPEC, "instance_uuids": ["during-outage"]})
                break
            except StoreUnavailable:
                assert time.monotonic() < deadline, "no recovery"
                time.sleep(0.1)
        snap = store.snapshot()
        consumers = [a.consumer_uuid for a in snap.allocations]
        assert consumers.count("during-outage") == 1 and "after" in consumers
        assert len(snap.allocations) == before + 2
        assert audit(snap) == []
        # The other instance's feed caught up too.
        deadline = time.monotonic() + 10
        while other.table.allocation("after") is None:
            assert time.monotonic() < deadline, "feed did not resume"
            time.sleep(0.05)
    finally:
        for r, s in ((replica, store), (other, other_store)):
            r.stop()
            s.close()
