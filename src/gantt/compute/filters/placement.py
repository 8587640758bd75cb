"""What Placement checks before Nova's filters run: resources fit, traits match, aggregate membership.

These are always on, whatever ``enabled_filters`` says.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, ClassVar

import numpy as np

from gantt.compute import groups
from gantt.compute.filters.base import Filter, register
from gantt.compute.filters.hoststate import aggregate_keys
from gantt.compute.journal import Rows
from gantt.compute.request import RequestContext
from gantt.compute.state import HostTable
from gantt.compute.ties import FIRST_CANDIDATES
from gantt.model import NearestMiss


@register
class ResourceFilter(Filter):
    """Every requested class fits: ``(total - reserved) * ratio - used >= amount``, within min/max unit and step."""

    name = "ResourceFilter"
    always_on = True
    explains_miss = True
    # The nodes that had room when a multi-instance request began: Nova asks Placement for its allocation
    # candidates once per request, so a node its earlier instances filled stays in the list the later ones weigh
    # (and normalize over), and a pick of it fails its claim and falls to the next node in order. The claim
    # does the same here (``HostTable.claim`` refuses a node without room).
    FIRST: ClassVar[tuple[str]] = FIRST_CANDIDATES

    def mask(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        if not ctx.resources:
            return None
        if ctx.instance_index > 0:
            first: tuple[int, np.ndarray] | None = ctx.scratch.get(self.FIRST)  # (layout, mask), as set below
            if first is not None and first[0] == table.layout and len(first[1]) >= table.n:
                return first[1]
        mask = self._fitting(table, ctx.resources)
        if ctx.fallback is not None:
            # Nova's two queries' candidates together: the PCPU one's (with its own traits), the VCPU one's
            fallback, n = ctx.fallback, table.n
            mask = (mask[:n] & _having(table, fallback.required, fallback.forbidden)) \
                | self._fitting(table, fallback.resources)[:n]
        if ctx.instance_index == 0 and max(ctx.spec.num_instances, len(ctx.spec.instance_uuids or ())) > 1:
            ctx.scratch[self.FIRST] = (table.layout, mask.copy())  # the kept mask is patched in place
        return mask

    def _fitting(self, table: HostTable, resources: dict[str, int]) -> np.ndarray:
        """The nodes with room for every class of ``resources`` (do not modify: a memoized mask)."""
        wanted: list[tuple[int, int]] = []
        for rc, amount in resources.items():
            j = table.rc_index.get(rc)
            if j is None:
                return np.zeros(table.n, dtype=np.bool_)
            wanted.append((j, amount))
        # Patched on the rows whose usage changed since the last request of the same size, not recomputed.
        key = (self.name, tuple(sorted(wanted)))
        return table.derived.usage_mask(key, lambda rows: _fits(table, wanted, rows))

    def nearest_miss(self, table: HostTable, ctx: RequestContext, others: np.ndarray) -> list[NearestMiss]:
        """For each requested class that some otherwise-eligible node lacks: the best such node, and the gap."""
        misses: list[NearestMiss] = []
        n = table.n
        for rc, amount in ctx.resources.items():
            j = table.rc_index.get(rc)
            if j is None:
                misses.append(NearestMiss(resource_class=rc, requested=amount, best_free=0.0, short_by=amount,
                                          constraint=f"no node has an inventory of {rc}"))
                continue
            rc_cols = table.rc
            eligible = others & table.has_inventory[:n, j]
            units = eligible & (rc_cols["max_unit"][:n, j] >= amount) & (rc_cols["min_unit"][:n, j] <= amount) \
                & (np.fmod(amount, np.maximum(rc_cols["step_size"][:n, j], 1)) == 0)
            if eligible.any() and not units.any():
                # No node could ever take this amount, however empty: name the unit constraint that blocks, with
                # the most any node has free (free room is not what is missing, so "short by" is only a figure).
                free = np.where(eligible, rc_cols["free"][:n, j], -np.inf)
                best = int(free.argmax())
                misses.append(NearestMiss(resource_class=rc, requested=amount, best_free=float(free[best]),
                                          short_by=max(0.0, float(amount - free[best])),
                                          host=table.host_names[best], nodename=table.node_names[best],
                                          constraint=_unit_constraint(table, j, amount, eligible)))
                continue
            free = np.where(units, rc_cols["free"][:n, j], -np.inf)
            if not free.size or np.isneginf(free.max()):
                continue
            best = int(free.argmax())
            if free[best] >= amount:
                continue
            misses.append(NearestMiss(resource_class=rc, requested=amount, best_free=float(free[best]),
                                      short_by=float(amount - free[best]), host=table.host_names[best],
                                      nodename=table.node_names[best]))
        return misses


    def headroom(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        """Each claim takes ``amount`` off a class's ``free``: ``free // amount`` more fit, the fewest over the
        classes asked (0 where the units refuse the amount, as the mask does)."""
        if not ctx.resources:
            return None
        n = table.n
        out = np.full(n, np.inf)
        for rc, amount in ctx.resources.items():
            j = table.rc_index.get(rc)
            if j is None:
                return np.zeros(n)
            count = np.floor((table.rc["free"][:n, j] + 1e-9) / amount) if amount > 0 else np.full(n, np.inf)
            rows = np.arange(n)
            count[~_fits(table, [(j, amount)], rows) & (count >= 1)] = 0.0  # units or step refuse it anyway
            np.minimum(out, np.maximum(count, 0.0), out=out)
        return out


def _having(table: HostTable, required: frozenset[str], forbidden: frozenset[str]) -> np.ndarray | bool:
    """The nodes with every ``required`` trait and none ``forbidden`` (True: nothing asked)."""
    if not required and not forbidden:
        return True
    having: np.ndarray = table.factor("traits").map(lambda traits: required <= traits and not (forbidden & traits))
    return having[:table.n]


def _unit_constraint(table: HostTable, j: int, amount: int, rows: np.ndarray) -> str:
    n = table.n
    largest_max = float(table.rc["max_unit"][:n, j][rows].max())
    if largest_max < amount:
        return f"max_unit {largest_max:g} < {amount} asked on every node"
    smallest_min = float(table.rc["min_unit"][:n, j][rows].min())
    if smallest_min > amount:
        return f"min_unit {smallest_min:g} > {amount} asked on every node"
    return f"{amount} is no multiple of step_size on any node whose min_unit/max_unit admit it"


def _fits(table: HostTable, wanted: list[tuple[int, int]], rows: Rows) -> np.ndarray:
    """Whether each of ``rows`` has room for every (class column, amount), within min/max unit and step."""
    out: np.ndarray | None = None
    for j, amount in wanted:
        fits = table.rc["free"][rows, j] >= amount - 1e-9
        bounds = _unit_bounds(table, j)
        if amount > bounds[0]:
            fits &= table.rc["max_unit"][rows, j] >= amount
        if amount < bounds[1]:
            fits &= table.rc["min_unit"][rows, j] <= amount
        if bounds[2] > 1:
            fits &= np.fmod(amount, np.maximum(table.rc["step_size"][rows, j], 1)) == 0
        out = fits if out is None else out & fits
    assert out is not None
    return out


def _unit_bounds(table: HostTable, j: int) -> tuple[float, float, float]:
    """(smallest max_unit, largest min_unit, largest step) over all rows: lets the common case skip three scans."""

    def build() -> tuple[float, float, float]:
        n = table.n
        if n == 0:
            return (np.inf, 0.0, 1.0)
        has = table.has_inventory[:n, j]
        if not has.any():
            return (np.inf, 0.0, 1.0)
        return (float(table.rc["max_unit"][:n, j][has].min()), float(table.rc["min_unit"][:n, j][has].max()),
                float(table.rc["step_size"][:n, j][has].max()))

    return table.static_cache(("unit_bounds", j), build)


class _PlacementQuery(Filter):
    """Placement's required/forbidden query on one interned set per node (its traits, its aggregates)."""

    always_on = True
    static = True
    factor: ClassVar[str] = ""

    def query(self, ctx: RequestContext) -> tuple[Any, frozenset[str]]:
        """(required, forbidden) as the request gives them; both empty: nothing asked."""
        raise NotImplementedError

    def predicate(self, table: HostTable, required: Any, forbidden: frozenset[str]) -> Callable[[frozenset[str]], bool]:
        raise NotImplementedError

    def cache_key(self, ctx: RequestContext) -> Hashable:
        return self.query(ctx)

    def mask(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        required, forbidden = self.query(ctx)
        if not required and not forbidden:
            return None
        return table.factor(self.factor).map(self.predicate(table, required, forbidden))


@register
class TraitsFilter(_PlacementQuery):
    """Required traits present, forbidden traits absent (flavor ``trait:`` extra specs, image properties, spec)."""

    name = "TraitsFilter"
    factor = "traits"

    def query(self, ctx: RequestContext) -> tuple[frozenset[str], frozenset[str]]:
        if ctx.fallback is not None:  # the traits only the PCPU query asks: ResourceFilter's, per query
            return ctx.required_traits - ctx.fallback.required, ctx.forbidden_traits - ctx.fallback.forbidden
        return ctx.required_traits, ctx.forbidden_traits

    def predicate(self, table: HostTable, required: frozenset[str],
                  forbidden: frozenset[str]) -> Callable[[frozenset[str]], bool]:
        return lambda traits: required <= traits and not (forbidden & traits)


@register
class MemberOfFilter(_PlacementQuery):
    """``member_of`` (and ``requested_destination.aggregates``): in at least one aggregate of every group, in
    none of the forbidden ones (ids or uuids; see ``request.member_of_from_spec``)."""

    name = "MemberOfFilter"
    factor = "aggregates"

    def query(self, ctx: RequestContext) -> tuple[tuple[frozenset[str], ...], frozenset[str]]:
        return ctx.member_of, ctx.forbidden_aggregates

    def predicate(self, table: HostTable, required: tuple[frozenset[str], ...],
                  forbidden: frozenset[str]) -> Callable[[frozenset[str]], bool]:
        wanted = [aggregate_keys(table, refs) for refs in required]
        banned = aggregate_keys(table, forbidden)
        return lambda aggs: all(aggs & keys for keys in wanted) and not (aggs & banned)


@register
class RequestGroupsFilter(Filter):
    """The request's groups (``request_groups``: Nova's device profiles' and ports' ``requested_resources``): the
    node's child providers take every group now, as Placement's allocation candidates over its tree would
    (``gantt.compute.groups``)."""

    name = "RequestGroupsFilter"
    always_on = True

    def mask(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        if ctx.groups is None:
            return None
        return groups.candidates(table, ctx.groups, ctx.resources)

    def headroom(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        """None: the groups' count needs what the other filters let in first (``groups.headroom``, which the
        capacity question applies last)."""
        return None
