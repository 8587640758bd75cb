"""Provider writes as steps (``gantt.replication.steps``), run from the Placement face's ``Call.steps`` by
``Replica.perform``.

On SQLite the event loop carries them out itself: the store's writer commits, no handler thread is asked for
unless the replica must catch up with the store. On a store that commits in its caller (memory, etcd) the whole
write runs on one handler thread. Refusals come out the same way on both: a stale generation is thrown back into
the steps, which catch up and refuse it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from gantt.config import Config
from gantt.model import GenerationConflict, Inventory, NotFound
from gantt.placement.api.microversion import MAX_VERSION
from gantt.placement.api.wire import Call
from gantt.placement.facade import Placement
from gantt.replication.replica import Replica
from gantt.resources.providers import ConsumerWrite, DuplicateName
from gantt.store.urls import open_store
from tests.conftest import TableLockHolder


@pytest.fixture(params=["sqlite", "memory"])
def placement(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Placement]:
    url = f"sqlite:///{tmp_path}/gantt.sqlite" if request.param == "sqlite" else "memory://"
    store = open_store(url)
    replica = Replica(store, Config()).start(follow=False)
    try:
        yield Placement(replica)
    finally:
        replica.close()
        store.close()


class _Runtime:
    """The service's runtime as a test sees it: every hop to a handler thread noted, no deciders."""

    loop_decision_rows = 200_000
    deciders = 0

    def __init__(self, hops: list[Callable[..., Any]], before: Callable[[], Any]) -> None:
        self.hops = hops
        self.before = before

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        self.hops.append(fn)  # every hop to a handler thread the write asks for
        self.before()
        return await asyncio.get_running_loop().run_in_executor(None, partial(fn, *args))

    async def on_decider(self, work: Any) -> Any:
        raise AssertionError("a Placement write is no decision")


def _call(placement: Placement, hops: list[Callable[..., Any]], before: Callable[[], Any] = lambda: None) -> Call:
    runtime = _Runtime(hops, before)
    return Call(None, MAX_VERSION, placement, runtime, "")  # type: ignore[arg-type]  # steps read no request


def _in_place(placement: Placement) -> bool:
    """Whether the store commits on a writer of its own (SQLite): then the loop runs the write itself."""
    return placement.replica.store.queued_commits


def test_writes_to_a_known_provider_take_no_handler_thread_on_sqlite(placement: Placement) -> None:
    made = placement.create_provider("cn1", "00000000-0000-0000-0000-000000000001")
    hops: list[Callable[..., Any]] = []
    call = _call(placement, hops)
    found, inventories = asyncio.run(call.steps(placement.set_inventories_steps, made.uuid, made.generation,
                                                {"VCPU": Inventory(total=8)}, reserved_may_equal_total=False))
    assert found.generation == made.generation + 1
    assert inventories["VCPU"].total == 8
    assert placement.provider(made.uuid).generation == found.generation  # applied here: read your own write
    # SQLite: built on the loop, committed by the store's writer; memory: all of it on one handler thread
    assert len(hops) == (0 if _in_place(placement) else 1)


def test_a_stale_generation_is_refused_after_catching_up(placement: Placement) -> None:
    made = placement.create_provider("cn1", "00000000-0000-0000-0000-000000000001")
    placement.set_provider_traits(made.uuid, made.generation, ["HW_CPU_X86_AVX"])
    hops: list[Callable[..., Any]] = []
    with pytest.raises(GenerationConflict):
        asyncio.run(_call(placement, hops).steps(placement.set_provider_traits_steps, made.uuid, made.generation,
                                               ["HW_CPU_X86_SSE"]))
    assert placement.provider(made.uuid).record.stats.traits == ["HW_CPU_X86_AVX"]
    # SQLite: one catch-up on a handler thread (the client's generation is behind this placement's), then refused
    # on the loop; memory: the whole write on one handler thread
    assert len(hops) == 1


def test_the_stores_refusal_is_thrown_into_the_steps(tmp_path: Path) -> None:
    """A replica behind another process's write builds a batch the store refuses: the refusal reaches the steps
    where the commit was asked for, which catch up (so the client's next read here shows the winning write) and
    give the client its 409."""
    url = f"sqlite:///{tmp_path}/gantt.sqlite"
    stores = [open_store(url), open_store(url)]
    ahead, behind = (Placement(Replica(store, Config()).start(follow=False)) for store in stores)
    try:
        made = ahead.create_provider("cn1", "00000000-0000-0000-0000-000000000001")
        behind.replica.sync()
        ahead.set_provider_traits(made.uuid, made.generation, ["HW_CPU_X86_AVX"])
        hops: list[Callable[..., Any]] = []
        with pytest.raises(GenerationConflict):
            asyncio.run(_call(behind, hops).steps(behind.set_provider_traits_steps, made.uuid, made.generation,
                                                  ["HW_CPU_X86_SSE"]))
        assert len(hops) == 1  # the catch-up before refusing
        assert behind.providers.get(made.uuid).record.stats.traits == ["HW_CPU_X86_AVX"]
        assert behind.providers.get(made.uuid).generation == made.generation + 1
    finally:
        for placement in (ahead, behind):
            placement.replica.close()
        for store in stores:
            store.close()


@pytest.fixture
def sqlite_placement(tmp_path: Path) -> Iterator[Placement]:
    store = open_store(f"sqlite:///{tmp_path}/gantt.sqlite")
    replica = Replica(store, Config()).start(follow=False)
    try:
        yield Placement(replica)
    finally:
        replica.close()
        store.close()


def test_a_busy_table_lock_sends_the_rest_to_a_handler_thread(sqlite_placement: Placement) -> None:
    """The loop never waits for the table's lock (a long candidates answer may hold it): the write goes on on a
    handler thread, which waits there instead."""
    placement = sqlite_placement
    made = placement.create_provider("cn1", "00000000-0000-0000-0000-000000000001")
    lock = TableLockHolder(placement.table).start()
    hops: list[Callable[..., Any]] = []
    call = _call(placement, hops, before=lock.release.set)
    found = asyncio.run(call.steps(placement.set_provider_traits_steps, made.uuid, made.generation,
                                   ["HW_CPU_X86_AVX"]))
    lock.thread.join()
    assert len(hops) == 1
    assert found.generation == made.generation + 1
    assert found.record.stats.traits == ["HW_CPU_X86_AVX"]


def test_a_commit_is_applied_on_a_handler_thread_while_the_table_lock_is_busy(sqlite_placement: Placement) -> None:
    """The commit's apply (``Replica._written``) takes the table's lock too: when another thread holds it at that
    moment (the feed applying a batch), the apply goes to a handler thread rather than stalling the loop."""
    placement = sqlite_placement
    made = placement.create_provider("cn1", "00000000-0000-0000-0000-000000000001")
    lock = TableLockHolder(placement.table)
    store = placement.replica.store
    commit = store.commit_on_loop

    def commit_then_lock(batch: Any, loop: Any) -> Any:
        future = commit(batch, loop)  # the batch is built: the lock is taken while its commit is in flight
        lock.start()
        return future

    store.commit_on_loop = commit_then_lock  # type: ignore[method-assign]
    hops: list[Callable[..., Any]] = []
    call = _call(placement, hops, before=lock.release.set)
    try:
        found = asyncio.run(call.steps(placement.set_provider_traits_steps, made.uuid, made.generation,
                                       ["HW_CPU_X86_AVX"]))
    finally:
        lock.stop()
    assert hops == [placement.replica._written]
    assert found.generation == made.generation + 1
    assert placement.provider(made.uuid).record.stats.traits == ["HW_CPU_X86_AVX"]


def test_a_create_takes_no_catch_up_unless_another_process_wrote(tmp_path: Path) -> None:
    """SQLite checks a create's freshness in its writer (``Batch.fresh_as_of``): a replica that holds every
    revision creates without reading the store first (no handler thread); one behind another process's write is
    refused there, catches up once, and finds the name taken, as Placement's unique name has it."""
    url = f"sqlite:///{tmp_path}/gantt.sqlite"
    stores = [open_store(url), open_store(url)]
    here, there = (Placement(Replica(store, Config()).start(follow=False)) for store in stores)
    try:
        hops: list[Callable[..., Any]] = []
        made = asyncio.run(_call(here, hops).steps(here.create_provider_steps, "cn1",
                                                   "00000000-0000-0000-0000-000000000001"))
        assert made.name == "cn1"
        assert hops == []  # built, committed and applied on the loop
        there.replica.sync()
        there.create_provider("cn2", "00000000-0000-0000-0000-000000000002")  # another process's write
        with pytest.raises(DuplicateName):
            asyncio.run(_call(here, hops).steps(here.create_provider_steps, "cn2",
                                                "00000000-0000-0000-0000-000000000003"))
        assert hops == [here.replica.sync]  # refused by the writer, caught up once
        assert here.providers.by_name["cn2"] == "00000000-0000-0000-0000-000000000002"
        again = asyncio.run(_call(here, hops).steps(here.create_provider_steps, "cn3",
                                                    "00000000-0000-0000-0000-000000000004"))
        assert again.name == "cn3" and hops == [here.replica.sync]  # caught up: fresh again
    finally:
        for placement in (here, there):
            placement.replica.close()
        for store in stores:
            store.close()


def test_a_create_of_a_name_in_flight_here_catches_up_first(tmp_path: Path) -> None:
    """Two creates of one name through this replica at once, the second built while the first is in flight: the
    second does not trust its memory (which lacks the first), catches up until the first is applied, and is
    refused. (SQLite: a store that checks a create's freshness; others catch up before every create.)"""
    store = open_store(f"sqlite:///{tmp_path}/gantt.sqlite")
    placement = Placement(Replica(store, Config()).start(follow=False))
    hops: list[Callable[..., Any]] = []

    async def both() -> list[Any]:
        call = _call(placement, hops)
        return await asyncio.gather(call.steps(placement.create_provider_steps, "cn1",
                                               "00000000-0000-0000-0000-000000000001"),
                                    call.steps(placement.create_provider_steps, "cn1",
                                               "00000000-0000-0000-0000-000000000002"),
                                    return_exceptions=True)

    try:
        first, second = asyncio.run(both())
        assert first.name == "cn1"
        assert isinstance(second, DuplicateName)
        assert [p.uuid for p in placement.provider_list()] == ["00000000-0000-0000-0000-000000000001"]
    finally:
        placement.replica.close()
        store.close()


def test_allocations_are_written_and_deleted_on_the_loop_on_sqlite(placement: Placement) -> None:
    """PUT /allocations and DELETE /allocations/{consumer} as steps: naming providers and classes this placement
    holds, on SQLite neither asks for a handler thread (the names need no catch-up); memory runs each on one."""
    made = placement.create_provider("cn1", "00000000-0000-0000-0000-000000000001")
    placement.set_inventories(made.uuid, made.generation, {"VCPU": Inventory(total=8)}, reserved_may_equal_total=False)
    consumer = "00000000-0000-0000-0000-0000000000c1"
    hops: list[Callable[..., Any]] = []
    call = _call(placement, hops)
    write = ConsumerWrite(consumer, {made.uuid: {"VCPU": 2}}, "p", "u", None, check_generation=True)
    asyncio.run(call.steps(placement.consumers.write_allocations_steps, [write]))
    assert placement.table.allocation(consumer) is not None
    assert placement.provider(made.uuid).generation == made.generation + 2  # applied here: read your own write
    asyncio.run(call.steps(placement.consumers.delete_allocations_steps, consumer))
    assert placement.table.allocation(consumer) is None
    assert len(hops) == (0 if _in_place(placement) else 2)
    with pytest.raises(NotFound):  # nothing left to delete: looked for again after a catch-up, then refused
        asyncio.run(call.steps(placement.consumers.delete_allocations_steps, consumer))
