"""Issue 31 item 9: a hard server-group policy is enforced across replicas or refused, never half held."""

from __future__ import annotations

from pathlib import Path

import pytest

from gantt.config import Config
from gantt.model import InvalidRequest
from gantt.replication.replica import Replica
from gantt.store.sqlite import SQLiteStore
from tests.conftest import host_stats, request

CONFIG = Config.from_dict({"filter_scheduler": {"enabled_filters": ["ComputeFilter", "ServerGroupAntiAffinityFilter",
                                                                    "ServerGroupAffinityFilter"]}})


@pytest.mark.parametrize("policy", ["anti-affinity", "affinity"])
def test_a_hard_policy_without_a_uuid_is_refused_by_two_replicas_on_one_file(policy: str, tmp_path: Path) -> None:
    """Two replicas on one SQLite file, ``b`` lagging: without a uuid the policy could not be held at claim time
    (both placed the anti-affine pair on h0), so each replica refuses the request and books nothing. With a uuid
    the lagging replica's claim conflicts on the group and is decided again."""
    url = f"sqlite:///{tmp_path}/gantt.sqlite"
    store_a, store_b = SQLiteStore(url), SQLiteStore(url)
    try:
        a = Replica(store_a, CONFIG).start(follow=False)
        a.update_resource_stats("h0", host_stats(memory_mb=65536))
        a.update_resource_stats("h1", host_stats(memory_mb=32768))
        b = Replica(store_b, CONFIG).start(follow=False)
        nameless = {"policy": policy, "members": ["m1", "m2"]}
        for replica, member in ((a, "m1"), (b, "m2")):
            with pytest.raises(InvalidRequest) as refused:
                replica.select_destinations(request(instance_uuids=[member], instance_group=nameless))
            assert refused.value.field == "$.instance_group.uuid"
        assert store_a.snapshot().allocations == []
        named = {"uuid": "g-1", "policy": "anti-affinity", "members": ["m1", "m2"]}
        [[first, *_]] = a.select_destinations(request(instance_uuids=["m1"], instance_group=named))
        [[second, *_]] = b.select_destinations(request(instance_uuids=["m2"], instance_group=named))
        assert first.host == "h0" and second.host == "h1"
    finally:
        store_a.close()
        store_b.close()


def test_soft_policies_need_no_uuid() -> None:
    """A soft policy only weighs: nothing to hold at claim time, so it is not refused."""
    from gantt import Scheduler
    sched = Scheduler(CONFIG)
    sched.update_resource_stats("h0", host_stats())
    [[chosen, *_]] = sched.select_destinations(request(instance_group={"policy": "soft-anti-affinity"}))
    assert chosen.host == "h0"
