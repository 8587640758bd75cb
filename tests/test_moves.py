"""Moves (design §6): resize, cold and live migration, evacuation — decided anew, source held until confirm/revert.

Regression for the issue "Safe under concurrency, reloads and moves": asking again for an instance that holds an
allocation returned that allocation whatever ``ignore_hosts``, ``requested_destination`` or a new flavor said.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from gantt.compute.scheduler import Scheduler
from gantt.model import Conflict, NotFound, NoValidHost
from gantt.replication.replica import Replica
from gantt.store.base import Store
from gantt.store.urls import open_store
from tests.conftest import FakeClock, host_stats, make_scheduler, request

FILTERS = ["ComputeFilter", "ServerGroupAntiAffinityFilter"]


def _placed(sched: Scheduler | Replica, consumer: str, host: str, vcpus: int = 2) -> None:
    [[first, *_]] = sched.select_destinations(request(vcpus=vcpus, instance_uuids=[consumer], force_hosts=[host]))
    assert first.host == host


def _move(consumer: str, migration: str, vcpus: int = 2, **fields: Any) -> dict[str, Any]:
    return request(vcpus=vcpus, instance_uuids=[consumer], migration_uuid=migration, **fields)


def _in_use(sched: Scheduler, host: str) -> float:
    vcpu = sched.host(host)["inventories"]["VCPU"]
    return float(vcpu["capacity"] - vcpu["free"])


def test_a_repeat_that_asks_for_something_else_is_refused_not_ignored() -> None:
    sched = make_scheduler(3, filters=FILTERS)
    _placed(sched, "vm", "h0")
    same = request(vcpus=2, instance_uuids=["vm"], force_hosts=["h0"])
    assert sched.select_destinations(same)[0][0].host == "h0"  # a plain repeat: the booking
    for other in (request(vcpus=2, instance_uuids=["vm"], ignore_hosts=["h0"]),
                  request(vcpus=4, instance_uuids=["vm"]),
                  request(vcpus=2, instance_uuids=["vm"], requested_destination={"host": "h1"})):
        with pytest.raises(Conflict, match="migration_uuid"):
            sched.select_destinations(other)
    assert sched.allocation("vm").host == "h0"


def test_a_move_claims_the_destination_and_holds_the_source_until_confirm() -> None:
    sched = make_scheduler(3, filters=FILTERS)
    _placed(sched, "vm", "h0")
    [[dest, *_]] = sched.select_destinations(_move("vm", "mig", vcpus=4, ignore_hosts=["h1"]))
    assert dest.host == "h2" and dest.consumer_uuid == "vm" and dest.allocation["VCPU"] == 4
    source = sched.allocation("mig")
    assert (source.host, source.resources["VCPU"], source.instance_uuid) == ("h0", 2, "vm")
    assert _in_use(sched, "h0") == 2 and _in_use(sched, "h2") == 4
    # a repeat of the move (a lost answer) answers where the instance went, claims nothing more
    assert sched.select_destinations(_move("vm", "mig", vcpus=4, ignore_hosts=["h1"]))[0][0].host == "h2"
    assert _in_use(sched, "h1") == 0
    dropped = sched.confirm_move("mig")
    assert (dropped.consumer_uuid, dropped.host, dropped.instance_uuid) == ("mig", "h0", "vm")
    assert sched.allocation("vm").host == "h2"
    assert _in_use(sched, "h0") == 0 and _in_use(sched, "h2") == 4
    with pytest.raises(NotFound):
        sched.allocation("mig")
    with pytest.raises(NotFound):
        sched.revert_move("mig")


def test_revert_gives_the_source_back_and_frees_the_destination() -> None:
    sched = make_scheduler(2, filters=FILTERS)
    _placed(sched, "vm", "h0")
    assert sched.select_destinations(_move("vm", "mig", vcpus=6))[0][0].host == "h1"
    restored = sched.revert_move("mig")
    assert (restored.host, restored.resources["VCPU"], restored.migration_uuid) == ("h0", 2, None)
    assert sched.allocation("vm") == restored
    assert _in_use(sched, "h0") == 2 and _in_use(sched, "h1") == 0
    with pytest.raises(NotFound):
        sched.confirm_move("mig")


def test_move_errors_are_clear() -> None:
    sched = make_scheduler(2, filters=FILTERS)
    with pytest.raises(Conflict, match="holds no allocation"):
        sched.select_destinations(_move("ghost", "mig"))
    _placed(sched, "vm", "h0")
    _placed(sched, "other", "h0")
    sched.select_destinations(_move("vm", "mig"))
    with pytest.raises(Conflict, match="not an instance"):  # a migration's consumer cannot itself be moved
        sched.select_destinations(_move("mig", "mig2"))
    with pytest.raises(Conflict, match="another"):  # a migration UUID already moving another instance
        sched.select_destinations(_move("other", "mig"))
    with pytest.raises(Conflict, match="not a migration"):
        sched.confirm_move("other")
    with pytest.raises(NotFound):
        sched.confirm_move("never")
    with pytest.raises(ValueError):
        sched.select_destinations(request(instance_uuids=["a", "b"], migration_uuid="m"))
    with pytest.raises(ValueError):
        sched.select_destinations(request(instance_uuids=["a"], migration_uuid="a"))


def test_allow_resize_to_same_host() -> None:
    """Off (Nova's default): the source host is never a destination. On: it is, and the source's resources stay
    held beside the new ones until confirm (as Nova's migration allocations on one provider)."""
    hosts = {"h0": {"vcpus": 8}, "h1": {"vcpus": 1}}
    sched = make_scheduler(hosts, filters=FILTERS)
    _placed(sched, "vm", "h0")
    with pytest.raises(NoValidHost) as err:
        sched.select_destinations(_move("vm", "mig", vcpus=4))
    steps = {s.name: s.removed for s in err.value.explanation.steps}  # type: ignore[union-attr]
    assert steps["allow_resize_to_same_host"] == 1
    assert sched.allocation("vm").host == "h0"
    with pytest.raises(NotFound):
        sched.allocation("mig")

    same = make_scheduler(hosts, filters=FILTERS, DEFAULT={"allow_resize_to_same_host": True})
    _placed(same, "vm", "h0")
    assert same.select_destinations(_move("vm", "mig", vcpus=4))[0][0].host == "h0"
    assert _in_use(same, "h0") == 6  # 2 held by the migration + 4 for the instance, until confirm
    with pytest.raises(NoValidHost):  # 6 + 4 > 8: both stay counted
        same.select_destinations(_move("vm", "mig2", vcpus=4))
    same.confirm_move("mig")
    assert _in_use(same, "h0") == 4


def test_a_host_listing_the_instance_confirms_the_migration_and_never_expires_it() -> None:
    """The source host lists the instance, not the migration: that listing is what keeps the migration's hold
    counted once (in the report) and what stops it from expiring as an unlisted claim."""
    clock = FakeClock()
    sched = make_scheduler({"h0": {}, "h1": {}}, filters=FILTERS, clock=clock, gantt={"claim_timeout": 60})
    _placed(sched, "vm", "h0")
    sched.update_resource_stats("h0", host_stats(vcpus_used=2, instances=["vm"]))
    assert sched.allocation("vm").confirmed
    sched.select_destinations(_move("vm", "mig"))
    assert sched.allocation("mig").confirmed and _in_use(sched, "h0") == 2
    clock.advance(3600)
    sched.update_resource_stats("h0", host_stats(vcpus_used=2, instances=["vm"]))
    assert sched.allocation("mig").host == "h0"  # not expired
    sched.update_resource_stats("h1", host_stats(vcpus_used=2, instances=["vm"]))
    assert sched.allocation("vm").confirmed and _in_use(sched, "h1") == 2


def test_a_resize_on_the_same_host_counts_in_flight_until_a_newer_report() -> None:
    clock = FakeClock()
    sched = make_scheduler({"h0": {"vcpus": 8}}, filters=FILTERS, clock=clock,
                           DEFAULT={"allow_resize_to_same_host": True})
    _placed(sched, "vm", "h0")
    sched.update_resource_stats("h0", host_stats(vcpus=8, vcpus_used=2, instances=["vm"]))
    clock.advance(1)
    sched.select_destinations(_move("vm", "mig", vcpus=4))
    assert not sched.allocation("vm").confirmed  # listed already, but the listing predates the resize
    assert _in_use(sched, "h0") == 6
    clock.advance(1)
    sched.update_resource_stats("h0", host_stats(vcpus=8, vcpus_used=6, instances=["vm"]))
    assert sched.allocation("vm").confirmed and _in_use(sched, "h0") == 6


def test_a_new_claim_for_an_instance_its_node_lists_counts_in_flight_until_a_newer_report() -> None:
    """Nova's way of a same-host resize: the conductor moves the instance's allocation to the migration's consumer
    (through Placement) before it asks, so the scheduler sees a fresh claim for an instance its node lists already.
    The report lists it with its old size only: the new claim must stay counted beside it, not pass as reported."""
    clock = FakeClock()
    sched = make_scheduler({"h0": {"vcpus": 8}}, filters=FILTERS, clock=clock)
    _placed(sched, "vm", "h0")
    sched.update_resource_stats("h0", host_stats(vcpus=8, vcpus_used=2, instances=["vm"]))
    assert sched.allocation("vm").confirmed
    sched.release("vm")  # as moved to the migration's consumer, which the report already counts (2)
    clock.advance(1)
    [[first]] = sched.select_destinations(request(vcpus=4, instance_uuids=["vm"]))
    assert first.host == "h0"
    assert not sched.allocation("vm").confirmed
    assert _in_use(sched, "h0") == 6  # the report's 2 and the new 4
    with pytest.raises(NoValidHost):  # 6 + 4 > 8
        sched.select_destinations(request(vcpus=4, instance_uuids=["other"]))
    clock.advance(1)
    sched.update_resource_stats("h0", host_stats(vcpus=8, vcpus_used=6, instances=["vm"]))
    assert sched.allocation("vm").confirmed and _in_use(sched, "h0") == 6


def test_anti_affinity_holds_through_a_move() -> None:
    sched = make_scheduler(4, filters=FILTERS)
    group = {"uuid": "g", "policy": "anti-affinity"}
    for i in range(2):
        sched.select_destinations(request(vcpus=2, instance_uuids=[f"m{i}"], instance_group=group))
    hosts = {sched.allocation(f"m{i}").host for i in range(2)}
    assert len(hosts) == 2
    [[dest, *_]] = sched.select_destinations(_move("m0", "mig", instance_group=group))
    assert dest.host not in hosts  # not onto the other member, not back onto its own source
    # while the move is open, the source still counts as a member's host: a new member avoids it
    sched.select_destinations(request(vcpus=2, instance_uuids=["m2"], instance_group=group))
    taken = [sched.allocation(c).host for c in ("m0", "m1", "m2", "mig")]
    assert len(set(taken)) == 4


def _evacuate(consumer: str, migration: str, source: str, **fields: Any) -> dict[str, Any]:
    """As Nova's conductor asks for an evacuation: its source host ignored (it is down)."""
    return _move(consumer, migration, ignore_hosts=[source], evacuation=True, **fields)


def _parts(sched: Scheduler | Replica, consumer: str) -> list[tuple[str, int]]:
    return [(key[0], resources["VCPU"]) for key, resources in sched.allocation(consumer).parts()]


def test_an_evacuation_books_the_destination_beside_the_source_in_the_instances_allocation() -> None:
    """Nova's scheduler books an evacuation in the instance's own allocation, on its source and its destination
    (the report client's ``_move_operation_alloc_request``); the source's compute drops its part when it comes
    back up, the destination's compute its own if the rebuild fails there (both through Placement, rewriting the
    instance's allocations). Regression: Gantt held the source under the migration's UUID, which no compute ever
    drops: the source kept the usage for good, and a failed rebuild left the instance nothing on its source."""
    sched = make_scheduler(3, filters=FILTERS)
    _placed(sched, "vm", "h0")
    [[dest, *_]] = sched.select_destinations(_evacuate("vm", "mig", "h0"))
    assert dest.host in ("h1", "h2") and dest.consumer_uuid == "vm" and dest.allocation == {
        "VCPU": 2, "MEMORY_MB": 512, "DISK_GB": 1}
    assert _parts(sched, "vm") == [(dest.host, 2), ("h0", 2)]  # where it runs now first
    with pytest.raises(NotFound):
        sched.allocation("mig")  # the migration holds nothing
    assert _in_use(sched, "h0") == 2 and _in_use(sched, dest.host) == 2
    # a repeat (a lost answer) answers where the instance went and claims nothing more
    assert sched.select_destinations(_evacuate("vm", "mig", "h0"))[0][0].host == dest.host
    assert [_in_use(sched, h) for h in ("h0", "h1", "h2")].count(0) == 1
    sched.release("vm")  # the instance deleted: both parts go
    assert [_in_use(sched, h) for h in ("h0", "h1", "h2")] == [0, 0, 0]
    with pytest.raises(ValueError, match="migration_uuid"):
        sched.select_destinations(request(instance_uuids=["vm"], evacuation=True))


def _two_replicas_with_vm_on_h0(store: Store, other: Store) -> tuple[Replica, Replica]:
    """Two replicas of one store (``other``: the same, or another handle on it), four hosts, "vm" placed on h0."""
    a = Replica(store, _config()).start(follow=False)
    b = Replica(other, _config()).start(follow=False)
    for name in ("h0", "h1", "h2", "h3"):
        a.update_resource_stats(name, host_stats(vcpus=4))
    _placed(a, "vm", "h0")
    b.catch_up()
    return a, b


def _twins(a: Replica, b: Replica, spec: dict[str, Any]) -> list[str]:
    """The same request sent to both replicas at once: both answer it, with one host other than h0."""
    answers: list[str] = []
    errors: list[BaseException] = []

    def ask(replica: Replica) -> None:
        try:
            answers.append(replica.select_destinations(spec)[0][0].host)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=ask, args=(r,)) for r in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(set(answers)) == 1 and answers[0] != "h0"
    return answers


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_an_evacuation_through_replicas_on_one_store(backend: str, tmp_path: Path) -> None:
    """The doubled allocation is one record in the store, replacing the instance's (one commit); a twin request
    on another replica answers the same decision (the loser's local claim rolled back to the source it held), and
    a replica started afterwards counts both parts."""
    url = "memory://" if backend == "memory" else f"sqlite:///{tmp_path}/g.sqlite"
    store = open_store(url)
    a, b = _two_replicas_with_vm_on_h0(store, store if backend == "memory" else open_store(url))
    answers = _twins(a, b, _evacuate("vm", "mig", "h0"))
    [held] = store.snapshot().allocations
    assert [(key[0], r["VCPU"]) for key, r in held.parts()] == [(answers[0], 2), ("h0", 2)]
    for replica in (a, b, Replica(store, _config()).start(follow=False)):
        replica.catch_up()
        assert _parts(replica, "vm") == [(answers[0], 2), ("h0", 2)]
        assert [_in_use(replica.scheduler, h) for h in ("h0", "h1", "h2", "h3")].count(2) == 2


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_moves_through_replicas_on_one_store(backend: str, tmp_path: Path) -> None:
    url = "memory://" if backend == "memory" else f"sqlite:///{tmp_path}/g.sqlite"
    store = open_store(url)
    moves_through_two_replicas(store, store if backend == "memory" else open_store(url))


def moves_through_two_replicas(store: Store, other: Store) -> None:
    """Two replicas (``other``: the same store, or another handle on it): twin moves, then confirm racing
    revert. Also run on etcd (tests/etcd/test_replicas.py)."""
    a, b = _two_replicas_with_vm_on_h0(store, other)
    answers = _twins(a, b, _move("vm", "mig"))  # the same move sent to both at once: one decision, both answer it
    snap = store.snapshot()
    held = {x.consumer_uuid: x.host for x in snap.allocations}
    assert held == {"vm": answers[0], "mig": "h0"}
    # the feed moved the usage revision of the node the instance left: a claim there from b still lands
    b.catch_up()
    assert b.node_revisions == {(nr.host, nr.node): nr.revision for nr in snap.node_revisions}
    # confirm on one, revert on the other: exactly one lands
    outcomes: list[str] = []

    def settle(replica: Replica, how: str) -> None:
        try:
            getattr(replica, f"{how}_move")("mig")
            outcomes.append(how)
        except (NotFound, Conflict):
            outcomes.append("refused")

    threads = [threading.Thread(target=settle, args=(a, "confirm")), threading.Thread(target=settle,
                                                                                       args=(b, "revert"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) in (["confirm", "refused"], ["refused", "revert"])
    final = {x.consumer_uuid: x.host for x in store.snapshot().allocations}
    assert final == ({"vm": answers[0]} if "confirm" in outcomes else {"vm": "h0"})
    for replica in (a, b):
        replica.catch_up()
        assert {x.consumer_uuid: x.host for x in replica.table.allocations()} == final
        fresh = Replica(store, _config()).start(follow=False)
        assert fresh.node_revisions == replica.node_revisions


def _config() -> Any:
    from gantt.config import Config

    return Config.from_dict({"filter_scheduler": {"enabled_filters": FILTERS},
                             "DEFAULT": {"service_down_time": 86400}, "gantt": {"seed": 3}})
