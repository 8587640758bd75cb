"""Issue 14: two processes, each a replica with two threads, on one SQLite file, racing pinned, multi-node
huge-page, thread-``require`` and PCI claims until the cloud is full: no CPU pinned twice and no device handed
out twice, by the allocations themselves and by ``gantt audit`` (tests/numa_pci_load.py). Replicas on one etcd
cluster: tests/etcd/test_numa_pci_claims.py."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

from gantt.model import HostReport, HostStats, decode
from gantt.replication.replica import Replica
from gantt.store.base import Batch
from gantt.store.sqlite import SQLiteStore
from tests import numa_pci_load as load


def _process(url: str, tag: str, seed: int, start: float, out: multiprocessing.Queue) -> None:
    store = SQLiteStore(url)
    replica = Replica(store, load.config(seed)).start()
    while time.time() < start:
        time.sleep(0.005)
    placed = load.hammer(replica, tag, threads=2, requests=16, seed=seed)
    out.put((placed, replica.scheduler.engine.stats.commit_conflicts))
    replica.stop()
    store.close()


def test_two_processes_with_threads_never_pin_a_cpu_or_hand_out_a_device_twice(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/gantt.sqlite"
    with SQLiteStore(url) as s:
        now = time.time()
        s.commit(Batch(reports=[HostReport(host=f"h{i}", stats=decode(load.host(i), HostStats), reported_at=now)
                                for i in range(load.HOSTS)]))
    ctx = multiprocessing.get_context("spawn")  # fresh interpreters: nothing of ours inherited via fork
    out: multiprocessing.Queue = ctx.Queue()
    start = time.time() + 3.0  # both import and load before the race
    procs = [ctx.Process(target=_process, args=(url, f"p{k}", k + 1, start, out)) for k in range(2)]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    placed = sorted(c for r in results for c in r[0])
    with SQLiteStore(url) as s:
        snapshot = s.snapshot()
    held = load.verify(snapshot)
    assert sorted(a.consumer_uuid for a in snapshot.allocations) == placed
    # the race ran until the cloud was (nearly) full: most pinned CPUs and devices are held
    assert held["pinned_cpus"] >= 0.75 * load.HOSTS * 4 * load.CORES, held
    assert held["devices"] >= 0.75 * load.HOSTS * (2 * load.VFS + 1), held
