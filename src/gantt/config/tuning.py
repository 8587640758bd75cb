"""``[tuning]``: how one worker of ``gantt serve`` is sized: its handler threads, where it decides placements, and
the request bodies it holds at once. These change what a placement costs and how long it waits under load, never
what is decided (bench/RESULTS-mixed.md measured them).

They were environment variables before they were options, and the operator guide documented them as such: each
still is (``ENVIRONMENT``), read once as a process starts and taking precedence over the file.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec
from msgspec import Struct

from gantt.model.prepare import prepare_types


class TuningSection(Struct, forbid_unknown_fields=True, kw_only=True):
    # How many decisions and commits may run at once off the event loop: enough concurrent commits for the store
    # to group them, few enough that CPU-bound decisions do not thrash the GIL.
    threads: int = 16
    # Where the store has a writer of its own (SQLite), placements are decided on the worker's event loop up to
    # this many rows, where a decision takes half a millisecond or less; above, on the decider threads, where a
    # decision's 1-4 ms (a million rows) would hold every connection's reads and answers behind it. At 100,000
    # hosts with reports streaming the loop decided with a lower placement p99 than the decider (47-50 ms against
    # 55-61, bench/RESULTS-mixed.md): each hop to the decider and back waited for the other thread's turn at the
    # interpreter lock.
    loop_decision_rows: int = 200_000
    # Decider threads per worker for those larger tables, taken in turn. 0: decided on the handler threads, each
    # blocked in its own commit (what a decider saves: bench/RESULTS-mixed.md).
    deciders: int = 1
    # Bytes of request bodies a worker holds at once over all its connections (never less than [gantt]
    # max_body_bytes): many clients each within the body limit cannot together pin its memory.
    body_buffer_bytes: int = 64 * 1024 * 1024

    def __post_init__(self) -> None:
        for name, minimum in MINIMUM.items():
            value = getattr(self, name)
            if value < minimum:
                raise ValueError(f"[tuning] {name} must be at least {minimum} (got {value})")

    def with_environment(self, environ: Mapping[str, str]) -> TuningSection:
        """These options with those ``environ`` sets (``ENVIRONMENT``) in their place."""
        given = {name: _whole_number(environ, variable, getattr(self, name), MINIMUM[name])
                 for name, variable in ENVIRONMENT.items()}
        return msgspec.structs.replace(self, **given)


MINIMUM = {"threads": 1, "loop_decision_rows": 0, "deciders": 0, "body_buffer_bytes": 1}
# Each option's environment variable (docs/operator-guide.md, "Tuning"), taken before the file's value.
ENVIRONMENT = {"threads": "GANTT_THREADS", "loop_decision_rows": "GANTT_LOOP_DECISION_ROWS",
               "deciders": "GANTT_DECIDERS", "body_buffer_bytes": "GANTT_BODY_BUFFER_BYTES"}


def _whole_number(environ: Mapping[str, str], name: str, default: int, minimum: int) -> int:
    """``name``'s value, or ``default`` where it is unset or blank. One that is not a whole number of at least
    ``minimum`` stops the start with a message naming it, never runs on a guess."""
    raw = environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip().replace("_", ""))
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise ValueError(f"{name}={raw!r}: expected a whole number of at least {minimum}")
    return value


prepare_types(globals())  # build msgspec type info before any thread decodes (see gantt.model.prepare)
