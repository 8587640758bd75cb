"""The one narrow interface every filter implements, and the registry that finds filters by Nova's class name.

A filter turns (HostTable, RequestContext) into a boolean mask over all rows at once. It never loops over hosts
in Python unless it loops over *distinct values* (see ``HostTable.factor``), and it never imports another filter.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import ClassVar

import numpy as np

from gantt.config import Config
from gantt.registry import Registry
from gantt.request import RequestContext
from gantt.state import HostTable


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


FILTERS: Registry[Filter] = Registry("filter")
register = FILTERS.register


def resolve(name: str) -> type[Filter]:
    """A name ``enabled_filters`` may give; the always-on filters are not offered (they run anyway)."""
    return FILTERS.find(name, [n for n, cls in FILTERS.items() if not cls.always_on])
