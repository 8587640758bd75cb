"""examples/nfv.toml: NUMA, pinned, huge-page and PCI flavors through the real engine, two lagging schedulers
claiming on one truth; the NUMA fragmentation it reports, and no CPU pinned twice, no device handed out twice."""

from __future__ import annotations

from collections import Counter

import pytest

from gantt.sim import ScenarioError, parse_scenario
from tests.sim.test_simulator import run, scenario_data


def test_the_nfv_scenario_runs_pins_and_reports_fragmentation() -> None:
    sim, r = run(scenario_data("nfv.toml"), requests=700)
    inv = r["invariants"]
    assert inv["numa_overbooked_nodes"] == 0 and inv["pci_overbooked_nodes"] == 0
    assert inv["overcommitted_nodes"] == 0 and inv["conservation"]
    truth = sim.truth
    pinned: Counter[tuple[str, int]] = Counter()
    devices = 0
    for allocation in truth.allocations():
        for cell in allocation.numa or ():
            pinned.update((allocation.host, cpu) for cpu in cell.pinned_cpus)
        devices += sum(t.count for t in allocation.pci or ())
    assert pinned and max(pinned.values()) == 1  # pinned guests placed, no CPU twice
    assert devices > 0
    fragmentation = r["final"]["numa_fragmentation"]
    # every NUMA-shaped flavor of the scenario is reported; the plain and PCI-only ones are not
    assert set(fragmentation) == {"vnf.pinned.1g", "vnf.2node", "vnf.require", "vnf.mixed"}
    for figures in fragmentation.values():
        assert figures["hosts_it_fits"] + figures["stranded_hosts"] == figures["hosts_with_room"]
    # by the time 700 requests ran, the counts say some host has room for a pinned flavor its cells cannot give
    assert sum(f["stranded_hosts"] for f in fragmentation.values()) > 0


def test_a_host_kind_with_a_bad_pci_pool_is_named() -> None:
    data = scenario_data("nfv.toml")
    data["cloud"]["host_kinds"][1]["pci"] = [{"vendor_id": "10de", "count": 2}]
    with pytest.raises(ScenarioError) as info:
        parse_scenario(data)
    assert info.value.field == "cloud.host_kinds[1].pci"


def test_a_numa_layout_that_does_not_divide_the_host_is_refused() -> None:
    data = scenario_data("nfv.toml")
    data["cloud"]["host_kinds"][0]["numa"]["threads"] = 5
    with pytest.raises(ScenarioError) as info:
        parse_scenario(data)
    assert "numa.cells" in str(info.value.message) and "host_kinds" in (info.value.field or "")
