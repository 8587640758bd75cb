from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

from gantt import InvalidRequest, NoValidHost
from gantt.compute.order import Ties
from tests.conftest import FakeClock, make_scheduler, passing, request

FILTERS = ["ComputeFilter"]


def test_places_on_a_host_and_consumes_it() -> None:
    sched = make_scheduler(2, filters=FILTERS)
    [[first, *alternates]] = sched.select_destinations(request(vcpus=16))
    assert first.consumer_uuid and first.allocation == {"VCPU": 16, "MEMORY_MB": 512, "DISK_GB": 1}
    assert [a.host for a in alternates] == ["h1" if first.host == "h0" else "h0"]
    [[second, *_]] = sched.select_destinations(request(vcpus=16))
    assert second.host != first.host
    with pytest.raises(NoValidHost) as err:
        sched.select_destinations(request(vcpus=1))
    explanation = err.value.explanation
    assert explanation is not None and explanation.reason == "ResourceFilter"
    assert explanation.nearest_miss[0].resource_class == "VCPU"
    assert explanation.nearest_miss[0].short_by == 1


def test_bad_request_names_the_field() -> None:
    sched = make_scheduler(1, filters=FILTERS)
    with pytest.raises(InvalidRequest) as err:
        sched.select_destinations({"flavor": {"vcpus": -1}})
    assert err.value.field == "$.flavor.vcpus"
    with pytest.raises(InvalidRequest) as err:
        sched.select_destinations({"flavor": {"vcpus": 1, "memory_mb": "lots"}})
    assert err.value.field == "$.flavor.memory_mb"


def test_idempotent_claim_per_consumer() -> None:
    sched = make_scheduler(3, filters=FILTERS)
    spec = request(vcpus=4, instance_uuids=["c-1"])
    [[a, *_]] = sched.select_destinations(spec)
    [[b, *_]] = sched.select_destinations(spec)
    assert (a.host, a.consumer_uuid) == (b.host, b.consumer_uuid)
    assert len(sched.table.allocations()) == 1
    assert sched.host(a.host)["inventories"]["VCPU"]["in_flight"] == 4


def test_multi_instance_is_all_or_nothing() -> None:
    sched = make_scheduler(2, filters=FILTERS)
    with pytest.raises(NoValidHost) as err:
        sched.select_destinations(request(vcpus=10, num_instances=3))
    assert "instance 3 of 3" in str(err.value)
    assert not sched.table.allocations()
    for host in ("h0", "h1"):
        assert sched.host(host)["inventories"]["VCPU"]["free"] == 16


def test_report_confirms_allocation_and_stops_counting_it_twice() -> None:
    sched = make_scheduler(1, filters=FILTERS)
    sched.select_destinations(request(vcpus=4, instance_uuids=["vm-1"]))
    assert sched.host("h0")["inventories"]["VCPU"]["free"] == 12
    # The host now runs it and reports the usage: in-flight must not be added on top.
    sched.update_resource_stats("h0", {"vcpus_used": 4, "instances": ["vm-1"]})
    inv = sched.host("h0")["inventories"]["VCPU"]
    assert (inv["reported_used"], inv["in_flight"], inv["free"]) == (4, 0, 12)
    assert sched.allocation("vm-1").confirmed


def test_unconfirmed_claim_expires_on_a_reporting_host() -> None:
    clock = FakeClock()
    sched = make_scheduler(1, filters=FILTERS, clock=clock, gantt={"claim_timeout": 300})
    sched.select_destinations(request(vcpus=4, instance_uuids=["vm-1"]))
    clock.advance(301)
    sched.update_resource_stats("h0", {"vcpus_used": 0, "instances": []})
    assert sched.table.allocation("vm-1") is None
    assert sched.table.expired_claims == 1
    assert sched.host("h0")["inventories"]["VCPU"]["free"] == 16


def test_down_host_is_filtered_and_multi_node_hosts_are_rows() -> None:
    clock = FakeClock()
    sched = make_scheduler(1, filters=FILTERS, clock=clock)
    clock.advance(61)
    sched.update_resource_stats(["ironic", "node-a"], {"vcpus": 4, "memory_mb": 4096, "local_gb": 10})
    sched.update_resource_stats(["ironic", "node-b"], {"vcpus": 4, "memory_mb": 4096, "local_gb": 10})
    assert passing(sched, request()) == {"node-a", "node-b"}
    sched.delete_host("ironic", "node-a")
    assert passing(sched, request()) == {"node-b"}


def test_a_node_added_after_a_removal_inherits_nothing() -> None:
    sched = make_scheduler({"a": {}, "b": {}}, filters=FILTERS)
    sched.update_resource_stats("b", {"service": {"disabled": True}, "traits": ["CUSTOM_X"], "num_io_ops": 7,
                                      "metrics": [{"name": "cpu.percent", "value": 90.0}],
                                      "inventories": {"CUSTOM_GPU": {"total": 4}}})
    sched.delete_host("a")  # b moves into a's row; b's old row is freed
    sched.delete_host("b")  # and now every row is freed
    sched.update_resource_stats("c", {"vcpus": 2, "memory_mb": 1024, "local_gb": 10})
    sched.update_resource_stats("d", {"vcpus": 2, "memory_mb": 1024, "local_gb": 10})
    for name in ("c", "d"):
        host = sched.host(name)
        assert not host["disabled"] and host["traits"] == [] and host["num_io_ops"] == 0
        assert set(host["inventories"]) == {"VCPU", "MEMORY_MB", "DISK_GB"}
        row = sched.table.row(name)
        assert np.isnan(sched.table.metric("cpu.percent")[row])  # NaN: not reported
    assert passing(sched, request(vcpus=2)) == {"c", "d"}


@pytest.mark.parametrize("ties", [3, 6, 40, 300, 999, 1000])  # fewer than wanted, sparse (listed), dense, all
@pytest.mark.parametrize("known", [False, True])  # the best score given (the kept sum's block maxima) or found
def test_ties_are_drawn_uniformly_and_distinct(ties: int, known: bool) -> None:
    """A decision draws among the positions tied at the best score without listing them when they are many: each
    draw is still a set of distinct ties (all of them when fewer than wanted), and every tie is equally likely."""
    rng = random.Random(11)
    score = np.full(1000, 3.0)
    score[rng.sample(range(1000), 50)] = -np.inf  # rows that are not candidates
    tied = sorted(rng.sample(range(1000), ties))
    score[tied] = 7.5
    found = Ties(score, 7.5 if known else None)
    assert found.top == 7.5
    want = 6
    seen: Counter[int] = Counter()
    rounds = 60_000 // min(ties, want)
    for _ in range(rounds):
        drawn = found.sample(want, rng)
        assert len(set(drawn)) == len(drawn) == min(ties, want)
        seen.update(drawn)
    assert set(seen) <= set(tied)
    expected = rounds * min(ties, want) / ties
    # every tie drawn, none much more often than the others (a fixed seed: the figures do not move)
    assert len(seen) == ties if expected >= 20 else len(seen) > ties * 0.9
    assert max(seen.values()) < expected + 6 * expected ** 0.5 + 6
    assert sorted(found.shuffled(rng)) == tied


def test_shuffled_ties_are_drawn_among_the_best_hosts_only() -> None:
    # Rows 0-9 weigh less (less free RAM) than the ten tied best at rows 10-19: whichever of the ties a seed draws,
    # it is one of them, and different seeds spread over several (the draw is by position among the ties).
    hosts = {f"h{i:02d}": ({"memory_mb": 16384} if i < 10 else {}) for i in range(20)}
    chosen = set()
    for seed in range(12):
        sched = make_scheduler(hosts, weighers=["RAMWeigher"], gantt={"seed": seed},
                               filter_scheduler={"shuffle_best_same_weighed_hosts": True})
        [[first, *_]] = sched.select_destinations(request())
        chosen.add(first.host)
    assert chosen <= {f"h{i:02d}" for i in range(10, 20)}
    assert len(chosen) >= 4
