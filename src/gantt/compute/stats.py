"""The engine's counters for /metrics: decisions, placements, conflicts, refusals and the mask cache's hits."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field


@dataclass
class EngineStats:
    """Counters for /metrics; a scheduler that replaces another (a replica's reload) carries them over."""

    decisions: int = 0
    placements: int = 0
    claim_conflicts: int = 0  # local compare-and-set rejections (the next candidate was tried)
    commit_conflicts: int = 0  # store-level conflicts (the request was decided again)
    no_valid_host: Counter[str] = field(default_factory=Counter)
    mask_cache_hits: int = 0
    mask_cache_misses: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
