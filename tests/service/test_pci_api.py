"""PCI through the real service: pci_stats reports are taken or refused with a problem naming the field, and a
flavor naming an alias the options do not define is a 400, not a placement that ignores it."""

from __future__ import annotations

import uuid

import httpx
import pytest

from gantt.client import SchedulerClient
from gantt.model import InvalidRequest
from tests.conftest import host_stats
from tests.service.server import ServerProcess


def test_pci_stats_reports_and_alias_requests(client: SchedulerClient, server: ServerProcess) -> None:
    host = f"pci-{uuid.uuid4().hex[:8]}"
    pools = [{"vendor_id": "8086", "product_id": "1520", "numa_node": 0, "count": 2, "dev_type": "type-VF"}]
    client.update_resource_stats(host, host_stats(pci_stats=pools))
    before = client.health().revision
    with httpx.Client(base_url=server.url, timeout=10) as http:
        bad = http.post("/v1/resource-stats",
                        json={"name": host, "stats": host_stats(pci_stats=[{**pools[0], "count": -2}])})
        assert bad.status_code == 400
        assert bad.json()["field"] == "$.stats.pci_stats[0].count"
        assert bad.headers["content-type"].startswith("application/problem+json")
    assert client.health().revision == before  # nothing applied
    spec = {"flavor": {"name": "f", "vcpus": 1, "memory_mb": 64, "root_gb": 1,
                       "extra_specs": {"pci_passthrough:alias": "a1:1"}},
            "project_id": "p", "instance_uuids": [f"{host}-vm"], "force_hosts": [host]}
    with pytest.raises(InvalidRequest) as err:  # the session's server defines no [pci] alias
        client.select_destinations(spec)
    assert err.value.field == "$.flavor.extra_specs.pci_passthrough:alias"
    assert "a1 is not defined" in err.value.message
