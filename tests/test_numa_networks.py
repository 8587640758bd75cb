"""NUMA affinity of networks (RequestSpec ``network_metadata``, issue 33): a NUMA guest lands on host cells whose
NICs serve its ports' physnets (and its tunnelled network), where the host declares such affinity, as Nova's
NUMATopologyFilter decides with ``hardware.numa_fit_instance_to_host``. Checked against Nova's own code, on
generated cases, in tests/parity/test_numa_parity.py; here decisions and claims on a real scheduler, and the field
through the HTTP API (tests/service/test_numa_networks_http.py).

The host is Nova's functional test's (``NUMAServersWithNetworksTest``): physnet foo on cell 1, bar on cell 0,
tunnelled networks on both.
"""

from __future__ import annotations

from typing import Any

import pytest

from gantt import NoValidHost
from tests.conftest import host_stats, make_scheduler, request

NUMA = ["NUMATopologyFilter"]


def cells(**networks: dict[str, Any]) -> dict[str, Any]:
    out = []
    for i in range(2):
        cpus = list(range(i * 4, i * 4 + 4))
        cell: dict[str, Any] = {"id": i, "cpuset": cpus, "pcpuset": [], "memory": 4096,
                                "siblings": [[c] for c in cpus], "mempages": [{"size_kb": 4, "total": 4096 * 256}]}
        if f"cell{i}" in networks:
            cell["network_metadata"] = networks[f"cell{i}"]
        out.append(cell)
    return host_stats(vcpus=8, memory_mb=8192, numa_topology={"cells": out})


AFFINE = cells(cell0={"physnets": ["bar"], "tunneled": True}, cell1={"physnets": ["foo"], "tunneled": True})


def guest(uuid: str, nodes: int, physnets: list[str], tunneled: bool = False) -> dict[str, Any]:
    return request(vcpus=2, memory_mb=1024, instance_uuids=[uuid], extra_specs={"hw:numa_nodes": str(nodes)},
                   network_metadata={"physnets": physnets, "tunneled": tunneled})


def landed(sched: Any, uuid: str) -> list[int]:
    return [c.cell for c in sched.table.allocation(uuid).numa]


def test_a_guest_lands_on_the_cell_its_physnet_is_on() -> None:
    s = make_scheduler({"h": AFFINE}, filters=NUMA)
    s.select_destinations(guest("vm-foo", 1, ["foo"]))
    s.select_destinations(guest("vm-bar", 1, ["bar"]))
    s.select_destinations(guest("vm-foo-tunnel", 1, ["foo"], tunneled=True))  # both cells serve tunnels
    assert (landed(s, "vm-foo"), landed(s, "vm-bar"), landed(s, "vm-foo-tunnel")) == ([1], [0], [1])


def test_physnets_split_over_cells_need_a_guest_on_both() -> None:
    s = make_scheduler({"h": AFFINE}, filters=NUMA)
    with pytest.raises(NoValidHost):
        s.select_destinations(guest("vm-1", 1, ["foo", "bar"]))
    assert s.table.allocation("vm-1") is None
    s.select_destinations(guest("vm-2", 2, ["foo", "bar"]))
    assert sorted(landed(s, "vm-2")) == [0, 1]


def test_a_declared_tunnel_decides_and_networks_no_cell_declares_go_anywhere() -> None:
    s = make_scheduler({"h": cells(cell1={"physnets": [], "tunneled": True})}, filters=NUMA)
    s.select_destinations(guest("vm-tunnel", 1, [], tunneled=True))
    s.select_destinations(guest("vm-tunnel-2", 1, [], tunneled=True))  # cell 0 is the emptier now
    assert landed(s, "vm-tunnel") == landed(s, "vm-tunnel-2") == [1]
    with pytest.raises(NoValidHost):  # only cell 0 has room left, and it does not serve the tunnel
        s.select_destinations(request(vcpus=2, memory_mb=3072, instance_uuids=["vm-big"],
                                      extra_specs={"hw:numa_nodes": "1"},
                                      network_metadata={"physnets": [], "tunneled": True}))
    s.select_destinations(guest("vm-elsewhere", 1, ["baz"]))  # no cell serves baz: no affinity to honour
    assert landed(s, "vm-elsewhere") == [0]


def test_a_guest_without_numa_topology_ignores_its_networks() -> None:
    s = make_scheduler({"h": AFFINE}, filters=NUMA)
    s.select_destinations(request(vcpus=2, memory_mb=1024, instance_uuids=["vm-1"],
                                  network_metadata={"physnets": ["foo", "bar"], "tunneled": True}))
    assert s.table.allocation("vm-1").numa is None
