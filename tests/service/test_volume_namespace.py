"""A volume namespace over HTTP: Cinder's pool reports in, volumes placed and claimed, two schedulers racing.

Two ``gantt serve`` processes on one SQLite file fill one thin pool at once: every volume either lands with
its space claimed or is refused, and the pool never holds more than its over-subscription allows.
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

import httpx
import msgspec

from gantt.cli.server_process import ServerProcess
from gantt.volume import BackendReport, PoolTable, VolumeOptions, VolumeRequest, VolumeScheduler

CONFIG: dict[str, Any] = {
    "DEFAULT": {"service_down_time": 86400},
    "namespace.vol": {"kind": "volume", "scheduler_default_filters": ["AvailabilityZoneFilter", "CapacityFilter"],
                      "scheduler_default_weighers": ["CapacityWeigher"]},
}
BASE = "/v1/namespaces/vol"
SIZE = 10
# One thin pool of 100 GB, over-subscribed 2:1: Cinder's CapacityFilter lets it take a bounded number of 10 GB
# volumes (computed below with the domain's own scheduler, one claim after another).
BACKEND: dict[str, Any] = {
    "host": "node1@lvm",
    "capabilities": {"volume_backend_name": "lvm", "vendor_name": "Open Source", "driver_version": "3.0",
                     "storage_protocol": "iSCSI"},
    "pools": [{"pool_name": "thin", "total_capacity_gb": 100, "free_capacity_gb": 100,
               "allocated_capacity_gb": 0, "provisioned_capacity_gb": 0, "reserved_percentage": 0,
               "max_over_subscription_ratio": 2.0, "thin_provisioning_support": True,
               "thick_provisioning_support": False, "multiattach": False}],
}


def _request(volume: str) -> dict[str, Any]:
    return {"volume_id": volume, "volume_properties": {"size": SIZE, "project_id": "p1"}}


def _sequential_limit() -> int:
    """How many volumes one scheduler alone places on the pool: the most any number of them may place."""
    options = VolumeOptions(scheduler_default_filters=["AvailabilityZoneFilter", "CapacityFilter"])
    scheduler, table = VolumeScheduler(options), PoolTable(options.max_over_subscription_ratio)
    for report in BackendReport(**BACKEND).pool_reports():
        table.apply(report)
    placed = 0
    while True:
        volume = str(uuid.uuid4())
        request = msgspec.convert(_request(volume), VolumeRequest)
        try:
            [pick, *_] = scheduler.select(table, request)
        except Exception:
            return placed
        table.claim(table.row(pick.host, pick.pool), volume, SIZE)  # type: ignore[arg-type]
        placed += 1


def test_two_schedulers_never_overfill_a_thin_pool(tmp_path: Path) -> None:
    check_two_schedulers(f"sqlite:///{tmp_path}/gantt.sqlite", tmp_path)


def check_two_schedulers(url: str, tmp_path: Path) -> None:
    """Two processes on one store (``url``) fill one thin pool at once (also run on etcd: tests/etcd)."""
    limit = _sequential_limit()
    assert 2 < limit < 40
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with ServerProcess(url, config=CONFIG, workdir=tmp_path / "a") as one, \
            ServerProcess(url, config=CONFIG, workdir=tmp_path / "b") as two:
        with httpx.Client(base_url=one.url) as http:
            assert http.post(f"{BASE}/resource-stats", json=BACKEND).status_code == 200
        with httpx.Client(base_url=two.url) as http:  # the other process has read the report from the feed
            for _ in range(100):
                if http.get(f"{BASE}/hosts").json()["pools"]:
                    break
                threading.Event().wait(0.05)

        placed: dict[str, str] = {}
        refused = 0
        lock = threading.Lock()
        start = threading.Barrier(8)

        def fill(server: ServerProcess) -> None:
            nonlocal refused
            with httpx.Client(base_url=server.url, timeout=30) as http:
                start.wait()
                for _ in range(limit):
                    volume = str(uuid.uuid4())
                    answer = http.post(f"{BASE}/select_destinations", json=_request(volume))
                    with lock:
                        if answer.status_code == 200:
                            placed[volume] = answer.json()["selections"][0]["backend_id"]
                        else:
                            assert answer.status_code == 409, answer.text
                            refused += 1

        threads = [threading.Thread(target=fill, args=(server,)) for server in (one, two) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

        assert 0 < len(placed) <= limit
        assert set(placed.values()) == {"node1@lvm#thin"}
        with httpx.Client(base_url=two.url) as http:
            for _ in range(100):  # the other process's claims arrive through its feed
                held = http.get(f"{BASE}/allocations").json()["allocations"]
                if len(held) >= len(placed):
                    break
                threading.Event().wait(0.05)
            assert {a["consumer_uuid"] for a in held} >= set(placed)
            [pool] = http.get(f"{BASE}/hosts").json()["pools"]
        # Every claim the store holds is one an answer reported, and the pool counts each once.
        assert len(held) == len(placed)
        assert pool["state"]["provisioned_capacity_gb"] == SIZE * len(placed)

        # A release gives the space back: the pool takes a volume again.
        gone = next(iter(placed))
        with httpx.Client(base_url=one.url) as http:
            assert http.delete(f"{BASE}/allocations/{gone}").status_code == 204
            again = http.post(f"{BASE}/select_destinations", json=_request(str(uuid.uuid4())))
            assert again.status_code == 200, again.text
            # The compute namespace is untouched by all of this.
            assert http.get("/v1/hosts").json()["hosts"] == []
            assert http.get("/v1/allocations").json()["allocations"] == []


def test_bad_volume_input_is_a_400_naming_the_field() -> None:
    with ServerProcess("memory://", config=CONFIG) as server, httpx.Client(base_url=server.url) as http:
        assert http.post(f"{BASE}/resource-stats", json=BACKEND).status_code == 200
        cases: list[tuple[str, Any, str]] = [
            ("select_destinations", {"volume_properties": {"size": 1}}, "$.volume_id"),
            ("select_destinations", {**_request("v1"), "colour": "red"}, "colour"),
            ("select_destinations", {**_request("v1"), "operation": "retype_volume"}, "$.operation"),
            ("resource-stats", {**BACKEND, "pools": [{"pool_name": "p", "total_capacity_gb": -5}]}, "$.pools[0]"),
        ]
        for path, body, field in cases:
            answer = http.post(f"{BASE}/{path}", json=body)
            problem = answer.json()
            assert answer.status_code == 400, (path, answer.text)
            assert problem.get("field") == field or f"`{field}`" in problem["detail"], (path, answer.text)
        assert http.get(f"{BASE}/allocations").json()["allocations"] == []  # nothing half-applied
        assert http.get(f"{BASE}/aggregates").status_code == 404  # no such route in a volume namespace
        assert http.delete(f"{BASE}/allocations/nope").status_code == 404
