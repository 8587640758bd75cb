"""Placements decided on the event loop (``Replica.perform`` running ``Replica.selecting``; SQLite commits them
on its writer thread): racing each other on a few nodes and racing another replica on the same file, they never
book past capacity, every acknowledged placement is in the store, and the steps that must block (a claim waiting
for another on the same node, a conflict's catch-up) go on on a handler thread.

In process: the app over a Replica on a real SQLite file, a second Replica on the same file placing from threads.
The same above ``[tuning] loop_decision_rows``, where the worker's decider thread drives the steps on a loop of its own.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx
import pytest

from gantt.config import Config
from gantt.model import GanttError, HostReport, NoValidHost
from gantt.replication.audit import audit
from gantt.replication.replica import Replica
from gantt.replication.steps import CONTENDED, Commit
from gantt.service.app import create_app
from gantt.service.runtime import Service
from tests.conftest import TableLockHolder, host_stats

T = TypeVar("T")
HOSTS, VCPUS = 3, 12
FLAVOR = {"name": "m1.tiny", "vcpus": 1, "memory_mb": 16, "root_gb": 1}


# Who hands the claims to the store's writer, by driver: the service's loop (a table of at most ``[tuning]
# loop_decision_rows`` rows); above it the worker's decider thread (``Decider``, ``[tuning] deciders`` of them),
# which drives the same steps on a loop of its own; with no deciders the handler threads, which commit in place.
_DRIVERS = {"loop": (20_000, 1, {threading.current_thread().name}), "decider": (0, 1, {"gantt-decider"}),
            "two deciders": (0, 2, {"gantt-decider-0", "gantt-decider-1"}), "threads": (0, 0, set())}


@pytest.mark.parametrize("driver", list(_DRIVERS))
def test_placements_on_the_loop_never_overbook_racing_another_replica(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     driver: str) -> None:
    rows, deciders, committers = _DRIVERS[driver]
    url = f"sqlite:///{tmp_path}/claims.sqlite"
    config = Config.from_dict({"gantt": {"seed": 5}, "tuning": {"loop_decision_rows": rows, "deciders": deciders}})
    on_loop = Replica.open(url, config)
    other = Replica.open(url, config)
    try:
        on_loop.report_many([HostReport.of(f"h{i}", host_stats(vcpus=VCPUS)) for i in range(HOSTS)])
        other.sync()
        assert len(other.table) == HOSTS

        def not_here(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError("the placement went to a handler thread instead of the loop")

        if driver != "threads":
            # the placement's thread path (no deciders) calls this: refused, so every placement below is decided
            # where asked
            monkeypatch.setattr(on_loop, "select_destinations", not_here)
        handed_over = 0
        run_here = on_loop.run

        def counted(steps: Any) -> Any:
            nonlocal handed_over
            handed_over += 1
            return run_here(steps)

        monkeypatch.setattr(on_loop, "run", counted)
        committed_from: set[str] = set()  # the threads that handed claims to the store's writer
        commit_on_loop = on_loop.store.commit_on_loop

        def noted(batch: Any, loop: Any) -> Any:
            committed_from.add(threading.current_thread().name)
            return commit_on_loop(batch, loop)

        monkeypatch.setattr(on_loop.store, "commit_on_loop", noted)
        decided_on: set[str] = set()  # the threads that drove the decisions
        select = on_loop._select

        def decided(spec: Any) -> Any:
            decided_on.add(threading.current_thread().name)
            return (yield from select(spec))

        monkeypatch.setattr(on_loop, "_select", decided)

        acked: list[str] = []
        statuses: list[int] = []
        lock = threading.Lock()

        def place_elsewhere() -> None:
            for _ in range(8):
                consumer = str(uuid.uuid4())
                try:
                    other.select_destinations({"flavor": FLAVOR, "instance_uuids": [consumer]})
                except (NoValidHost, GanttError):
                    continue
                with lock:
                    acked.append(consumer)

        async def place_on_loop(http: httpx.AsyncClient) -> None:
            for _ in range(5):
                consumer = str(uuid.uuid4())
                answer = await http.post("/v1/select_destinations",
                                         json={"flavor": FLAVOR, "instance_uuids": [consumer]})
                statuses.append(answer.status_code)
                if answer.status_code == 200:
                    with lock:
                        acked.append(consumer)

        async def run() -> None:
            transport = httpx.ASGITransport(app=create_app(on_loop))
            async with httpx.AsyncClient(transport=transport, base_url="http://gantt") as http, \
                    anyio.create_task_group() as group:
                for _ in range(3):
                    group.start_soon(anyio.to_thread.run_sync, place_elsewhere)
                for _ in range(8):
                    group.start_soon(place_on_loop, http)

        anyio.run(run)  # 24 + 40 asks for 36 vCPUs
        snap = on_loop.store.snapshot()
        assert audit(snap) == [], "a node is over capacity"
        stored = {a.consumer_uuid for a in snap.allocations}
        assert set(acked) == stored, "an acknowledged placement is missing, or one nobody was told about is stored"
        assert set(statuses) <= {200, 409}, statuses  # placed, or no room left (never an error)
        assert statuses.count(200) > 0
        assert len(stored) >= HOSTS * VCPUS - 3  # the cloud fills up (a few may give up under contention)
        assert handed_over > 0, "no claim waited for another on its node: the hand-off to a thread went untested"
        # Who decided is every driver asked; who committed from a loop is among them (a placement whose claim
        # waited for another on its node commits from a handler thread: with 3 nodes and 8 placements at once,
        # every placement one of two deciders drove went that way in 3 runs of 20).
        assert committed_from <= committers and bool(committed_from) == bool(committers), committed_from
        if committers:
            # every driver asked decided; the service's loop also hands a decision to a handler thread when the
            # feed holds the table at its start (a decider waits for it instead)
            assert committers <= decided_on, decided_on
            assert all(name.startswith("gantt-handler") for name in decided_on - committers), decided_on
    finally:
        on_loop.close()
        other.close()


def test_a_claim_on_the_loop_that_loses_its_node_revision_is_checked_again_and_lands(tmp_path: Path) -> None:
    """Another replica books on the same node between this one's decision and its commit: the store refuses the
    commit, the refusal goes back into the steps, which catch up (on a handler thread) and commit again."""
    url = f"sqlite:///{tmp_path}/race.sqlite"
    config = Config.from_dict({"gantt": {"seed": 5}})
    on_loop = Replica.open(url, config)
    other = Replica.open(url, config)
    try:
        on_loop.report_many([HostReport.of("h0", host_stats(vcpus=4))])
        other.sync()
        commit_on_loop = on_loop.store.commit_on_loop
        raced: list[str] = []

        def racing(batch: Any, loop: Any) -> Any:
            if batch.allocations and not raced:  # the first claim: the other replica gets there first
                raced.append(other.select_destinations({"flavor": FLAVOR})[0][0].consumer_uuid)
            return commit_on_loop(batch, loop)

        on_loop.store.commit_on_loop = racing  # type: ignore[method-assign]
        conflicts = on_loop.revalidations

        async def run() -> httpx.Response:
            transport = httpx.ASGITransport(app=create_app(on_loop))
            async with httpx.AsyncClient(transport=transport, base_url="http://gantt") as http:
                return await http.post("/v1/select_destinations", json={"flavor": FLAVOR})

        answer = anyio.run(run)
        assert answer.status_code == 200, answer.text
        assert raced and on_loop.revalidations == conflicts + 1, "the store did not refuse the first commit"
        mine = answer.json()["selections"][0][0]["consumer_uuid"]
        stored = {a.consumer_uuid for a in on_loop.store.snapshot().allocations}
        assert stored == {mine, raced[0]}
        assert {a.consumer_uuid for a in on_loop.table.allocations()} == stored  # applied here too
    finally:
        on_loop.close()
        other.close()


def test_a_committed_claim_applies_its_result_on_a_thread_while_the_feed_holds_the_table(tmp_path: Path) -> None:
    """The commit lands while another thread (the feed applying a batch) holds the table lock: the steps ask for
    a thread before applying the result instead of waiting for the lock where they are driven (the event loop,
    whose every connection would wait too); driven on there, the result is applied."""
    # No follower thread: the test is the one holding the lock (a follower applying the report would hold it at
    # the first step, which then rightly asks for a thread before deciding).
    replica = Replica.open(f"sqlite:///{tmp_path}/held.sqlite", Config.from_dict({"gantt": {"seed": 5}}), follow=False)
    try:
        replica.report_many([HostReport.of("h0", host_stats(vcpus=4))])
        steps = replica.selecting({"flavor": FLAVOR})
        commit = steps.send(None)
        assert isinstance(commit, Commit) and commit.batch.allocations, commit
        result = replica.store.commit(commit.batch)
        with TableLockHolder(replica.table):
            step = steps.send(result)  # without the glance: blocks on the lock until released, then finishes
            assert step == CONTENDED, step
        answer = replica.run(steps)
        consumer = answer[0][0].consumer_uuid
        assert replica.table.allocation(consumer) is not None
    finally:
        replica.close()


def test_a_report_written_while_the_feed_holds_the_table_is_applied_on_a_thread(tmp_path: Path) -> None:
    """The same for a report (committed by SQLite's writer while the loop waits): its result is applied on a
    handler thread while another thread holds the table lock, not on the loop, and the answer still comes."""
    replica = Replica.open(f"sqlite:///{tmp_path}/report.sqlite", Config.from_dict({"gantt": {"seed": 5}}))
    try:
        replica.report_many([HostReport.of("h0", host_stats(vcpus=4))])
        applied_on = _threads_calling(replica, "_written")

        async def run() -> httpx.Response:
            transport = httpx.ASGITransport(app=create_app(replica))
            async with httpx.AsyncClient(transport=transport, base_url="http://gantt") as http:
                return await _while_held(replica, http.post("/v1/resource-stats",
                                                            json={"name": "h0", "stats": host_stats(vcpus=8)}))

        answer = anyio.run(run)
        assert answer.status_code == 200, answer.text
        assert applied_on and applied_on[0].startswith("gantt-handler"), applied_on
    finally:
        replica.close()


@pytest.mark.parametrize("decider", [True, False])
def test_a_decider_waits_for_the_table_where_the_loop_goes_to_a_thread(tmp_path: Path, decider: bool) -> None:
    """While another thread (the feed) holds the table lock, a placement driven on the service's loop goes on on
    a handler thread (every connection would wait behind it); one driven on a decider, whose loop serves
    decisions only, waits for the lock where it is (no hop), and both are answered once the lock is free."""
    tuning = {"loop_decision_rows": 0 if decider else 20_000, "deciders": 1}
    config = Config.from_dict({"gantt": {"seed": 5}, "tuning": tuning})
    replica = _lone_replica(tmp_path)
    try:
        handed = _threads_calling(replica, "run")

        async def run() -> Any:
            svc = Service(replica, config, None)
            try:
                steps = replica.selecting({"flavor": FLAVOR})
                return await _while_held(replica, replica.perform(steps, svc, decision=True))
            finally:
                svc.close()

        [[chosen]] = anyio.run(run)
        assert replica.table.allocation(chosen.consumer_uuid) is not None
        assert handed == ([] if decider else [handed[0]]), handed
        assert decider or handed[0].startswith("gantt-handler"), handed
    finally:
        replica.close()


def _threads_calling(replica: Replica, method: str) -> list[str]:
    """The names of the threads that call ``replica``'s ``method`` from now on, in order (the call goes on)."""
    names: list[str] = []
    original = getattr(replica, method)

    def noted(*args: Any) -> Any:
        names.append(threading.current_thread().name)
        return original(*args)

    setattr(replica, method, noted)
    return names


def _lone_replica(tmp_path: Path) -> Replica:
    """A replica holding one host, not following its file: the table's lock is the test's alone."""
    replica = Replica.open(f"sqlite:///{tmp_path}/lone.sqlite", Config.from_dict({"gantt": {"seed": 5}}),
                           follow=False)
    replica.report_many([HostReport.of("h0", host_stats(vcpus=4))])
    return replica


async def _while_held(replica: Replica, work: Awaitable[T]) -> T:
    """``work`` awaited while another thread (as the feed would) holds the table's lock, for 0.5 s at most."""
    with TableLockHolder(replica.table) as feed:
        async with anyio.create_task_group() as group:
            group.start_soon(anyio.to_thread.run_sync, _release_later, feed.release)
            result = await work
    return result


def _release_later(done: threading.Event) -> None:
    done.wait(0.5)  # the request is answered (if at all) while the lock is held for this long
    done.set()



def test_reading_the_feed_while_the_feed_holds_the_table_goes_on_on_a_thread(tmp_path: Path) -> None:
    """``Service.sync`` (a release's answer reads the feed up to its own commit) reads and applies in place where
    the store is local, but not while another thread holds the table lock: then on a handler thread."""
    replica = _lone_replica(tmp_path)
    try:
        synced_on = _threads_calling(replica, "sync")

        async def run() -> int:
            svc = Service(replica, replica.config, None)
            try:
                free = await svc.sync()  # nobody holds the lock: in place
                busy = await _while_held(replica, svc.sync())
                return busy - free
            finally:
                svc.close()

        assert anyio.run(run) == 0
        assert synced_on[0] == threading.current_thread().name, synced_on
        assert synced_on[1].startswith("gantt-handler"), synced_on
    finally:
        replica.close()
