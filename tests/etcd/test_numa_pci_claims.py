"""Issue 14 on etcd: two Gantt instances (Replicas) on one 3-member cluster, two threads each, racing pinned,
multi-node huge-page, thread-``require`` and PCI claims until the cloud is full: no CPU pinned twice and no
device handed out twice (tests/numa_pci_load.py checks the allocations and runs ``gantt audit``)."""

from __future__ import annotations

import threading

import pytest

from gantt.replication.replica import Replica
from gantt.store.etcd import EtcdStore
from tests import numa_pci_load as load

pytestmark = pytest.mark.etcd


def test_two_replicas_on_etcd_never_pin_a_cpu_or_hand_out_a_device_twice(store_url: str) -> None:
    stores = [EtcdStore(store_url), EtcdStore(store_url)]
    replicas = [Replica(s, load.config(k + 1)).start() for k, s in enumerate(stores)]
    try:
        for i in range(load.HOSTS):
            replicas[0].update_resource_stats(f"h{i}", load.host(i))
        replicas[1].catch_up()
        placed: list[list[str]] = [[], []]
        runners = [threading.Thread(target=lambda k=k: placed[k].extend(
            load.hammer(replicas[k], f"r{k}", threads=2, requests=16, seed=k + 1))) for k in range(2)]
        for r in runners:
            r.start()
        for r in runners:
            r.join()
        snapshot = stores[0].snapshot()
        held = load.verify(snapshot)
        assert sorted(a.consumer_uuid for a in snapshot.allocations) == sorted(placed[0] + placed[1])
        assert held["pinned_cpus"] >= 0.75 * load.HOSTS * 4 * load.CORES, held
        assert held["devices"] >= 0.75 * load.HOSTS * (2 * load.VFS + 1), held
    finally:
        for r in replicas:
            r.stop()
        for s in stores:
            s.close()
