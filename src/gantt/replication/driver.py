"""The two drivers of steps (``gantt.replication.steps``): one in the caller's thread, one on an event loop.

In a thread every step is carried out where it is asked for: a commit blocks, a sync reads the feed, a request
to go on off the loop asks nothing. On an event loop the store must have a writer of its own (SQLite): each
commit is handed to it while the loop waits on a future of this loop, its changes are applied here; a sync, or
a step that may block (``OFF_LOOP``, ``CONTENDED``), sends the work (or the rest of the operation) to a handler
thread through ``offload``. ``Replica.run`` and ``Replica.perform`` choose between them; nothing else drives
steps.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol, TypeVar

from gantt.replication.steps import CONTENDED, SYNC, Commit, Steps, Write, advance
from gantt.store.base import Batch, CommitResult, Store

T = TypeVar("T")

# Runs ``fn(*args)`` on a handler thread and gives its answer to the loop (the service's thread pool).
Offload = Callable[..., Awaitable[Any]]


class Target(Protocol):
    """What the drivers use of the replica whose operation they drive (``Replica``)."""

    @property
    def store(self) -> Store: ...

    def sync(self) -> int: ...

    def write(self, batch: Batch) -> int: ...

    def run(self, steps: Steps[T]) -> T: ...

    def _written(self, batch: Batch, result: CommitResult) -> CommitResult: ...

    def _uncontended(self) -> bool: ...


class Runtime(Protocol):
    """Where an operation run from an event loop (``Replica.perform``) may go instead: the service's handler
    threads and decider loops, and how large a table it still decides on its own loop."""

    @property
    def loop_decision_rows(self) -> int: ...

    @property
    def deciders(self) -> int: ...

    async def run(self, fn: Callable[..., T], *args: Any) -> T: ...

    async def on_decider(self, work: Coroutine[Any, Any, T]) -> T: ...


def drive_here(target: Target, steps: Steps[T]) -> T:
    """Carry out ``steps`` in this thread: each commit, write or sync made here, its result (or error) sent back
    where it was asked for; a request to leave the loop needs nothing."""
    value: Any = None
    error: Exception | None = None
    while True:
        done, step = advance(steps, value, error)
        if done:
            return step  # type: ignore[no-any-return]  # advance answers Any: the operation's own T
        value = error = None
        try:
            if isinstance(step, Commit):
                value = target.store.commit(step.batch)
            elif isinstance(step, Write):
                value = target.write(step.batch)
            elif step is SYNC:
                value = target.sync()
        except Exception as exc:  # raised where the step was asked for, as a call would
            error = exc


async def drive_on_loop(target: Target, steps: Steps[T], offload: Offload, *, waits_for_lock: bool = False) -> T:
    """Carry out ``steps`` on the running loop, whose store commits on a writer of its own (see the module).
    ``waits_for_lock``: the loop serves decisions only (a decider), so a ``CONTENDED`` step waits for the table's
    lock here: profiled at 100,000 hosts with two workers, the hop to a handler thread a decider made whenever
    the feed held the lock was a fifth of its time."""
    loop = asyncio.get_running_loop()
    store = target.store
    value: Any = None
    error: Exception | None = None
    while True:
        done, step = advance(steps, value, error)
        if done:
            return step  # type: ignore[no-any-return]  # advance answers Any: the operation's own T
        value = error = None
        if step is CONTENDED and waits_for_lock:
            continue
        if not isinstance(step, (Commit, Write)) and step is not SYNC:
            # OFF_LOOP, or CONTENDED on a loop that serves connections: the rest on a handler thread
            return await offload(target.run, steps)  # type: ignore[no-any-return]  # the offloaded call answers Any: the operation's own T
        try:
            if isinstance(step, Commit):
                # A future of this loop: the writer completes a group's with one wake-up, where a thread-safe
                # future wrapped for the loop cost a Condition, a chained callback and a wake-up per claim (~4 %
                # of the loop's time per placement, profiled).
                value = await store.commit_on_loop(step.batch, loop)
            elif isinstance(step, Write):
                batch = step.batch
                result = await store.commit_on_loop(batch, loop)
                if target._uncontended():
                    value = target._written(batch, result).revision
                else:  # the feed applies a batch under the table lock: ours on a thread, not stalling the loop
                    value = (await offload(target._written, batch, result)).revision
            else:  # SYNC
                # On a handler thread: measured under load, the read of the store's head on the loop (its GIL
                # given up and waited for again) cost more writes/s than the hop, though less CPU.
                value = await offload(target.sync)
        except Exception as exc:  # raised where the step was asked for, as drive_here does
            error = exc
