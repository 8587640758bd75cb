"""The pipeline: pre-selection → filters → weighers → pick (subset, shuffle) → claim → alternates → explain.

The engine knows filters and weighers only through their narrow interfaces (``filters.base``,
``weighers.base``) and storage only through an optional commit hook: it never imports the service or a store.

Claims
- Locally a claim is ``HostTable.claim``: a compare-and-set under the table lock (the node still has room). A
  rejected claim moves on to the next candidate in rank order.
- With a shared store, the service passes ``commit``: after every instance of a request holds its local claim, the
  batch is committed to the store in one transaction. A ``ClaimConflict`` (another scheduler got there first)
  rolls the local claims back; the hook has already refreshed the replica, and the request is decided again. One
  budget (``Attempts``: ``[gantt] claim_retries`` store conflicts per request) is shared by these decisions and
  the hook's own re-validations, so retries never multiply.
- All or nothing: if instance k of a request cannot be placed, the claims of instances 0..k-1 are released.
"""

from __future__ import annotations

import logging
import random
import threading
import zlib
from collections import Counter
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np

from gantt.base.ids import new_uuid
from gantt.compute import numa, pci
from gantt.compute.ranking import BlockPick, Ranker, Ranking
from gantt.compute.request import RequestContext
from gantt.compute.state import ClaimRejected, HostTable, SourceMoved
from gantt.compute.ties import FIRST_CANDIDATES, TieHistory
from gantt.compute.ties import KEY as TIES
from gantt.config import Config
from gantt.model import (
    Allocation,
    Candidate,
    Conflict,
    Explanation,
    GanttError,
    NodeKey,
    NoValidHost,
    NUMACellClaim,
    NUMATopologyLimits,
    RequestSpec,
    Selection,
    decode,
)

log = logging.getLogger(__name__)



class Attempts:
    """One request's budget of store conflicts (``[gantt] claim_retries``), shared by every loop that absorbs
    one: the engine deciding again and the commit hook re-validating the same nodes."""

    __slots__ = ("left",)

    def __init__(self, conflicts: int) -> None:
        self.left = conflicts

    def spend(self) -> bool:
        """Take one conflict from the budget; False when none is left (the request gives up)."""
        if self.left <= 0:
            return False
        self.left -= 1
        return True


CommitHook = Callable[[list[Allocation], Attempts], None]
# The same commit as steps (see ``Engine.select_steps``): a generator whose steps its own driver carries out.
CommitSteps = Callable[[list[Allocation], Attempts], Generator[Any, Any, None]]


class ClaimConflict(GanttError):
    """Raised by a commit hook when the store refused a batch because another scheduler changed a node."""

    status = 409
    title = "Claim conflict"

    def __init__(self, message: str, keys: list[NodeKey] | None = None, *, held: list[str] | None = None) -> None:
        super().__init__(message)
        self.keys = keys or []
        # Consumers the store says another instance booked first; the replica has caught up with those bookings,
        # so the local allocation of each is the store's: the rollback keeps it and the next round answers with it.
        self.held = held or []


class TableReplaced(ClaimConflict):
    """The replica re-read its store while this request decided on the table that reload replaced: the caller
    decides again on the new one (not a conflict with another scheduler, and no conflict budget is spent)."""


class _LostBorrowed(Exception):
    """Internal: an allocation a request answered with (held by a twin request) vanished before it returned."""


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


class Engine:
    def __init__(self, table: HostTable, config: Config | None = None, *, commit: CommitHook | None = None,
                 commit_steps: CommitSteps | None = None, rng: random.Random | None = None,
                 stats: EngineStats | None = None) -> None:
        self.table = table
        self.config = config or Config()
        self.commit = commit
        self.commit_steps = commit_steps  # ``commit`` as steps, for select_steps (None: ``commit`` in place)
        self.rng = rng or random.Random(self.config.gantt.seed)
        self.stats = stats or EngineStats()
        self._stats_lock = self.stats.lock
        self.ranker = Ranker(table, self.config, self.stats)
        self._slots: tuple[int, np.ndarray] | None = None  # _slot_rows: (table layout, per row: of my slot)
        self._slots_lock = threading.Lock()

    # ----------------------------------------------------------------------------------------- public face

    def select_destinations(self, spec: RequestSpec | dict[str, Any]) -> list[list[Selection]]:
        """One list per instance: the claimed node first, then up to ``max_attempts - 1`` unclaimed alternates."""
        steps = self.select_steps(spec, in_place=True)
        try:
            next(steps)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        raise AssertionError("a commit made in place yielded a step")  # pragma: no cover

    def select_steps(self, spec: RequestSpec | dict[str, Any], *, in_place: bool = False,
                     ) -> Generator[Any, Any, list[list[Selection]]]:
        """``select_destinations`` as steps: whatever the steps of ``commit_steps`` yield passes through to the
        caller that drives them (the engine knows nothing of what they ask), and what it sends or throws back
        goes to them. The decisions themselves never yield. ``in_place``: commit with ``commit`` instead."""
        spec = decode(spec, RequestSpec, path="$")
        commit = self._commit_now if in_place or self.commit_steps is None else self.commit_steps
        attempts = Attempts(self.config.gantt.claim_retries)
        while True:
            ctx = RequestContext.build(spec, self.config, self.table.clock())
            try:
                placed, answer = self._place_all(ctx)
            except _LostBorrowed:
                # A twin request (same consumers, another thread) gave up and rolled back a consumer this one
                # answered with: decide again rather than return an allocation that no longer exists.
                with self._stats_lock:
                    self.stats.claim_conflicts += 1
                if not attempts.spend():
                    break
                continue
            if self.commit is None or not placed:
                return answer
            try:
                yield from commit(placed, attempts)
                return answer
            except TableReplaced:
                self._rollback(placed, ctx.moved)
                raise  # the caller decides again on the table that replaced ours
            except ClaimConflict as exc:
                self._rollback(placed, ctx.moved, keep=set(exc.held))
                with self._stats_lock:
                    self.stats.commit_conflicts += 1
                log.info("commit conflict on %s (%d conflict(s) left)", exc.keys, attempts.left)
                if not attempts.spend():
                    break
            except BaseException:
                self._rollback(placed, ctx.moved)
                raise
        raise NoValidHost("claims kept conflicting with other schedulers; try again",
                          Explanation(hosts=self.table.n, steps=[], reason="contention"))

    def _commit_now(self, placed: list[Allocation], attempts: Attempts) -> Generator[Any, Any, None]:
        assert self.commit is not None
        self.commit(placed, attempts)
        return
        yield  # a generator that yields nothing: the commit happens in place

    def candidates(self, spec: RequestSpec | dict[str, Any], limit: int | None = None) -> list[Candidate]:
        """The nodes that pass the filters, best first, with their weights; claims nothing (a dry run)."""
        spec = decode(spec, RequestSpec, path="$")
        ctx = self._dry_context(spec)
        table = self.table
        while True:
            contributions: dict[str, np.ndarray] = {}
            ranking = self.ranker.rank(ctx, contributions)
            rows = ranking.candidate_rows()
            scores = ranking.candidate_scores()
            order = np.argsort(-scores, kind="stable")
            if limit is not None:
                order = order[:limit]
            out = []
            for i in order.tolist():
                r = int(rows[i])
                out.append(Candidate(host=table.host_names[r], nodename=table.node_names[r],
                                     weight=float(scores[i]), uuid=table.node_uuids[r], availability_zone=self._zone(r),
                                     weights={name: float(part[i]) for name, part in contributions.items()}))
            if table.layout == ranking.layout:  # else rows were renumbered while they were named: again
                return out

    def explain(self, spec: RequestSpec | dict[str, Any]) -> Explanation:
        """Filter by filter, how many nodes each removes for this request (whether or not anything fits)."""
        spec = decode(spec, RequestSpec, path="$")
        ctx = self._dry_context(spec)
        return self.ranker.explain(ctx, self.ranker.rank(ctx))

    def _dry_context(self, spec: RequestSpec) -> RequestContext:
        ctx = RequestContext.build(spec, self.config, self.table.clock())
        if spec.migration_uuid and spec.instance_uuids:  # a move's dry run: what the move itself would rank
            source = self.table.allocation(spec.instance_uuids[0])
            if source is not None and source.migration_uuid != spec.migration_uuid:
                ctx.move_source = source
        return ctx

    def release(self, consumer_uuid: str) -> Allocation:
        return self.table.release(consumer_uuid)

    # ------------------------------------------------------------------------------------------ placement

    def _place_all(self, ctx: RequestContext) -> tuple[list[Allocation], list[list[Selection]]]:
        spec = ctx.spec
        consumers = list(spec.instance_uuids) if spec.instance_uuids else [
            new_uuid() for _ in range(spec.num_instances)]
        placed: list[Allocation] = []  # claimed by this call: rolled back if the request fails
        borrowed: list[Allocation] = []  # held already (by an earlier or concurrent twin request): not ours
        answer: list[list[Selection]] = []
        if len(consumers) > 1:  # later instances order equal weights as Nova's re-sorted list does
            ctx.scratch[TIES] = TieHistory(self.table.layout, len(consumers))
        with self._stats_lock:
            self.stats.decisions += 1
        try:
            for index, consumer in enumerate(consumers):
                ctx.instance_index = index
                if ctx.rebuild:  # one instance (RequestContext checks it), on the host it is on
                    answer.append(self._check_rebuild(ctx))
                    continue
                if spec.migration_uuid is not None:  # one instance (RequestSpec checks it)
                    selections, allocation, owned = self._place_move(ctx, consumer, placed)
                    (placed if owned else borrowed).append(allocation)
                    answer.append(selections)
                    self._book(ctx, (allocation.host, allocation.nodename), consumer)
                    continue
                held = self.table.allocation(consumer)
                if held is not None:  # idempotent: this consumer was placed before
                    _check_repeat(ctx, held)
                    answer.append([self._selection_for(held)])
                    borrowed.append(held)
                    self._book(ctx, (held.host, held.nodename), consumer)
                    continue
                selections, allocation, owned = self._place_one(ctx, consumer, placed)
                (placed if owned else borrowed).append(allocation)
                answer.append(selections)
                self._book(ctx, (allocation.host, allocation.nodename), consumer)
            if borrowed:
                with self.table.lock:
                    lost = any(self.table.allocation(a.consumer_uuid) is not a for a in borrowed)
                if lost:
                    raise _LostBorrowed()
        except BaseException:
            self._rollback(placed, ctx.moved)
            raise
        with self._stats_lock:
            self.stats.placements += sum(1 for a in placed if a.instance_uuid is None)
        return placed, answer

    def _book(self, ctx: RequestContext, key: NodeKey, consumer: str) -> None:
        """Server-group bookkeeping so the next instance of the same request sees this one (as Nova does)."""
        ctx.placed.append(key)
        if ctx.group_policy is not None:
            ctx.group_hosts.append(key[0])
            ctx.group_members.add(consumer)

    def _check_rebuild(self, ctx: RequestContext) -> list[Selection]:
        """A rebuild (``_nova_check_type: ["rebuild"]``): is the instance's host still good for the new image?
        As Nova's scheduler answers it: the rebuild filters over the pre-selection, the best node, and no claim
        (the instance keeps the allocation it holds; nothing is booked anew, nothing written)."""
        while True:
            ranking = self.ranker.rank(ctx)
            if ranking.count == 0:
                raise self._no_valid_host(ctx, ranking)
            table = self.table
            for row, weight in self._order(ranking):
                if table.layout != ranking.layout:
                    break  # renumbered meanwhile: rank again
                if row < table.n:
                    return [self._selection(row, {}, {}, None, weight)]
            else:
                raise self._no_valid_host(ctx, ranking)

    def _place_move(self, ctx: RequestContext, consumer: str,
                    placed: list[Allocation]) -> tuple[list[Selection], Allocation, bool]:
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
                return [self._selection_for(source)], source, False
            if source is not None and source.migration_uuid == migration:  # made and confirmed: a repeat
                return [self._selection_for(source)], source, False
            if source is None:
                raise Conflict(f"instance {consumer!r} holds no allocation to move; place it without "
                               "migration_uuid", field="$.instance_uuids")
            if source.instance_uuid is not None:
                raise Conflict(f"{consumer!r} is a migration holding a move's source, not an instance",
                               field="$.instance_uuids")
            ctx.move_source = source
            try:
                return self._place_one(ctx, consumer, placed)
            except SourceMoved:
                continue  # released or moved by another request meanwhile: look again
        raise Conflict(f"instance {consumer!r} kept moving while this move was decided; try again",
                       field="$.instance_uuids")

    def _place_one(self, ctx: RequestContext, consumer: str,
                   placed: list[Allocation]) -> tuple[list[Selection], Allocation, bool]:
        """Claim one node for ``consumer``: (selections, allocation, whether this call created the allocation).

        When a concurrent request for the same consumer got there first, the claim hands back *its* allocation:
        the answer is then that allocation (not the row this call tried), and it is not ours to roll back.
        A move (``ctx.move_source``) claims with ``table.move``: the migration's allocation holding the source
        joins ``placed`` (one commit with the instance's).
        """
        while True:
            ranking = self.ranker.rank(ctx, lazy=True)
            if ranking.count == 0:
                return self._fail(ctx, consumer, placed, self._no_valid_host(ctx, ranking))
            outcome = self._claim_down(ctx, consumer, placed, ranking)
            if outcome is not None:
                return outcome
            # Rows were renumbered before a node was claimed: the ranking's rows name other nodes now.

    def _numa_claim(self, row: int, ctx: RequestContext) -> list[NUMACellClaim] | None:
        table = self.table
        limits = table.numa_limits(row)
        return numa.claim(table.node_numa(row), ctx.numa, cpu_ratio=limits.cpu_allocation_ratio,
                          ram_ratio=limits.ram_allocation_ratio,
                          pack=self.config.compute.packing_host_numa_cells_allocation_strategy,
                          pools=table.node_pci_pools(row), pci_requests=ctx.pci_requests)

    def _takes_devices(self, row: int, ctx: RequestContext) -> bool:
        """Whether node ``row`` can take what the claim takes beyond resources now: the guest's NUMA cells and its
        PCI devices (with their NUMA affinity), as a claim there would fit them."""
        table = self.table
        if ctx.numa is not None and table.node_numa(row) is not None:
            return self._numa_claim(row, ctx) is not None
        return not ctx.pci_requests or pci.supports(table.node_pci_pools(row), ctx.pci_requests)

    def _shown_limits(self, ranking: Ranking, ctx: RequestContext, row: int,
                      limits: dict[str, float]) -> dict[str, float | NUMATopologyLimits]:
        """The Selection's limits: the claim's caps and what the filters that ran leave for the node (Nova's)."""
        shown: dict[str, float | NUMATopologyLimits] = dict(limits)
        for flt in self.ranker.leaving:  # the others leave nothing
            if flt in ranking.applied:
                shown.update(flt.selection_limits(self.table, ctx, row))
        return shown

    def _claim_down(self, ctx: RequestContext, consumer: str, placed: list[Allocation],
                    ranking: Ranking) -> tuple[list[Selection], Allocation, bool] | None:
        """Claim the first candidate that still has room, then gather alternates. None when the table's rows
        were renumbered before anything was claimed (the caller ranks again)."""
        table = self.table
        max_attempts = self.config.scheduler.max_attempts
        spec = ctx.spec
        chosen: Allocation | None = None
        selections: list[Selection] = []
        history: TieHistory | None = ctx.scratch.get(TIES)
        step = None
        if history is not None:
            if history.layout != ranking.layout:  # rows renumbered: the earlier rows name other nodes now
                history.steps.clear()
                history.layout = ranking.layout
            if ctx.instance_index < history.instances - 1:  # a later instance reads this one's weights
                step = history.snapshot(ranking)
        # A later instance ranks the nodes that had room for the first (ResourceFilter): some are full now.
        early = ctx.instance_index > 0 and FIRST_CANDIDATES in ctx.scratch
        picked = -1  # Nova's pick (the first in order), which heads its list for the next instance even when
        # its claim fails and a later node is claimed
        for row, weight in self._order(ranking, history if history is not None and history.steps else None):
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
                if early and table.fits(row, ctx.resources, limits or None) is not None:
                    continue  # filled by this request's earlier instances: Nova's claim fails, the next is tried
                allocation = Allocation(consumer_uuid=consumer, host=key[0], nodename=key[1],
                                        resources=dict(ctx.resources), project_id=spec.project_id,
                                        user_id=spec.user_id, request_id=spec.request_id, group=ctx.hard_group)
                if ctx.numa is not None and table.node_numa(row) is not None:
                    # The claim holds the cells, CPUs and pages the guest takes, as fitted on the node now.
                    allocation.numa = self._numa_claim(row, ctx)
                    if allocation.numa is None:
                        continue  # taken meanwhile by a claim this ranking did not see
                try:
                    if ctx.move_source is None:
                        chosen = table.claim(key, allocation, limits=limits or None, pci=ctx.pci_requests)
                    else:
                        allocation.migration_uuid = spec.migration_uuid
                        held = table.move(key, allocation, ctx.move_source, limits=limits or None,
                                          pci=ctx.pci_requests)
                        ctx.moved[consumer] = (ctx.move_source, held)
                        placed.append(held)
                        chosen = allocation
                except SourceMoved:
                    raise
                except ClaimRejected:
                    with self._stats_lock:
                        self.stats.claim_conflicts += 1
                    continue
                if chosen is not allocation:  # a twin request holds this consumer: answer with its claim
                    return [self._selection_for(chosen)], chosen, False
                if history is not None:
                    history.record(step, picked)
                shown = self._shown_limits(ranking, ctx, row, limits)
                selection = self._selection(row, chosen.resources, shown, consumer, weight)
                if table.layout != ranking.layout:  # renumbered while the selection was read: read it by key
                    now = table.row_of(key)
                    shown = self._shown_limits(ranking, ctx, now, limits) if now is not None else dict(limits)
                    selection = msgspec.structs.replace(self._selection_for(chosen), limits=shown, weight=weight)
                selections.append(selection)
                if max_attempts <= 1:
                    break
                continue
            # Alternates: later candidates that still fit now, devices and NUMA cells included; not claimed (the
            # conductor's retry claims them).
            if key[0] == chosen.host or table.fits(row, ctx.resources, limits or None) is not None \
                    or not self._takes_devices(row, ctx):
                continue
            alternate = self._selection(row, dict(ctx.resources), self._shown_limits(ranking, ctx, row, limits),
                                        None, weight)
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
            error = self._no_valid_host(ctx, ranking, reason="contention" if ranking.count else "")
            return self._fail(ctx, consumer, placed, error)
        return selections, chosen, True

    def _fail(self, ctx: RequestContext, consumer: str, placed: list[Allocation],
              error: NoValidHost) -> tuple[list[Selection], Allocation, bool]:
        """Give up on ``consumer`` — unless a twin request claimed it meanwhile (then answer with that claim).

        The check and the rollback of this request's earlier claims happen under one hold of the table lock:
        otherwise a twin could borrow one of those claims, pass its own final check, and return it after this
        request released it (an answer naming an allocation that does not exist).
        """
        with self.table.lock:
            held = self.table.allocation(consumer)
            migration = ctx.spec.migration_uuid
            if held is not None and (migration is None or held.migration_uuid == migration):
                return [self._selection_for(held)], held, False
            self._rollback(placed, ctx.moved)
            placed.clear()
        raise error

    def _order(self, ranking: Ranking, history: TieHistory | None = None) -> Iterator[tuple[int, float]]:
        """(row, weight) in Nova's pick order: a random one of the best ``host_subset_size``, then by weight.

        With ``shuffle_best_same_weighed_hosts`` the nodes tied for the best weight are shuffled first. Only the few
        rows actually needed are extracted (repeated argmax), never a sort of every candidate. Consumes the
        ranking: each picked score is overwritten with -inf (a copy would cost a pass over every row); a shared
        score (the table's kept sum) is copied first, and only once a walk by weight needs the writes.
        A ranking with ``exact`` verdicts (filters that refine) skips the rows that fail them, so the subset and
        the alternates are those of the exact candidates, in the same order; only the rows walked are checked.
        Equal weights go the lowest row first, or, for a later instance of a multi-instance request
        (``history``), the order Nova's re-sorted list leaves them in (``gantt.compute.ties``).
        """
        fs = self.config.filter_scheduler
        pick = ranking.pick
        # By blocks (a decision over many rows): the kept scores are read, never written; a pick is remembered.
        score: Any = ranking.score if pick is None else pick
        shared = ranking.shared  # the table's kept sum: copied before the first write
        taken: list[int] = []  # positions picked but not yet set to -inf in ``score``
        rows = ranking.rows
        remaining = ranking.count
        exact = ranking.exact
        head: list[tuple[int, float]] = []  # (position in score, weight)

        def passes(i: int) -> bool:
            return exact is None or exact(int(rows[i]) if rows is not None else i)

        def own() -> Any:
            """``score`` to write in: a copy of a shared one, with every position taken so far at -inf."""
            nonlocal score, shared
            if shared:
                score, shared = score.copy(), False
            for i in taken:
                score[i] = -np.inf
            taken.clear()
            return score

        if fs.shuffle_best_same_weighed_hosts and remaining:
            ties = _Ties(score, ranking.top)
            take = fs.host_subset_size + self.config.scheduler.max_attempts + 4
            drawn = ties.sample(take, self.rng) if exact is None else ties.shuffled(self.rng)
            for i in drawn:
                weight = float(score[i])
                taken.append(i)
                remaining -= 1
                if passes(i):
                    head.append((i, weight))
                if len(head) >= take:
                    break
        batch = fs.host_subset_size + self.config.scheduler.max_attempts
        walk: Iterator[int] | None = None
        tied: list[int] = []  # positions tied with the last one ``best`` gave, in Nova's order, reversed

        def best() -> int:
            """The next position by weight (set it to -inf before asking again)."""
            nonlocal walk
            if walk is None:
                # Made only when the ties drawn above do not fill the head: then, and only then, a shared
                # score is copied (a pass over every row).
                own()
                walk = _best_first(score, batch) if pick is None else pick.best_first(batch)
            if history is None:
                return next(walk)
            while tied:
                i = tied.pop()
                if score[i] != -np.inf:
                    return i
            while True:
                i = next(walk)
                if i < 0 or score[i] != -np.inf:  # the walk may offer a tie given already
                    break
            if i < 0:
                return i
            group = _tied(score, i, pick)
            if len(group) > 1:
                at = rows[group] if rows is not None else group
                by_row = dict(zip(at.tolist(), group.tolist(), strict=True))
                tied.extend(by_row[r] for r in reversed(history.order(at).tolist()))
                i = tied.pop()
            return i

        while len(head) < fs.host_subset_size and remaining > 0:
            i = best()
            weight = float(score[i])
            score[i] = -np.inf
            remaining -= 1
            if passes(i):
                head.append((i, weight))

        offset = ranking.offset

        def emit(i: int, score: float) -> tuple[int, float]:
            return (int(rows[i]) if rows is not None else i), score + offset

        if head:
            subset = head[: fs.host_subset_size]
            if self.config.gantt.subset_slots > 1:
                subset = self._my_share(subset, own(), rows, passes) or subset
            first = subset[self.rng.randrange(len(subset))]
            if first in head:
                head.remove(first)
            else:  # a tie of the subset's last weight from beyond it (_my_share)
                own()[first[0]] = -np.inf
                remaining -= 1
            yield emit(*first)
        for i, weight in head:
            yield emit(i, weight)
        while remaining > 0:
            i = best()
            weight = float(score[i])
            if weight == -np.inf:
                return
            score[i] = -np.inf
            remaining -= 1
            if passes(i):
                yield emit(i, weight)

    def _my_share(self, subset: list[tuple[int, float]], score: np.ndarray, rows: np.ndarray | None,
                  passes: Callable[[int], bool]) -> list[tuple[int, float]]:
        """This instance's share of Nova's subset (``[gantt] subset_slot``): its members whose host hashes to this
        slot, and in place of each member of another slot at the subset's last weight, a node of this slot tied
        with it from beyond the subset. Nova orders equal weights as its host manager lists the hosts, which is
        arbitrary: a subset holding those ties instead is one Nova could have formed. Empty: none of this slot."""
        mine = self._slot_rows()

        def is_mine(i: int) -> bool:
            row = int(rows[i]) if rows is not None else i
            return row < len(mine) and bool(mine[row])

        share = [(i, w) for i, w in subset if is_mine(i)]
        last = min(w for _, w in subset)
        wanted = sum(1 for i, w in subset if w == last and not is_mine(i))
        if not wanted:
            return share
        ties = np.flatnonzero(score == last)  # the subset's own members are -inf by now
        at = rows[ties] if rows is not None else ties
        ok = at < len(mine)
        ok[ok] = mine[at[ok]]
        for i in ties[ok].tolist():
            if passes(i):
                share.append((i, last))
                wanted -= 1
                if not wanted:
                    return share
        if share:
            return share
        # None of this slot left at these weights (this instance ran ahead of the others): the others' nodes, but
        # drawn from all the ties rather than the first rows, where the others' own picks are.
        drawn = [int(ties[j]) for j in self.rng.sample(range(len(ties)), min(len(ties), len(subset)))]
        return [(i, last) for i in drawn if passes(i)]

    def _slot_rows(self) -> np.ndarray:
        """Per row: does its host hash to this instance's slot. A hash of the name, not the row number, so that
        every instance agrees whatever order it loaded the hosts in; kept until rows are renumbered."""
        table = self.table
        slots, slot = self.config.gantt.subset_slots, self.config.gantt.subset_slot
        layout, names = table.layout, table.host_names
        cached = self._slots
        if cached is not None and cached[0] == layout and len(cached[1]) >= len(names):
            return cached[1]
        with self._slots_lock:  # one thread hashes the names; the first decisions of every thread would all do it
            cached = self._slots
            known = cached[1] if cached is not None and cached[0] == layout else np.zeros(0, dtype=bool)
            if len(known) < len(names):
                fresh = [zlib.crc32(name.encode()) % slots == slot for name in names[len(known):]]
                known = np.concatenate([known, np.array(fresh, dtype=bool)])
                self._slots = (layout, known)
            return known

    def _rollback(self, placed: list[Allocation], moved: dict[str, tuple[Allocation, Allocation]],
                  keep: set[str] | frozenset[str] = frozenset()) -> None:
        table = self.table
        with table.lock:
            for allocation in reversed(placed):
                if allocation.consumer_uuid in keep:
                    continue
                if allocation.consumer_uuid in moved:  # a move: the instance gets its source back
                    source, held = moved[allocation.consumer_uuid]
                    if held.consumer_uuid not in keep:  # else the store made this move (a twin request's)
                        table.unmove(allocation, held, source)
                    continue
                # Only our own claim: after a release, a twin request may hold a new claim for the same consumer.
                if table.allocation(allocation.consumer_uuid) is allocation:
                    table.release(allocation.consumer_uuid)

    def _no_valid_host(self, ctx: RequestContext, ranking: Ranking, reason: str = "") -> NoValidHost:
        if ranking.exact is not None:  # a decision's ranking: explain with every filter's exact mask
            ranking = self.ranker.rank(ctx)
        explanation = self.ranker.explain(ctx, ranking, reason)
        with self._stats_lock:
            self.stats.no_valid_host[explanation.reason or "unknown"] += 1
        prefix = f"instance {ctx.instance_index + 1} of {ctx.spec.num_instances}: " if ctx.spec.num_instances > 1 \
            else ""
        return NoValidHost(prefix + explanation.summary(), explanation)

    # ---------------------------------------------------------------------------------------- selections

    def _zone(self, row: int) -> str:
        return self.table.zone(row) or self.config.default.default_availability_zone

    def _selection(self, row: int, resources: dict[str, int], limits: dict[str, float | NUMATopologyLimits],
                   consumer: str | None, weight: float) -> Selection:
        table = self.table
        return Selection(host=table.host_names[row], nodename=table.node_names[row], uuid=table.node_uuids[row],
                         availability_zone=self._zone(row), allocation=dict(resources), limits=dict(limits),
                         consumer_uuid=consumer, weight=weight)

    def _selection_for(self, allocation: Allocation) -> Selection:
        row = self.table.row_of((allocation.host, allocation.nodename))
        if row is None:
            return Selection(host=allocation.host, nodename=allocation.nodename,
                             allocation=dict(allocation.resources), consumer_uuid=allocation.consumer_uuid)
        return self._selection(row, allocation.resources, {}, allocation.consumer_uuid, 0.0)


BEST_BLOCK = 1024  # rows per block when finding the best few of a long score array


def _tied(score: Any, i: int, pick: BlockPick | None) -> np.ndarray:
    """The positions not taken yet whose score equals position ``i``'s (a pass over the scores)."""
    if pick is None:
        return np.flatnonzero(score == score[i])
    group = np.flatnonzero((pick.total == pick.total[i]) & pick.mask)
    if pick.taken:
        group = group[~np.isin(group, np.fromiter(pick.taken, dtype=np.intp, count=len(pick.taken)))]
    return group


def _best_first(score: np.ndarray, batch: int) -> Iterator[int]:
    """Positions of ``score`` in the order repeated ``argmax`` (each pick then set to -inf by the caller) gives:
    highest first, the lowest position among equals. The caller sets each yielded position to -inf before
    asking for the next.

    At 1,000,000 rows an argmax is a pass of ~0.5 ms and a decision takes several (the pick, the alternates).
    Here one pass takes each block's maximum; the best ``batch`` positions then lie in the ``batch`` blocks with
    the highest maxima (the lower block first among equal maxima): each of those holds a position that beats
    any position outside them. Only those blocks are searched. A further batch is found the same way if asked.
    """
    n = len(score)
    if n < 256 * BEST_BLOCK:  # below ~250,000 rows a few argmax passes cost less
        while True:
            yield int(score.argmax())
    full = n - n % BEST_BLOCK
    while True:
        maxima = score[:full].reshape(-1, BEST_BLOCK).max(axis=1)
        if full < n:
            maxima = np.append(maxima, score[full:].max())
        blocks = np.sort(np.lexsort((np.arange(len(maxima)), -maxima))[:batch])
        positions = np.concatenate([np.arange(b * BEST_BLOCK, min((b + 1) * BEST_BLOCK, n)) for b in blocks])
        values = score[positions]
        k = min(batch, len(values))
        threshold = np.partition(values, len(values) - k)[len(values) - k]  # the k-th highest
        above = np.flatnonzero(values > threshold)
        above = above[np.lexsort((above, -values[above]))]
        ties = np.flatnonzero(values == threshold)[: k - len(above)]  # positions ascend: lowest first
        yield from positions[np.concatenate((above, ties))].tolist()


def _shuffled_range(count: int, rng: random.Random) -> Iterator[int]:
    """``range(count)`` in a random order, drawn one at a time (a partial Fisher-Yates, the draws of shuffling a
    list of it in place): a caller that stops after a few pays for a few, where ``rng.sample`` of every tie, or a
    list of them, would pay for all. The swaps are kept in a dict, so no list of ``count`` items is built."""
    swapped: dict[int, int] = {}
    for k in range(count):
        j = rng.randrange(k, count)
        at_j = swapped.get(j, j)
        swapped[j] = swapped.get(k, k)
        yield at_j


class _Ties:
    """The positions of ``score`` tied at its highest value ``top`` (found by a pass when not given).

    Drawn by rejection first: a uniform position, kept if it ties and was not drawn before, gives each tie the
    same chance ``rng.sample`` of a list of them would, and where ties are common (an idle cloud of identical
    nodes: every row) a few tries find them, where counting or listing 100,000 ties was a third of a decision.
    When tries keep missing (ties are few, or fewer than wanted), the ties are listed and sampled: a draw either
    way is uniform, so the two together are.
    """

    __slots__ = ("_score", "top")

    _TRIES = 8  # per tie wanted, at most
    _FIRST = 16  # tries without any tie: the ties are sparse, list them

    def __init__(self, score: np.ndarray, top: float | None = None) -> None:
        self._score = score
        self.top = float(score.max()) if top is None else top

    def sample(self, want: int, rng: random.Random) -> list[int]:
        """Up to ``want`` distinct tied positions (fewer only when fewer tie), in a uniformly random order."""
        score, top, n = self._score, self.top, len(self._score)
        drawn: dict[int, None] = {}  # ordered: the order drawn
        for tries in range(1, self._TRIES * want + 1):
            i = rng.randrange(n)
            if score[i] == top and i not in drawn:
                drawn[i] = None
                if len(drawn) == want:
                    return list(drawn)
            elif not drawn and tries >= self._FIRST:
                break
        ties = self._listed()
        return [int(ties[j]) for j in rng.sample(range(len(ties)), min(want, len(ties)))]

    def shuffled(self, rng: random.Random) -> Iterator[int]:
        """Every tied position in a uniformly random order, drawn as the caller asks (for a caller that may need
        many: those that fail an exact check are skipped)."""
        ties = self._listed()
        for j in _shuffled_range(len(ties), rng):
            yield int(ties[j])

    def _listed(self) -> np.ndarray:
        return np.flatnonzero(self._score == self.top)


def _check_repeat(ctx: RequestContext, held: Allocation) -> None:
    """A request naming a consumer that holds an allocation is a repeat and answered with that allocation, unless
    it asks for something else: then it is a move without a migration_uuid, refused rather than ignored."""
    spec = ctx.spec
    dest = spec.requested_destination
    why = None
    if spec.ignore_hosts and held.host.lower() in {h.lower() for h in spec.ignore_hosts}:
        why = f"ignore_hosts names {held.host!r}"
    elif spec.force_hosts and held.host.lower() not in {h.lower() for h in spec.force_hosts}:
        why = "force_hosts does not name its host"
    elif spec.force_nodes and held.nodename not in spec.force_nodes:
        why = "force_nodes does not name its node"
    elif dest is not None and ((dest.host and dest.host != held.host) or (dest.node and dest.node != held.nodename)):
        why = "requested_destination names another host"
    elif {rc: n for rc, n in ctx.resources.items() if n} != {rc: n for rc, n in held.resources.items() if n}:
        why = "the requested resources differ from what it holds"
    if why is not None:
        raise Conflict(f"consumer {held.consumer_uuid!r} holds an allocation on {held.host!r} and {why}: a move "
                       "needs migration_uuid (or release the allocation first)", field="$.instance_uuids")


