"""The one narrow interface every filter implements, and the registry that finds filters by Nova's class name.

A filter turns (HostTable, RequestContext) into a boolean mask over all rows at once. It never loops over hosts
in Python unless it loops over *distinct values* (see ``HostTable.factor``), and it never imports another filter.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import ClassVar

import numpy as np

from gantt.config import Config
from gantt.request import RequestContext
from gantt.state import HostTable

FILTERS: dict[str, type[Filter]] = {}


class Filter:
    """Base class. Subclasses set ``name`` (Nova's class name) and implement ``mask``.

    - ``mask`` returns a bool array of length ``table.n`` (True: the node passes), or None when the request does
      not concern this filter (a cheap "everything passes").
    - ``static = True`` declares that the mask depends only on the request parts returned by ``cache_key`` and on
      static host state (interned attributes, aggregates, the set of rows). The engine then caches the mask
      until ``table.static_revision`` moves. Anything that reads usage, liveness or time is not static.
    - ``limits`` lets a filter cap usage below the inventory (Nova's per-aggregate allocation ratios); the claim
      honours the cap, so a racing claim cannot exceed what the filter allowed.
    - ``always_on`` filters run whatever ``enabled_filters`` says (resources, traits, member_of).
    """

    name: ClassVar[str] = ""
    static: ClassVar[bool] = False
    always_on: ClassVar[bool] = False
    # Nova's run_filter_once_per_request: evaluated for the first instance of a request only.
    once_per_request: ClassVar[bool] = False

    def __init__(self, config: Config) -> None:
        self.config = config

    def cache_key(self, ctx: RequestContext) -> Hashable:
        """The parts of the request the (static) mask depends on."""
        raise NotImplementedError

    def mask(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        raise NotImplementedError

    def limits(self, table: HostTable, ctx: RequestContext) -> dict[str, np.ndarray] | None:
        """Per resource class, the most a node may have in use after the claim (NaN or absent: no cap)."""
        return None


def register(cls: type[Filter]) -> type[Filter]:
    """Class decorator: make a filter available to ``enabled_filters`` under its ``name``."""
    if not cls.name:
        raise TypeError(f"{cls.__qualname__} has no name")
    if cls.name in FILTERS and FILTERS[cls.name] is not cls:
        raise TypeError(f"filter name {cls.name!r} registered twice")
    FILTERS[cls.name] = cls
    return cls


def resolve(name: str) -> type[Filter]:
    """Nova accepts full dotted paths (``nova.scheduler.filters.compute_filter.ComputeFilter``); so do we."""
    short = name.rsplit(".", 1)[-1]
    try:
        return FILTERS[short]
    except KeyError:
        known = ", ".join(sorted(n for n, c in FILTERS.items() if not c.always_on))
        raise ValueError(f"unknown filter {name!r}; known filters: {known}") from None
