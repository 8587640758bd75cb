"""Issue 9: request fields with Placement's meaning — member_of ('!', 'in:'), trait names."""

from __future__ import annotations

import pytest

from gantt.model import InvalidRequest
from tests.conftest import make_scheduler, passing, request


def _cloud():  # type: ignore[no-untyped-def]
    sched = make_scheduler(4, filters=["ComputeFilter"])
    sched.update_aggregate({"id": 1, "uuid": "agg-one", "hosts": ["h0", "h1"]})
    sched.update_aggregate({"id": 2, "hosts": ["h1", "h2"]})
    return sched


def test_a_forbidden_aggregate_excludes_its_hosts_only() -> None:
    sched = _cloud()
    assert passing(sched, request(member_of=[["!1"]])) == {"h2", "h3"}
    assert passing(sched, request(member_of=[["!agg-one"]])) == {"h2", "h3"}  # by uuid too
    assert passing(sched, request(member_of=[["!in:1,2"]])) == {"h3"}


def test_in_lists_and_groups() -> None:
    sched = _cloud()
    assert passing(sched, request(member_of=[["in:1,2"]])) == {"h0", "h1", "h2"}
    assert passing(sched, request(member_of=[["in:1,2"], ["2"]])) == {"h1", "h2"}  # groups are ANDed
    assert passing(sched, request(member_of=[["1", "2"]])) == {"h0", "h1", "h2"}
    assert passing(sched, request(member_of=[["in:1"], ["!2"]])) == {"h0"}


@pytest.mark.parametrize("member_of", [[["!1", "2"]], [["in:"]], [["in:1,!2"]], [[]]])
def test_malformed_member_of_is_a_400_naming_the_group(member_of: list[list[str]]) -> None:
    sched = _cloud()
    with pytest.raises(InvalidRequest) as err:
        sched.select_destinations(request(member_of=member_of))
    assert err.value.field == "$.member_of[0]"


@pytest.mark.parametrize(("fields", "where"), [
    ({"required_traits": ["hw_cpu_x86_avx2"]}, "$.required_traits"),
    ({"forbidden_traits": ["CUSTOM_lower"]}, "$.forbidden_traits"),
    ({"required_traits": ["NOT_A_REAL_TRAIT"]}, "$.required_traits"),
    ({"extra_specs": {"trait:custom_x": "required"}}, "$.required_traits"),
])
def test_an_invalid_trait_name_is_a_400_not_a_no_valid_host(fields: dict[str, object], where: str) -> None:
    sched = _cloud()
    with pytest.raises(InvalidRequest) as err:
        sched.select_destinations(request(**fields))
    assert err.value.field == where and err.value.status == 400


def test_valid_standard_and_custom_traits_pass_validation() -> None:
    sched = make_scheduler({"h0": {"traits": ["HW_CPU_X86_AVX2", "CUSTOM_GPU_A100"]}, "h1": {}}, filters=[])
    assert passing(sched, request(required_traits=["HW_CPU_X86_AVX2", "CUSTOM_GPU_A100"])) == {"h0"}


def test_no_valid_host_names_the_filter_that_removed_the_most_and_says_hosts_are_down() -> None:
    from gantt import NoValidHost
    from tests.conftest import FakeClock

    clock = FakeClock()
    sched = make_scheduler(3, filters=["ComputeFilter", "AvailabilityZoneFilter"], clock=clock)
    clock.advance(120)
    with pytest.raises(NoValidHost) as err:
        sched.select_destinations(request())
    assert err.value.explanation.reason == "ComputeFilter"
    assert err.value.explanation.down == 3
    assert "3 down: no report for > 60 s" in str(err.value)
    assert sched.engine.stats.no_valid_host == {"ComputeFilter": 1}


def test_the_nearest_miss_says_which_unit_constraint_blocks() -> None:
    from gantt import NoValidHost
    sched = make_scheduler({}, filters=["ComputeFilter"])
    sched.update_resource_stats("h", {"vcpus": 16, "memory_mb": 4096, "local_gb": 10,
                                      "inventories": {"VCPU": {"total": 1000, "max_unit": 16}}})
    with pytest.raises(NoValidHost) as err:
        sched.select_destinations(request(vcpus=32))
    [miss] = err.value.explanation.nearest_miss
    assert miss.constraint == "max_unit 16 < 32 asked on every node"
    assert "short by" not in str(err.value)


def test_a_node_shows_how_long_ago_it_reported_and_goes_down_past_service_down_time() -> None:
    """Issue 17: hosts went down silently 60 s after their last report; the age of the report is shown."""
    from gantt import Scheduler
    now = [1_000_000.0]
    sched = Scheduler({"DEFAULT": {"service_down_time": 60}}, clock=lambda: now[0])
    sched.update_resource_stats("h0", {"vcpus": 4, "memory_mb": 4096, "local_gb": 40})
    assert sched.host("h0")["last_report_seconds_ago"] == 0.0 and sched.host("h0")["up"]
    now[0] += 90
    node = sched.host("h0")
    assert node["last_report_seconds_ago"] == 90.0 and not node["up"]


def test_metrics_count_up_disabled_and_down_nodes_apart() -> None:
    """Issue 17: a disabled node that still reports was counted as up."""
    from gantt.replication.replica import Replica
    from gantt.service.metrics import Metrics
    from gantt.store.memory import MemoryStore

    now = [1_000_000.0]
    replica = Replica(MemoryStore(), clock=lambda: now[0]).start(follow=False)
    replica.update_resource_stats("old", {"vcpus": 4, "memory_mb": 4096, "local_gb": 40})
    now[0] += 120  # past service_down_time: "old" is down
    replica.update_resource_stats("up", {"vcpus": 4, "memory_mb": 4096, "local_gb": 40})
    replica.update_resource_stats("off", {"vcpus": 4, "memory_mb": 4096, "local_gb": 40,
                                          "service": {"disabled": True}})
    text = Metrics().render(replica)
    states = {line.split('state="')[1].split('"')[0]: line.split()[-1] for line in text.splitlines()
              if line.startswith("gantt_hosts{")}
    assert states == {"up": "1", "disabled": "1", "down": "1"}
    assert any(line.startswith("gantt_build_info{") and line.endswith(" 1") for line in text.splitlines())
