from __future__ import annotations

import pytest

from gantt import InvalidRequest, NoValidHost
from tests.conftest import make_scheduler, passing, request


def test_same_host_and_different_host() -> None:
    s = make_scheduler(4, filters=["SameHostFilter", "DifferentHostFilter"])
    s.update_instance_info("h1", ["vm-1"])
    s.update_instance_info("h2", ["vm-2"])
    assert passing(s, request(scheduler_hints={"same_host": ["vm-1", "vm-2"]})) == {"h1", "h2"}
    assert passing(s, request(scheduler_hints={"same_host": "vm-1"})) == {"h1"}
    assert passing(s, request(scheduler_hints={"same_host": ["unknown"]})) == set()
    assert passing(s, request(scheduler_hints={"different_host": ["vm-1", "vm-2"]})) == {"h0", "h3"}
    assert passing(s, request()) == {"h0", "h1", "h2", "h3"}


def test_same_host_covers_every_node_of_the_host() -> None:
    s = make_scheduler({}, filters=["SameHostFilter"])
    for node in ("n1", "n2"):
        s.update_resource_stats(["ironic", node], {"vcpus": 4, "memory_mb": 4096, "local_gb": 10})
    s.update_resource_stats("other", {"vcpus": 4, "memory_mb": 4096, "local_gb": 10})
    s.update_instance_info("ironic", ["vm-1"])
    assert passing(s, request(scheduler_hints={"same_host": ["vm-1"]})) == {"n1", "n2"}


def group(policy: str, **fields: object) -> dict:  # type: ignore[type-arg]
    return {"uuid": "g1", "policy": policy, **fields}


def test_affinity_follows_the_group_and_the_first_instance_of_a_request() -> None:
    s = make_scheduler(4, filters=["ServerGroupAffinityFilter"])
    assert passing(s, request(instance_group=group("affinity", hosts=["h2"]))) == {"h2"}
    answer = s.select_destinations(request(num_instances=3, instance_group=group("affinity")))
    assert len({sel[0].host for sel in answer}) == 1


def test_anti_affinity_spreads_a_multi_instance_request() -> None:
    s = make_scheduler(3, filters=["ServerGroupAntiAffinityFilter"])
    answer = s.select_destinations(request(num_instances=3, instance_group=group("anti-affinity")))
    assert sorted(sel[0].host for sel in answer) == ["h0", "h1", "h2"]
    with pytest.raises(NoValidHost) as err:
        s.select_destinations(request(num_instances=4, instance_group=group("anti-affinity", uuid="g2"),
                                      instance_uuids=["a", "b", "c", "d"]))
    assert "instance 4 of 4" in str(err.value)
    assert "ServerGroupAntiAffinityFilter removed 3" in str(err.value)


def test_members_claimed_under_the_group_count_even_when_the_request_does_not_list_them() -> None:
    # Nova's request lists the group's members as its database knew them; one placed an instant ago by another
    # request (or scheduler) is known here by its claim.
    s = make_scheduler(3, filters=["ServerGroupAntiAffinityFilter", "ServerGroupAffinityFilter"])
    [[first, *_]] = s.select_destinations(request(instance_group=group("anti-affinity"), instance_uuids=["m1"]))
    assert first.host not in passing(s, request(instance_group=group("anti-affinity"), instance_uuids=["m2"]))
    [[lead, *_]] = s.select_destinations(request(instance_group=group("affinity", uuid="g3"), instance_uuids=["a1"]))
    assert passing(s, request(instance_group=group("affinity", uuid="g3"), instance_uuids=["a2"])) == {lead.host}
    s.release("m1")
    assert first.host in passing(s, request(instance_group=group("anti-affinity"), instance_uuids=["m2"]))


def test_anti_affinity_counts_members_and_honours_max_server_per_host() -> None:
    s = make_scheduler(3, filters=["ServerGroupAntiAffinityFilter"])
    s.update_instance_info("h0", ["m1", "m2"])
    s.update_instance_info("h1", ["m3", "stranger"])
    spec = request(instance_group=group("anti-affinity", members=["m1", "m2", "m3"]))
    assert passing(s, spec) == {"h2"}
    spec = request(instance_group=group("anti-affinity", members=["m1", "m2", "m3"], rules={"max_server_per_host": 2}))
    assert passing(s, spec) == {"h1", "h2"}
    # the group's hosts play no part: only members among a host's instances count (Nova's filter)
    assert passing(s, request(instance_group=group("anti-affinity", hosts=["h2"]))) == {"h0", "h1", "h2"}
    # the instance being moved does not block its own host
    spec = request(instance_uuids=["m1"], instance_group=group("anti-affinity", members=["m1", "m2", "m3"]))
    assert passing(s, spec) == {"h0", "h2"}


def test_an_instance_listed_by_instance_info_stays_on_its_host_when_its_allocation_goes() -> None:
    """A resize: Nova's conductor moves the instance's allocation to the migration's consumer before it asks, while
    the instance still runs on its source, as the host's instance info says. Its own host must still pass
    anti-affinity (Nova: ``spec_obj.instance_uuid in host_state.instances``), or a resize to the same host in an
    anti-affinity group is refused (Nova's ServerGroupTestV21.test_resize_to_same_host_with_anti_affinity)."""
    s = make_scheduler(2, filters=["ServerGroupAntiAffinityFilter"])
    for member, host in (("m0", "h0"), ("m1", "h1")):
        s.select_destinations(request(instance_uuids=[member], force_hosts=[host]))
        s.update_instance_info(host, [member])
    s.release("m1")  # its allocation is the migration's now
    spec = request(instance_uuids=["m1"], instance_group=group("anti-affinity", members=["m0", "m1"],
                                                               hosts=["h0", "h1"]))
    assert passing(s, spec) == {"h1"}
    s.delete_instance_info("h1", "m1")  # gone from the host (deleted, or moved away and confirmed)
    assert passing(s, spec) == {"h1"}  # h1 runs no member now, whatever the group's hosts still say


def test_anti_affinity_counts_members_on_a_host_not_the_groups_hosts() -> None:
    """Nova's ServerGroupAntiAffinityFilter counts the group's members among the host's instances; the group's
    ``hosts`` (Nova's InstanceGroup.get_hosts when the request spec was made) may name a host a member has left
    since (moved, evacuated, deleted): it passes. A member the table knows runs on a host the list omits counts."""
    s = make_scheduler(4, filters=["ServerGroupAntiAffinityFilter"])
    s.update_instance_info("h0", ["m1"])
    s.update_instance_info("h1", ["stranger"])
    s.update_instance_info("h3", ["m2"])  # moved here after the group's hosts were read
    spec = request(instance_group=group("anti-affinity", members=["m1", "m2"], hosts=["h0", "h1", "h2"]))
    assert passing(s, spec) == {"h1", "h2"}
    spec = request(instance_group=group("anti-affinity", members=["m1", "m2"], hosts=["h0", "h1", "h2"],
                                        rules={"max_server_per_host": 2}))
    assert passing(s, spec) == {"h0", "h1", "h2", "h3"}


def test_anti_affinity_with_max_two_packs_two_per_host() -> None:
    s = make_scheduler(2, filters=["ServerGroupAntiAffinityFilter"])
    answer = s.select_destinations(request(num_instances=4,
                                           instance_group=group("anti-affinity", rules={"max_server_per_host": 2})))
    hosts = [sel[0].host for sel in answer]
    assert sorted(hosts) == ["h0", "h0", "h1", "h1"]


def test_other_policies_are_not_these_filters_business() -> None:
    s = make_scheduler(2, filters=["ServerGroupAffinityFilter", "ServerGroupAntiAffinityFilter"])
    s.update_instance_info("h0", ["m1"])
    spec = request(instance_group=group("soft-anti-affinity", members=["m1"], hosts=["h0"]))
    assert passing(s, spec) == {"h0", "h1"}


def test_simple_cidr_affinity() -> None:
    s = make_scheduler({"a": {"host_ip": "10.1.2.3"}, "b": {"host_ip": "10.1.3.4"}, "c": {"host_ip": "fd00::5"},
                        "d": {}}, filters=["SimpleCIDRAffinityFilter"])
    assert passing(s, request(scheduler_hints={"build_near_host_ip": "10.1.2.200"})) == {"a"}  # default /24
    assert passing(s, request(scheduler_hints={"build_near_host_ip": "10.1.2.200", "cidr": "/16"})) == {"a", "b"}
    assert passing(s, request(scheduler_hints={"build_near_host_ip": "10.1.2.200", "cidr": "16"})) == {"a", "b"}
    assert passing(s, request(scheduler_hints={"build_near_host_ip": "fd00::1", "cidr": "/64"})) == {"c"}
    assert passing(s, request()) == {"a", "b", "c", "d"}


@pytest.mark.parametrize(("hints", "field"), [
    ({"build_near_host_ip": "10.1.2.200", "cidr": "/abc"}, "$.scheduler_hints.cidr"),
    ({"build_near_host_ip": "10.1.2.200", "cidr": "/33"}, "$.scheduler_hints.cidr"),
    ({"build_near_host_ip": "not-an-ip"}, "$.scheduler_hints.build_near_host_ip"),
])
def test_bad_cidr_hints_name_the_field(hints: dict, field: str) -> None:  # type: ignore[type-arg]
    s = make_scheduler(1, filters=["SimpleCIDRAffinityFilter"])
    with pytest.raises(InvalidRequest) as err:
        s.select_destinations(request(scheduler_hints=hints))
    assert err.value.field == field
