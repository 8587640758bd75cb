"""The filter contract, and the registry that finds filters by Nova's class name.

A filter turns (HostTable, RequestContext) into a boolean mask over every row at once. It never loops over hosts
in Python unless it loops over *distinct values* (see ``HostTable.factor``), and it never imports another filter:
twins share a base in their own module (as Nova's ``AggregateIoOpsFilter(IoOpsFilter)``), and helpers several
modules need live in modules that register nothing (``agg_meta``, ``hoststate``, ``image_meta``).

What a filter must have:
- ``name``: Nova's class name (or Nova's request-filter function name), the key ``enabled_filters`` uses;
  ``@register`` puts the class in ``FILTERS`` under it.
- ``mask(table, ctx)``: a bool array of length ``table.n`` (True: the node passes), or None when the request does
  not concern this filter (a cheap "everything passes", also cheaper to combine).

What a filter may declare (class attributes, off by default) and the method each one asks for:
- ``static = True`` + ``cache_key(ctx)``: the mask depends only on the request parts ``cache_key`` returns and on
  static host state (interned attributes, aggregates, the set of rows). The engine caches the mask until
  ``table.static_revision`` moves. Anything that reads usage, liveness or time is not static.
- ``once_per_request = True``: Nova's run_filter_once_per_request; evaluated for the first instance of a request
  only, its mask reused for the others.
- ``always_on = True``: runs whatever ``enabled_filters`` says (Placement's query, Nova's request filters), and
  even for forced hosts. Such a filter must also be named in ``gantt.compute.filters.pipeline.ALWAYS_ON``, which
  fixes the order.
- ``explains_miss = True`` + ``nearest_miss(table, ctx, others)``: when nothing fits, the filter can say which
  node came nearest and by how much; ``others`` marks the nodes every other step passes.
- ``refines = True`` + ``prefilter(table, ctx)`` and ``exact(table, ctx)``: the exact mask costs Python per node
  (NUMA fits), so a decision asks for a vectorized *necessary* condition instead (``prefilter``: it may keep
  nodes the exact check refuses, never drop one it accepts) and a per-row exact check (``exact``: row -> bool)
  that the ranker and the engine run only on the rows that decide the outcome (the weighers' extremes, the best
  ``host_subset_size``, the alternates). Dry runs and explanations still use ``mask``.
- ``limits(table, ctx)`` (a method with a default, no flag): a filter that caps usage below the inventory (Nova's
  per-aggregate allocation ratios) returns the cap per resource class; the claim honours it, so a racing claim
  cannot exceed what the filter allowed.
- ``selection_limits(table, ctx, row)`` (a method with a default, no flag): what the filter, like Nova's, leaves in
  the limits of a node it passed (NUMATopologyFilter's ``numa_topology``); the Selection carries it.
- ``headroom(table, ctx)`` (a method with a default, no flag): how many more instances of the request each row
  can take before the filter refuses it, as their claims land one by one (``gantt.compute.capacity``). The default,
  None, says the verdict does not move with them; a filter whose verdict moves in a way it cannot count raises
  ``CapacityUnknown`` naming itself.

A filter that declares a capability without the method it needs is refused when registered.

Order: the always-on filters first, in ``gantt.compute.filters.pipeline.ALWAYS_ON``'s order, then
``enabled_filters`` in the order given (as Nova runs them). Every mask is evaluated either way; the order is the
order an explanation lists.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import ClassVar

import numpy as np

from gantt.base.registry import Registry
from gantt.compute.request import RequestContext
from gantt.compute.state import HostTable
from gantt.config import Config
from gantt.model import InvalidRequest, NearestMiss, NUMATopologyLimits


class Filter:
    """Base class: see the module's docstring for the contract."""

    name: ClassVar[str] = ""
    static: ClassVar[bool] = False
    always_on: ClassVar[bool] = False
    once_per_request: ClassVar[bool] = False
    explains_miss: ClassVar[bool] = False
    refines: ClassVar[bool] = False

    def __init__(self, config: Config) -> None:
        self.config = config

    def cache_key(self, ctx: RequestContext) -> Hashable:
        """The parts of the request the (static) mask depends on."""
        raise NotImplementedError

    def mask(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        raise NotImplementedError

    def prefilter(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        """A necessary condition of ``mask``, vectorized (a filter that ``refines``)."""
        raise NotImplementedError

    def exact(self, table: HostTable, ctx: RequestContext) -> Callable[[int], bool] | None:
        """The exact verdict for one row, for the rows ``prefilter`` keeps (None: ``prefilter`` is exact)."""
        raise NotImplementedError

    def limits(self, table: HostTable, ctx: RequestContext) -> dict[str, np.ndarray] | None:
        """Per resource class, the most a node may have in use after the claim (NaN or absent: no cap)."""
        return None

    def selection_limits(self, table: HostTable, ctx: RequestContext, row: int) -> dict[str, NUMATopologyLimits]:
        """What Nova's filter would leave in ``host_state.limits`` for node ``row`` it passed (none by default)."""
        return {}

    def nearest_miss(self, table: HostTable, ctx: RequestContext, others: np.ndarray) -> list[NearestMiss]:
        """Why the nodes ``others`` marks missed this filter: for each shortfall, the nearest node and the gap."""
        return []

    def headroom(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        """Per row, how many more instances of ``ctx`` the filter lets in as they are claimed one by one (a float
        array, whole numbers; None: as many as the others let in)."""
        return None


class CapacityUnknown(InvalidRequest):
    """A capacity question whose answer depends on how a filter's verdict moves with each claim, which that
    filter cannot count in advance (a NUMA fit, PCI pools, a JSON query on usage): refused, never guessed."""

    def __init__(self, filter_name: str, why: str) -> None:
        super().__init__(f"capacity cannot be counted for this request: {filter_name} {why}", field="$.requests")


FILTERS: Registry[Filter] = Registry("filter")


def register(cls: type[Filter]) -> type[Filter]:
    """Class decorator: make ``cls`` available under its ``name``, once it holds to the contract.

    kube-scheduler's plugins are checked against their interfaces when compiled; at import is the nearest we get.
    Only registered classes are checked: a shared base may declare what its subclasses implement.
    """
    if cls.static and cls.cache_key is Filter.cache_key:
        raise TypeError(f"{cls.__qualname__} is static but has no cache_key")
    if cls.refines and (cls.prefilter is Filter.prefilter or cls.exact is Filter.exact):
        raise TypeError(f"{cls.__qualname__} refines but lacks prefilter or exact")
    if cls.explains_miss and cls.nearest_miss is Filter.nearest_miss:
        raise TypeError(f"{cls.__qualname__} explains misses but has no nearest_miss")
    return FILTERS.register(cls)


def resolve(name: str) -> type[Filter]:
    """A name ``enabled_filters`` may give; the always-on filters are not offered (they run anyway)."""
    return FILTERS.find(name, [n for n, cls in FILTERS.items() if not cls.always_on])
