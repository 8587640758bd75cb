"""Issue 30 (1): a restart serves what the store holds, every kind of record included.

A consumer spanning two providers (a child provider's bandwidth, a sharing pool's disk) writes rows of
``allocation_parts``; on SQLite 3.40.0-3.41.0 (Python 3.11's) ``PRAGMA quick_check`` flagged that table's good
rows ("NULL value in allocation_parts.consumer", its key order then differing from its column order) and
``gantt serve`` refused to start on its own file. Tested on the SQLite this interpreter has, the oldest we run on.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx

from gantt.cli.server_process import ServerProcess
from tests.conftest import host_stats, request
from tests.test_numa_claims import numa_stats, pinned

LATEST = {"x-auth-token": "admin", "openstack-api-version": "placement latest"}
CONFIG: dict[str, Any] = {
    "DEFAULT": {"service_down_time": 86400},
    "gantt": {"seed": 7},
    "filter_scheduler": {"enabled_filters": ["ComputeFilter", "NUMATopologyFilter"]},
    "namespace.vol": {"kind": "volume", "scheduler_default_filters": ["CapacityFilter"],
                      "scheduler_default_weighers": ["CapacityWeigher"]},
}
BACKEND: dict[str, Any] = {
    "host": "node1@lvm", "capabilities": {"volume_backend_name": "lvm", "storage_protocol": "iSCSI"},
    "pools": [{"pool_name": "thin", "total_capacity_gb": 100, "free_capacity_gb": 100, "reserved_percentage": 0,
               "max_over_subscription_ratio": 2.0, "thin_provisioning_support": True}],
}
# What changes with the clock alone, not with the store's data.
VOLATILE = {"last_report_seconds_ago", "updated_at", "created_at", "seconds_since_sync", "pid", "state_up", "up"}


def _ok(response: httpx.Response, *codes: int) -> httpx.Response:
    assert response.status_code in (codes or (200,)), (response.request.method, response.request.url,
                                                        response.status_code, response.text)
    return response


def _provider(http: httpx.Client, name: str, parent: str | None = None) -> str:
    rp = str(uuid.uuid4())
    body: dict[str, Any] = {"name": name, "uuid": rp}
    if parent:
        body["parent_provider_uuid"] = parent
    _ok(http.post("/resource_providers", json=body))
    return rp


def _put(http: httpx.Client, rp: str, what: str, **body: Any) -> None:
    generation = _ok(http.get(f"/resource_providers/{rp}")).json()["generation"]
    _ok(http.put(f"/resource_providers/{rp}/{what}", json={"resource_provider_generation": generation, **body}))


def _fill(server: ServerProcess) -> None:
    """Every kind of record the store writes, through the service's faces."""
    with httpx.Client(base_url=server.url, timeout=30) as v1, \
            httpx.Client(base_url=server.url + "/placement", headers=LATEST, timeout=30) as pl:
        # /v1: hosts (one NUMA node, one with two nodes), an aggregate, placements, a move held, instance lists
        _ok(v1.post("/v1/resource-stats", json={"name": "numa", "stats": numa_stats(cells=2)}))
        _ok(v1.post("/v1/resource-stats", json={"name": ["bm", "bm-1"], "stats": host_stats(vcpus=8)}))
        _ok(v1.post("/v1/resource-stats", json={"name": ["bm", "bm-2"], "stats": host_stats(vcpus=8)}))
        for i in range(2):
            _ok(v1.post("/v1/resource-stats", json={"name": f"h{i}", "stats": host_stats(vcpus=8)}))
        _ok(v1.put("/v1/aggregates/agg1", json={"id": "agg1", "name": "agg1", "hosts": ["h0", "h1"],
                                                 "metadata": {"availability_zone": "az1"}}))
        _ok(v1.post("/v1/select_destinations", json=pinned(2, "vm-numa")))
        _ok(v1.post("/v1/select_destinations", json=request(vcpus=2, instance_uuids=["vm-a", "vm-b"],
                                                             force_hosts=["h0"])))
        _ok(v1.post("/v1/select_destinations", json=request(vcpus=3, instance_uuids=["vm-a"],
                                                             migration_uuid="mig-a", force_hosts=["h1"])))
        _ok(v1.post("/v1/select_destinations", json=request(vcpus=1, instance_uuids=["vm-c"],
                                                             force_hosts=["bm"], force_nodes=["bm-2"])))
        _ok(v1.post("/v1/instances/h0", json={"instances": ["vm-b"]}))
        # Placement: custom class and trait, a tree (root + child with bandwidth), a sharing pool in an aggregate
        _ok(pl.put("/resource_classes/CUSTOM_GOLD"), 201, 204)
        _ok(pl.put("/traits/CUSTOM_FAST"), 201, 204)
        root = _provider(pl, "r1")
        child = _provider(pl, "r1-pf", parent=root)
        pool = _provider(pl, "pool")
        agg = str(uuid.uuid4())
        _put(pl, root, "inventories", inventories={"VCPU": {"total": 8}, "MEMORY_MB": {"total": 4096},
                                                   "CUSTOM_GOLD": {"total": 3}})
        _put(pl, child, "inventories", inventories={"NET_BW_EGR_KILOBIT_PER_SEC": {"total": 10000}})
        _put(pl, pool, "inventories", inventories={"DISK_GB": {"total": 500}})
        _put(pl, child, "traits", traits=["CUSTOM_FAST", "HW_NIC_SRIOV"])
        _put(pl, pool, "traits", traits=["MISC_SHARES_VIA_AGGREGATE"])
        _put(pl, root, "aggregates", aggregates=[agg])
        _put(pl, pool, "aggregates", aggregates=[agg])
        consumer = str(uuid.uuid4())
        _ok(pl.put(f"/allocations/{consumer}", json={
            "allocations": {root: {"resources": {"VCPU": 2, "CUSTOM_GOLD": 1}},
                            child: {"resources": {"NET_BW_EGR_KILOBIT_PER_SEC": 1000}},
                            pool: {"resources": {"DISK_GB": 20}}},
            "project_id": "p", "user_id": "u", "consumer_generation": None, "consumer_type": "INSTANCE"}), 204)
        migration = str(uuid.uuid4())
        _ok(pl.put(f"/allocations/{migration}", json={
            "allocations": {root: {"resources": {"VCPU": 1}}, child: {"resources": {"NET_BW_EGR_KILOBIT_PER_SEC": 5}}},
            "project_id": "p", "user_id": "u", "consumer_generation": None, "consumer_type": "MIGRATION"}), 204)
        # a volume namespace: a backend's pool and a volume on it
        _ok(v1.post("/v1/namespaces/vol/resource-stats", json=BACKEND))
        _ok(v1.post("/v1/namespaces/vol/select_destinations",
                    json={"volume_id": "vol-1", "volume_properties": {"size": 10, "project_id": "p"}}))


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        items = [_strip(v) for v in value]
        return sorted(items, key=repr)  # listing order is not the data (issue 30, item 13)
    return value


def _served(server: ServerProcess) -> dict[str, Any]:
    """Everything the service answers about its data, on both faces and in the volume namespace."""
    out: dict[str, Any] = {}
    with httpx.Client(base_url=server.url, timeout=30) as v1, \
            httpx.Client(base_url=server.url + "/placement", headers=LATEST, timeout=30) as pl:
        for path in ("/v1/hosts", "/v1/aggregates", "/v1/allocations", "/v1/namespaces/vol/hosts",
                     "/v1/namespaces/vol/allocations"):
            out[path] = _ok(v1.get(path)).json()
        for path in ("/resource_providers", "/traits", "/resource_classes"):
            out[path] = _ok(pl.get(path)).json()
        for rp in out["/resource_providers"]["resource_providers"]:
            for what in ("inventories", "traits", "aggregates", "usages", "allocations"):
                path = f"/resource_providers/{rp['uuid']}/{what}"
                out[path] = _ok(pl.get(path)).json()
        consumers = {c for a in out["/v1/allocations"]["allocations"] for c in (a["consumer_uuid"],)}
        for consumer in sorted(consumers):
            out[f"/allocations/{consumer}"] = _ok(pl.get(f"/allocations/{consumer}")).json()
            out[f"/v1/allocations/{consumer}"] = _ok(v1.get(f"/v1/allocations/{consumer}")).json()
    return _strip(out)


def test_a_restart_serves_every_kind_of_record_it_held(tmp_path: Path) -> None:
    path = tmp_path / "gantt.sqlite"
    with ServerProcess(f"sqlite:///{path}", config=CONFIG, workdir=tmp_path) as server:
        _fill(server)
        before = _served(server)
        assert server.stop() == 0
        with sqlite3.connect(path) as conn:  # the case of the issue: parts of multi-provider allocations
            assert conn.execute("SELECT count(*) FROM allocation_parts").fetchone()[0] >= 3
        server.start()  # refused before: "the file is damaged: NULL value in allocation_parts.consumer"
        after = _served(server)
    assert len(before["/v1/allocations"]["allocations"]) == 7
    assert after == before
    audit = subprocess.run([sys.executable, "-m", "gantt", "audit", "--store", f"sqlite:///{path}"],
                           capture_output=True, text=True, timeout=60)
    assert audit.returncode == 0, audit.stdout + audit.stderr


def _old_layout(path: Path) -> None:
    """``allocation_parts`` as Gantt made it before: columns (consumer, host, node), key (host, node, consumer)."""
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE parts_old AS SELECT consumer, host, node FROM allocation_parts")
        conn.execute("DROP TABLE allocation_parts")
        conn.execute("CREATE TABLE allocation_parts (consumer TEXT NOT NULL, host TEXT NOT NULL, node TEXT NOT NULL,"
                     " PRIMARY KEY (host, node, consumer)) WITHOUT ROWID")
        conn.execute("INSERT INTO allocation_parts SELECT consumer, host, node FROM parts_old")
        conn.execute("DROP TABLE parts_old")


def test_a_file_of_the_old_layout_starts_and_is_rebuilt_in_key_order(tmp_path: Path) -> None:
    path = tmp_path / "gantt.sqlite"
    url = f"sqlite:///{path}"
    with ServerProcess(url, config=CONFIG, workdir=tmp_path) as server:
        with httpx.Client(base_url=server.url + "/placement", headers=LATEST, timeout=30) as pl:
            root = _provider(pl, "r1")
            child = _provider(pl, "r1-pf", parent=root)
            _put(pl, root, "inventories", inventories={"VCPU": {"total": 8}})
            _put(pl, child, "inventories", inventories={"NET_BW_EGR_KILOBIT_PER_SEC": {"total": 10000}})
            consumer = str(uuid.uuid4())
            _ok(pl.put(f"/allocations/{consumer}", json={
                "allocations": {root: {"resources": {"VCPU": 2}},
                                child: {"resources": {"NET_BW_EGR_KILOBIT_PER_SEC": 1000}}},
                "project_id": "p", "user_id": "u", "consumer_generation": None, "consumer_type": "INSTANCE"}), 204)
            before = _ok(pl.get(f"/allocations/{consumer}")).json()
        server.stop()
        _old_layout(path)
        audit = subprocess.run([sys.executable, "-m", "gantt", "audit", "--store", url], capture_output=True,
                               text=True, timeout=60)
        assert audit.returncode == 0, audit.stdout + audit.stderr  # read-only: audits the old layout as it is
        with sqlite3.connect(path) as conn:
            assert [r[1] for r in conn.execute("PRAGMA table_info(allocation_parts)")] == ["consumer", "host", "node"]
        server.start()
        with httpx.Client(base_url=server.url + "/placement", headers=LATEST, timeout=30) as pl:
            assert _ok(pl.get(f"/allocations/{consumer}")).json() == before
    with sqlite3.connect(path) as conn:
        assert [r[1] for r in conn.execute("PRAGMA table_info(allocation_parts)")] == ["host", "node", "consumer"]
        assert conn.execute("PRAGMA quick_check").fetchall() == [("ok",)]  # on every SQLite, 3.40's included
        assert conn.execute("SELECT host, node, consumer FROM allocation_parts").fetchall() == [(child, child,
                                                                                                 consumer)]
