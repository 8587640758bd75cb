"""``gantt serve --workers N`` on etcd: one instance of N processes, each a replica following the watch and
claiming by compare-and-set, so the workers never book one host's capacity twice."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest

from gantt.replication.audit import audit
from gantt.store.etcd import EtcdStore
from tests.conftest import host_stats
from tests.service.server import ServerProcess

pytestmark = pytest.mark.etcd


def test_two_workers_on_etcd_fill_the_hosts_without_double_booking(store_url: str, tmp_path: Path) -> None:
    config = {"filter_scheduler": {"enabled_filters": ["ComputeFilter"], "host_subset_size": 4}}
    with ServerProcess(store_url, config=config, workers=2, workdir=tmp_path) as server:
        pids: set[int] = set()
        deadline = time.monotonic() + 60
        while len(pids) < 2 and time.monotonic() < deadline:
            pids.add(httpx.get(f"{server.url}/health").json()["pid"])  # a new connection each time
        assert len(pids) == 2, "both workers answer"
        hosts = [f"h{i}" for i in range(4)]
        with server.client() as client:
            for host in hosts:
                client.update_resource_stats(host, host_stats(vcpus=2))
        streak = 0
        deadline = time.monotonic() + 60
        while streak < 10 and time.monotonic() < deadline:  # either worker knows every host (through the watch)
            known = all(httpx.get(f"{server.url}/v1/hosts/{h}").status_code == 200 for h in hosts)
            streak = streak + 1 if known else 0
        assert streak == 10
        placed: dict[str, str] = {}
        refused: list[int] = []
        lock = threading.Lock()

        def place(k: int) -> None:
            for j in range(4):  # 16 requests of 1 vCPU for 8 vCPUs, from both workers at once
                consumer = f"vm-{k}-{j}"
                response = httpx.post(f"{server.url}/v1/select_destinations", timeout=60,
                                      json={"flavor": {"vcpus": 1, "memory_mb": 1, "root_gb": 1},
                                            "instance_uuids": [consumer]})
                with lock:
                    if response.status_code == 200:
                        placed[consumer] = response.json()["selections"][0][0]["host"]
                    else:
                        refused.append(response.status_code)

        threads = [threading.Thread(target=place, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(placed) == 8, (placed, refused)
        assert set(refused) <= {409}, refused  # NoValidHost: nothing left; never a 5xx
        assert server.stop() == 0
    with EtcdStore(store_url) as store:
        snap = store.snapshot()
    assert audit(snap) == []
    assert {(a.consumer_uuid, a.host) for a in snap.allocations} == set(placed.items())
