"""Issue 14, NUMA: host reports carry Nova's numa_topology, NUMATopologyFilter decides as Nova does, and what
Gantt cannot honour is refused. (Agreement with Nova itself: tests/parity/test_numa_parity.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from gantt import Scheduler
from gantt.compute.request import RequestContext, resources_from_spec, traits_from_spec
from gantt.model import HostStats, InvalidRequest, RequestSpec, decode
from tests.conftest import host_stats, make_scheduler, passing, request
from tests.service.server import ServerProcess

F = ["NUMATopologyFilter"]


def cell(cell_id: int, cpus: range, memory: int = 8192, *, pinned: tuple[int, ...] = (), smt: bool = True,
         shared: bool = False, legacy: bool = False, **extra: Any) -> dict[str, Any]:
    """A dedicated-CPU cell (shared ones with ``shared``; both, as vcpu_pin_set reports them, with ``legacy``),
    cores of two threads with ``smt``."""
    listed = list(cpus)
    cores = [listed[i:i + 2] for i in range(0, len(listed), 2)] if smt else [[c] for c in listed]
    return {"id": cell_id, "cpuset": listed if shared or legacy else [], "pcpuset": [] if shared else listed,
            "memory": memory, "pinned_cpus": list(pinned), "siblings": cores,
            "mempages": [{"size_kb": 4, "total": memory * 256}], **extra}


def numa_host(*cells: dict[str, Any], **stats: Any) -> dict[str, Any]:
    vcpus = sum(len(c["cpuset"]) + len(c["pcpuset"]) for c in cells)
    inventories = {"PCPU": {"total": sum(len(c["pcpuset"]) for c in cells)}} if any(c["pcpuset"] for c in cells) \
        else {}
    return host_stats(vcpus=vcpus, numa_topology={"cells": list(cells)}, inventories=inventories, **stats)


def sched(**hosts: dict[str, Any]) -> Scheduler:
    return make_scheduler(hosts, filters=F)


def pinned(vcpus: int, **specs: str) -> dict[str, Any]:
    return request(vcpus=vcpus, memory_mb=1024, extra_specs={"hw:cpu_policy": "dedicated", **specs})


def primitive(plain: dict[str, Any]) -> dict[str, Any]:
    def obj(name: str, data: dict[str, Any]) -> dict[str, Any]:
        return {"nova_object.name": name, "nova_object.namespace": "nova", "nova_object.version": "1.0",
                "nova_object.data": data, "nova_object.changes": list(data)}

    return obj("NUMATopology", {"cells": [obj("NUMACell", {**c, "mempages": [
        obj("NUMAPagesTopology", p) for p in c["mempages"]]}) for c in plain["cells"]]})


# ------------------------------------------------------------------------------------------- reports


def test_a_report_reads_the_plain_and_the_versioned_object_form_alike() -> None:
    plain = {"cells": [cell(0, range(0, 4)), cell(1, range(4, 8), pinned=(4, 5))]}
    a = decode({"numa_topology": plain}, HostStats)
    b = decode({"numa_topology": primitive(plain)}, HostStats)
    assert a == b and a.numa_topology is not None and len(a.numa_topology.cells) == 2


@pytest.mark.parametrize(("topology", "field"), [
    ({"cells": [{"id": 0, "memory": -1}]}, "$.stats.numa_topology.cells[0].memory"),
    ({"cells": [{"id": 0, "cpuset": ["a"]}]}, "$.stats.numa_topology.cells[0].cpuset[0]"),
    ({"cells": [{"id": 0, "mempages": [{"size_kb": 0, "total": 1}]}]},
     "$.stats.numa_topology.cells[0].mempages[0].size_kb"),
    ({"cells": [{"id": 0, "mempages": [{"size_kb": 4, "total": 1}, {"size_kb": 4, "total": 2}]}]},
     "$.stats.numa_topology.cells[0].mempages"),
    ({"cells": [{"id": 0}, {"id": 0}]}, "$.stats.numa_topology.cells"),
    ({"cells": [{"id": 0, "bogus": 1}]}, "$.stats.numa_topology.cells[0]"),  # the message names the key
    ({"nova_object.name": "PciDevicePool", "nova_object.data": {}}, "$.stats.numa_topology.nova_object.name"),
    ({"nova_object.data": {"cells": [{"nova_object.data": {"id": "x"}}]}},
     "$.stats.numa_topology.nova_object.data"),
])
def test_a_bad_topology_is_refused_naming_the_field(topology: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidRequest) as err:
        decode({"numa_topology": topology}, HostStats, path="$.stats")
    assert err.value.field == field, err.value.message


def test_a_later_report_replaces_the_topology_and_rows_keep_their_own_when_others_leave() -> None:
    s = sched(a=numa_host(cell(0, range(0, 4))), b=numa_host(cell(0, range(0, 8))), c=host_stats())
    assert passing(s, pinned(6)) == {"b"}
    s.table.remove("a")  # b moves into a's row: its cells must move with it
    assert passing(s, pinned(6)) == {"b"}
    s.update_resource_stats("b", {"numa_topology": {"cells": [cell(0, range(0, 8), pinned=(0, 1, 2, 3))]}})
    assert passing(s, pinned(6)) == set()
    s.update_resource_stats("b", {"numa_topology": {"cells": []}})  # no cells: no NUMA topology
    assert passing(s, pinned(2)) == set()


# -------------------------------------------------------------------------------------------- the filter


def test_a_request_without_numa_passes_every_node_and_a_numa_one_needs_a_topology() -> None:
    s = sched(a=numa_host(cell(0, range(0, 8), shared=True)), plain=host_stats())
    assert passing(s, request(vcpus=2)) == {"a", "plain"}
    assert passing(s, request(vcpus=2, memory_mb=1024, extra_specs={"hw:numa_nodes": "1"})) == {"a"}


def test_dedicated_cpus_must_be_free_in_one_cell_and_nodes_split_the_guest() -> None:
    s = sched(one=numa_host(cell(0, range(0, 8), pinned=(0, 1))),  # 6 free in one cell
              two=numa_host(cell(0, range(0, 4)), cell(1, range(4, 8))))  # 4 + 4 free
    assert passing(s, pinned(6)) == {"one"}
    assert passing(s, pinned(8, **{"hw:numa_nodes": "2"})) == {"two"}  # 4 per guest node; one has 1 cell
    assert passing(s, pinned(4, **{"hw:numa_nodes": "2"})) == {"two"}


def test_thread_policies_follow_the_siblings() -> None:
    s = sched(smt=numa_host(cell(0, range(0, 8), pinned=(0,), legacy=True)),
              nosmt=numa_host(cell(0, range(0, 8), smt=False)))
    # require: SMT siblings needed (Nova also asks Placement for HW_CPU_HYPERTHREADING; these report no traits)
    spec = pinned(2, **{"hw:cpu_thread_policy": "require"})
    assert RequestContext.build(decode(spec, RequestSpec), s.config, 0).required_traits == {"HW_CPU_HYPERTHREADING"}
    s.update_resource_stats("smt", {"traits": ["HW_CPU_HYPERTHREADING"]})
    s.update_resource_stats("nosmt", {"traits": ["HW_CPU_HYPERTHREADING"]})
    assert passing(s, spec) == {"smt"}
    # isolate: whole free cores, one vCPU each; the smt host has 3 whole cores left
    s.update_resource_stats("smt", {"traits": []})
    s.update_resource_stats("nosmt", {"traits": []})
    assert passing(s, pinned(3, **{"hw:cpu_thread_policy": "isolate"})) == {"smt", "nosmt"}
    assert passing(s, pinned(4, **{"hw:cpu_thread_policy": "isolate"})) == {"nosmt"}
    # An SMT host whose dedicated CPUs are not also its shared ones (cpu_dedicated_set) cannot emulate isolate,
    # as in Nova (its bug 1889633)
    s.update_resource_stats("smt", {"numa_topology": {"cells": [cell(0, range(0, 8))]}})
    assert passing(s, pinned(1, **{"hw:cpu_thread_policy": "isolate"})) == {"nosmt"}


def test_huge_pages_must_be_free_in_the_size_asked_for() -> None:
    huge = cell(0, range(0, 4), memory=8192, shared=True)
    huge["mempages"] = [{"size_kb": 4, "total": 8192 * 256}, {"size_kb": 2048, "total": 1024, "used": 512}]
    s = sched(huge=numa_host(huge), small=numa_host(cell(0, range(0, 4), shared=True)))
    assert passing(s, request(vcpus=2, memory_mb=1024, extra_specs={"hw:mem_page_size": "large"})) == {"huge"}
    assert passing(s, request(vcpus=2, memory_mb=2048, extra_specs={"hw:mem_page_size": "2MB"})) == set()
    assert passing(s, request(vcpus=2, memory_mb=1024, extra_specs={"hw:mem_page_size": "small"})) == \
        {"huge", "small"}


def test_shared_guests_are_limited_by_the_cells_allocation_ratios() -> None:
    busy = cell(0, range(0, 4), shared=True, cpu_usage=6)
    s = sched(busy=numa_host(busy, cpu_allocation_ratio=2.0))  # 4 CPUs * 2.0 = 8, 6 in use
    numa2 = {"hw:numa_nodes": "1"}
    assert passing(s, request(vcpus=2, memory_mb=1024, extra_specs=numa2)) == {"busy"}
    assert passing(s, request(vcpus=3, memory_mb=1024, extra_specs=numa2)) == set()


def test_the_packing_strategy_option_is_honoured() -> None:
    config = {"compute": {"packing_host_numa_cells_allocation_strategy": True}}
    s = make_scheduler({"a": numa_host(cell(0, range(0, 4)), cell(1, range(4, 8)))}, filters=F, **config)
    assert s.config.compute.packing_host_numa_cells_allocation_strategy is True
    assert passing(s, pinned(2)) == {"a"}


# ------------------------------------------------------------------------------------------ the request


def _resources(specs: dict[str, str], vcpus: int = 4) -> dict[str, int]:
    return resources_from_spec(decode(request(vcpus=vcpus, memory_mb=1024, extra_specs=specs), RequestSpec))


def test_cpu_policies_ask_for_pcpu_as_nova_asks_placement() -> None:
    assert _resources({"hw:cpu_policy": "dedicated"})["PCPU"] == 4
    assert "VCPU" not in _resources({"hw:cpu_policy": "dedicated"})
    mixed = _resources({"hw:cpu_policy": "mixed", "hw:cpu_dedicated_mask": "^0"})
    assert (mixed["VCPU"], mixed["PCPU"]) == (1, 3)
    assert _resources({"hw:cpu_policy": "dedicated", "hw:emulator_threads_policy": "isolate"})["PCPU"] == 5
    spec = decode(request(extra_specs={"hw:cpu_policy": "dedicated", "hw:cpu_thread_policy": "isolate"}),
                  RequestSpec)
    assert traits_from_spec(spec)[1] == {"HW_CPU_HYPERTHREADING"}


@pytest.mark.parametrize(("specs", "field"), [
    ({"hw:pmem": "4GB"}, "$.flavor.extra_specs.hw:pmem"),
    ({"hw:mem_encryption": "true"}, "$.flavor.extra_specs.hw:mem_encryption"),
    ({"hw:cpu_thread_policy": "isolate"}, "$.flavor.extra_specs.hw:cpu_thread_policy"),
    ({"hw:cpu_policy": "pinned"}, "$.flavor.extra_specs.hw:cpu_policy"),
    ({"hw:numa_nodes": "3"}, "$.flavor.extra_specs.hw:numa_nodes"),  # 4 vCPUs do not split in 3
    ({"hw:numa_nodes": "0"}, "$.flavor.extra_specs.hw:numa_nodes"),
    ({"hw:mem_page_size": "huge"}, "$.flavor.extra_specs.hw:mem_page_size"),
    ({"hw:cpu_policy": "mixed"}, "$.flavor.extra_specs.hw:cpu_dedicated_mask"),
    ({"hw:numa_nodes": "2", "hw:numa_cpus.0": "0-1", "hw:numa_mem.0": "512", "hw:numa_cpus.1": "1-3",
      "hw:numa_mem.1": "512"}, "$.flavor.extra_specs.hw:numa_cpus.1"),
    ({"hw:numa_nodes": "2", "hw:numa_cpus.0": "0-1", "hw:numa_mem.0": "512", "hw:numa_cpus.1": "2-3",
      "hw:numa_mem.1": "100"}, "$.flavor.extra_specs.hw:numa_mem.0"),
    ({"hw:locked_memory": "true"}, "$.flavor.extra_specs.hw:locked_memory"),
])
def test_requests_nova_refuses_or_gantt_cannot_honour_are_refused_naming_the_key(specs: dict[str, str],
                                                                                 field: str) -> None:
    s = sched(a=numa_host(cell(0, range(0, 8))))
    with pytest.raises(InvalidRequest) as err:
        s.candidates(request(vcpus=4, memory_mb=1024, extra_specs=specs))
    assert err.value.field == field, err.value.message


def test_image_properties_shape_the_guest_too() -> None:
    s = sched(a=numa_host(cell(0, range(0, 8))), b=numa_host(cell(0, range(0, 2))))
    spec = request(vcpus=4, memory_mb=1024, image={"properties": {"hw_cpu_policy": "dedicated"}})
    assert passing(s, spec) == {"a"}
    with pytest.raises(InvalidRequest) as err:
        s.candidates(request(vcpus=4, image={"properties": {"hw_mem_page_size": "large"}}))
    assert err.value.field == "$.image.properties.hw_mem_page_size"


# ------------------------------------------------------------------------------------------ over HTTP


def test_over_http_a_numa_report_is_kept_across_a_restart_and_decides(tmp_path: Path) -> None:
    config = {"filter_scheduler": {"enabled_filters": ["ComputeFilter", "NUMATopologyFilter"]},
              "DEFAULT": {"service_down_time": 86400}, "gantt": {"seed": 3}}
    plain = {"cells": [cell(0, range(0, 4)), cell(1, range(4, 8))]}
    with ServerProcess(f"sqlite:///{tmp_path}/gantt.sqlite", config=config, workdir=tmp_path) as server:
        bad = httpx.post(f"{server.url}/v1/resource-stats",
                         json={"name": "n1", "stats": {"numa_topology": {"cells": [{"id": 0, "memory": -5}]}}})
        assert bad.status_code == 400 and bad.json()["field"] == "$.stats.numa_topology.cells[0].memory"
        with server.client() as client:
            client.update_resource_stats("n1", numa_host(*plain["cells"]))
            client.update_resource_stats("n2", {**numa_host(*plain["cells"]), "numa_topology": primitive(
                {"cells": [cell(0, range(0, 4), pinned=(0, 1, 2))]})})
            client.update_resource_stats("plain", host_stats())
            assert {c.host for c in client.candidates(pinned(3)).candidates} == {"n1"}
        server.restart()  # the replica is rebuilt from the store's records
        with server.client() as client:
            assert {c.host for c in client.candidates(pinned(3)).candidates} == {"n1"}
            [[chosen, *_]] = client.select_destinations({**pinned(4), "instance_uuids": ["vm-1"]})
            assert chosen.host == "n1"
            held = client.allocation("vm-1").numa  # the claim names the cell and the CPUs it pinned
            assert held is not None and len(held) == 1 and len(held[0].pinned_cpus) == 4
        server.restart()
        with server.client() as client:  # kept by the store: the next claim pins other CPUs
            client.select_destinations({**pinned(4), "instance_uuids": ["vm-2"]})
            taken = [set(client.allocation(vm).numa[0].pinned_cpus) for vm in ("vm-1", "vm-2")]
            assert not taken[0] & taken[1]


