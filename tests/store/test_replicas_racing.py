"""Replicas racing on one SQLite file, in threads, with their follower threads on: the promise is never to
double-book and never to lose an acknowledged claim, whatever interleaves.

test_replica_properties drives random operations one at a time (the test decides each replica's lag); this one runs
them at once: clients claim (one or two instances per request), ask again for a booking they hold through another
replica (twins, racing the first ask), release through any replica; hosts report (capacity only grows, so that
the audit can hold every allocation against the final capacity), an operator moves hosts between zones, replicas
reload from a snapshot in the middle of decisions, and the feed is compacted to its last few revisions now and
then so that followers fall off its end and re-snapshot. Each replica has its own SQLiteStore handle, as a process
would.

At the end, after every replica has caught up: no node over capacity; every acknowledged claim that was not
released is held, once, on the node it was answered with; every release that was answered is gone; nothing else
is held (a failed request left nothing behind); and every replica's view of the allocations and of the usage
is the store's.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gantt import NoValidHost
from gantt.config import Config
from gantt.replication.audit import audit
from gantt.replication.replica import Replica
from gantt.store.sqlite import SQLiteStore
from tests.conftest import host_stats, request

CONFIG = Config.from_dict({
    "filter_scheduler": {"enabled_filters": ["ComputeFilter", "AvailabilityZoneFilter"], "host_subset_size": 2},
    "DEFAULT": {"service_down_time": 86400},
})
HOSTS = [f"h{i}" for i in range(6)]
ZONES = (None, None, "az1", "az2")
REPLICAS = 3
CLIENTS = 4
STEPS = 40  # per client thread


@dataclass
class Ledger:
    """What the clients were told, under one lock: the model the store is audited against."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    held: dict[str, str] = field(default_factory=dict)  # consumer -> host it was answered with
    released: set[str] = field(default_factory=set)
    asked: set[str] = field(default_factory=set)  # every consumer ever asked for
    errors: list[str] = field(default_factory=list)


def _client(index: int, seed: int, replicas: list[Replica], ledger: Ledger) -> None:
    rng = random.Random(seed * 1000 + index)
    mine: list[str] = []
    for step in range(STEPS):
        replica = rng.choice(replicas)
        try:
            if mine and rng.random() < 0.3:
                consumer = mine.pop(rng.randrange(len(mine)))
                gone = rng.choice(replicas).release(consumer)
                with ledger.lock:
                    assert gone.consumer_uuid == consumer
                    ledger.released.add(consumer)
                    del ledger.held[consumer]
                continue
            count = rng.choice((1, 1, 2))
            uuids = [f"c{index}-{step}-{i}" for i in range(count)]
            spec = request(vcpus=rng.choice((1, 1, 2)), memory_mb=512, instance_uuids=uuids,
                           num_instances=count, availability_zone=rng.choice(ZONES))
            with ledger.lock:
                ledger.asked.update(uuids)
            twin = rng.random() < 0.25  # the same request through another replica, at the same time
            answers: list[list[Any] | BaseException] = []
            if twin:
                other = rng.choice([r for r in replicas if r is not replica])
                thread = threading.Thread(target=_ask, args=(other, spec, answers))
                thread.start()
                _ask(replica, spec, answers)
                thread.join(timeout=60)
            else:
                _ask(replica, spec, answers)
            booked = [a for a in answers if not isinstance(a, BaseException)]
            for answer in answers:
                if isinstance(answer, BaseException) and not isinstance(answer, NoValidHost):
                    raise answer
            if not booked:
                continue
            hosts = [{u: sel[0].host for u, sel in zip(uuids, answer, strict=True)} for answer in booked]
            # twins that both succeed were answered the one booking
            assert all(h == hosts[0] for h in hosts), f"twins answered differently: {hosts}"
            with ledger.lock:
                ledger.held.update(hosts[0])
            mine.extend(uuids)
        except BaseException as exc:  # reported by the test, with the step
            with ledger.lock:
                ledger.errors.append(f"client {index} step {step}: {exc!r}")
            return


def _ask(replica: Replica, spec: dict[str, Any], answers: list[Any]) -> None:
    try:
        answers.append(replica.select_destinations(spec))
    except BaseException as exc:
        answers.append(exc)


def _operator(seed: int, replicas: list[Replica], ledger: Ledger, stop: threading.Event) -> None:
    """Reports (capacity only grows; other fields move, so they are written, not touches), zones, reloads, the
    feed cut short."""
    rng = random.Random(seed)
    vcpus = dict.fromkeys(HOSTS, 3)
    n = 0
    try:
        while not stop.is_set() and n < 400:
            n += 1
            replica = rng.choice(replicas)
            roll = rng.random()
            if roll < 0.5:
                host = rng.choice(HOSTS)
                vcpus[host] = min(6, vcpus[host] + rng.choice((0, 0, 1)))
                replica.update_resource_stats(host, host_stats(vcpus=vcpus[host], memory_mb=8192,
                                                               num_io_ops=rng.randrange(4)))
            elif roll < 0.8:
                members = rng.sample(HOSTS, rng.randrange(1, 4))
                replica.update_aggregate({"id": rng.choice((1, 2)), "hosts": members,
                                          "metadata": {"availability_zone": rng.choice(("az1", "az2"))}})
            elif roll < 0.9:
                replica.load()  # a reload racing the decisions in flight on the same replica
            else:
                replica.store.compact(keep=rng.randrange(1, 4))  # lagging followers fall off the feed's end
            stop.wait(0.002)
    except BaseException as exc:
        with ledger.lock:
            ledger.errors.append(f"operator: {exc!r}")


@pytest.mark.parametrize("seed", range(6))
def test_replicas_racing_on_one_file_never_double_book_nor_lose_a_claim(tmp_path: Path, seed: int) -> None:
    url = f"sqlite:///{tmp_path}/gantt.sqlite?retention=30"  # short, and cut shorter by the operator
    stores = [SQLiteStore(url) for _ in range(REPLICAS)]
    replicas: list[Replica] = []
    try:
        seeder = Replica(stores[0], CONFIG).start(follow=False)
        for host in HOSTS:
            seeder.update_resource_stats(host, host_stats(vcpus=3, memory_mb=8192))
        replicas = [Replica(store, CONFIG).start() for store in stores]
        ledger = Ledger()
        stop = threading.Event()
        operator = threading.Thread(target=_operator, args=(seed, replicas, ledger, stop))
        clients = [threading.Thread(target=_client, args=(i, seed, replicas, ledger)) for i in range(CLIENTS)]
        operator.start()
        for thread in clients:
            thread.start()
        for thread in clients:
            thread.join(timeout=240)
        stop.set()
        operator.join(timeout=60)
        assert not any(t.is_alive() for t in [operator, *clients]), "a thread hung"
        assert ledger.errors == [], ledger.errors

        snap = stores[0].snapshot()
        problems = audit(snap, CONFIG)
        assert problems == [], f"{problems}; held: {sorted((a.host, a.consumer_uuid) for a in snap.allocations)}"
        held = {a.consumer_uuid: a.host for a in snap.allocations}
        assert len(held) == len(snap.allocations)
        lost = {c: h for c, h in ledger.held.items() if held.get(c) != h}
        assert lost == {}, "acknowledged claims missing or moved"
        assert not ledger.released & set(held), "a released claim is held again"
        assert set(held) <= ledger.asked
        assert set(held) == set(ledger.held), f"held but never acknowledged: {set(held) - set(ledger.held)}"
        fresh = Replica(stores[0], CONFIG).start(follow=False)
        probe = request(vcpus=1, memory_mb=512)
        expected = sorted((c.host, round(c.weight, 9)) for c in fresh.candidates(probe))
        for replica in replicas:
            replica.sync()
            seen = {a.consumer_uuid: a.host for a in replica.allocations()}
            assert seen == held, (f"replica {replicas.index(replica)} at {replica.revision} (store {snap.revision}):"
                                  f" extra {set(seen) - set(held)}, missing {set(held) - set(seen)}")
            assert sorted((c.host, round(c.weight, 9)) for c in replica.candidates(probe)) == expected
    finally:
        for replica in replicas:
            replica.stop()
        for store in stores:
            store.close()
