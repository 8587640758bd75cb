"""PCI claims: a claim takes the devices it uses from its node's pools, so no two claims (threads, or replicas
on one store) hand out the same device; a release gives them back, the host's report listing the instance takes
over from the claim. Audited: per node and pool, the devices unconfirmed claims hold never exceed the pool."""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from gantt import NoValidHost
from gantt.config import Config
from gantt.model import Allocation, HostReport, PciTaken
from gantt.replication.audit import audit
from gantt.replication.replica import Replica
from gantt.store import Batch, open_store
from tests.conftest import host_stats, make_scheduler, request

ALIASES = [json.dumps({"name": "vf", "vendor_id": "8086", "product_id": "1520"}),
           json.dumps({"name": "gpu", "vendor_id": "10de", "product_id": "1db4"})]
SECTIONS: dict[str, Any] = {"filter_scheduler": {"enabled_filters": ["PciPassthroughFilter"]},
                            "pci": {"alias": ALIASES}}


def pools(vf: int = 0, gpu: int = 0) -> list[dict[str, Any]]:
    return [{"vendor_id": "8086", "product_id": "1520", "numa_node": 0, "count": vf, "dev_type": "type-VF"},
            {"vendor_id": "10de", "product_id": "1db4", "numa_node": 1, "count": gpu}]


def pci(value: str, *uuids: str) -> dict[str, Any]:
    return request(extra_specs={"pci_passthrough:alias": value}, instance_uuids=list(uuids))


def held_devices(allocations: list[Allocation], reported: dict[str, list[dict[str, Any]]]) -> Counter[tuple[str, str]]:
    """Devices held per (host, product), asserting no pool gives more than it has."""
    held: Counter[tuple[str, str]] = Counter()
    for alloc in allocations:
        if not alloc.confirmed:
            for taken in alloc.pci:
                held[(alloc.host, str(taken.pool["product_id"]))] += taken.count
    for (host, product), count in held.items():
        assert count <= sum(p["count"] for p in reported[host] if p["product_id"] == product), (host, product)
    return held


def test_claims_take_devices_and_releases_give_them_back() -> None:
    sched = make_scheduler({"h0": {"pci_stats": pools(vf=2, gpu=1)}, "h1": {}}, **SECTIONS)
    sched.select_destinations(pci("vf:1,gpu:1", "a"))
    taken = {(str(t.pool["product_id"]), t.count) for t in sched.allocation("a").pci}
    assert taken == {("1520", 1), ("1db4", 1)}
    with pytest.raises(NoValidHost):  # the one GPU is held
        sched.select_destinations(pci("gpu:1", "b"))
    sched.select_destinations(pci("vf:1", "c"))
    with pytest.raises(NoValidHost):
        sched.select_destinations(pci("vf:1", "d"))
    sched.release("a")
    assert sched.select_destinations(pci("gpu:1,vf:1", "e"))[0][0].host == "h0"


def test_the_instances_of_one_request_do_not_share_devices() -> None:
    sched = make_scheduler({"h0": {"pci_stats": pools(vf=1)}, "h1": {"pci_stats": pools(vf=1)}}, **SECTIONS)
    with pytest.raises(NoValidHost):
        sched.select_destinations(pci("vf:1", "a", "b", "c"))
    assert not list(sched.table.allocations())  # all or nothing
    answer = sched.select_destinations(pci("vf:1", "a", "b"))
    assert sorted(selections[0].host for selections in answer) == ["h0", "h1"]


def test_the_report_listing_the_instance_takes_over_from_the_claim() -> None:
    sched = make_scheduler({"h0": {"pci_stats": pools(vf=2)}}, **SECTIONS)
    sched.select_destinations(pci("vf:1", "a"))
    # the host built it: its pools show one device fewer, and it lists the instance (the claim is confirmed)
    sched.update_resource_stats("h0", host_stats(pci_stats=pools(vf=1), instances=["a"]))
    assert sched.allocation("a").confirmed
    sched.select_destinations(pci("vf:1", "b"))  # the device left is not counted twice
    with pytest.raises(NoValidHost):
        sched.select_destinations(pci("vf:1", "c"))


def test_threads_on_two_replicas_of_one_store_never_hand_out_a_device_twice(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/g.sqlite"
    config = Config.from_dict({**SECTIONS, "gantt": {"seed": 3}})
    reported = {f"h{i}": pools(vf=i % 3, gpu=(i + 1) % 2) for i in range(6)}
    a = Replica(open_store(url), config).start(follow=True)
    b = Replica(open_store(url), config).start(follow=True)
    try:
        for host, host_pools in reported.items():
            a.update_resource_stats(host, host_stats(pci_stats=host_pools))
        b.catch_up()
        placed: list[str] = []

        def worker(replica: Replica, name: str) -> None:
            for k in range(12):
                with_gpu = "vf:1,gpu:1" if k % 3 == 0 else "vf:1"
                try:
                    replica.select_destinations(pci(with_gpu, f"{name}-{k}"))
                    placed.append(f"{name}-{k}")
                except NoValidHost:
                    pass

        threads = [threading.Thread(target=worker, args=(replica, f"{tag}{t}"))
                   for t in range(2) for replica, tag in ((a, "a"), (b, "b"))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        b.catch_up()
        a.catch_up()
        for replica in (a, b):
            held = held_devices(list(replica.allocations()), reported)
            assert sum(n for (_, product), n in held.items() if product == "1520") == len(placed)
        assert len(placed) == sum(p["count"] for ps in reported.values() for p in ps if p["product_id"] == "1520")
    finally:
        a.close()
        b.close()


def test_a_scheduler_reloaded_from_its_store_counts_the_devices_held(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/g.sqlite"
    config = Config.from_dict({**SECTIONS, "gantt": {"seed": 3}})
    a = Replica(open_store(url), config).start(follow=False)
    a.update_resource_stats("h0", host_stats(pci_stats=pools(gpu=1)))
    a.select_destinations(pci("gpu:1", "a"))
    b = Replica(open_store(url), config).start(follow=False)
    with pytest.raises(NoValidHost):
        b.select_destinations(pci("gpu:1", "b"))


def test_pool_sets_no_row_uses_are_forgotten() -> None:
    """Every claim leaves a new pool set (one device fewer); the interner is compacted to the sets in use, and the
    filter's verdicts (cached by code) follow the renumbering."""
    big = {"vcpus": 2000, "memory_mb": 1_000_000, "local_gb": 2000}
    sched = make_scheduler({"h0": {**big, "pci_stats": pools(vf=1500)}, "h1": {"pci_stats": pools(vf=1)}},
                           **SECTIONS)
    _, epoch = sched.table.pci_pools()
    for k in range(1100):
        assert sched.select_destinations(pci("vf:1", f"vm-{k}"))[0][0].host in ("h0", "h1")
    factor, later = sched.table.pci_pools()
    assert later > epoch and len(factor.values) < 1100
    assert {c.host for c in sched.candidates(pci("vf:300", "x"))} == {"h0"}
    assert not {c.host for c in sched.candidates(pci("vf:500", "x"))}  # 1,501 devices, 1,100 held
    held = sum(t.count for a in sched.table.allocations() for t in a.pci)
    assert held == 1100


def test_the_audit_finds_a_device_handed_out_twice(tmp_path: Path) -> None:
    pools_h0 = pools(gpu=1)
    gpu = {k: v for k, v in pools_h0[1].items() if k != "count"}
    with open_store(f"sqlite:///{tmp_path}/g.sqlite") as store:
        store.commit(Batch(reports=[HostReport.of("h0", host_stats(pci_stats=pools_h0))]))
        store.commit(Batch(allocations=[Allocation("a", "h0", "h0", {"VCPU": 1}, pci=[PciTaken(gpu, 1)])]))
        assert audit(store.snapshot()) == []
        # forced in without a compare (no claim does this): the one GPU twice
        store.commit(Batch(allocations=[Allocation("b", "h0", "h0", {"VCPU": 1}, pci=[PciTaken(gpu, 1)])]))
        [problem] = audit(store.snapshot())
        assert "h0/h0 PCI pool" in problem and "product_id=1db4" in problem and "2 devices held > 1" in problem


def test_a_report_with_two_pools_of_one_key_lends_both() -> None:
    # Claims name a pool by its key; what they hold of a key comes out of those pools in order, as Nova took them
    twin = {"vendor_id": "8086", "product_id": "1520", "numa_node": 0, "count": 1, "dev_type": "type-VF"}
    sched = make_scheduler({"h0": {"pci_stats": [twin, {**twin, "count": 2}]}}, **SECTIONS)
    for vm in ("a", "b", "c"):
        sched.select_destinations(pci("vf:1", vm))
    with pytest.raises(NoValidHost):
        sched.select_destinations(pci("vf:1", "d"))
    assert sched.table.pci_overbooked(0) == []  # three held of a key the two pools have three of


def test_a_claim_on_other_pools_lands_while_an_earlier_claims_pool_is_gone_from_the_report(tmp_path: Path) -> None:
    """Nova's test_pci_in_placement.PlacementPCIAllocationHealingTests.test_heal_multiple_allocations (which failed
    when the scheduler read the compute's row between two boots): the cells' row of a node lists no instances, so
    the first claim's devices still count in flight once the row shows them used (their pool gone). That
    over-count must not refuse a second claim that takes other pools: the commit checks the pools it takes."""
    url = f"sqlite:///{tmp_path}/g.sqlite"
    config = Config.from_dict({**SECTIONS, "gantt": {"seed": 3}})
    replica = Replica(open_store(url), config).start(follow=True)
    try:
        replica.update_resource_stats("h0", host_stats(pci_stats=pools(vf=4, gpu=2)))
        replica.select_destinations(pci("gpu:2", "a"))
        # the compute has claimed both GPUs: its row lists their pool empty, and no instances
        replica.update_resource_stats("h0", host_stats(pci_stats=pools(vf=4, gpu=0)))
        replica.select_destinations(pci("vf:1", "b"))
        assert {t.pool["product_id"] for t in replica.allocation("b").pci} == {"1520"}
        with pytest.raises(NoValidHost):  # the GPUs are gone, in the report and in the claim
            replica.select_destinations(pci("gpu:1", "c"))
    finally:
        replica.close()
