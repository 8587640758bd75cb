"""Issue 30, item 3: a claim's age for ``claim_timeout`` is measured on each replica's own steady clock, from when
that replica first held the claim, never by comparing the claiming server's wall clock with the reporting one's.

Two replicas of one SQLite file (two servers), each on its own clock: the claiming one an hour behind. On main,
the other's next report of the node took the fresh claim for an hour old and released it (a listing node) or
stopped counting it in flight (a node that reports usage only): capacity booked twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gantt.config import Config
from gantt.replication.replica import Replica
from gantt.store.sqlite import SQLiteStore
from tests.conftest import FakeClock, host_stats, request

HOUR = 3600.0
TIMEOUT = 600.0
CONFIG = Config.from_dict({"DEFAULT": {"service_down_time": 60.0}, "gantt": {"claim_timeout": TIMEOUT}})


@pytest.fixture
def behind_and_right(tmp_path: Path) -> Iterator[tuple[Replica, FakeClock, Replica, FakeClock]]:
    url = f"sqlite:///{tmp_path}/gantt.sqlite"
    slow_clock, clock = FakeClock(1_000_000.0 - HOUR), FakeClock(1_000_000.0)
    slow = Replica(SQLiteStore(url), CONFIG, clock=slow_clock).start_owning(follow=False)
    right = Replica(SQLiteStore(url), CONFIG, clock=clock).start_owning(follow=False)
    try:
        yield slow, slow_clock, right, clock
    finally:
        slow.close()
        right.close()


@pytest.mark.parametrize("lists_instances", [True, False])
def test_a_claim_from_a_server_an_hour_behind_is_as_old_as_it_is(
        behind_and_right: tuple[Replica, FakeClock, Replica, FakeClock], lists_instances: bool) -> None:
    slow, slow_clock, right, clock = behind_and_right
    stats = host_stats(vcpus=4, vcpus_used=0, cpu_allocation_ratio=1.0,
                       **({"instances": []} if lists_instances else {}))
    right.update_resource_stats("h", stats)
    slow.sync()
    [[chosen, *_]] = slow.select_destinations(request(vcpus=4, instance_uuids=["vm-1"]))
    assert chosen.host == "h"
    right.sync()
    clock.advance(10.0)
    slow_clock.advance(10.0)
    right.update_resource_stats("h", stats)  # the build has not happened yet: the node lists no vm-1, uses 0
    right._flush_expired()  # what its follower does after each read
    slow.sync()
    for replica in (slow, right):
        held = replica.table.allocation("vm-1")
        assert held is not None and not held.confirmed
        assert replica.host("h")["inventories"]["VCPU"]["in_flight"] == 4
    assert [a.consumer_uuid for a in right.store.snapshot().allocations] == ["vm-1"]
    # claim_timeout later on the reporting replica's clock, its report settles or expires the claim as before
    clock.advance(TIMEOUT + 1.0)
    right.update_resource_stats("h", stats)
    right._flush_expired()
    assert right.host("h")["inventories"]["VCPU"]["in_flight"] == 0
    expired = [a.consumer_uuid for a in right.store.snapshot().allocations] == []
    assert expired == lists_instances
