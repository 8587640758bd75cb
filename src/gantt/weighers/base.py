"""The one narrow interface every weigher implements, and the registry that finds weighers by Nova's class name.

A weigher returns raw values for all rows; the engine normalizes them over the candidates exactly as Nova does
(``(x - min) / (max - min)``, all zeros when every candidate has the same value), multiplies by the weigher's
multiplier (per node, when an aggregate overrides it: the lowest value across the node's aggregates wins), and
sums. Weighers never import each other.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from gantt.config import Config
from gantt.request import RequestContext
from gantt.state import HostTable

WEIGHERS: dict[str, type[Weigher]] = {}


class Weigher:
    name: ClassVar[str] = ""
    # The [filter_scheduler] option holding the multiplier; aggregates override it by a metadata key of this name.
    multiplier_option: ClassVar[str] = ""
    # Fixed normalization bounds (Nova's minval/maxval); None: taken from the candidates.
    minval: ClassVar[float | None] = None
    maxval: ClassVar[float | None] = None

    def __init__(self, config: Config) -> None:
        self.config = config

    def multiplier(self) -> float:
        return float(getattr(self.config.filter_scheduler, self.multiplier_option))

    def raw(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        """Raw per-row values (length ``table.n``), or None when this request gives every node the same weight."""
        raise NotImplementedError


def register(cls: type[Weigher]) -> type[Weigher]:
    if not cls.name:
        raise TypeError(f"{cls.__qualname__} has no name")
    if cls.name in WEIGHERS and WEIGHERS[cls.name] is not cls:
        raise TypeError(f"weigher name {cls.name!r} registered twice")
    WEIGHERS[cls.name] = cls
    return cls


def resolve(names: list[str]) -> list[type[Weigher]]:
    """``weight_classes``: Nova's ``nova.scheduler.weights.all_weighers`` means every weigher."""
    out: list[type[Weigher]] = []
    for name in names:
        if name.endswith("all_weighers"):
            out.extend(cls for cls in WEIGHERS.values() if cls not in out)
            continue
        short = name.rsplit(".", 1)[-1]
        if short not in WEIGHERS:
            raise ValueError(f"unknown weigher {name!r}; known weighers: {', '.join(sorted(WEIGHERS))}")
        if WEIGHERS[short] not in out:
            out.append(WEIGHERS[short])
    return out
