"""Steps: an operation written once as a generator and driven where it is cheapest.

A write or a claim that must commit to the store, read the feed or wait for a lock yields what it needs (a
``Batch`` to commit, a catch-up, ``THREAD``) and gets the outcome back: the value, or the error thrown in where it
was asked for. A handler thread drives it in place (``Replica.run_claims``, ``PlacementFacade.run_steps``); the
event loop drives it where the store has a writer of its own (``Service.claim``, the Placement face's
``steps``), handing the rest to a thread when a step asks for ``THREAD``. The operation itself is the same code
either way; only its drivers differ, and they share ``advance``.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, TypeVar

T = TypeVar("T")

THREAD = "thread"  # a step asking to go on where blocking is fine (a handler thread); in place, it asks nothing
# A step saying that another thread holds the table's lock now (the feed applying a batch): the service's event
# loop goes on on a handler thread rather than stall every connection behind it; a driver whose loop serves
# decisions only (a decider) waits for the lock where it is, which costs less than the hop; in place, nothing.
CONTENDED = "contended"


def advance(steps: Generator[Any, Any, Any], value: Any = None, error: BaseException | None = None,
            ) -> tuple[bool, Any]:
    """Give ``steps`` the outcome of its last step (``value``, or ``error`` thrown in where it was asked for):
    ``(True, its answer)`` once it has returned, else ``(False, its next step)``."""
    try:
        return False, (steps.throw(error) if error is not None else steps.send(value))
    except StopIteration as stop:
        return True, stop.value
