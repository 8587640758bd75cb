"""``Scheduler.utilization``: nodes counted once by state, capacity and usage per zone and resource class."""

from __future__ import annotations

from gantt.model import Utilization
from tests.conftest import FakeClock, host_stats, make_scheduler, request


def _by_zone(state: Utilization) -> dict[tuple[str, str], tuple[float, float]]:
    return {(z.zone, z.resource_class): (z.capacity, z.used) for z in state.zones}


def test_each_node_counts_once_and_only_up_nodes_hold_capacity() -> None:
    clock = FakeClock()
    sched = make_scheduler({}, filters=["ComputeFilter", "AvailabilityZoneFilter"], clock=clock,
                           DEFAULT={"service_down_time": 60, "default_availability_zone": "home"})
    # Reported long ago: down by the time the others report.
    sched.update_resource_stats("stale", host_stats(vcpus=100))
    sched.update_resource_stats("stale-disabled", host_stats(vcpus=100, service={"disabled": True}))
    clock.advance(120)
    sched.update_resource_stats("a1", host_stats(vcpus=16, vcpus_used=2))
    sched.update_resource_stats("a2", host_stats(vcpus=8, cpu_allocation_ratio=2.0, inventories={
        "CUSTOM_GPU": {"total": 4, "reserved": 1, "allocation_ratio": 1.0}}))
    sched.update_resource_stats("b1", host_stats(vcpus=4))
    sched.update_resource_stats("off", host_stats(vcpus=100, service={"disabled": True}))
    sched.update_resource_stats("fenced", host_stats(vcpus=100, service={"forced_down": True}))
    sched.update_aggregate({"id": 1, "name": "az1", "hosts": ["a1", "a2", "off"],
                            "metadata": {"availability_zone": "az1"}})

    state = sched.utilization()
    # Down wins over disabled: "stale-disabled" is down; "off" still reports, so it is disabled.
    assert (state.hosts_up, state.hosts_down, state.hosts_disabled) == (3, 3, 1)
    zones = _by_zone(state)
    assert zones[("az1", "VCPU")] == (16 + 8 * 2, 2)
    assert zones[("home", "VCPU")] == (4, 0)  # in no zoned aggregate: the configured default zone
    assert zones[("az1", "CUSTOM_GPU")] == (3, 0)  # (total - reserved) * ratio
    assert ("home", "CUSTOM_GPU") not in zones  # no node there has the class

    # A claim counts as used at once (in flight until the host reports it); a release gives it back.
    [[selection, *_]] = sched.select_destinations(request(vcpus=4, availability_zone="az1",
                                                          instance_uuids=["vm-1"]))
    assert selection.host in ("a1", "a2")
    assert _by_zone(sched.utilization())[("az1", "VCPU")] == (32, 6)
    sched.release("vm-1")
    assert _by_zone(sched.utilization())[("az1", "VCPU")] == (32, 2)

    # Zones follow aggregates and new nodes at once (a2 leaves az1 for the default zone; b2 arrives).
    sched.update_aggregate({"id": 1, "name": "az1", "hosts": ["a1", "off"], "metadata": {"availability_zone": "az1"}})
    sched.update_resource_stats("b2", host_stats(vcpus=2))
    zones = _by_zone(sched.utilization())
    assert zones[("az1", "VCPU")] == (16, 2) and zones[("home", "VCPU")] == (4 + 16 + 2, 0)
    assert zones[("home", "CUSTOM_GPU")] == (3, 0) and ("az1", "CUSTOM_GPU") not in zones
    sched.delete_host("b2")
    sched.update_aggregate({"id": 1, "name": "az1", "hosts": ["a1", "a2", "off"],
                            "metadata": {"availability_zone": "az1"}})

    # Every node of a zone down: its gauges stay, at 0, rather than vanish.
    clock.advance(120)
    sched.update_resource_stats("b1", host_stats(vcpus=4))
    state = sched.utilization()
    assert (state.hosts_up, state.hosts_down, state.hosts_disabled) == (1, 6, 0)
    assert _by_zone(state)[("az1", "VCPU")] == (0, 0)
    assert _by_zone(state)[("home", "VCPU")] == (4, 0)


def test_an_empty_table_has_no_nodes_and_no_zones() -> None:
    state = make_scheduler({}).utilization()
    assert state == Utilization(hosts_up=0, hosts_down=0, hosts_disabled=0, zones=[])
