from __future__ import annotations

from tests.conftest import make_scheduler, passing, request


def test_num_instances_counts_reports_and_unconfirmed_placements() -> None:
    s = make_scheduler({"a": {"num_instances": 2}, "b": {"num_instances": 0}}, filters=["NumInstancesFilter"],
                       filter_scheduler={"max_instances_per_host": 2})
    assert passing(s, request()) == {"b"}
    s.select_destinations(request(instance_uuids=["x"]))
    assert passing(s, request()) == {"b"}  # 1 placed, not yet reported
    # once b reports x it is counted once, not twice
    s.update_resource_stats("b", {"instances": ["x"]})
    assert passing(s, request()) == {"b"}
    s.select_destinations(request(instance_uuids=["y"]))
    assert passing(s, request()) == set()


def test_a_multi_instance_request_sees_its_own_placements() -> None:
    s = make_scheduler({"a": {}, "b": {}}, filters=["NumInstancesFilter"],
                       filter_scheduler={"max_instances_per_host": 2})
    answer = s.select_destinations(request(num_instances=4))
    assert sorted(sel[0].host for sel in answer) == ["a", "a", "b", "b"]


def test_aggregate_num_instances() -> None:
    s = make_scheduler({"a": {"num_instances": 4}, "b": {"num_instances": 4}, "c": {"num_instances": 4}},
                       filters=["AggregateNumInstancesFilter"], filter_scheduler={"max_instances_per_host": 5})
    s.update_aggregate({"id": 1, "hosts": ["a"], "metadata": {"max_instances_per_host": "10"}})
    s.update_aggregate({"id": 2, "hosts": ["a", "b"], "metadata": {"max_instances_per_host": "4"}})
    assert passing(s, request()) == {"c"}  # a: lowest of 10 and 4
    s.delete_aggregate(2)
    assert passing(s, request()) == {"a", "b", "c"}  # b is in no aggregate again: the global 5
