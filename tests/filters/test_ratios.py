from __future__ import annotations

import pytest

from gantt import NoValidHost
from tests.conftest import make_scheduler, passing, request

F = ["AggregateCoreFilter", "AggregateRamFilter", "AggregateDiskFilter"]


def sched():  # type: ignore[no-untyped-def]
    # every node 16 vCPUs at its own ratio 4.0 (64 schedulable), 64 GiB RAM at 1.5, 1000 GB disk at 1.0
    s = make_scheduler(4, filters=F, clock=None)
    for host in ("h0", "h1", "h2", "h3"):
        s.update_resource_stats(host, {"cpu_allocation_ratio": 4.0, "ram_allocation_ratio": 1.5,
                                       "vcpus_used": 8})
    return s


def test_no_aggregate_ratio_means_the_nodes_own_ratio() -> None:
    s = sched()
    s.update_resource_stats("h0", {"vcpus_used": 48})
    assert passing(s, request(vcpus=16)) == {"h0", "h1", "h2", "h3"}  # h0: 48 used + 16 <= 16 * 4.0


def test_aggregate_ratio_lowest_wins_and_hosts_outside_keep_their_own() -> None:
    s = sched()
    s.update_aggregate({"id": 1, "hosts": ["h0", "h1"], "metadata": {"cpu_allocation_ratio": "2.0"}})
    s.update_aggregate({"id": 2, "hosts": ["h1"], "metadata": {"cpu_allocation_ratio": "1.0"}})
    s.update_aggregate({"id": 3, "hosts": ["h2"], "metadata": {"cpu_allocation_ratio": "oops"}})  # ignored
    assert passing(s, request(vcpus=9)) == {"h0", "h2", "h3"}  # h1: 16 * 1.0 (the lower) - 8 = 8 left
    assert passing(s, request(vcpus=16)) == {"h0", "h2", "h3"}  # h0: 16 * 2.0 - 8 = 24 left
    s.update_resource_stats("h0", {"vcpus_used": 20})
    assert passing(s, request(vcpus=13)) == {"h2", "h3"}  # h0: 32 - 20 = 12 left (its own 4.0 would leave 44)
    assert passing(s, request(vcpus=12)) == {"h0", "h2", "h3"}


def test_ram_and_disk_ratios() -> None:
    s = sched()
    s.update_aggregate({"id": 1, "hosts": ["h0"], "metadata": {"ram_allocation_ratio": "1.0",
                                                               "disk_allocation_ratio": "0.5"}})
    assert passing(s, request(memory_mb=65536 + 1)) == set()  # no instance may overcommit against itself
    assert passing(s, request(memory_mb=60000)) == {"h0", "h1", "h2", "h3"}
    s.update_resource_stats("h0", {"memory_mb_used": 10000})
    assert passing(s, request(memory_mb=60000)) == {"h1", "h2", "h3"}
    assert passing(s, request(root_gb=600)) == {"h1", "h2", "h3"}


def test_limits_reach_the_claim() -> None:
    s = sched()
    s.update_aggregate({"id": 1, "hosts": ["h0", "h1", "h2", "h3"], "metadata": {"cpu_allocation_ratio": "1.5"}})
    [[sel, *_]] = s.select_destinations(request(vcpus=16))
    assert sel.limits["VCPU"] == 24.0  # 16 * 1.5: the most the node may have in use
    assert "MEMORY_MB" not in sel.limits
    # fill every node to its aggregate capacity: 8 used + 16 = 24 each
    for _ in range(3):
        s.select_destinations(request(vcpus=16))
    with pytest.raises(NoValidHost) as err:
        s.select_destinations(request(vcpus=1))
    assert "AggregateCoreFilter removed 4" in str(err.value)
    # a claim racing past the filter is still held to the aggregate capacity
    table = s.table
    row = table.row("h0")
    assert table.fits(row, {"VCPU": 1}, {"VCPU": 24.0}) == "VCPU"


def test_multi_node_host_gets_its_aggregate_ratio_on_every_node() -> None:
    s = make_scheduler({}, filters=F)
    for node in ("n1", "n2"):
        s.update_resource_stats(["ironic", node], {"vcpus": 4, "memory_mb": 4096, "local_gb": 10,
                                                   "cpu_allocation_ratio": 4.0})
    s.update_aggregate({"id": 1, "hosts": ["ironic"], "metadata": {"cpu_allocation_ratio": "1.0"}})
    assert passing(s, request(vcpus=4, memory_mb=128)) == {"n1", "n2"}
    s.select_destinations(request(vcpus=4, memory_mb=128))
    assert len(passing(s, request(vcpus=1, memory_mb=128))) == 1
