"""A pool report newer than a claim counts it (Cinder's rule), one older does not, whatever order they commit in;
a report that repeats the pool's figures (the store's touch) is a report all the same. A replica that follows the
feed and one rebuilt from a snapshot of the same store therefore agree on every pool's figures."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gantt.model import Allocation
from gantt.store.base import Batch, Store
from gantt.store.urls import open_store
from gantt.volume import BackendReport, PoolReport, VolumeProperties, VolumeRequest
from gantt.volume.facade import Volumes
from gantt.volume.replica import VolumeReplica

POOL = {"pool_name": "p", "total_capacity_gb": 100, "free_capacity_gb": 100, "allocated_capacity_gb": 0,
        "provisioned_capacity_gb": 0, "thin_provisioning_support": True, "max_over_subscription_ratio": 2.0}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def store() -> Iterator[Store]:
    with open_store("memory://", namespace="vol") as store:
        yield store


def _figures(volumes: Volumes) -> dict[str, Any]:
    [pool] = volumes.pools()
    return {k: pool["state"][k] for k in ("free_capacity_gb", "allocated_capacity_gb", "provisioned_capacity_gb")}


def _reloaded(store: Store) -> dict[str, Any]:
    return _figures(_volumes(store))


def _volumes(store: Store, clock: Clock | None = None) -> Volumes:
    return Volumes(VolumeReplica(store, **({"clock": clock} if clock else {})).start(follow=False))


def _place(replica: Volumes, volume: str, size: int) -> None:
    replica.select_destinations(VolumeRequest(volume_id=volume, volume_properties=VolumeProperties(size=size)))


def test_a_repeated_report_newer_than_a_claim_counts_it(store: Store) -> None:
    clock = Clock()
    replica = _volumes(store, clock)
    replica.report(BackendReport(host="b@lvm", pools=[POOL]))
    clock.now += 10
    _place(replica, "v1", 10)
    assert _figures(replica) == {"free_capacity_gb": 90, "allocated_capacity_gb": 10, "provisioned_capacity_gb": 10}
    assert _reloaded(store) == _figures(replica)
    clock.now += 10
    replica.report(BackendReport(host="b@lvm", pools=[POOL]))  # the same figures: written as a touch
    # The backend reported after the claim: its figures speak for the volume (Cinder resets to them too).
    assert _figures(replica) == {"free_capacity_gb": 100, "allocated_capacity_gb": 0, "provisioned_capacity_gb": 0}
    assert _reloaded(store) == _figures(replica)
    clock.now += 10
    _place(replica, "v2", 5)  # claimed after the touch: on top of the figures again
    assert _figures(replica)["provisioned_capacity_gb"] == 5 and _reloaded(store) == _figures(replica)


def test_a_report_taken_before_a_claim_does_not_count_it_even_when_it_commits_after(store: Store) -> None:
    clock = Clock()
    replica = _volumes(store, clock)
    replica.report(BackendReport(host="b@lvm", pools=[POOL]))
    clock.now += 10
    _place(replica, "v1", 10)
    # Another scheduler took the backend's report at 1005, before the claim, and commits it only now.
    older = {**POOL, "free_capacity_gb": 95, "allocated_capacity_gb": 3, "provisioned_capacity_gb": 3}
    [report] = BackendReport(host="b@lvm", pools=[older]).pool_reports(reported_at=1005.0)
    store.commit(Batch(reports=[report.to_record()]))
    replica.replica.sync()
    assert _figures(replica) == {"free_capacity_gb": 85, "allocated_capacity_gb": 13, "provisioned_capacity_gb": 13}
    assert _reloaded(store) == _figures(replica)
    # Another scheduler's claim from before that report, arriving through the feed: already counted by it.
    store.commit(Batch(allocations=[Allocation("v0", "b@lvm", "p", {"VOLUME_GB": 3}, created_at=1004.0)]))
    replica.replica.sync()
    assert _figures(replica)["provisioned_capacity_gb"] == 13 and _reloaded(store) == _figures(replica)
    # A release gives back only what is still on top of the report.
    replica.release("v1")
    assert _figures(replica)["provisioned_capacity_gb"] == 3 and _reloaded(store) == _figures(replica)


def test_table_touch_and_apply_follow_the_claims_times() -> None:
    from gantt.volume import PoolTable

    table = PoolTable()
    row = table.apply(PoolReport(host="b@lvm", pool_name="p", capabilities=dict(POOL), reported_at=100.0))
    table.claim(row, "old", 7, at=90.0)  # before the report: counted by it
    table.claim(row, "new", 5, at=110.0)
    assert table.provisioned[row] == 5 and table.volume_count[row] == 2
    assert table.touch("b@lvm", "p", 105.0) and table.provisioned[row] == 5  # still before "new"
    assert table.touch("b@lvm", "p", 120.0) and table.provisioned[row] == 0
    assert table.report(row).reported_at == 120.0 and not table.touch("b@lvm", "nope", 130.0)
    table.claim(row, "later", 4, at=130.0)
    table.apply(PoolReport(host="b@lvm", pool_name="p", capabilities=dict(POOL), reported_at=125.0))
    assert table.provisioned[row] == 4  # the report predates "later": it consumes on top of the new figures


def test_new_size_is_refused_on_create_rather_than_checked_while_size_is_claimed(store: Store) -> None:
    from gantt.model import InvalidRequest

    replica = _volumes(store)
    replica.report(BackendReport(host="b@lvm", pools=[{**POOL, "thin_provisioning_support": False,
                                                       "thick_provisioning_support": True}]))
    # 100 GB thick: new_size - size = 1 GB would pass CapacityFilter, and 150 GB would be claimed.
    request = VolumeRequest(volume_id="v1", volume_properties=VolumeProperties(size=150), new_size=151)
    with pytest.raises(InvalidRequest) as refused:
        replica.select_destinations(request)
    assert refused.value.field == "$.new_size" and not replica.replica.allocations


def test_every_pool_of_a_backend_is_applied_from_the_feed(store: Store) -> None:
    """A backend reports its pools in one revision: the replica that wrote it and one that follows the feed each
    hold them all (the cursor once moved on the first change and skipped the rest of its revision)."""
    pools = [{**POOL, "pool_name": name} for name in ("p1", "p2", "p3")]
    writer = _volumes(store)
    follower = _volumes(store)
    writer.report(BackendReport(host="b@lvm", pools=pools))
    follower.replica.sync()
    for replica in (writer, follower, _volumes(store)):
        assert len(replica.pools()) == 3
