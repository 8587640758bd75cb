"""Several server processes on one SQLite file, clients racing for too little capacity: one truth, no overcommit."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

from gantt.client import SchedulerClient
from gantt.model import GanttError, NoValidHost
from gantt.replication.audit import audit
from gantt.store.sqlite import SQLiteStore
from tests.conftest import host_stats, request
from tests.service.server import ServerProcess

CONFIG: dict[str, Any] = {
    "filter_scheduler": {"enabled_filters": ["ComputeFilter"]},
    "DEFAULT": {"service_down_time": 86400},
}
HOSTS, VCPUS = 12, 8
CAPACITY = HOSTS * VCPUS


def test_processes_on_one_file_share_one_truth(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/gantt.sqlite"
    # Three processes on one file: a `--workers 2` server and a separate single-process one.
    pair = ServerProcess(url, config=CONFIG, workers=2, workdir=tmp_path / "a" if _mk(tmp_path / "a") else None)
    single = ServerProcess(url, config=CONFIG, workdir=tmp_path / "b" if _mk(tmp_path / "b") else None)
    with pair, single:
        with single.client() as client:
            client.update_resource_stats_many([(f"h{i}", host_stats(vcpus=VCPUS)) for i in range(HOSTS)])
        for server in (pair, single):
            _wait_for_hosts(server, HOSTS, probes=8)

        acked: dict[str, str] = {}
        refused = 0
        lost: set[str] = set()  # asked, but no answer came back: may or may not hold an allocation
        lock = threading.Lock()
        start = threading.Barrier(9)

        def place_one(c: SchedulerClient) -> None:
            nonlocal refused
            consumer = str(uuid.uuid4())
            try:
                [[sel, *_]] = c.select_destinations(request(vcpus=1, instance_uuids=[consumer]))
            except NoValidHost:
                with lock:
                    refused += 1
                return
            except GanttError:
                with lock:
                    lost.add(consumer)
                return
            with lock:
                acked[consumer] = sel.host

        def place(server: ServerProcess, attempts: int) -> None:
            # one keep-alive connection per client; the pair's workers share the listening socket, so its four
            # clients' connections are spread over both
            with SchedulerClient(server.url, timeout=30.0) as c:
                start.wait()
                for _ in range(attempts):
                    place_one(c)

        attempts = 24  # 8 clients x 24 = 192 asks for 96 vCPUs
        threads = [threading.Thread(target=place, args=(pair if i % 2 else single, attempts)) for i in range(8)]
        for t in threads:
            t.start()
        start.wait()
        for t in threads:
            t.join(timeout=60)

        with SQLiteStore(url) as store:
            snap = store.snapshot()
        assert audit(snap) == [], "a node is over capacity"
        stored = {a.consumer_uuid: a.host for a in snap.allocations}
        assert all(stored.get(c) == h for c, h in acked.items()), "an acknowledged claim is missing or moved"
        phantoms = set(stored) - set(acked) - lost
        assert phantoms == set(), f"allocations nobody was told about: {sorted(phantoms)[:5]}"
        assert len(acked) + refused + len(lost) == 8 * attempts
        assert len(stored) <= CAPACITY
        assert len(acked) >= CAPACITY - len(lost) - 8  # the cloud fills up (a few may give up under contention)

        # every replica converges on the store's truth through the change feed
        for server in (pair, single):
            deadline = time.monotonic() + 10
            while True:
                with SchedulerClient(server.url, timeout=5.0) as c:
                    if {a.consumer_uuid for a in c.allocations()} == set(stored):
                        break
                assert time.monotonic() < deadline, "a replica did not converge on the store"
                time.sleep(0.05)


def _mk(path: Path) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    return True


def _wait_for_hosts(server: ServerProcess, hosts: int, probes: int) -> None:
    """Ask (on fresh connections, so every worker answers some) until each replica has every host."""
    deadline = time.monotonic() + 15
    good = 0
    while good < probes:
        with SchedulerClient(server.url, timeout=5.0) as c:
            if c.health().hosts >= hosts:
                good += 1
            else:
                good = 0
                time.sleep(0.02)
        assert time.monotonic() < deadline, "the replicas did not load the hosts"
