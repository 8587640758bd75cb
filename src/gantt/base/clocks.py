"""The two clocks a replica reads: the wall clock it stamps what it writes with, and a steady clock it judges
liveness and claim ages by.

A wall clock can step (NTP correcting a server that ran an hour fast, an operator's ``date``) and two servers'
wall clocks differ. Nothing that decides is ordered by it: reports are ordered by the store (last write wins),
and how long ago a node reported or a claim was made is measured on ``Steady``, which reads like the wall clock
at the process's start and then moves with ``time.monotonic``, so no step of the wall clock moves it.

``GANTT_TEST_CLOCK_OFFSET_FILE`` (for tests only): a file holding a number of seconds added to this process's
wall clock, read again when it changes, so a test can run a real server whose clock is behind, ahead, or steps.
Unset (always, outside tests), ``wall`` is ``time.time`` itself.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

TEST_OFFSET_FILE = "GANTT_TEST_CLOCK_OFFSET_FILE"


class _OffsetWall:
    """``time.time`` plus the offset a test writes into a file (checked at most every 20 ms)."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._offset = 0.0
        self._checked = -1.0

    def __call__(self) -> float:
        now = time.monotonic()
        if now - self._checked > 0.02:
            self._checked = now
            try:
                with open(self._path) as f:
                    self._offset = float(f.read().strip() or 0.0)
            except (OSError, ValueError):
                pass  # mid-write, or gone: keep the last offset read
        return time.time() + self._offset


def _wall() -> Callable[[], float]:
    path = os.environ.get(TEST_OFFSET_FILE)
    return _OffsetWall(path) if path else time.time


wall: Callable[[], float] = _wall()


class Steady:
    """A clock in the wall clock's units that never steps: ``wall()`` when built, then ``time.monotonic``'s
    progress. Liveness and claim ages read it, so a step of the wall clock neither keeps a dead node up nor puts
    a live one down."""

    def __init__(self, wall_clock: Callable[[], float] = time.time) -> None:
        self._base = wall_clock() - time.monotonic()

    def __call__(self) -> float:
        return self._base + time.monotonic()


def steady_for(clock: Callable[[], float]) -> Callable[[], float]:
    """The steady clock to pair with ``clock``: a ``Steady`` for the system's wall clock; any other clock (a test's
    fake one, the simulator's virtual one) is its own, moved only by whoever owns it."""
    if clock is time.time or isinstance(clock, _OffsetWall):
        return Steady(clock)
    return clock
