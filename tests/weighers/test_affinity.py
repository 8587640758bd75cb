"""ServerGroupSoftAffinityWeigher and ServerGroupSoftAntiAffinityWeigher."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from gantt.model import InvalidRequest
from tests.conftest import make_scheduler, request
from tests.weighers.helpers import ranking, weights

F = ["ComputeFilter"]
SOFT = ["ServerGroupSoftAffinityWeigher", "ServerGroupSoftAntiAffinityWeigher"]


def group(policy: str, members: list[str] | None = None, hosts: list[str] | None = None) -> dict[str, Any]:
    return {"uuid": "g-1", "policy": policy, "members": members or [], "hosts": hosts or []}


def test_soft_affinity_prefers_nodes_running_members() -> None:
    sched = make_scheduler(4, filters=F, weighers=SOFT)
    sched.update_instance_info("h2", ["m1", "m2"])
    sched.update_instance_info("h3", ["m3", "other"])
    spec = request(instance_group=group("soft-affinity", ["m1", "m2", "m3"], ["h2", "h3"]))
    assert ranking(sched, spec)[:2] == ["h2", "h3"]
    w = weights(sched, spec, "ServerGroupSoftAffinityWeigher")
    assert w == {"h2": pytest.approx(1.0), "h3": pytest.approx(0.5), "h0": 0.0, "h1": 0.0}
    # The anti-affinity weigher has nothing to say about a soft-affinity group.
    assert set(weights(sched, spec, "ServerGroupSoftAntiAffinityWeigher").values()) == {0.0}


def test_soft_anti_affinity_prefers_nodes_with_fewest_members() -> None:
    sched = make_scheduler(3, filters=F, weighers=SOFT)
    sched.update_instance_info("h0", ["m1", "m2"])
    sched.update_instance_info("h1", ["m3"])
    spec = request(instance_group=group("soft-anti-affinity", ["m1", "m2", "m3"]))
    assert ranking(sched, spec) == ["h2", "h1", "h0"]
    w = weights(sched, spec, "ServerGroupSoftAntiAffinityWeigher")
    assert w == {"h2": pytest.approx(1.0), "h1": pytest.approx(0.5), "h0": 0.0}


def test_soft_affinity_packs_a_multi_instance_request_against_the_ram_weigher() -> None:
    sched = make_scheduler(4, filters=F, weighers=[*SOFT, "RAMWeigher"],
                           filter_scheduler={"soft_affinity_weight_multiplier": 2.0})
    answer = sched.select_destinations(request(memory_mb=4096, num_instances=3,
                                               instance_group=group("soft-affinity")))
    assert len({sel[0].host for sel in answer}) == 1


def test_soft_anti_affinity_spreads_a_multi_instance_request_then_doubles_up_evenly() -> None:
    sched = make_scheduler(3, filters=F, weighers=[*SOFT, "RAMWeigher"],
                           filter_scheduler={"ram_weight_multiplier": -0.5})  # RAM alone would stack them
    answer = sched.select_destinations(request(num_instances=6, instance_group=group("soft-anti-affinity")))
    assert sorted(Counter(sel[0].host for sel in answer).values()) == [2, 2, 2]


@pytest.mark.parametrize("option", ["soft_affinity_weight_multiplier", "soft_anti_affinity_weight_multiplier"])
def test_a_negative_soft_affinity_multiplier_is_refused_as_nova_refuses_it(option: str) -> None:
    # Nova 34 declares both options with min=0.0: oslo.config refuses a negative value at start.
    with pytest.raises(InvalidRequest, match=option):
        make_scheduler(3, filters=F, weighers=SOFT, filter_scheduler={option: -1.0})


def test_members_on_other_nodes_of_a_multi_node_host_do_not_count_for_this_node() -> None:
    sched = make_scheduler({}, filters=F, weighers=SOFT)
    for node in ("n1", "n2"):
        sched.update_resource_stats(["ironic", node], {"vcpus": 4, "memory_mb": 4096, "local_gb": 10,
                                                       "instances": ["m1"] if node == "n2" else []})
    spec = request(memory_mb=64, instance_group=group("soft-affinity", ["m1"]))
    assert weights(sched, spec, "ServerGroupSoftAffinityWeigher") == {"n2": pytest.approx(1.0), "n1": 0.0}
