"""Issue 11: every number that reaches a column is finite and within a stated range; no weight is ever NaN."""

from __future__ import annotations

import math

import pytest

from gantt import Scheduler
from gantt.config import Config
from gantt.model import InvalidRequest
from tests.conftest import host_stats, make_scheduler, request


@pytest.mark.parametrize(("stats", "where"), [
    ({"cpu_allocation_ratio": 1e308}, "$.stats.cpu_allocation_ratio"),
    ({"ram_allocation_ratio": float("inf")}, "$.stats.ram_allocation_ratio"),
    ({"vcpus": 2**40}, "$.stats.vcpus"),
    ({"disk_available_least": -(2**40)}, "$.stats.disk_available_least"),
    ({"metrics": [{"name": "m", "value": float("nan")}]}, "$.stats.metrics[0].value"),
    ({"inventories": {"VCPU": {"total": 2**40}}}, "$.stats.inventories[...].total"),
    ({"inventories": {"VCPU": {"total": 8, "allocation_ratio": 1e300}}}, "$.stats.inventories[...].allocation_ratio"),
])
def test_out_of_range_report_numbers_are_refused(stats: dict[str, object], where: str) -> None:
    sched = Scheduler()
    with pytest.raises(InvalidRequest) as err:
        sched.report({"host": "h", "stats": host_stats(**stats)})
    assert err.value.field.startswith(where)
    assert sched.table.n == 0


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e400"])
def test_non_finite_numeric_aggregate_metadata_is_refused(value: str) -> None:
    sched = make_scheduler(2)
    with pytest.raises(InvalidRequest) as err:
        sched.update_aggregate({"id": 1, "hosts": ["h0"], "metadata": {"cpu_allocation_ratio": value}})
    assert err.value.field == "$.metadata.cpu_allocation_ratio"
    assert not sched.table.aggregates()


def test_non_finite_multipliers_are_refused() -> None:
    with pytest.raises(InvalidRequest, match="ram_weight_multiplier"):
        Config.from_dict({"filter_scheduler": {"ram_weight_multiplier": float("inf")}})
    with pytest.raises(InvalidRequest, match="weight_of_unavailable"):
        Config.from_dict({"metrics": {"weight_of_unavailable": float("-inf")}})


def test_the_largest_accepted_numbers_still_weigh_finitely() -> None:
    sched = make_scheduler({"big": {"vcpus": 2**31 - 1, "cpu_allocation_ratio": 10_000.0,
                                    "memory_mb": 2**31 - 1, "local_gb": 2**31 - 1},
                            "small": {}})
    for candidate in sched.candidates(request()):
        assert math.isfinite(candidate.weight)
    [[chosen, *_]] = sched.select_destinations(request())
    assert math.isfinite(chosen.weight)
