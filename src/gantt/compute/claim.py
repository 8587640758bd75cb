"""The claim path: walk a ranking in pick order, claim the first node that still has room, gather alternates.

A claim is ``HostTable.claim`` (or ``move``): a compare-and-set under the table lock. A rejected claim moves on to
the next candidate in rank order; a twin request (same consumer, another thread) that got there first is answered
with its claim; rows renumbered before anything was claimed send the caller back to rank again.
"""

from __future__ import annotations

from contextlib import nullcontext

import msgspec

from gantt.compute import groups, numa, pci
from gantt.compute.order import PickOrder
from gantt.compute.ranking import Ranker, Ranking
from gantt.compute.request import RequestContext
from gantt.compute.selections import Selections
from gantt.compute.state.rejected import ClaimRejected, SourceMoved
from gantt.compute.state.table import HostTable
from gantt.compute.stats import EngineStats
from gantt.compute.ties import FIRST_CANDIDATES, TieHistory
from gantt.compute.ties import KEY as TIES
from gantt.compute.ties import Step as TieStep
from gantt.config import Config
from gantt.model import Allocation, Conflict, NodeKey, NoValidHost, NUMACellClaim, NUMATopologyLimits, Selection

# What claiming one consumer answers: its selections (the claimed node first), its allocation, and whether this
# call created that allocation (False: a twin request's, or a move made before: not ours to roll back).
Placed = tuple[list[Selection], Allocation, bool]


class Claims:
    """Claims nodes for one consumer at a time, in the order ``PickOrder`` gives."""

    def __init__(self, table: HostTable, config: Config, ranker: Ranker, order: PickOrder,
                 selections: Selections, stats: EngineStats) -> None:
        self.table = table
        self.config = config
        self.ranker = ranker
        self.order = order
        self.selections = selections
        self.stats = stats

    def place_one(self, ctx: RequestContext, consumer: str, placed: list[Allocation]) -> Placed:
        """Claim one node for ``consumer``.

        When a concurrent request for the same consumer got there first, the claim hands back *its* allocation:
        the answer is then that allocation (not the row this call tried), and it is not ours to roll back.
        A move (``ctx.move_source``) claims with ``table.move``: the migration's allocation holding the source
        joins ``placed`` (one commit with the instance's).
        """
        while True:
            ranking = self.ranker.rank(ctx, lazy=True)
            if ranking.count == 0:
                return self.fail(ctx, consumer, placed, self.ranker.refusal(ctx, ranking))
            outcome = self._claim_down(ctx, consumer, placed, ranking)
            if outcome is not None:
                return outcome
            # Rows were renumbered before a node was claimed: the ranking's rows name other nodes now.

    def place_move(self, ctx: RequestContext, consumer: str, placed: list[Allocation]) -> Placed:
        """A move of ``consumer`` under ``spec.migration_uuid`` (design §6): decided anew, never answered with the
        allocation it leaves; that one is held by the migration until confirm or revert.

        A repeat of a move already made (the migration holds this instance's source) answers with where the
        instance went, like any repeated request.
        """
        table = self.table
        migration = ctx.spec.migration_uuid
        assert migration is not None
        for _ in range(self.config.gantt.claim_retries + 1):
            with table.lock:
                source = table.allocation(consumer)
                holding = table.allocation(migration)
            if holding is not None:
                if holding.instance_uuid != consumer:
                    raise Conflict(f"migration {migration!r} is a consumer of its own or a move of another "
                                   "instance", field="$.migration_uuid")
                if source is None or source.migration_uuid != migration:
                    raise Conflict(f"instance {consumer!r} no longer holds the allocation of migration "
                                   f"{migration!r}", field="$.migration_uuid")
                return [self.selections.of(source)], source, False
            if source is not None and source.migration_uuid == migration:  # made and confirmed: a repeat
                return [self.selections.of(source)], source, False
            if source is None:
                raise Conflict(f"instance {consumer!r} holds no allocation to move; place it without "
                               "migration_uuid", field="$.instance_uuids")
            if source.instance_uuid is not None:
                raise Conflict(f"{consumer!r} is a migration holding a move's source, not an instance",
                               field="$.instance_uuids")
            ctx.move_source = source
            try:
                return self.place_one(ctx, consumer, placed)
            except SourceMoved:
                continue  # released or moved by another request meanwhile: look again
        raise Conflict(f"instance {consumer!r} kept moving while this move was decided; try again",
                       field="$.instance_uuids")

    def fail(self, ctx: RequestContext, consumer: str, placed: list[Allocation], error: NoValidHost) -> Placed:
        """Give up on ``consumer`` — unless a twin request claimed it meanwhile (then answer with that claim).

        The check and the rollback of this request's earlier claims happen under one hold of the table lock:
        otherwise a twin could borrow one of those claims, pass its own final check, and return it after this
        request released it (an answer naming an allocation that does not exist).
        """
        with self.table.lock:
            held = self.table.allocation(consumer)
            migration = ctx.spec.migration_uuid
            if held is not None and (migration is None or held.migration_uuid == migration):
                return [self.selections.of(held)], held, False
            rollback(self.table, placed, ctx.moved)
            placed.clear()
        raise error

    def _claim_down(self, ctx: RequestContext, consumer: str, placed: list[Allocation],
                    ranking: Ranking) -> Placed | None:
        """Claim the first candidate that still has room, then gather alternates. None when the table's rows
        were renumbered before anything was claimed (the caller ranks again)."""
        table = self.table
        max_attempts = self.attempts(ctx)
        chosen: Allocation | None = None
        selections: list[Selection] = []
        history, step = _tie_history(ctx, ranking)
        # A later instance ranks the nodes that had room for the first (ResourceFilter): some are full now.
        early = ctx.instance_index > 0 and FIRST_CANDIDATES in ctx.scratch
        picked = -1  # Nova's pick (the first in order), which heads its list for the next instance even when
        # its claim fails and a later node is claimed
        for row, weight in self.order.walk(ranking, history if history is not None and history.steps else None,
                                           max_attempts):
            if picked < 0:
                picked = row
            key = (table.host_names[row], table.node_names[row]) if row < table.n else None
            if table.layout != ranking.layout:  # checked after the read: the key is the ranked node's, or unused
                if chosen is None:
                    return None
                break  # alternates are advice: stop gathering them rather than name the wrong nodes
            if key is None:
                continue
            limits = {rc: float(arr[row]) for rc, arr in ranking.limits.items() if arr[row] == arr[row]}
            if chosen is None:
                if early and table.fits(row, resources_at(table, ctx, row, limits), limits or None) is not None:
                    continue  # filled by this request's earlier instances: Nova's claim fails, the next is tried
                claimed = self._claim_row(ctx, consumer, placed, row, key, limits)
                if claimed is None:
                    continue
                chosen, ours = claimed
                if not ours:  # a twin request holds this consumer: answer with its claim
                    return [self.selections.of(chosen)], chosen, False
                if history is not None:
                    history.record(step, picked)
                selections.append(self._chosen(ranking, ctx, row, key, chosen, limits, weight))
                if max_attempts <= 1:
                    break
                continue
            # Alternates: later candidates that still fit now, devices and NUMA cells included; not claimed (the
            # conductor's retry claims them).
            resources = resources_at(table, ctx, row, limits)
            if key[0] == chosen.host or table.fits(row, resources, limits or None) is not None \
                    or not self._takes_devices(row, ctx):
                continue
            takes, landing = self._landing(row, ctx)
            if not takes:
                continue
            shown = _plus(resources, landing.on_node) if landing else dict(resources)
            alternate = self.selections.at(row, shown, self._shown_limits(ranking, ctx, row, limits), None, weight,
                                           landing)
            if table.layout != ranking.layout:
                break
            selections.append(alternate)
            if len(selections) >= max_attempts:
                break
        if chosen is None:
            # Every candidate was taken between ranking and claiming (or, for a later instance, filled by the
            # earlier ones: the request's first candidates were ranked); rank again from the current state.
            ctx.scratch.pop(FIRST_CANDIDATES, None)
            ranking = self.ranker.rank(ctx)
            error = self.ranker.refusal(ctx, ranking, reason="contention" if ranking.count else "")
            return self.fail(ctx, consumer, placed, error)
        return selections, chosen, True

    def attempts(self, ctx: RequestContext) -> int:
        """The chosen node and its alternates: [scheduler] max_attempts, or the request's ``alternates`` + 1."""
        wanted = ctx.spec.alternates
        return self.config.scheduler.max_attempts if wanted is None else wanted + 1

    def alternates(self, ctx: RequestContext, taken: set[str]) -> list[Selection]:
        """The alternates Nova's ``_get_alternate_hosts`` gives every instance of a request of several (or of one
        asked again): the hosts filtered and weighed once more after all the request's claims, in pick order,
        the first ``max_attempts - 1`` that still have room and that no instance of the request took (one taken is
        replaced by the next, never dropped). Not claimed."""
        wanted = self.attempts(ctx) - 1
        out: list[Selection] = []
        if wanted <= 0:
            return out
        table = self.table
        ranking = self.ranker.rank(ctx, lazy=True)
        if ranking.count == 0:
            return out
        history: TieHistory | None = ctx.scratch.get(TIES)
        if history is not None and history.layout != ranking.layout:
            history = None  # rows renumbered since the claims: their picks name other rows now
        for row, weight in self.order.walk(ranking, history if history is not None and history.steps else None,
                                           wanted + 1):
            if table.layout != ranking.layout:
                break  # advice: stop rather than name the wrong nodes
            if row >= table.n or table.host_names[row] in taken:
                continue
            limits = {rc: float(arr[row]) for rc, arr in ranking.limits.items() if arr[row] == arr[row]}
            resources = resources_at(table, ctx, row, limits)
            if table.fits(row, resources, limits or None) is not None or not self._takes_devices(row, ctx):
                continue
            takes, landing = self._landing(row, ctx)
            if not takes:
                continue
            shown = _plus(resources, landing.on_node) if landing else dict(resources)
            out.append(self.selections.at(row, shown, self._shown_limits(ranking, ctx, row, limits), None, weight,
                                          landing))
            if len(out) >= wanted:
                break
        return out

    def _claim_row(self, ctx: RequestContext, consumer: str, placed: list[Allocation], row: int, key: NodeKey,
                   limits: dict[str, float]) -> tuple[Allocation, bool] | None:
        """Claim node ``row`` (``key``) for ``consumer``: (the allocation, whether it is this claim's own rather than
        a twin request's), or None when the node has no room left (the walk goes on)."""
        table = self.table
        spec = ctx.spec
        allocation = Allocation(consumer_uuid=consumer, host=key[0], nodename=key[1],
                                resources=dict(resources_at(table, ctx, row, limits)),
                                project_id=spec.project_id, user_id=spec.user_id, request_id=spec.request_id,
                                group=ctx.hard_group)
        if ctx.numa is not None and table.node_numa(row) is not None:
            # The claim holds the cells, CPUs and pages the guest takes, as fitted on the node now.
            allocation.numa = self._numa_claim(row, ctx)
            if allocation.numa is None:
                return None  # taken meanwhile by a claim this ranking did not see
        try:
            # the groups' providers chosen and claimed in one hold (gantt.compute.groups); the claim locks anyway
            with table.lock if ctx.groups is not None else nullcontext():
                if ctx.groups is not None:
                    landing = groups.assign(table, row, ctx.groups, allocation.resources)
                    if landing is None:
                        raise ClaimRejected(f"{key}: its providers no longer take the request's groups")
                    allocation.extra, allocation.mappings = list(landing.parts), dict(landing.mappings)
                    allocation.resources = _plus(allocation.resources, landing.on_node)
                if ctx.move_source is None:
                    chosen = table.claim(key, allocation, limits=limits or None, pci=ctx.pci_requests,
                                         pci_parts=self._pci_parts(ctx))
                else:
                    allocation.migration_uuid = spec.migration_uuid
                    held = table.move(key, allocation, ctx.move_source, limits=limits or None,
                                      pci=ctx.pci_requests, pci_parts=self._pci_parts(ctx),
                                      doubled=spec.evacuation)
                    ctx.moved[consumer] = (ctx.move_source, held)
                    if held is not allocation:  # an evacuation's source stays in the instance's own allocation
                        placed.append(held)
                    chosen = allocation
        except SourceMoved:
            raise
        except ClaimRejected:
            with self.stats.lock:
                self.stats.claim_conflicts += 1
            return None
        return chosen, chosen is allocation

    def _landing(self, row: int, ctx: RequestContext) -> tuple[bool, groups.Assignment | None]:
        """Whether node ``row`` takes the request's groups now, and where they would land (None: it has none)."""
        if ctx.groups is None:
            return True, None
        found = groups.assign(self.table, row, ctx.groups, resources_at(self.table, ctx, row, None))
        return found is not None, found

    def _pci_parts(self, ctx: RequestContext) -> bool:
        """Whether the claim holds the flavor's PCI devices on their Placement providers (pci_in_placement)."""
        asked = ctx.spec.pci_in_placement
        return self.config.filter_scheduler.pci_in_placement if asked is None else asked

    def _chosen(self, ranking: Ranking, ctx: RequestContext, row: int, key: NodeKey, chosen: Allocation,
                limits: dict[str, float], weight: float) -> Selection:
        """The claimed node's Selection, read by key when rows were renumbered while it was read."""
        table = self.table
        shown = self._shown_limits(ranking, ctx, row, limits)
        selection = self.selections.at(row, chosen.resources, shown, chosen.consumer_uuid, weight, chosen)
        if table.layout != ranking.layout:
            now = table.row_of(key)
            shown = self._shown_limits(ranking, ctx, now, limits) if now is not None else dict(limits)
            selection = msgspec.structs.replace(self.selections.of(chosen), limits=shown, weight=weight)
        return selection

    def _numa_claim(self, row: int, ctx: RequestContext) -> list[NUMACellClaim] | None:
        table = self.table
        limits = table.numa_limits(row)
        return numa.claim(table.node_numa(row), ctx.numa, cpu_ratio=limits.cpu_allocation_ratio,
                          ram_ratio=limits.ram_allocation_ratio,
                          pack=self.config.compute.packing_host_numa_cells_allocation_strategy,
                          pools=table.node_pci_pools(row), pci_requests=ctx.pci_requests, networks=ctx.networks,
                          rooms=self._rooms(row, ctx))

    def _rooms(self, row: int, ctx: RequestContext) -> dict[str, pci.Room] | None:
        """The node's PCI providers when the devices are Placement's (pci_in_placement), for ``pci.take``."""
        return self.table.pci_rooms(row) if any(r.in_placement for r in ctx.pci_requests) else None

    def _takes_devices(self, row: int, ctx: RequestContext) -> bool:
        """Whether node ``row`` can take what the claim takes beyond resources now: the guest's NUMA cells and its
        PCI devices (with their NUMA affinity), as a claim there would fit them."""
        table = self.table
        if ctx.numa is not None and table.node_numa(row) is not None:
            return self._numa_claim(row, ctx) is not None
        return not ctx.pci_requests or pci.supports(table.node_pci_pools(row), ctx.pci_requests,
                                                    rooms=self._rooms(row, ctx))

    def _shown_limits(self, ranking: Ranking, ctx: RequestContext, row: int,
                      limits: dict[str, float]) -> dict[str, float | NUMATopologyLimits]:
        """The Selection's limits: the claim's caps and what the filters that ran leave for the node (Nova's)."""
        shown: dict[str, float | NUMATopologyLimits] = dict(limits)
        for flt in self.ranker.leaving:  # the others leave nothing
            if flt in ranking.applied:
                shown.update(flt.selection_limits(self.table, ctx, row))
        return shown


def resources_at(table: HostTable, ctx: RequestContext, row: int, limits: dict[str, float] | None) -> dict[str, int]:
    """What a claim on node ``row`` takes: the request's resources, or, for a dedicated guest that Nova's PCPU
    query would not have found there (no room for its PCPU, or the thread policy's trait not as asked), those of
    Nova's VCPU query (``RequestContext.fallback``), as Nova claims a host's first allocation request."""
    fallback = ctx.fallback
    if fallback is None:
        return ctx.resources
    traits = table.node_traits(row)
    if fallback.required <= traits and not (fallback.forbidden & traits) \
            and table.fits(row, ctx.resources, limits or None) is None:
        return ctx.resources
    return fallback.resources


def _plus(resources: dict[str, int], more: dict[str, int]) -> dict[str, int]:
    """``resources`` with ``more`` added (the groups the node's own provider takes, beside the flavor's classes)."""
    out = dict(resources)
    for rc, amount in more.items():
        out[rc] = out.get(rc, 0) + amount
    return out


def _tie_history(ctx: RequestContext, ranking: Ranking) -> tuple[TieHistory | None, TieStep | None]:
    """A multi-instance request's history of equal weights (``gantt.compute.ties``), and this instance's weights
    for the later instances to read (None for the last)."""
    history: TieHistory | None = ctx.scratch.get(TIES)
    step = None
    if history is not None:
        if history.layout != ranking.layout:  # rows renumbered: the earlier rows name other nodes now
            history.steps.clear()
            history.layout = ranking.layout
        if ctx.instance_index < history.instances - 1:  # a later instance reads this one's weights
            step = history.snapshot(ranking)
    return history, step


def rollback(table: HostTable, placed: list[Allocation], moved: dict[str, tuple[Allocation, Allocation]],
             keep: set[str] | frozenset[str] = frozenset()) -> None:
    """Undo this request's claims (last first), but not those of consumers in ``keep`` (the store's now) nor a
    claim a twin request made anew for the same consumer after ours was released."""
    with table.lock:
        for allocation in reversed(placed):
            if allocation.consumer_uuid in keep:
                continue
            if allocation.consumer_uuid in moved:  # a move: the instance gets its source back
                source, held = moved[allocation.consumer_uuid]
                if held.consumer_uuid not in keep:  # else the store made this move (a twin request's)
                    table.unmove(allocation, held, source)
                continue
            if table.allocation(allocation.consumer_uuid) is allocation:
                table.release(allocation.consumer_uuid)
