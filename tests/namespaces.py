"""Two namespaces in one ``gantt serve``: nothing of one is seen, decided on or written through the other.

Shared by the SQLite test (tests/service/test_namespaces.py) and the etcd one (tests/etcd/test_namespaces.py):
the same checks on each backend's own way of keeping namespaces apart (tables in one file, key prefixes).
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from gantt.cli.server_process import ServerProcess
from gantt.client import SchedulerClient
from gantt.model import NotFound

# The default namespace runs Nova's load filter with its default limit (50 instances); "blue" runs it with a limit
# of 1: a host running 5 instances fits in compute and not in blue, so blue's decisions show blue's config only.
CONFIG: dict[str, Any] = {
    "filter_scheduler": {"enabled_filters": ["ComputeFilter"]},
    "DEFAULT": {"service_down_time": 86400},
    "gantt": {"seed": 7},
    "namespace.blue": {"kind": "compute"},
    "namespace.blue.filter_scheduler": {"enabled_filters": ["ComputeFilter", "NumInstancesFilter"],
                                        "max_instances_per_host": 1},
    "namespace.blue.DEFAULT": {"service_down_time": 86400},
}
FLAVOR = {"name": "small", "vcpus": 1, "memory_mb": 512, "root_gb": 1}


def _stats(memory_mb: int, num_instances: int) -> dict[str, Any]:
    return {"vcpus": 8, "memory_mb": memory_mb, "local_gb": 100, "num_instances": num_instances}


def _nodes(client: SchedulerClient) -> dict[str, int]:
    return {h.host: h.inventories["MEMORY_MB"].total for h in client.hosts()}


def _placed(client: SchedulerClient, consumer: str) -> str:
    [[chosen, *_]] = client.select_destinations({"flavor": FLAVOR, "instance_uuids": [consumer]})
    return chosen.host


def check_isolation(store: str) -> None:
    with ServerProcess(store, config=CONFIG) as server:
        compute = SchedulerClient(server.url)
        blue = SchedulerClient(server.url, namespace="blue")
        # The same host name in both namespaces: two hosts, each with its own numbers.
        compute.update_resource_stats("h1", _stats(8192, 5))
        compute.update_resource_stats("only-compute", _stats(8192, 0))
        blue.update_resource_stats("h1", _stats(4096, 5))
        blue.update_resource_stats("only-blue", _stats(4096, 0))
        assert _nodes(compute) == {"h1": 8192, "only-compute": 8192}
        assert _nodes(blue) == {"h1": 4096, "only-blue": 4096}

        # Aggregates: one namespace's aggregate is not the other's.
        compute.update_aggregate({"id": 1, "name": "fast", "hosts": ["h1"], "metadata": {"ssd": "true"}})
        assert [a.name for a in compute.aggregates()] == ["fast"]
        assert blue.aggregates() == []
        with pytest.raises(NotFound):
            blue.aggregate(1)

        # Config: blue's filter and limit decide blue's requests only.
        assert {c.host for c in compute.candidates({"flavor": FLAVOR}).candidates} == {"h1", "only-compute"}
        assert {c.host for c in blue.candidates({"flavor": FLAVOR}).candidates} == {"only-blue"}

        # Allocations: a claim in blue is blue's; the same consumer in compute is another, independent claim.
        consumer = str(uuid.uuid4())
        assert _placed(blue, consumer) == "only-blue"
        assert compute.allocations() == []
        with pytest.raises(NotFound):
            compute.allocation(consumer)
        with pytest.raises(NotFound):
            compute.release(consumer)
        assert blue.allocation(consumer).host == "only-blue"
        assert _placed(compute, consumer) in {"h1", "only-compute"}
        blue.release(consumer)
        assert compute.allocation(consumer).consumer_uuid == consumer  # blue's release left compute's claim
        assert blue.allocations() == []

        # Deleting blue's h1 leaves compute's h1.
        blue.delete_host("h1")
        assert _nodes(blue) == {"only-blue": 4096}
        assert _nodes(compute) == {"h1": 8192, "only-compute": 8192}

        # /health and /metrics show each namespace's replica.
        health = compute.health()
        assert health.namespaces is not None and health.namespaces["blue"]["hosts"] == 1
        assert health.hosts == 2
        metrics = compute.metrics()
        assert 'gantt_namespace_hosts{namespace="blue",state="up"} 1' in metrics
        assert 'gantt_namespace_hosts{namespace="compute",state="up"} 2' in metrics

        # A namespace the service does not serve: a 404 problem that names it.
        with pytest.raises(NotFound, match="'green'"):
            SchedulerClient(server.url, namespace="green").hosts()
        with httpx.Client(base_url=server.url) as http:
            answer = http.get("/v1/namespaces/compute/hosts")  # the default has one spelling: /v1/hosts
            assert answer.status_code == 404 and answer.json()["field"] == "namespace"
            answer = http.get("/v1/namespaces/Not-A-Name/hosts")
            assert answer.status_code == 400 and answer.json()["field"] == "namespace"


def check_feeds(store: str) -> None:
    """A replica of one namespace never sees a change of the other: each has its own feed and revisions."""
    from gantt.model import HostReport, HostStats
    from gantt.replication.replica import Replica
    from gantt.store.base import Batch, open_store

    red = Replica.open(open_store(store, namespace="red"))
    green = Replica.open(open_store(store, namespace="green"))
    try:
        start = red.sync()
        report = HostReport.of("h1", HostStats(vcpus=4, memory_mb=1024, local_gb=10))
        for i in range(5):
            green.store.commit(Batch(reports=[HostReport.of(f"g{i}", HostStats(vcpus=4, memory_mb=1024,
                                                                                local_gb=10))]))
        green.sync()
        assert red.store.changes(start, timeout=0.3) == []
        assert red.sync() == start
        assert [h["host"] for h in red.hosts()] == []
        assert len(green.hosts()) == 5
        red.store.commit(Batch(reports=[report]))
        red.sync()
        assert [h["host"] for h in red.hosts()] == ["h1"]
        assert "h1" not in {h["host"] for h in green.hosts()}
    finally:
        red.close()
        green.close()
