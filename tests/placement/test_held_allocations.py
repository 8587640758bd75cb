"""Issue 30 item 4: Placement never drops an allocation by itself. An allocation written through the Placement face
(a resize's migration hold, a port's bandwidth) ends only by a DELETE or a PUT, whatever ``claim_timeout`` says
and whether or not the node lists its consumer; only the scheduler's own claims of an instance a listing node
never lists expire. A node that lists instances counts such an allocation on top of its reported usage until it
lists the consumer (its report then covers it), as Placement counts every allocation.

A real ``gantt serve`` on SQLite with ``claim_timeout = 3``, the node reporting through ``/v1``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.placement.test_api import create, new_uuid, put_inventory
from tests.service.server import ServerProcess

TIMEOUT = 3.0
CONFIG: dict[str, Any] = {"DEFAULT": {"service_down_time": 86400},
                          "filter_scheduler": {"enabled_filters": ["ComputeFilter"]},
                          "gantt": {"seed": 7, "claim_timeout": TIMEOUT}}
LATEST = {"x-auth-token": "admin", "openstack-api-version": "placement latest"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    workdir: Path = tmp_path_factory.mktemp("held")
    with ServerProcess(f"sqlite:///{workdir}/gantt.sqlite", config=CONFIG, workdir=workdir) as process:
        yield process  # (conftest's http and v1 clients talk to this one: a fixture named alike overrides)


def report(v1: httpx.Client, host: str, node_uuid: str, *, used: int = 0, instances: list[str]) -> None:
    """A report whose figures moved (a repeat within a sixth of service_down_time writes nothing at all)."""
    answer = v1.post("/v1/resource-stats", json={"name": host, "stats": {
        "uuid": node_uuid, "vcpus": 8, "vcpus_used": used, "memory_mb": 4096, "local_gb": 100,
        "memory_mb_used": int(time.monotonic() * 1000) % 4096,
        "cpu_allocation_ratio": 1.0, "ram_allocation_ratio": 1.0, "disk_allocation_ratio": 1.0,
        "instances": instances}})
    assert answer.status_code == 200, answer.text


def put(http: httpx.Client, consumer: str, allocations: dict[str, dict[str, int]], kind: str) -> None:
    answer = http.put(f"/allocations/{consumer}", json={
        "allocations": {rp: {"resources": r} for rp, r in allocations.items()}, "project_id": "p",
        "user_id": "u", "consumer_generation": None, "consumer_type": kind})
    assert answer.status_code == 204, answer.text


def fits(v1: httpx.Client, host: str, vcpus: int) -> bool:
    """Whether a /v1 claim of ``vcpus`` on the host lands now (released at once)."""
    consumer = new_uuid()
    answer = v1.post("/v1/select_destinations", json={"resources": {"VCPU": vcpus}, "force_hosts": [host],
                                                      "instance_uuids": [consumer]})
    if answer.status_code != 200:
        return False
    assert v1.delete(f"/v1/allocations/{consumer}").status_code == 204
    return True


def test_placement_allocations_outlive_claim_timeout_on_a_listing_node(http: httpx.Client,
                                                                       v1: httpx.Client) -> None:
    node = new_uuid()
    host = f"cmp-{node[:8]}"
    report(v1, host, node, instances=[])
    # a Neutron port's bandwidth on a child provider of the node, beside its VCPU
    port_rp = create(http, parent=node)["uuid"]
    assert put_inventory(http, port_rp, 0, NET_BW_EGR_KILOBIT_PER_SEC=1000).status_code == 200
    migration, port, instance = new_uuid(), new_uuid(), new_uuid()
    put(http, migration, {node: {"VCPU": 2}}, "MIGRATION")
    put(http, port, {node: {"VCPU": 1}, port_rp: {"NET_BW_EGR_KILOBIT_PER_SEC": 100}}, "INSTANCE")
    # the scheduler's own claim of an instance the node will never list: that one may expire
    claimed = v1.post("/v1/select_destinations", json={"resources": {"VCPU": 1}, "force_hosts": [host],
                                                       "instance_uuids": [instance]})
    assert claimed.status_code == 200, claimed.text
    time.sleep(TIMEOUT + 1)
    report(v1, host, node, instances=[])
    # expired, as before (written by the replica after it applied the report: wait for it)
    deadline = time.monotonic() + 10
    while http.get(f"/allocations/{instance}").json() != {"allocations": {}}:
        assert time.monotonic() < deadline, "the unlisted scheduler claim never expired"
        time.sleep(0.1)
    held = http.get(f"/allocations/{migration}").json()
    assert held["allocations"][node]["resources"] == {"VCPU": 2}, held
    assert held["consumer_type"] == "MIGRATION"
    spans = http.get(f"/allocations/{port}").json()["allocations"]
    assert {rp: part["resources"] for rp, part in spans.items()} == \
        {node: {"VCPU": 1}, port_rp: {"NET_BW_EGR_KILOBIT_PER_SEC": 100}}
    assert http.get(f"/resource_providers/{node}/usages").json()["usages"]["VCPU"] == 3
    # counted on top of the node's report (which covers none of them): 8 - 0 - 3 = 5 left
    assert fits(v1, host, 5) and not fits(v1, host, 6)
    # Once the node lists a consumer, its report covers it: counted once, by the report
    report(v1, host, node, used=2, instances=[migration])
    assert fits(v1, host, 5) and not fits(v1, host, 6)  # 8 - 2 reported - 1 (the port's consumer) = 5
    # Only a DELETE ends them
    assert http.delete(f"/allocations/{migration}").status_code == 204
    assert http.delete(f"/allocations/{port}").status_code == 204
    report(v1, host, node, used=0, instances=[])
    assert fits(v1, host, 8)
