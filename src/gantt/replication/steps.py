"""Steps: an operation written once as a generator and driven where it is cheapest.

A write or a claim that must commit to the store, read the feed or wait for a lock yields a step saying what it
needs, and gets the outcome back: the value, or the error thrown in where it was asked for. The step kinds:

- ``Commit(batch)``: commit the batch; the answer is the store's ``CommitResult``, which the operation applies
  itself (a claim: ``Replica`` moves its nodes' usage revisions as only a conditional commit may);
- ``Write(batch)``: commit the batch and apply its changes here (read your own writes); the answer is the revision;
- ``SYNC``: read the feed up to everything the store had committed when asked (``Follower.sync``);
- ``OFF_LOOP``: go on where blocking is fine (a wait for another claim's lock, a catch-up that may wait for the
  feed); in a thread it asks nothing;
- ``CONTENDED``: another thread holds the table's lock now (the feed applying a batch): the service's event loop
  goes on on a handler thread rather than stall every connection behind it; a loop that serves decisions only (a
  decider) waits for the lock where it is, which costs less than the hop; in a thread, nothing.

``gantt.replication.driver`` carries them out, in a thread or on an event loop; the operation is the same code
either way.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, Final, Protocol, TypeVar

from gantt.store.base import Batch

T = TypeVar("T")


class Step:
    """What an operation asks of its driver; the kinds below are the only ones."""

    __slots__ = ()


class Commit(Step):
    """Commit ``batch``; the operation gets the ``CommitResult`` and applies it itself."""

    __slots__ = ("batch",)

    def __init__(self, batch: Batch) -> None:
        self.batch = batch


class Write(Step):
    """Commit ``batch`` and apply its changes to the replica; the operation gets the revision."""

    __slots__ = ("batch",)

    def __init__(self, batch: Batch) -> None:
        self.batch = batch


class Sync(Step):
    """Read the feed up to the store's head (its answer: the revision reached)."""

    __slots__ = ()


class OffLoop(Step):
    """Go on where blocking is fine: a handler thread."""

    __slots__ = ()


class Contended(Step):
    """Another thread holds the table's lock now: an event loop that serves connections goes on on a thread."""

    __slots__ = ()


SYNC: Final = Sync()
OFF_LOOP: Final = OffLoop()
CONTENDED: Final = Contended()

# An operation as steps: it yields Steps, gets each one's answer sent back (or its error thrown in), and returns
# its own answer.
Steps = Generator[Step, Any, T]


class Lock(Protocol):
    """A lock or re-entrant lock (the host table's)."""

    def acquire(self, blocking: bool = ..., timeout: float = ...) -> bool: ...

    def release(self) -> None: ...


class _Release:
    """A lock already taken, released at the end of a ``with``."""

    __slots__ = ("lock",)

    def __init__(self, lock: Lock) -> None:
        self.lock = lock

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        self.lock.release()


def holding(lock: Lock) -> Steps[_Release]:
    """``lock`` taken, for a ``with`` (``with (yield from holding(lock)):``): when another thread holds it (a long
    read, the feed), the steps first ask to go on off the loop (``OFF_LOOP``), so that an event loop never waits
    for it."""
    if not lock.acquire(blocking=False):
        yield OFF_LOOP
        lock.acquire()
    return _Release(lock)


def writing(batch: Batch) -> Steps[int]:
    """A write as an operation (``Replica.perform``): ``batch`` committed and applied; the answer its revision."""
    revision: int = yield Write(batch)
    return revision


def advance(steps: Steps[Any], value: Any = None, error: BaseException | None = None) -> tuple[bool, Any]:
    """Give ``steps`` the outcome of its last step (``value``, or ``error`` thrown in where it was asked for):
    ``(True, its answer)`` once it has returned, else ``(False, its next step)``."""
    try:
        return False, (steps.throw(error) if error is not None else steps.send(value))
    except StopIteration as stop:
        return True, stop.value
