"""A node removed while a decision ranks (the feed thread applying a host deletion) must not make the decision
crash or claim the node that took the removed one's row (rows are compacted by moving the last row in)."""

from __future__ import annotations

import numpy as np

from gantt.compute.filters.base import Filter
from gantt.compute.ranking import RANK_ATTEMPTS
from gantt.compute.request import RequestContext
from gantt.compute.scheduler import Scheduler
from gantt.compute.state import HostTable
from gantt.model import HostReport
from tests.conftest import host_stats, request


class _RemovesOnce(Filter):
    """Stands for the feed thread: removes ``host`` the first time the ranking reaches this filter."""

    name = "RemovesOnce"

    def __init__(self, config: object, host: str) -> None:
        super().__init__(config)  # type: ignore[arg-type]
        self.host, self.done = host, False

    def mask(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        if not self.done:
            self.done = True
            table.remove(self.host)
        return None


def _cloud() -> Scheduler:
    sched = Scheduler({"filter_scheduler": {"enabled_filters": ["AvailabilityZoneFilter"]}})
    for name in ("a", "b", "c"):
        sched.update_resource_stats(name, host_stats(vcpus=8))
    sched.update_aggregate({"id": 1, "hosts": ["a"], "metadata": {"availability_zone": "az1"}})
    sched.update_aggregate({"id": 2, "hosts": ["b", "c"], "metadata": {"availability_zone": "az2"}})
    return sched


def test_the_node_that_takes_a_removed_row_is_not_claimed_for_it() -> None:
    sched = _cloud()
    sched.engine.ranker.filters.append(_RemovesOnce(sched.config, "a"))
    spec = request(vcpus=1) | {"availability_zone": "az1"}
    try:
        [[chosen, *_]] = sched.select_destinations(spec)
    except Exception as exc:  # the only az1 host is gone: NoValidHost is the right answer
        assert type(exc).__name__ == "NoValidHost", exc
    else:
        raise AssertionError(f"placed on {chosen.host} in {chosen.availability_zone}: not in az1")
    assert sched.allocations() == []


def test_a_removal_mid_ranking_does_not_crash_the_decision() -> None:
    sched = _cloud()
    sched.engine.ranker.filters.insert(0, _RemovesOnce(sched.config, "a"))  # before every other mask
    spec = request(vcpus=1) | {"availability_zone": "az2"}
    [[chosen, *_]] = sched.select_destinations(spec)
    assert chosen.host in {"b", "c"} and chosen.availability_zone == "az2"


class _AddsOnce(Filter):
    """Stands for the feed thread adding hosts: ``count`` new nodes join the first time the ranking reaches it."""

    name = "AddsOnce"

    def __init__(self, config: object, count: int, times: int = 1) -> None:
        super().__init__(config)  # type: ignore[arg-type]
        self.count, self.times, self.added = count, times, 0

    def mask(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        if self.times:
            self.times -= 1
            for _ in range(self.count):
                self.added += 1
                table.update(HostReport.of(f"new-{self.added}", host_stats(vcpus=8)))
        return None


def test_hosts_joining_mid_ranking_do_not_crash_the_decision() -> None:
    """Rows added after the ranking took its first masks leave arrays of two lengths: the ranking is made again."""
    sched = _cloud()
    sched.engine.ranker.filters.insert(0, _AddsOnce(sched.config, 5))  # before every other mask is taken
    [[chosen, *_]] = sched.select_destinations(request(vcpus=1) | {"availability_zone": "az2"})
    assert chosen.host in {"b", "c"} and chosen.availability_zone == "az2"


def test_hosts_joining_under_every_ranking_end_in_one_made_under_the_lock() -> None:
    """A feed that adds rows under each attempt cannot keep a decision from ending: the last attempt holds the
    table's lock (the filter, run on the deciding thread, may still add under it: the lock is reentrant)."""
    sched = _cloud()
    adds = _AddsOnce(sched.config, 1, times=RANK_ATTEMPTS - 1)
    sched.engine.ranker.filters.insert(0, adds)
    [[chosen, *_]] = sched.select_destinations(request(vcpus=1) | {"availability_zone": "az2"})
    assert chosen.host in {"b", "c"} and adds.added == RANK_ATTEMPTS - 1
