"""Unique ids in uuid form, made cheaply: OpenStack's ``req-<uuid>`` request ids, and the uuids Gantt gives a
consumer a request does not name.

``uuid.uuid4()`` reads 16 bytes from the kernel and builds a UUID object per call: profiled per Placement write,
the request id was a few percent of the event loop's time, and a placement's consumer uuid a few percent of a
decision's. Here the first half of the uuid is random per process (drawn again in a forked child) and the second
a counter starting at a random point, so ids stay unique across processes and restarts as random ones are, and
still read as version 4 uuids (version and variant bits set). Both kinds come from the one sequence."""

from __future__ import annotations

import itertools
import os
import secrets

_prefix = ""
_counter: itertools.count[int] = itertools.count()


def _draw() -> None:
    global _prefix, _counter
    high = secrets.randbits(64)
    text = f"{high:016x}"
    _prefix = f"{text[:8]}-{text[8:12]}-4{text[13:16]}-"
    _counter = itertools.count(secrets.randbits(61))


_draw()
os.register_at_fork(after_in_child=_draw)


def new_uuid() -> str:
    """A uuid (version 4 form), unique per call."""
    low = f"{(next(_counter) & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000:016x}"
    return f"{_prefix}{low[:4]}-{low[4:]}"


def request_id() -> str:
    """``req-`` and a uuid (``new_uuid``)."""
    return f"req-{new_uuid()}"
