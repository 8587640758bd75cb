"""POST /v1/capacity on a real ``gantt serve``: the answer the library gives, a 400 naming the field for what cannot
be counted, and nothing claimed by asking."""

from __future__ import annotations

import uuid

import httpx
import pytest

from gantt.client import SchedulerClient
from gantt.model import InvalidRequest
from tests.service.server import ServerProcess


def test_capacity_over_http_counts_per_zone_and_rack_and_claims_nothing(client: SchedulerClient,
                                                                      server: ServerProcess) -> None:
    tag = uuid.uuid4().hex[:8]
    hosts = [f"{tag}-h{i}" for i in range(4)]
    for host in hosts:
        client.update_resource_stats(host, {"vcpus": 16, "memory_mb": 32768, "local_gb": 1000})
    zone = f"{tag}-az"
    client.update_aggregate({"id": f"{tag}-rack", "name": f"{tag}-r07", "hosts": hosts[:2],
                             "metadata": {"availability_zone": zone}})
    client.update_aggregate({"id": f"{tag}-rack2", "name": f"{tag}-r08", "hosts": hosts[2:],
                             "metadata": {"availability_zone": zone}})
    large = {"flavor": {"name": "m1.large", "vcpus": 4, "memory_mb": 8192, "root_gb": 80},
             "availability_zone": zone}
    client.select_destinations({**large, "force_hosts": [hosts[0]]})
    allocations = len(client.allocations())
    answer = client.capacity({"requests": [large], "without": {"aggregates": [f"{tag}-r07"]}, "limit": 1})
    [room] = answer.requests
    assert room.instances_before == 3 + 3 * 4 and room.instances == 8
    assert room.by_zone == {zone: 8} and room.by_aggregate == {f"{tag}-r08": 8}
    assert len(room.top) == 1 and room.top[0].instances == 4 and room.top[0].host in hosts[2:]
    assert answer.displaced is not None and answer.displaced.consumers == 1
    assert answer.displaced.shapes[0].fit_again == 1
    assert len(client.allocations()) == allocations  # asking claimed nothing
    with pytest.raises(InvalidRequest) as caught:
        client.capacity({"requests": [large], "without": {"hosts": [f"{tag}-nosuch"]}})
    assert caught.value.field == "$.without.hosts[0]"
    bad = httpx.post(f"{server.url}/v1/capacity", json={"requests": [large], "limit": 5000}, timeout=10)
    assert bad.status_code == 400 and bad.json()["field"] == "$.limit"
