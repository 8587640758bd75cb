"""Nova's PCPU -> VCPU fallback for dedicated guests (``[workarounds] disable_fallback_pcpu_query``, issue 33).

A host still configured with ``vcpu_pin_set`` reports its pinnable CPUs as VCPU only, its NUMA cells with the same
CPUs shared and dedicated. Nova's scheduler asks Placement for a dedicated guest twice (PCPU with the thread
policy's trait, then VCPU without it) and weighs both answers' hosts together; a host the first answer holds is
claimed on PCPU, one only the second holds on VCPU. The query itself is checked against Nova's code in
tests/parity/test_pcpu_fallback_parity.py; here the decisions and claims, on real schedulers and a SQLite store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gantt import NoValidHost
from gantt.config import Config, load_config
from gantt.replication.audit import audit
from gantt.replication.replica import Replica
from gantt.store.sqlite import SQLiteStore
from tests.conftest import host_stats, make_scheduler, passing, request

NUMA = ["NUMATopologyFilter"]
OFF = {"disable_fallback_pcpu_query": True}


def _cells(cores: int, threads: int, legacy: bool) -> list[dict[str, Any]]:
    cpus = list(range(cores * threads))
    return [{"id": 0, "cpuset": cpus if legacy else [], "pcpuset": cpus, "memory": 8192,
             "siblings": [cpus[k:k + threads] for k in range(0, len(cpus), threads)],
             "mempages": [{"size_kb": 4, "total": 8192 * 256}]}]


def legacy(cores: int = 4, threads: int = 2) -> dict[str, Any]:
    """nova-compute with ``vcpu_pin_set``: VCPU only, every CPU both shared and dedicated in its cell."""
    return host_stats(vcpus=cores * threads, memory_mb=8192, numa_topology={"cells": _cells(cores, threads, True)},
                      traits=["HW_CPU_HYPERTHREADING"] if threads > 1 else [])


def modern(cores: int = 4) -> dict[str, Any]:
    """nova-compute with ``[compute] cpu_dedicated_set``: PCPU inventory, dedicated CPUs only in its cell."""
    return host_stats(vcpus=cores * 2, memory_mb=8192, numa_topology={"cells": _cells(cores, 2, False)},
                      inventories={"PCPU": {"total": cores * 2}}, traits=["HW_CPU_HYPERTHREADING"])


def pinned(vcpus: int, uuid: str, **fields: Any) -> dict[str, Any]:
    specs = {"hw:cpu_policy": "dedicated", **fields.pop("specs", {})}
    return request(vcpus=vcpus, memory_mb=1024, instance_uuids=[uuid], extra_specs=specs, **fields)


def test_a_legacy_host_takes_a_dedicated_guest_on_vcpu_and_pins_its_cpus() -> None:
    s = make_scheduler({"old": legacy()}, filters=NUMA)
    for i in range(4):
        [[chosen, *_]] = s.select_destinations(pinned(2, f"vm-{i}"))
        assert chosen.host == "old" and chosen.allocation == {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 1}
    taken = [cpu for i in range(4) for c in s.table.allocation(f"vm-{i}").numa for cpu in c.pinned_cpus]
    assert sorted(taken) == list(range(8))  # each pinned once: the cells' fit still decides
    with pytest.raises(NoValidHost):  # every CPU pinned, every VCPU counted
        s.select_destinations(pinned(1, "vm-full"))


def test_the_option_leaves_the_pcpu_query_alone() -> None:
    s = make_scheduler({"old": legacy()}, filters=NUMA, workarounds=OFF)
    with pytest.raises(NoValidHost):
        s.select_destinations(pinned(2, "vm-1"))
    assert s.table.allocation("vm-1") is None


def test_both_answers_are_weighed_together_and_each_host_claims_its_own_query() -> None:
    s = make_scheduler({"new": modern(), "old": legacy()}, filters=NUMA)
    assert passing(s, pinned(2, "vm-0")) == {"new", "old"}
    [[on_new]] = s.select_destinations(pinned(2, "vm-1", force_hosts=["new"]))
    [[on_old]] = s.select_destinations(pinned(2, "vm-2", force_hosts=["old"]))
    assert on_new.allocation == {"PCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 1}
    assert on_old.allocation == {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 1}
    # only the PCPU query without it
    s = make_scheduler({"new": modern(), "old": legacy()}, filters=NUMA, workarounds=OFF)
    assert passing(s, pinned(2, "vm-0")) == {"new"}


def test_alternates_carry_the_query_their_host_answers() -> None:
    s = make_scheduler({"new": modern(), "old": legacy()}, filters=NUMA, scheduler={"max_attempts": 2})
    [[chosen, alternate]] = s.select_destinations(pinned(2, "vm-1"))
    by_host = {sel.host: sel.allocation for sel in (chosen, alternate)}
    assert by_host == {"new": {"PCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 1},
                       "old": {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 1}}


def test_the_fallback_drops_the_thread_policys_trait() -> None:
    """As Nova's test_create_server_with_isolate_thread_policy_old_configuration: an SMT host with vcpu_pin_set
    has HW_CPU_HYPERTHREADING, which isolate forbids in the PCPU query only; the guest takes whole cores."""
    spec = pinned(2, "vm-1", specs={"hw:cpu_thread_policy": "isolate"})
    s = make_scheduler({"old": legacy(cores=2)}, filters=NUMA)
    [[chosen]] = s.select_destinations(spec)
    assert chosen.allocation == {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 1}
    assert sorted(s.table.allocation("vm-1").numa[0].pinned_cpus) == [0, 1, 2, 3]
    with pytest.raises(NoValidHost):
        make_scheduler({"old": legacy(cores=2)}, filters=NUMA, workarounds=OFF).select_destinations(spec)


def test_only_a_dedicated_policy_falls_back() -> None:
    """Nova's cpu_pinning_requested: neither a mixed policy nor an explicit resources:PCPU asks twice."""
    s = make_scheduler({"old": legacy()}, filters=NUMA)
    mixed = pinned(2, "vm-1", specs={"hw:cpu_policy": "mixed", "hw:cpu_dedicated_mask": "^0"})
    explicit = request(vcpus=2, memory_mb=1024, instance_uuids=["vm-2"], extra_specs={"resources:PCPU": "2"})
    for spec in (mixed, explicit):
        with pytest.raises(NoValidHost):
            s.select_destinations(spec)


def test_asking_again_answers_the_fallback_claim() -> None:
    s = make_scheduler({"old": legacy()}, filters=NUMA)
    [[first]] = s.select_destinations(pinned(2, "vm-1"))
    [[again]] = s.select_destinations(pinned(2, "vm-1"))  # a repeat, not a move refused as "other resources"
    expected = ("old", {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 1})
    assert (first.host, first.allocation) == (again.host, again.allocation) == expected


def test_two_replicas_on_one_sqlite_file_never_pin_a_cpu_twice(tmp_path: Path) -> None:
    config = Config.from_dict({"filter_scheduler": {"enabled_filters": NUMA}})
    url = f"sqlite:///{tmp_path}/gantt.sqlite"
    first, second = SQLiteStore(url), SQLiteStore(url)
    a = Replica(first, config).start(follow=False)
    b = Replica(second, config).start(follow=False)
    try:
        a.update_resource_stats("old", legacy())
        b.catch_up()
        # b has not seen a's claim when it decides: the same CPUs, refused by the store, refitted
        a.select_destinations(pinned(4, "vm-a"))
        b.select_destinations(pinned(4, "vm-b"))
        snapshot = first.snapshot()
        assert audit(snapshot, config) == []
        pins = [cpu for alloc in snapshot.allocations for c in alloc.numa or () for cpu in c.pinned_cpus]
        assert sorted(pins) == list(range(8))
        assert [alloc.resources.get("VCPU") for alloc in snapshot.allocations] == [4, 4]
    finally:
        a.stop()
        b.stop()
        first.close()
        second.close()


def test_nova_conf_sets_the_option_among_nova_computes_own(tmp_path: Path) -> None:
    conf = tmp_path / "nova.conf"
    conf.write_text("[workarounds]\ndisable_fallback_pcpu_query = yes\ndisable_rootwrap = true\n")
    assert load_config(conf).workarounds.disable_fallback_pcpu_query is True
    conf.write_text("[workarounds]\nenable_qemu_monitor_announce_self = true\n")
    assert load_config(conf).workarounds.disable_fallback_pcpu_query is False
