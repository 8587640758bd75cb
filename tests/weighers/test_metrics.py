"""MetricsWeigher: weight_setting, weight_multiplier, required, weight_of_unavailable."""

from __future__ import annotations

from typing import Any

import pytest

from gantt import GanttError
from gantt.compute.weighers.metrics import ComputeHostMetricNotFound, parse_weight_setting
from tests.conftest import make_scheduler, request
from tests.weighers.helpers import ranking, weights

F = ["ComputeFilter"]


def metrics(**values: float) -> list[dict[str, Any]]:
    return [{"name": name.replace("_", "."), "value": value, "source": "test"}
            for name, value in values.items()]


def scheduler(hosts: dict[str, dict[str, Any]], **metrics_section: Any):  # type: ignore[no-untyped-def]
    section = {"weight_setting": ["cpu.frequency=-1.0", "mem.free=0.5"], **metrics_section}
    return make_scheduler(hosts, filters=F, weighers=["MetricsWeigher"], metrics=section)


def test_weighted_sum_of_metrics_ranks_nodes() -> None:
    sched = scheduler({"a": {"metrics": metrics(cpu_frequency=90, mem_free=100)},  # -90 + 50 = -40
                       "b": {"metrics": metrics(cpu_frequency=10, mem_free=20)},  # -10 + 10 = 0
                       "c": {"metrics": metrics(cpu_frequency=50, mem_free=100)}})  # -50 + 50 = 0 -> tie with b
    assert ranking(sched, request())[2] == "a"
    w = weights(sched, request(), "MetricsWeigher")
    assert w == {"b": pytest.approx(1.0), "c": pytest.approx(1.0), "a": 0.0}


def test_required_metric_missing_on_a_candidate_fails_the_request_and_claims_nothing() -> None:
    sched = scheduler({"a": {"metrics": metrics(cpu_frequency=10, mem_free=1)},
                       "b": {"metrics": metrics(cpu_frequency=10)}})
    with pytest.raises(ComputeHostMetricNotFound) as err:
        sched.select_destinations(request(num_instances=2))
    assert isinstance(err.value, GanttError)
    assert (err.value.host, err.value.metric) == ("b", "mem.free")
    assert not sched.table.allocations()


def test_required_metric_missing_on_a_filtered_out_node_is_fine() -> None:
    sched = scheduler({"a": {"metrics": metrics(cpu_frequency=10, mem_free=1)},
                       "b": {"metrics": metrics(cpu_frequency=20, mem_free=1)},
                       "c": {"service": {"disabled": True}}})
    assert ranking(sched, request()) == ["a", "b"]


def test_unavailable_metric_gets_weight_of_unavailable_when_not_required() -> None:
    sched = scheduler({"a": {"metrics": metrics(cpu_frequency=10, mem_free=0)},
                       "b": {"metrics": metrics(cpu_frequency=99)},
                       "c": {"metrics": metrics(cpu_frequency=50, mem_free=0)}}, required=False)
    assert ranking(sched, request()) == ["a", "c", "b"]
    w = weights(sched, request(), "MetricsWeigher")
    # raw: a -10, c -50, b -10000: normalized over that span b is 0 and a is 1.
    assert w["b"] == 0.0 and w["a"] == pytest.approx(1.0)
    assert w["c"] == pytest.approx((10000 - 50) / (10000 - 10))


def test_missing_metric_with_zero_ratio_is_ignored() -> None:
    sched = make_scheduler({"a": {"metrics": metrics(cpu_frequency=10)},
                            "b": {"metrics": metrics(cpu_frequency=20)}}, filters=F, weighers=["MetricsWeigher"],
                           metrics={"weight_setting": ["cpu.frequency=1", "mem.free=0"], "required": False})
    assert ranking(sched, request()) == ["b", "a"]


def test_aggregate_multiplier_zero_spares_its_nodes_the_unavailable_penalty() -> None:
    sched = scheduler({"a": {"metrics": metrics(cpu_frequency=10, mem_free=0)},
                       "b": {"metrics": metrics(cpu_frequency=30)},
                       "c": {"metrics": metrics(cpu_frequency=20, mem_free=0)}}, required=False)
    sched.update_aggregate({"id": 1, "hosts": ["b"], "metadata": {"metrics_weight_multiplier": "0"}})
    # b's raw value is its partial sum (-30), not -10000; with multiplier 0 it contributes 0.
    w = weights(sched, request(), "MetricsWeigher")
    assert w == {"a": pytest.approx(1.0), "c": pytest.approx(0.5), "b": 0.0}


def test_negative_weight_multiplier_inverts_the_ranking() -> None:
    sched = scheduler({"a": {"metrics": metrics(cpu_frequency=90, mem_free=0)},
                       "b": {"metrics": metrics(cpu_frequency=10, mem_free=0)}}, weight_multiplier=-1.0)
    assert ranking(sched, request()) == ["a", "b"]


def test_metric_that_stops_being_reported_becomes_unavailable() -> None:
    sched = scheduler({"a": {"metrics": metrics(cpu_frequency=1, mem_free=0)},
                       "b": {"metrics": metrics(cpu_frequency=2, mem_free=0)}}, required=False)
    assert ranking(sched, request()) == ["a", "b"]
    sched.update_resource_stats("a", {"metrics": metrics(cpu_frequency=1)})
    assert ranking(sched, request()) == ["b", "a"]


def test_parse_weight_setting_skips_malformed_entries() -> None:
    assert parse_weight_setting(["a=1", "b", "c=x", "=2", " d = -0.5"]) == [("a", 1.0), ("d", -0.5)]


def test_metric_values_are_what_novas_weigher_sees() -> None:
    # Nova reads a node's metrics JSON into integer fields, percentages as hundredths (monitor_metric.py).
    sched = make_scheduler({"a": {"metrics": [{"name": "cpu.percent", "value": 10.07, "source": "s"},
                                              {"name": "cpu.frequency", "value": 2399.9, "source": "s"}]}},
                           filters=F)
    assert sched.table.metric("cpu.percent")[0] == 1007
    assert sched.table.metric("cpu.frequency")[0] == 2399
