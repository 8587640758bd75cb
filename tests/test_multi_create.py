"""A multi-instance request places its instances as Nova's ``_schedule`` does (issue 31, item 4).

Nova re-sorts the host list the previous instance left (a stable sort: equal weights keep that list's order, the
host picked last first), and weighs the later instances over the hosts Placement returned for the request, full
ones included (a pick of one fails its claim and falls to the next host in order). The generated comparison with
Nova's own code is tests/parity/test_multi_parity.py; these are the cases that show each rule, on every path a
decision can take (full-length scores, the kept weighted sum shared, candidates gathered, blocks of rows).
"""

from __future__ import annotations

from typing import Any

import pytest

from gantt.compute import blocks as blocks_mod
from gantt.model import Aggregate
from tests.conftest import make_scheduler, request

PATHS = ["full", "kept_sum", "gathered", "blocks"]


def _sched(hosts: dict[str, dict[str, Any]], path: str, monkeypatch: pytest.MonkeyPatch, **fs: Any) -> Any:
    """``hosts`` on the decision path ``path``; for "gathered" the hosts are a zone's minority of the rows."""
    others = {f"x{i}": {} for i in range(3 * len(hosts))} if path == "gathered" else {}
    sched = make_scheduler({**hosts, **others}, filters=["AvailabilityZoneFilter"], filter_scheduler=fs)
    if path == "gathered":
        sched.update_aggregate(Aggregate(id=1, name="z", hosts=list(hosts), availability_zone="z"))
    if path in ("kept_sum", "blocks"):
        sched.table.derived.patch_min_rows = 0
    if path == "blocks":
        monkeypatch.setattr(blocks_mod, "BLOCK", 8)
        sched.engine.ranker.block_min_rows = 0
    return sched


def _place(sched: Any, count: int, path: str, name: str = "i", **flavor: Any) -> list[str]:
    spec = request(num_instances=count, instance_uuids=[f"{name}{k}" for k in range(count)], **flavor)
    if path == "gathered":
        spec["availability_zone"] = "z"
    return [alts[0].host for alts in sched.select_destinations(spec)]


@pytest.mark.parametrize("path", PATHS)
def test_equal_hosts_keep_the_order_the_previous_instance_left(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's case: two equal hosts, DiskWeigher, three instances. After h0 and h1 took one each they are
    equal again, and Nova's list has h1 (picked last) first: [h0, h1, h1], where picking by row gave h0."""
    sched = _sched({"h0": {}, "h1": {}}, path, monkeypatch, weight_classes=["DiskWeigher"])
    assert _place(sched, 3, path) == ["h0", "h1", "h1"]
    # three equal hosts, five instances: the ties after h2 go h2 (picked last), then h1 before h0 (h1 was
    # ahead of h0 in the list the second instance left)
    sched = _sched({"h0": {}, "h1": {}, "h2": {}}, path, monkeypatch, weight_classes=["DiskWeigher"])
    assert _place(sched, 5, path) == ["h0", "h1", "h2", "h2", "h1"]


@pytest.mark.parametrize("path", PATHS)
def test_later_instances_weigh_the_hosts_the_first_one_could_use(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """h0 has room for one instance. Nova weighs the second instance over h0, h1 and h2 (Placement's
    candidates, fetched once per request): h0's single instance stretches the instance count's range, and h1
    wins (weights -1.25 against -1.82). Weighed over h1 and h2 alone, h2 won (-1 against -1.25)."""
    hosts = {"h0": {"memory_mb": 4096, "num_instances": 0}, "h1": {"memory_mb": 12288, "num_instances": 12},
             "h2": {"memory_mb": 36864, "num_instances": 10}}
    sched = _sched(hosts, path, monkeypatch, weight_classes=["RAMWeigher", "NumInstancesWeigher"],
                   ram_weight_multiplier=-1.0, num_instances_weight_multiplier=-1.0)
    assert _place(sched, 2, path, memory_mb=4096) == ["h0", "h1"]
    # the first candidates do not outlive the request: the next one does not see h0 (full) at all
    assert _place(sched, 1, path, "next", memory_mb=4096) == ["h2"]


def test_alternates_are_one_list_without_the_requests_hosts_and_a_repeat_has_them() -> None:
    """Nova's ``_get_alternate_hosts``: after every claim of the request, one list for all its instances, without
    any host the request took (a host a later instance took is replaced, never dropped); the same instances asked
    again get their claims back with alternates (Nova filters and weighs anew)."""
    sched = make_scheduler({f"h{i}": {"vcpus": 8} for i in range(6)}, filters=["ComputeFilter"],
                           scheduler={"max_attempts": 3})
    uuids = ["x", "y", "z"]
    first = sched.select_destinations(request(vcpus=2, num_instances=3, instance_uuids=uuids))
    chosen = {choices[0].host for choices in first}
    assert len(chosen) == 3
    alternates = [[s.host for s in choices[1:]] for choices in first]
    assert alternates == [alternates[0]] * 3 and len(alternates[0]) == 2
    assert not set(alternates[0]) & chosen
    again = sched.select_destinations(request(vcpus=2, num_instances=3, instance_uuids=uuids))
    assert [c[0].host for c in again] == [c[0].host for c in first]
    assert [[s.host for s in c[1:]] for c in again] == alternates
    [[one, *alts]] = sched.select_destinations(request(vcpus=2, instance_uuids=["x"]))
    assert one.host == first[0][0].host and len(alts) == 2 and one.host not in {a.host for a in alts}
