"""HypervisorVersionWeigher."""

from __future__ import annotations

from tests.conftest import make_scheduler, request
from tests.weighers.helpers import ranking, totals

F = ["ComputeFilter"]


def test_newer_hypervisor_wins_and_negative_multiplier_prefers_older() -> None:
    hosts = {"old": {"hypervisor_version": 6002000}, "new": {"hypervisor_version": 9000000},
             "mid": {"hypervisor_version": 8002000}}
    sched = make_scheduler(hosts, filters=F, weighers=["HypervisorVersionWeigher"])
    assert ranking(sched, request()) == ["new", "mid", "old"]
    inverse = make_scheduler(hosts, filters=F, weighers=["HypervisorVersionWeigher"],
                             filter_scheduler={"hypervisor_version_weight_multiplier": -1.0})
    assert ranking(inverse, request()) == ["old", "mid", "new"]


def test_unknown_version_counts_as_zero() -> None:
    sched = make_scheduler({"a": {"hypervisor_version": 1000}}, filters=F,
                           weighers=["HypervisorVersionWeigher"])
    sched.update_resource_stats("b", {"vcpus": 16, "memory_mb": 65536, "local_gb": 1000})
    assert ranking(sched, request()) == ["a", "b"]
    assert totals(sched, request())["b"] == 0.0
