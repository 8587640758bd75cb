"""Issue 10: random interleavings of writes, claims, releases, moves, reloads and feed lag across replicas on one
store.

After every step: no node over capacity, every acknowledged claim present and unmoved (a move moves it where it
answered; its source stays held under the migration until confirm, or revert gives it back), no anti-affinity group
with two members on one host, and every replica that has caught up answers exactly as a replica built from
scratch on the same store. Replicas do not follow the feed by themselves: the test decides when each catches
up, so their lag is part of the interleaving. ``GANTT_PROPERTY_EXAMPLES`` raises the number of examples for a
long run (CI keeps it small).
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from gantt import NoValidHost
from gantt.config import Config
from gantt.model import Conflict, GanttError, NotFound
from gantt.replication.audit import audit
from gantt.replication.replica import Replica
from gantt.store.base import Store
from gantt.store.memory import MemoryStore
from gantt.store.sqlite import SQLiteStore
from tests.conftest import FakeClock, host_stats, request

EXAMPLES = int(os.environ.get("GANTT_PROPERTY_EXAMPLES", "20"))
HOSTS = ["h0", "h1", "h2", "h3"]
CONFIG = Config.from_dict({
    "filter_scheduler": {"enabled_filters": ["ComputeFilter", "AvailabilityZoneFilter",
                                             "ServerGroupAntiAffinityFilter", "ServerGroupAffinityFilter"],
                         "host_subset_size": 2},
    "gantt": {"seed": 3},
})

op = st.one_of(
    st.tuples(st.just("report"), st.integers(0, 2), st.sampled_from(HOSTS), st.integers(0, 10)),
    st.tuples(st.just("aggregate"), st.integers(0, 2), st.integers(1, 2),
              st.lists(st.sampled_from(HOSTS), unique=True, max_size=3), st.sampled_from(["az1", "az2"])),
    st.tuples(st.just("claim"), st.integers(0, 2), st.integers(0, 11), st.sampled_from([None, None, "az1", "az2"]),
              st.sampled_from([None, None, "anti-affinity", "affinity"]), st.integers(1, 3)),
    st.tuples(st.just("release"), st.integers(0, 2), st.integers(0, 11)),
    # move: the consumer is the n-th booked one (n < 8), or c<n> whether booked or not
    st.tuples(st.just("move"), st.integers(0, 2), st.integers(0, 11), st.integers(1, 3), st.integers(0, 2)),
    st.tuples(st.just("confirm"), st.integers(0, 2), st.integers(0, 2)),
    st.tuples(st.just("revert"), st.integers(0, 2), st.integers(0, 2)),
    st.tuples(st.just("catch_up"), st.integers(0, 2)),
    st.tuples(st.just("reload"), st.integers(0, 2)),
)


def _spec(consumer: int, zone: str | None, policy: str | None, vcpus: int) -> dict[str, Any]:
    spec = request(vcpus=vcpus, memory_mb=1024) | {"instance_uuids": [f"c{consumer}"]}
    if zone:
        spec["availability_zone"] = zone
    if policy:
        spec["instance_group"] = {"uuid": f"g-{policy}", "policy": policy}
    return spec


class Booking(NamedTuple):
    host: str
    policy: str | None
    vcpus: int
    migration: str | None = None  # the move that put it there


def _check(store: Store, replicas: list[Replica], acked: dict[str, Booking], moving: dict[str, tuple[str, str]],
           clock: FakeClock, probes: list[dict[str, Any]]) -> None:
    snap = store.snapshot()
    assert audit(snap, CONFIG) == []
    held = {a.consumer_uuid: a for a in snap.allocations}
    for consumer, booking in acked.items():
        assert consumer in held and held[consumer].host == booking.host, f"acknowledged {consumer} moved/lost"
    for migration, (consumer, source) in moving.items():
        assert migration in held and held[migration].host == source, f"{migration}: source {source} lost"
        assert held[migration].instance_uuid == consumer
    assert set(held) == set(acked) | set(moving)
    per_host = Counter((a.group, a.host) for a in snap.allocations if a.group == "g-anti-affinity")
    assert all(count == 1 for count in per_host.values()), per_host
    affinity_hosts = {a.host for a in snap.allocations if a.group == "g-affinity"}
    assert len(affinity_hosts) <= 1, affinity_hosts
    fresh = Replica(store, CONFIG, clock=clock).start(follow=False)
    for replica in replicas:
        if replica.revision != snap.revision:
            continue  # behind the feed: it may answer from older state, and its claims are checked by the store
        for spec in probes:  # the same candidates with the same weights (ties may list in another row order)
            ours = sorted((c.host, round(c.weight, 9)) for c in replica.candidates(spec))
            assert ours == sorted((c.host, round(c.weight, 9)) for c in fresh.candidates(spec)), spec


def _run(store_a: Store, stores: list[Store], ops: list[tuple[Any, ...]]) -> None:
    clock = FakeClock()
    seed = Replica(store_a, CONFIG, clock=clock).start(follow=False)
    for host in HOSTS:
        seed.update_resource_stats(host, host_stats(vcpus=4, memory_mb=8192))
    replicas = [Replica(s, CONFIG, clock=clock).start(follow=False) for s in stores]
    acked: dict[str, Booking] = {}
    moving: dict[str, tuple[str, str]] = {}  # open migrations: migration -> (instance, source host)
    probes = [_spec(99, None, None, 1), _spec(99, "az1", None, 2), _spec(98, None, "anti-affinity", 1)]
    for consumer in (0, 1):  # two bookings to start from, so that moves have something to move
        [[chosen, *_]] = seed.select_destinations(_spec(consumer, None, None, 1))
        acked[f"c{consumer}"] = Booking(chosen.host, None, 1)
    for step in ops:
        kind, r = step[0], replicas[step[1]]
        clock.advance(1)
        expected: tuple[type[GanttError], ...] = (NoValidHost,)  # what this step may answer with, by the model
        try:
            if kind == "report":
                r.update_resource_stats(step[2], host_stats(vcpus=4, memory_mb=8192, num_io_ops=step[3]))
            elif kind == "aggregate":
                r.update_aggregate({"id": step[2], "hosts": step[3], "metadata": {"availability_zone": step[4]}})
            elif kind == "claim":
                consumer = f"c{step[2]}"
                if consumer in acked and acked[consumer].vcpus != step[5]:
                    expected = (Conflict,)  # a repeat asking for other resources is a move without a migration
                [[chosen, *_]] = r.select_destinations(_spec(step[2], step[3], step[4], step[5]))
                if consumer in acked:  # asking again must answer the same booking
                    assert chosen.host == acked[consumer].host
                else:
                    acked[consumer] = Booking(chosen.host, step[4], step[5])
            elif kind == "release":
                consumer = f"c{step[2]}"
                if consumer in acked:
                    r.release(consumer)
                    del acked[consumer]
            elif kind == "move":
                consumer, migration = f"c{step[2]}", f"m{step[4]}"
                if step[2] < 8 and acked:
                    consumer = sorted(acked)[step[2] % len(acked)]
                booking = acked.get(consumer)
                repeat = booking is not None and booking.migration == migration \
                    and moving.get(migration, (consumer,))[0] == consumer
                if booking is None or (migration in moving and not repeat):
                    expected = (Conflict, NotFound)
                policy = booking.policy if booking else None
                spec = _spec(int(consumer[1:]), None, policy, booking.vcpus if repeat and booking else step[3])
                [[chosen, *_]] = r.select_destinations(spec | {"migration_uuid": migration})
                assert booking is not None and (migration not in moving or repeat), step
                if repeat:
                    assert chosen.host == booking.host
                else:
                    assert chosen.host != booking.host  # allow_resize_to_same_host is off
                    moving[migration] = (consumer, booking.host)
                    acked[consumer] = Booking(chosen.host, policy, step[3], migration)
            elif kind == "confirm":
                migration = f"m{step[2]}"
                expected = (NotFound,)
                r.confirm_move(migration)
                assert moving.pop(migration, None) is not None, step
            elif kind == "revert":
                migration = f"m{step[2]}"
                consumer, source = moving.get(migration, ("", ""))
                booking = acked.get(consumer)
                expected = (NotFound,) if migration not in moving else (Conflict,)
                restored = r.revert_move(migration)
                assert booking is not None and booking.migration == migration, step
                assert restored.host == source
                del moving[migration]
                acked[consumer] = Booking(source, booking.policy, restored.resources["VCPU"])
            elif kind == "catch_up":
                r.catch_up()
            elif kind == "reload":
                r.load()
        except GanttError as exc:  # only what the model expects; the store is the truth
            assert isinstance(exc, expected), f"{step}: {exc!r}"
            event(f"{kind}: {type(exc).__name__}")
        else:
            event(f"{kind}: done")
        _check(store_a, replicas, acked, moving, clock, probes)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, min_size=5, max_size=40))
def test_replicas_on_a_memory_store(ops: list[tuple[Any, ...]]) -> None:
    store = MemoryStore()
    _run(store, [store, store, store], ops)


@settings(max_examples=max(5, EXAMPLES // 3), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, min_size=5, max_size=30))
def test_replicas_on_one_sqlite_file(tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[Any, ...]]) -> None:
    path = Path(tmp_path_factory.mktemp("prop")) / "gantt.sqlite"
    stores = [SQLiteStore(f"sqlite:///{path}") for _ in range(3)]  # one connection each, as processes have
    try:
        _run(stores[0], stores, ops)
    finally:
        for s in stores:
            s.close()
