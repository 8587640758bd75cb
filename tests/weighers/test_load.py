"""IoOpsWeigher and NumInstancesWeigher."""

from __future__ import annotations

import pytest

from tests.conftest import make_scheduler, request
from tests.weighers.helpers import ranking, totals, weights

F = ["ComputeFilter"]


def test_io_ops_prefers_idle_nodes_by_default() -> None:
    sched = make_scheduler({"a": {"num_io_ops": 4}, "b": {"num_io_ops": 0}, "c": {"num_io_ops": 2}},
                           filters=F, weighers=["IoOpsWeigher"])
    assert ranking(sched, request()) == ["b", "c", "a"]
    w = weights(sched, request(), "IoOpsWeigher")
    assert w == {"a": pytest.approx(-1.0), "b": 0.0, "c": pytest.approx(-0.5)}


def test_io_ops_normalizes_from_zero_not_from_the_least_busy_candidate() -> None:
    # Nova's minval = 0: with loads 2 and 4 the weights are 0.5 and 1 (times -1), not 0 and 1.
    sched = make_scheduler({"a": {"num_io_ops": 4}, "b": {"num_io_ops": 2}}, filters=F,
                           weighers=["IoOpsWeigher"])
    assert weights(sched, request(), "IoOpsWeigher") == {"b": pytest.approx(-0.5), "a": pytest.approx(-1.0)}
    idle = make_scheduler(2, filters=F, weighers=["IoOpsWeigher"])
    assert set(totals(idle, request()).values()) == {0.0}


def test_io_ops_positive_multiplier_prefers_busy_nodes() -> None:
    sched = make_scheduler({"a": {"num_io_ops": 4}, "b": {"num_io_ops": 0}}, filters=F,
                           weighers=["IoOpsWeigher"], filter_scheduler={"io_ops_weight_multiplier": 2.0})
    assert ranking(sched, request()) == ["a", "b"]


def test_in_flight_builds_count_as_io_ops_and_instances_within_a_request() -> None:
    # Identical nodes: only the in-flight count separates them, so a 3-instance request spreads over 3 nodes.
    sched = make_scheduler(3, filters=F, weighers=["IoOpsWeigher"])
    answer = sched.select_destinations(request(num_instances=3))
    assert len({sel[0].host for sel in answer}) == 3
    packed = make_scheduler(3, filters=F, weighers=["NumInstancesWeigher"],
                            filter_scheduler={"num_instances_weight_multiplier": 1.0})
    answer = packed.select_destinations(request(num_instances=3))
    assert len({sel[0].host for sel in answer}) == 1


def test_confirmed_builds_stop_counting_as_in_flight() -> None:
    sched = make_scheduler({"a": {}, "b": {"num_instances": 1}}, filters=F, weighers=["NumInstancesWeigher"],
                           filter_scheduler={"num_instances_weight_multiplier": -1.0})
    [[sel, *_]] = sched.select_destinations(request(instance_uuids=["vm-1"]))
    assert sel.host == "a"
    assert sched.table.col("inflight_instances").tolist() == [1.0, 0.0]
    sched.update_resource_stats("a", {"num_instances": 1, "instances": ["vm-1"]})
    assert sched.table.col("inflight_instances").tolist() == [0.0, 0.0]
    assert set(totals(sched, request()).values()) == {0.0}


def test_num_instances_is_off_by_default_and_spreads_when_negative() -> None:
    hosts = {"a": {"num_instances": 10}, "b": {"num_instances": 2}, "c": {"num_instances": 5}}
    off = make_scheduler(hosts, filters=F, weighers=["NumInstancesWeigher"])
    assert set(totals(off, request()).values()) == {0.0}
    on = make_scheduler(hosts, filters=F, weighers=["NumInstancesWeigher"],
                        filter_scheduler={"num_instances_weight_multiplier": -1.0})
    assert ranking(on, request()) == ["b", "c", "a"]
    assert weights(on, request(), "NumInstancesWeigher")["c"] == pytest.approx(-3 / 8)
