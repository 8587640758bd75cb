"""Issue 34 item 12: "how many more m1.large fit in az1, and on which hosts?", "if rack r07 fails, what no longer
fits?". The count is checked against what it claims to predict: real claims, one instance at a time, until
NoValidHost, on generated clouds (used capacity, allocation ratios, reserved, max_unit, aggregates overriding
ratios and load limits, the load filters), node by node."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

import gantt
from gantt.model import InvalidRequest, NoValidHost

SEEDS = range(40)
LOAD_FILTERS = ["NumInstancesFilter", "IoOpsFilter", "AggregateNumInstancesFilter", "AggregateIoOpsFilter",
                "AggregateCoreFilter", "AggregateRamFilter", "AggregateDiskFilter"]


def generated(seed: int) -> tuple[gantt.Scheduler, dict[str, Any]]:
    rnd = random.Random(seed)
    filters = ["ComputeFilter", "AvailabilityZoneFilter", *rnd.sample(LOAD_FILTERS, rnd.randint(0, 4))]
    config = {"filter_scheduler": {"enabled_filters": filters,
                                   "max_instances_per_host": rnd.choice([3, 8, 50]),
                                   "max_io_ops_per_host": rnd.choice([2, 5, 8])}}
    sched = gantt.Scheduler(config)
    hosts = [f"h{i}" for i in range(rnd.randint(3, 9))]
    for host in hosts:
        vcpus = rnd.choice([4, 8, 16])
        memory = rnd.choice([8192, 16384, 32768])
        disk = rnd.choice([100, 200, 500])
        stats: dict[str, Any] = {
            "vcpus": vcpus, "memory_mb": memory, "local_gb": disk,
            "vcpus_used": rnd.randint(0, vcpus), "memory_mb_used": rnd.randint(0, memory // 2),
            "local_gb_used": rnd.randint(0, disk // 2), "num_instances": rnd.randint(0, 3),
            "num_io_ops": rnd.randint(0, 3),
            "cpu_allocation_ratio": rnd.choice([1.0, 2.0, 4.0]), "ram_allocation_ratio": rnd.choice([1.0, 1.5]),
        }
        if rnd.random() < 0.3:
            stats["inventories"] = {"VCPU": {"total": vcpus, "reserved": rnd.randint(0, 2),
                                             "max_unit": rnd.choice([2, vcpus]),
                                             "allocation_ratio": stats["cpu_allocation_ratio"]}}
        sched.update_resource_stats(host, stats)
    for i, members in enumerate((hosts[: len(hosts) // 2], hosts[len(hosts) // 2:])):
        metadata = {"availability_zone": f"az{i}"}
        if rnd.random() < 0.5:
            metadata.update({"cpu_allocation_ratio": str(rnd.choice([1.0, 2.0])),
                             "max_instances_per_host": str(rnd.choice([2, 4])),
                             "max_io_ops_per_host": str(rnd.choice([3, 6]))})
        sched.update_aggregate({"id": i + 1, "name": f"r{i:02d}", "hosts": members, "metadata": metadata})
    flavor = {"name": "f", "vcpus": rnd.choice([1, 2, 3]), "memory_mb": rnd.choice([512, 2048, 4096]),
              "root_gb": rnd.choice([5, 20, 40])}
    spec: dict[str, Any] = {"flavor": flavor}
    if rnd.random() < 0.3:
        spec["availability_zone"] = "az1"
    return sched, spec


@pytest.mark.parametrize("seed", SEEDS)
def test_the_count_is_what_claims_one_at_a_time_place_node_by_node(seed: int) -> None:
    sched, spec = generated(seed)
    answer = sched.capacity({"requests": [spec], "limit": 1000})
    [counted] = answer.requests
    placed: Counter[str] = Counter()
    for _ in range(5000):
        try:
            [[chosen, *_]] = sched.select_destinations(spec)
        except NoValidHost:
            break
        placed[chosen.host] += 1
    assert counted.instances == sum(placed.values())
    assert {room.host: room.instances for room in counted.top} == dict(placed)
    assert counted.nodes == len(placed)
    # nothing was claimed by the question: asking again after the claims finds no room left
    assert sched.capacity({"requests": [spec]}).requests[0].instances == 0


def cloud() -> gantt.Scheduler:
    sched = gantt.Scheduler()
    for i in range(6):
        sched.update_resource_stats(f"h{i}", {"vcpus": 16, "memory_mb": 32768, "local_gb": 1000})
    sched.update_aggregate({"id": 1, "name": "r07", "hosts": ["h0", "h1"], "metadata": {"availability_zone": "az1"}})
    sched.update_aggregate({"id": 2, "name": "r08", "hosts": ["h2", "h3"], "metadata": {"availability_zone": "az1"}})
    sched.update_aggregate({"id": 3, "name": "r09", "hosts": ["h4", "h5"], "metadata": {"availability_zone": "az2"}})
    return sched


LARGE = {"flavor": {"name": "m1.large", "vcpus": 4, "memory_mb": 8192, "root_gb": 80}}


def test_per_zone_per_aggregate_and_the_hosts_with_the_most_room() -> None:
    sched = cloud()
    sched.select_destinations({"flavor": {"vcpus": 4, "memory_mb": 8192, "root_gb": 80},
                               "force_hosts": ["h0"]})
    [room] = sched.capacity({"requests": [LARGE], "limit": 2}).requests
    assert room.flavor == "m1.large" and room.resources == {"VCPU": 4, "MEMORY_MB": 8192, "DISK_GB": 80}
    assert room.instances == 3 + 5 * 4  # RAM: 32768 / 8192 per host, h0 has one already
    assert room.by_zone == {"az1": 3 + 3 * 4, "az2": 8}
    assert room.by_aggregate == {"r07": 7, "r08": 8, "r09": 8}
    assert [(r.host, r.instances) for r in room.top] == [("h1", 4), ("h2", 4)]
    [in_az2] = sched.capacity({"requests": [{**LARGE, "availability_zone": "az2"}]}).requests
    assert in_az2.instances == 8 and in_az2.by_zone == {"az2": 8}


def test_a_rack_lost_says_what_no_longer_fits() -> None:
    sched = cloud()
    for host in ("h0", "h0", "h1"):
        sched.select_destinations({"flavor": {"vcpus": 4, "memory_mb": 8192, "root_gb": 80}, "force_hosts": [host]})
    answer = sched.capacity({"requests": [LARGE], "without": {"aggregates": ["r07"]}})
    [room] = answer.requests
    assert room.instances_before == 2 + 3 + 4 * 4 and room.instances == 16
    assert room.nodes_before == 6 and room.nodes == 4 and "r07" not in room.by_aggregate
    displaced = answer.displaced
    assert displaced is not None and displaced.nodes == 2 and displaced.consumers == 3
    assert displaced.resources == {"DISK_GB": 240, "MEMORY_MB": 24576, "VCPU": 12}
    [shape] = displaced.shapes
    assert shape.consumers == 3 and shape.fit_again == 3
    by_zone = sched.capacity({"requests": [LARGE], "without": {"zones": ["az1"], "hosts": ["h5"]}}).requests[0]
    assert by_zone.instances == 4


@pytest.mark.parametrize(("question", "field"), [
    ({"requests": []}, "$.requests"),
    ({"requests": [LARGE], "without": {"hosts": ["nosuch"]}}, "$.without.hosts[0]"),
    ({"requests": [LARGE], "without": {"aggregates": ["r99"]}}, "$.without.aggregates[0]"),
    ({"requests": [LARGE], "without": {"zones": ["az9"]}}, "$.without.zones[0]"),
    ({"requests": [{**LARGE, "num_instances": 3}]}, "$.requests[0].num_instances"),
    ({"requests": [{**LARGE, "instance_uuids": ["a"]}]}, "$.requests[0].instance_uuids"),
    ({"requests": [{"flavor": {"vcpus": 0, "memory_mb": 0, "root_gb": 0}}]}, "$.requests[0].flavor"),
    ({"requests": [{"flavor": {"vcpus": 2, "memory_mb": 512, "root_gb": 1, "extra_specs": {"hw:numa_nodes": "1"}}}]},
     "$.requests"),
    ({"requests": [{**LARGE, "scheduler_hints": {"query": '[">=", "$free_ram_mb", 1024]'}}]}, "$.requests"),
    ({"requests": [LARGE], "limit": -1}, "$.limit"),
])
def test_what_cannot_be_counted_is_refused_naming_the_field(question: dict[str, Any], field: str) -> None:
    sched = gantt.Scheduler({"filter_scheduler": {"enabled_filters": ["ComputeFilter", "NUMATopologyFilter",
                                                                      "JsonFilter"]}})
    sched.update_resource_stats("h0", {"vcpus": 16, "memory_mb": 32768, "local_gb": 1000})
    sched.update_aggregate({"id": 1, "name": "r07", "hosts": ["h0"], "metadata": {"availability_zone": "az1"}})
    with pytest.raises(InvalidRequest) as caught:
        sched.capacity(question)
    assert caught.value.field == field


def test_a_capabilities_spec_on_usage_is_refused_and_one_on_static_state_is_counted() -> None:
    sched = gantt.Scheduler({"filter_scheduler": {"enabled_filters": ["ComputeCapabilitiesFilter"]}})
    sched.update_resource_stats("h0", {"vcpus": 16, "memory_mb": 32768, "local_gb": 1000,
                                       "hypervisor_type": "QEMU"})
    on_usage = {"flavor": {"vcpus": 1, "memory_mb": 1024, "root_gb": 1,
                           "extra_specs": {"capabilities:free_ram_mb": ">= 4096"}}}
    with pytest.raises(InvalidRequest, match="free_ram_mb"):
        sched.capacity({"requests": [on_usage]})
    static = {"flavor": {"vcpus": 1, "memory_mb": 1024, "root_gb": 1,
                         "extra_specs": {"capabilities:hypervisor_type": "QEMU"}}}
    assert sched.capacity({"requests": [static]}).requests[0].instances == 32


def test_the_command_answers_and_refuses_a_name_that_matches_nothing(tmp_path: Any) -> None:
    import json
    import subprocess
    import sys

    from tests.service.server import ServerProcess

    with ServerProcess(f"sqlite:///{tmp_path}/c.sqlite") as server:
        def gantt_cli(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([sys.executable, "-m", "gantt", *args, "--url", server.url], capture_output=True,
                                  text=True, timeout=60)

        for i in range(3):
            assert gantt_cli("hosts", "create", f"h{i}", "--vcpus", "16", "--memory-mb", "32768",
                             "--disk-gb", "1000").returncode == 0
        assert gantt_cli("aggregates", "create", "r07", "--hosts", "h0", "--property",
                         "availability_zone=az1").returncode == 0
        done = gantt_cli("capacity", "--flavor", "m1.large", "--vcpus", "4", "--memory-mb", "8192", "--root-gb", "80",
                         "--without-aggregate", "r07")
        assert done.returncode == 0, done.stderr
        assert "m1.large: 8 more fit on 2 nodes (nova 8); 12 on 3 nodes with the hosts taken away" in done.stdout
        as_json = gantt_cli("capacity", "--vcpus", "4", "--memory-mb", "8192", "--root-gb", "80", "-f", "json")
        [room] = json.loads(as_json.stdout)["requests"]
        assert room["instances"] == 12 and room["by_zone"] == {"az1": 4, "nova": 8}
        refused = gantt_cli("capacity", "--without-host", "nosuch")
        assert refused.returncode != 0 and "$.without.hosts[0]" in refused.stderr + refused.stdout
