"""The simulator's virtual time: one clock every table, scheduler and failure reads, and where its zero lies."""

from __future__ import annotations

EPOCH = 1_000_000.0  # virtual time 0; non-zero because HostTable treats created_at == 0 as "unset"


class VirtualClock:
    def __init__(self, now: float = EPOCH) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
