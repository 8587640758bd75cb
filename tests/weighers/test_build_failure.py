"""BuildFailureWeigher."""

from __future__ import annotations

import pytest

from tests.conftest import make_scheduler, request
from tests.weighers.helpers import ranking, weights

F = ["ComputeFilter"]


def test_failed_builds_push_a_node_back_with_the_negated_multiplier() -> None:
    sched = make_scheduler({"a": {"failed_builds": 3}, "b": {}, "c": {"failed_builds": 1}}, filters=F,
                           weighers=["BuildFailureWeigher", "RAMWeigher"])
    assert ranking(sched, request()) == ["b", "c", "a"]
    w = weights(sched, request(), "BuildFailureWeigher")
    assert w["a"] == pytest.approx(-1_000_000.0) and w["b"] == 0.0


def test_aggregate_override_is_negated_too() -> None:
    sched = make_scheduler({"a": {"failed_builds": 2}, "b": {"failed_builds": 4}}, filters=F,
                           weighers=["BuildFailureWeigher"])
    sched.update_aggregate({"id": 1, "hosts": ["b"], "metadata": {"build_failure_weight_multiplier": "10"}})
    sched.update_aggregate({"id": 2, "hosts": ["a"], "metadata": {"build_failure_weight_multiplier": "0"}})
    w = weights(sched, request(), "BuildFailureWeigher")
    assert w == {"a": 0.0, "b": pytest.approx(-10.0)}
    assert ranking(sched, request()) == ["a", "b"]


def test_negative_config_multiplier_prefers_failing_nodes() -> None:
    sched = make_scheduler({"a": {"failed_builds": 2}, "b": {}}, filters=F, weighers=["BuildFailureWeigher"],
                           filter_scheduler={"build_failure_weight_multiplier": -1.0})
    assert ranking(sched, request()) == ["a", "b"]
