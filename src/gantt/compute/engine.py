"""The pipeline: pre-selection → filters → weighers → pick (subset, shuffle) → claim → alternates → explain.

The engine is the face of one decision: it ranks (``gantt.compute.ranking``), claims down the ranking in Nova's
pick order (``gantt.compute.claim``, ``gantt.compute.order``), and commits through the hook of
``gantt.compute.commit``. It knows filters and weighers only through their narrow interfaces (``filters.base``,
``weighers.base``) and storage only through that hook: it never imports the service or a store.

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
from collections.abc import Generator, Mapping
from typing import Any

import numpy as np

from gantt.base.ids import new_uuid
from gantt.compute import groups
from gantt.compute.claim import Claims, rollback
from gantt.compute.commit import Attempts, ClaimConflict, CommitHook, CommitSteps, TableReplaced
from gantt.compute.context_memo import ContextMemo
from gantt.compute.order import PickOrder
from gantt.compute.ranking import Ranker
from gantt.compute.request import RequestContext, unnumbered_traits
from gantt.compute.selections import Selections
from gantt.compute.state.table import HostTable
from gantt.compute.stats import EngineStats
from gantt.compute.ties import KEY as TIES
from gantt.compute.ties import TieHistory
from gantt.config import Config
from gantt.model import (
    Allocation,
    Candidate,
    Conflict,
    Explanation,
    NodeKey,
    NoValidHost,
    RequestSpec,
    Selection,
    decode,
)

log = logging.getLogger(__name__)


class _LostBorrowed(Exception):
    """Internal: an allocation a request answered with (held by a twin request) vanished before it returned."""


class Engine:
    """One scheduler's decisions over one table: its ranker, its pick order and its claims, composed."""

    def __init__(self, table: HostTable, config: Config | None = None, *, commit: CommitHook | None = None,
                 commit_steps: CommitSteps | None = None, rng: random.Random | None = None,
                 stats: EngineStats | None = None) -> None:
        self.table = table
        self.config = config or Config()
        self.commit = commit
        self.commit_steps = commit_steps  # ``commit`` as steps, for select_steps (None: ``commit`` in place)
        self.stats = stats or EngineStats()
        self.ranker = Ranker(table, self.config, self.stats)
        self.order = PickOrder(table, self.config, rng or random.Random(self.config.gantt.seed))
        self.selections = Selections(table, self.config)
        self.claims = Claims(table, self.config, self.ranker, self.order, self.selections, self.stats)
        self.contexts = ContextMemo()  # RequestContext.build once per request class

    def retune(self) -> None:
        """The Config's options changed in place (``gantt.config.per_request``: Nova reads some at each request):
        new filters and weighers, whose masks and memos kept across decisions start from the new values, as at
        construction. A decision in flight finishes with the ones it began with; the table's own caches are keyed
        by what they depend on, and stay."""
        ranker = Ranker(self.table, self.config, self.stats)
        self.claims = Claims(self.table, self.config, ranker, self.order, self.selections, self.stats)
        self.ranker = ranker

    # ----------------------------------------------------------------------------------------- public face

    def select_destinations(self, spec: RequestSpec | dict[str, Any]) -> list[list[Selection]]:
        """One list per instance: the claimed node first, then up to ``max_attempts - 1`` unclaimed alternates."""
        steps = self.select_steps(spec, in_place=True)
        try:
            next(steps)
        except StopIteration as stop:
            answer: list[list[Selection]] = stop.value  # what select_steps returned
            return answer
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
            ctx = self._context(spec)
            try:
                placed, answer = self._place_all(ctx)
            except _LostBorrowed:
                # A twin request (same consumers, another thread) gave up and rolled back a consumer this one
                # answered with: decide again rather than return an allocation that no longer exists.
                with self.stats.lock:
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
                rollback(self.table, placed, ctx.moved)
                raise  # the caller decides again on the table that replaced ours
            except ClaimConflict as exc:
                rollback(self.table, placed, ctx.moved, keep=set(exc.held))
                with self.stats.lock:
                    self.stats.commit_conflicts += 1
                log.info("commit conflict on %s (%d conflict(s) left): %s", exc.keys, attempts.left, exc.message)
                if not attempts.spend():
                    break
            except BaseException:
                rollback(self.table, placed, ctx.moved)
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
                                     weight=float(scores[i]), uuid=table.node_uuids[r],
                                     availability_zone=self.selections.zone(r),
                                     weights={name: float(part[i]) for name, part in contributions.items()}))
            if table.layout == ranking.layout:  # else rows were renumbered while they were named: again
                return out

    def explain(self, spec: RequestSpec | dict[str, Any]) -> Explanation:
        """Filter by filter, how many nodes each removes for this request (whether or not anything fits)."""
        spec = decode(spec, RequestSpec, path="$")
        ctx = self._dry_context(spec)
        return self.ranker.explain(ctx, self.ranker.rank(ctx))

    def context(self, spec: RequestSpec) -> RequestContext:
        """The request read against this table, as a decision reads it (``gantt.compute.capacity`` asks too)."""
        return self._context(spec)

    def _context(self, spec: RequestSpec) -> RequestContext:
        """The request read against this table: the flavor's classes only child providers hold go to them."""
        ctx = self.contexts.build(spec, self.config, self.table.clock())
        if not ctx.rebuild:  # a rebuild claims nothing
            required, forbidden = unnumbered_traits(ctx.spec)
            ctx.resources, ctx.groups = groups.spill(self.table, ctx.resources, ctx.groups,
                                                     required - frozenset(ctx.spec.required_traits or ()),
                                                     forbidden)
            if ctx.groups is not None and ctx.groups.unnumbered_required:
                # read across the node and the children its classes land on (groups.spill), not the node alone
                ctx.required_traits -= ctx.groups.unnumbered_required
        return ctx

    def _dry_context(self, spec: RequestSpec) -> RequestContext:
        ctx = self._context(spec)
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
        repeated = False  # an instance answered with the claim it holds
        answer: list[list[Selection]] = []
        if len(consumers) > 1:  # later instances order equal weights as Nova's re-sorted list does (and so do
            # the alternates, weighed as one more instance would be)
            ctx.scratch[TIES] = TieHistory(self.table.layout, len(consumers) + 1)
        with self.stats.lock:
            self.stats.decisions += 1
        try:
            for index, consumer in enumerate(consumers):
                ctx.instance_index = index
                if ctx.rebuild:  # one instance (RequestContext checks it), on the host it is on
                    answer.append(self._check_rebuild(ctx))
                    continue
                if spec.migration_uuid is not None:  # one instance (RequestSpec checks it)
                    selections, allocation, owned = self.claims.place_move(ctx, consumer, placed)
                    (placed if owned else borrowed).append(allocation)
                    answer.append(selections)
                    self._book(ctx, (allocation.host, allocation.nodename), consumer)
                    continue
                held = self.table.allocation(consumer)
                if held is not None:  # idempotent: this consumer was placed before
                    _check_repeat(ctx, held)
                    repeated = True
                    answer.append([self.selections.of(held)])
                    borrowed.append(held)
                    self._book(ctx, (held.host, held.nodename), consumer)
                    continue
                selections, allocation, owned = self.claims.place_one(ctx, consumer, placed)
                (placed if owned else borrowed).append(allocation)
                answer.append(selections)
                self._book(ctx, (allocation.host, allocation.nodename), consumer)
            if not ctx.rebuild and spec.migration_uuid is None and (len(consumers) > 1 or repeated):
                self._shared_alternates(ctx, answer, len(consumers))
            if borrowed:
                with self.table.lock:
                    lost = any(self.table.allocation(a.consumer_uuid) is not a for a in borrowed)
                if lost:
                    raise _LostBorrowed()
        except BaseException:
            rollback(self.table, placed, ctx.moved)
            raise
        with self.stats.lock:
            self.stats.placements += sum(1 for a in placed if a.instance_uuid is None)
        return placed, answer

    def _shared_alternates(self, ctx: RequestContext, answer: list[list[Selection]], instances: int) -> None:
        """Every instance's alternates, as Nova's ``_get_alternate_hosts`` gives them once all are claimed: one
        list, weighed after the request's claims, without any host the request took."""
        ctx.instance_index = instances
        taken = {choices[0].host for choices in answer}
        alternates = self.claims.alternates(ctx, taken)
        for choices in answer:
            del choices[1:]
            choices.extend(alternates)

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
                raise self.ranker.refusal(ctx, ranking)
            table = self.table
            for row, weight in self.order.walk(ranking):
                if table.layout != ranking.layout:
                    break  # renumbered meanwhile: rank again
                if row < table.n:
                    return [self.selections.at(row, {}, {}, None, weight)]
            else:
                raise self.ranker.refusal(ctx, ranking)


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
    elif _nonzero(held.resources) not in [_nonzero(asked) for asked in _queries(ctx)]:
        why = "the requested resources differ from what it holds"
    if why is not None:
        raise Conflict(f"consumer {held.consumer_uuid!r} holds an allocation on {held.host!r} and {why}: a move "
                       "needs migration_uuid (or release the allocation first)", field="$.instance_uuids")


def _queries(ctx: RequestContext) -> list[dict[str, int]]:
    """What the request's claim may hold: its resources, or those of Nova's fallback query (a dedicated guest on a
    host answering VCPU only)."""
    return [ctx.resources, *([ctx.fallback.resources] if ctx.fallback is not None else [])]


def _nonzero(resources: Mapping[str, int]) -> dict[str, int]:
    return {rc: n for rc, n in resources.items() if n}
