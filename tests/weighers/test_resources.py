"""RAMWeigher, CPUWeigher, DiskWeigher, and the multiplier machinery every weigher shares."""

from __future__ import annotations

import pytest

from tests.conftest import make_scheduler, request
from tests.weighers.helpers import ranking, totals, weights

F = ["ComputeFilter"]


def test_ram_weigher_spreads_by_default_and_normalizes_from_zero() -> None:
    # Nova 34's RAM/CPU/Disk weighers set minval = 0: weights run from 0 to the most free candidate.
    sched = make_scheduler({"a": {"memory_mb": 4096}, "b": {"memory_mb": 8192}, "c": {"memory_mb": 16384}},
                           filters=F, weighers=["RAMWeigher"])
    assert ranking(sched, request()) == ["c", "b", "a"]
    w = weights(sched, request(), "RAMWeigher")
    assert w["c"] == pytest.approx(1.0) and w["a"] == pytest.approx(0.25)
    assert w["b"] == pytest.approx(0.5)


def test_negative_free_ram_counts_as_zero() -> None:
    # An overcommitted node reports more RAM used than it has; Nova clamps its weight at minval (0).
    sched = make_scheduler({"a": {"memory_mb": 4096, "memory_mb_used": 6144, "ram_allocation_ratio": 2.0},
                            "b": {"memory_mb": 8192}, "c": {"memory_mb": 4096}},
                           filters=F, weighers=["RAMWeigher"])
    w = weights(sched, request(), "RAMWeigher")
    assert w == {"a": 0.0, "b": pytest.approx(1.0), "c": pytest.approx(0.5)}


def test_negative_multiplier_stacks() -> None:
    sched = make_scheduler({"a": {"memory_mb": 4096}, "b": {"memory_mb": 8192}, "c": {"memory_mb": 16384}},
                           filters=F, weighers=["RAMWeigher"],
                           filter_scheduler={"ram_weight_multiplier": -2.0})
    assert ranking(sched, request()) == ["a", "b", "c"]
    assert weights(sched, request(), "RAMWeigher")["c"] == pytest.approx(-2.0)


def test_ram_counts_in_flight_claims() -> None:
    sched = make_scheduler({"a": {"memory_mb": 8192}, "b": {"memory_mb": 6144}}, filters=F,
                           weighers=["RAMWeigher"])
    sched.select_destinations(request(memory_mb=4096))  # lands on a (more free RAM): a now has 4096 free
    assert ranking(sched, request())[0] == "b"


def test_all_equal_gives_equal_weights() -> None:
    # Normalized from 0, equal free capacity is 1.0 per weigher (Nova's normalize with minval=0).
    sched = make_scheduler(3, filters=F, weighers=["RAMWeigher", "CPUWeigher", "DiskWeigher"])
    assert set(totals(sched, request()).values()) == {3.0}


def test_cpu_weigher_uses_allocation_ratio_and_usage() -> None:
    sched = make_scheduler({"a": {"vcpus": 8, "cpu_allocation_ratio": 4.0, "vcpus_used": 4},  # 28 free
                            "b": {"vcpus": 16, "cpu_allocation_ratio": 1.0}},  # 16 free
                           filters=F, weighers=["CPUWeigher"])
    assert ranking(sched, request()) == ["a", "b"]
    sched2 = make_scheduler({"a": {"vcpus": 8}, "b": {"vcpus": 16}}, filters=F, weighers=["CPUWeigher"],
                            filter_scheduler={"cpu_weight_multiplier": -1.0})
    assert ranking(sched2, request()) == ["a", "b"]


def test_disk_weigher_uses_the_smaller_of_disk_available_least_and_accounted_free() -> None:
    sched = make_scheduler({"a": {"local_gb": 1000, "disk_available_least": 100},
                            "b": {"local_gb": 500},
                            "c": {"local_gb": 200, "disk_available_least": 900}},  # least > free: free wins
                           filters=F, weighers=["DiskWeigher"])
    assert ranking(sched, request()) == ["b", "c", "a"]
    assert sched.host("c")["free_disk_mb"] == 200 * 1024 - 1024 * 0


def test_single_candidate_is_unweighed() -> None:
    sched = make_scheduler({"a": {"memory_mb": 4096}}, filters=F, weighers=["RAMWeigher"])
    assert totals(sched, request()) == {"a": 0.0}


def _agg(agg_id: int, hosts: list[str], **metadata: str) -> dict[str, object]:
    return {"id": agg_id, "name": f"agg{agg_id}", "hosts": hosts, "metadata": metadata}


def test_aggregate_override_lowest_value_wins_on_multi_aggregate_nodes() -> None:
    hosts = {"a": {"memory_mb": 4096}, "b": {"memory_mb": 8192}, "c": {"memory_mb": 16384}}
    sched = make_scheduler(hosts, filters=F, weighers=["RAMWeigher"])
    # c is in both aggregates: the lower multiplier (-1.0) applies; b gets 3.0; a keeps the config's 1.0.
    sched.update_aggregate(_agg(1, ["b", "c"], ram_weight_multiplier="3.0"))
    sched.update_aggregate(_agg(2, ["c"], ram_weight_multiplier="-1.0"))
    w = weights(sched, request(), "RAMWeigher")
    assert w["c"] == pytest.approx(-1.0)
    assert w["b"] == pytest.approx(3.0 * 8192 / 16384)
    assert w["a"] == pytest.approx(4096 / 16384)
    assert ranking(sched, request()) == ["b", "a", "c"]
    # Updating an aggregate invalidates the memoized per-node multipliers.
    sched.update_aggregate(_agg(2, ["c"], ram_weight_multiplier="5.0"))
    assert weights(sched, request(), "RAMWeigher")["c"] == pytest.approx(3.0)
    sched.delete_aggregate(1)
    assert weights(sched, request(), "RAMWeigher")["b"] == pytest.approx(8192 / 16384)


def test_aggregate_override_enables_a_weigher_whose_config_multiplier_is_zero() -> None:
    sched = make_scheduler({"a": {"memory_mb": 4096}, "b": {"memory_mb": 8192}}, filters=F,
                           weighers=["RAMWeigher"], filter_scheduler={"ram_weight_multiplier": 0.0})
    assert set(totals(sched, request()).values()) == {0.0}
    sched.update_aggregate(_agg(1, ["b"], ram_weight_multiplier="2"))
    assert weights(sched, request(), "RAMWeigher") == {"b": pytest.approx(2.0), "a": 0.0}


def test_unparsable_override_falls_back_to_the_config_value_for_that_node() -> None:
    # Nova's validate_num_values: one bad value among a node's aggregates voids the override for that node.
    sched = make_scheduler({"a": {"memory_mb": 4096}, "b": {"memory_mb": 8192}, "c": {"memory_mb": 8192}},
                           filters=F, weighers=["RAMWeigher"])
    sched.update_aggregate(_agg(1, ["b", "c"], ram_weight_multiplier="-4"))
    sched.update_aggregate(_agg(2, ["b"], ram_weight_multiplier="lots"))
    w = weights(sched, request(), "RAMWeigher")
    assert w["b"] == pytest.approx(1.0) and w["c"] == pytest.approx(-4.0)


def test_multi_node_host_rows_share_their_host_aggregates() -> None:
    sched = make_scheduler({}, filters=F, weighers=["RAMWeigher"])
    for node, mem in (("n1", 4096), ("n2", 8192)):
        sched.update_resource_stats(["ironic", node], {"vcpus": 4, "memory_mb": mem, "local_gb": 10})
    sched.update_resource_stats("kvm", {"vcpus": 4, "memory_mb": 6144, "local_gb": 10})
    sched.update_aggregate(_agg(1, ["ironic"], ram_weight_multiplier="-1"))
    w = weights(sched, request(), "RAMWeigher")
    assert w == {"n2": pytest.approx(-1.0), "n1": pytest.approx(-0.5), "kvm": pytest.approx(0.75)}
