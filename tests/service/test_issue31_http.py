"""Issue 31 through a real ``gantt serve``: what Nova refuses is a 400 naming the field, nothing written; a rebuild
answers its host and books nothing; a report may carry compute_nodes' JSON text."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.service.server import ServerProcess
from tests.service.test_bad_input import HOST, SPEC, STATS, _state, _unhandled, http  # noqa: F401 (fixture)


@pytest.mark.parametrize(("body", "field"), [
    ({**SPEC, "image": {"properties": {"hw_architecture": "x64"}}}, "$.image.properties.hw_architecture"),
    ({**SPEC, "image": {"properties": {"img_hv_requested_version": "s>= 8"}}},
     "$.image.properties.img_hv_requested_version"),
    ({**SPEC, "image": {"properties": {"hw_disk_bus": "nvme"}}}, "$.image.properties.hw_disk_bus"),
    ({**SPEC, "instance_group": {"policy": "anti-affinity", "members": ["a", "b"]}}, "$.instance_group.uuid"),
    ({**SPEC, "scheduler_hints": {"_nova_check_type": ["rebuild"]}, "instance_uuids": ["r1", "r2"],
      "num_instances": 2}, "$.scheduler_hints._nova_check_type"),
])
def test_what_nova_refuses_is_a_400_naming_the_field(http: httpx.Client, body: dict[str, Any],  # noqa: F811
                                                     field: str) -> None:
    before = _state(http), _unhandled(http)
    response = http.post("/v1/select_destinations", json=body)
    assert response.status_code == 400, response.text
    assert response.json()["field"] == field
    assert (_state(http), _unhandled(http)) == before


def test_a_rebuild_answers_its_host_and_books_nothing(http: httpx.Client) -> None:  # noqa: F811
    before = _state(http)
    body = {**SPEC, "instance_uuids": ["rebuilt-vm"], "force_nodes": [HOST],
            "scheduler_hints": {"_nova_check_type": ["rebuild"]}}
    response = http.post("/v1/select_destinations", json=body)
    assert response.status_code == 200, response.text
    [[chosen]] = response.json()["selections"]
    assert chosen["host"] == HOST and not chosen.get("allocation") and not chosen.get("consumer_uuid")
    assert _state(http) == before


def test_a_report_may_carry_compute_nodes_json_text(server: ServerProcess) -> None:
    topology = {"cells": [{"id": 0, "cpuset": [0, 1], "memory": 2048}]}
    pools = [{"vendor_id": "8086", "product_id": "1520", "count": 2, "numa_node": 0}]
    with httpx.Client(base_url=server.url, timeout=10) as client:
        stats = {**STATS, "numa_topology": json.dumps(topology), "pci_stats": json.dumps(pools)}
        client.post("/v1/resource-stats", json={"name": "text-host", "stats": stats}).raise_for_status()
        assert client.get("/v1/hosts/text-host").status_code == 200
        bad = client.post("/v1/resource-stats", json={"name": "text-host", "stats": {**STATS, "numa_topology": "{"}})
        assert bad.status_code == 400 and bad.json()["field"] == "$.stats.numa_topology"
