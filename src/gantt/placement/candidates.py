"""Allocation candidates: Placement's ``GET /allocation_candidates`` on the replica's table (design §5).

Placement answers this question with a dozen SQL queries and a Cartesian product per tree. Here the per-provider
questions (does it have room for this amount within its units and step, does it carry these traits, is it in
these aggregates, is it in this tree) are boolean masks over every provider at once, read from the same columns
the filters use; Python only combines the few providers that survive, tree by tree, with Placement's rules:

- a numbered group (``resourcesN``) is satisfied by one provider; the unnumbered group by one provider too when
  nothing is nested or shared, else by several providers of one tree plus sharing providers
  (``MISC_SHARES_VIA_AGGREGATE``) reachable from the tree through an aggregate;
- the groups of a candidate share one anchor (a root), honour ``group_policy=isolate`` and ``same_subtree``, and
  what they take together fits each provider's capacity and ``max_unit``;
- ``root_required`` filters anchors, ``limit`` keeps the first N (Placement's order is arbitrary: any N of the
  answers is an answer, so generation stops at N).

Pure: reads a ``Forest`` (``gantt.placement.forest``: the providers' shape, cached while it does not change)
and the table's usage columns.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

import msgspec
import numpy as np

from gantt.compute.state.table import HostTable
from gantt.model import prepare_types
from gantt.placement.forest import Forest, ProviderSummary, Usage

_EPS = 1e-9


@dataclass(frozen=True)
class RequestGroup:
    """One ``resources[SUFFIX]`` group with its ``required``, ``member_of`` and ``in_tree`` (parsed; each
    frozenset in ``required``/``member_of`` means "any of these", all entries must hold)."""

    suffix: str = ""
    resources: tuple[tuple[str, int], ...] = ()
    required: tuple[frozenset[str], ...] = ()
    forbidden_traits: frozenset[str] = frozenset()
    member_of: tuple[frozenset[str], ...] = ()
    forbidden_aggregates: frozenset[str] = frozenset()
    in_tree: str | None = None

    @property
    def same_provider(self) -> bool:
        return bool(self.suffix)


@dataclass(frozen=True)
class CandidateQuery:
    groups: tuple[RequestGroup, ...]
    limit: int | None = None
    group_policy: str | None = None
    root_required: frozenset[str] = frozenset()
    root_forbidden: frozenset[str] = frozenset()
    same_subtrees: tuple[frozenset[str], ...] = ()
    nested_aware: bool = True  # before 1.29 a candidate takes at most one provider per tree


# The answer's objects are made by the thousand and hold no cycles: untracked by the cyclic collector (gc=False),
# so that making them does not trigger collections that walk every provider the replica holds.
class Amounts(msgspec.Struct, frozen=True, gc=False):
    """What one candidate takes from one provider (Placement's ``{"resources": {class: amount}}``)."""

    resources: dict[str, int]


class AllocationRequest(msgspec.Struct, gc=False):
    """One candidate: what to allocate on which provider (by uuid), and which providers satisfied which group
    (``mappings``: suffix -> uuids). In Placement's shape, so the latest microversion encodes it as it is."""

    allocations: dict[str, Amounts]
    mappings: dict[str, list[str]]


class Candidates(msgspec.Struct):
    allocation_requests: list[AllocationRequest]
    provider_summaries: dict[str, ProviderSummary]  # by provider uuid


# ---------------------------------------------------------------------------------------------- search


class _Pick(NamedTuple):  # a tuple: tens of thousands are made per answer
    """Placement's per-group AllocationRequest: the parts one group takes, anchored at one root."""

    anchor: int
    parts: tuple[tuple[int, str, int], ...]  # (provider, class, amount)
    providers: frozenset[int]
    suffix: str
    same_provider: bool


class _NoCandidates(Exception):
    """Placement's ResourceProviderNotFound inside the search: the answer is empty."""


class _Search:
    def __init__(self, table: HostTable, forest: Forest, query: CandidateQuery) -> None:
        self.table = table
        self.forest = forest
        self.query = query
        n = table.n
        self.rc = table.rc
        self.has = table.has_inventory[:n]
        self.anchor_ok = self._anchor_mask()
        self._fit_cache: dict[tuple[str, int], np.ndarray] = {}

    # ---- per-provider masks

    def _anchor_mask(self) -> np.ndarray | None:
        """root_required: the roots allowed to anchor a candidate (None: all)."""
        q, f = self.query, self.forest
        if not q.root_required and not q.root_forbidden:
            return None
        roots = f.root == np.arange(f.size)
        ok: np.ndarray = roots.copy()
        for trait in q.root_required:
            ok &= f.trait_mask(trait)
        if q.root_forbidden:
            ok &= ~f.any_trait(q.root_forbidden)
        if not ok.any():
            raise _NoCandidates
        return ok

    def fits(self, rc: str, amount: int) -> np.ndarray:
        """Providers with room for ``amount`` of ``rc`` within min/max unit and step (Placement's rule)."""
        key = (rc, amount)
        found = self._fit_cache.get(key)
        if found is not None:
            return found
        j = self.table.rc_index.get(rc)
        rows = self.forest.rows
        if j is None or not len(rows):
            found = np.zeros(self.forest.size, dtype=np.bool_)
        else:
            # Row-wise over the table's columns, then one gather into the forest's order (not five gathers). The
            # step only where one is set: a float fmod over every row cost more than the rest of the answer.
            rc_cols, n = self.rc, len(self.has)
            ok = (self.has[:, j] & (rc_cols["free"][:n, j] >= amount - _EPS)
                  & (rc_cols["max_unit"][:n, j] >= amount) & (rc_cols["min_unit"][:n, j] <= amount))
            step = rc_cols["step_size"][:n, j]
            stepped = step > 1
            if stepped.any():
                ok[stepped] &= np.fmod(amount, step[stepped]) == 0
            found = ok[rows]
        self._fit_cache[key] = found
        return found

    def _tree(self, group: RequestGroup) -> np.ndarray | None:
        if group.in_tree is None:
            return None
        where = self.forest.index.get(group.in_tree)
        if where is None:
            raise _NoCandidates
        in_tree: np.ndarray = self.forest.root == self.forest.root[where]
        return in_tree

    def _with_resource(self, group: RequestGroup) -> dict[str, np.ndarray]:
        tree = self._tree(group)
        out = {}
        for rc, amount in group.resources:
            mask = self.fits(rc, amount)
            if tree is not None:
                mask = mask & tree
            if not mask.any():
                raise _NoCandidates
            out[rc] = mask
        return out

    def _in_aggregates(self, group: RequestGroup) -> np.ndarray | None:
        if not group.member_of:
            return None
        mask = np.ones(self.forest.size, dtype=np.bool_)
        for any_of in group.member_of:
            mask &= self.forest.any_member(any_of)
        if not mask.any():
            raise _NoCandidates
        return mask

    def _anchored(self, root: int) -> bool:
        return self.anchor_ok is None or bool(self.anchor_ok[root])

    # ---- one group

    def picks(self, group: RequestGroup) -> Iterator[_Pick]:
        sharing = bool(self.forest.sharing.any())
        if not group.same_provider and (sharing or self.forest.has_trees):
            return self._tree_picks(group)
        return self._single_picks(group)

    def _single_mask(self, group: RequestGroup) -> np.ndarray | None:
        """The providers that alone satisfy the whole group (None: Placement matches nothing)."""
        f = self.forest
        with_resource = self._with_resource(group)
        in_aggs = self._in_aggregates(group)
        if not group.resources and in_aggs is None and not group.required:
            return None  # as Placement: a resourceless group with nothing to filter by matches nothing
        mask = np.ones(f.size, dtype=np.bool_) if in_aggs is None else in_aggs.copy()
        for any_of in group.required:
            mask &= f.any_trait(any_of)
        if group.forbidden_aggregates:
            mask &= ~f.any_member(group.forbidden_aggregates)
        if group.forbidden_traits:
            mask &= ~f.any_trait(group.forbidden_traits)
        for fit in with_resource.values():
            mask &= fit
        return mask

    def _single_picks(self, group: RequestGroup) -> Iterator[_Pick]:
        """Each provider that alone satisfies the whole group (and, for a sharing one, each tree it serves)."""
        f = self.forest
        mask = self._single_mask(group)
        if mask is None:
            return
        for p in np.flatnonzero(mask).tolist():
            parts = tuple((p, rc, amount) for rc, amount in group.resources)
            root = int(f.root[p])
            if self._anchored(root):
                yield _Pick(root, parts, frozenset((p,)), group.suffix, group.same_provider)
            if f.sharing[p]:
                for anchor in f.anchors(p):
                    if anchor != root and self._anchored(anchor):
                        yield _Pick(anchor, parts, frozenset((p,)), group.suffix, group.same_provider)

    def _one_group_one_provider(self, group: RequestGroup) -> Candidates:
        """One group that one provider satisfies alone: each matching provider is one candidate (its anchors
        all give the same one), the mask already holds capacity and units, so nothing is combined."""
        f, q = self.forest, self.query
        mask = self._single_mask(group)
        if mask is None:
            return Candidates([], {})
        if self.anchor_ok is not None:
            anchored = self.anchor_ok[f.root]
            for p in np.flatnonzero(mask & ~anchored & f.sharing).tolist():
                anchored[p] = any(self._anchored(a) for a in f.anchors(p))
            mask &= anchored
        chosen = np.flatnonzero(mask)
        if q.limit is not None:
            chosen = chosen[:q.limit]
        amounts = Amounts(dict(group.resources))  # one object, shared by every candidate
        uuids = f.uuids
        requests = [AllocationRequest({uuids[p]: amounts}, {group.suffix: [uuids[p]]}) for p in chosen.tolist()]
        return Candidates(requests, self._summaries(set(chosen.tolist())))

    def _tree_picks(self, group: RequestGroup) -> Iterator[_Pick]:
        """The unnumbered group over trees: each class from any provider of the tree, or from a sharing provider
        serving it; every combination whose providers together carry the required traits and none forbidden."""
        f = self.forest
        if group.required and not f.any_trait(t for any_of in group.required for t in any_of).any():
            raise _NoCandidates
        with_resource = self._with_resource(group)
        in_aggs = self._in_aggregates(group)
        bad_aggs = f.any_member(group.forbidden_aggregates) if group.forbidden_aggregates else None
        found: dict[str, set[tuple[int, int]]] = {}
        trees: set[int] | None = None  # the trees (by anchor) that can serve every class seen so far
        for rc, fit in with_resource.items():
            rows = np.flatnonzero(fit)
            pairs = set(zip(rows.tolist(), f.root[rows].tolist(), strict=True))  # one gather, not a scalar each
            shared = f.sharing & fit
            if group.in_tree is None and shared.any():
                if in_aggs is not None:
                    shared = shared & in_aggs
                for p in np.flatnonzero(shared).tolist():
                    pairs |= {(p, anchor) for anchor in f.anchors(p)}
            if self.anchor_ok is not None:
                pairs = {(p, a) for p, a in pairs if self.anchor_ok[a]}
            if in_aggs is not None:
                pairs = {(p, a) for p, a in pairs if in_aggs[p] or in_aggs[a]}
            if bad_aggs is not None:
                pairs = {(p, a) for p, a in pairs if not (bad_aggs[p] or bad_aggs[a])}
            if not pairs:
                raise _NoCandidates
            anchors = {a for _, a in pairs}
            trees = anchors if trees is None else trees & anchors
            if not trees:
                raise _NoCandidates
            found[rc] = pairs
        if trees is None:
            return
        amounts = dict(group.resources)
        by_tree: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
        # Each class's pairs filtered once, by the trees that serve every class (filtering every earlier class
        # again as each class came was most of a nested answer's time).
        for rc, pairs in found.items():
            for p, anchor in sorted(pairs):
                if anchor in trees:
                    by_tree[anchor][rc].append(p)
        for anchor in sorted(by_tree):  # lazily: a caller that has enough candidates stops asking
            per_rc = by_tree[anchor]
            classes = sorted(per_rc)
            asked = [amounts[rc] for rc in classes]
            for combo in itertools.product(*(per_rc[rc] for rc in classes)):  # distinct: one provider per list
                if (group.required or group.forbidden_traits) and not self._traits_hold(combo, group):
                    continue
                yield _Pick(anchor, tuple(zip(combo, classes, asked, strict=True)), frozenset(combo),
                            group.suffix, False)

    def _traits_hold(self, combo: tuple[int, ...], group: RequestGroup) -> bool:
        traits: set[str] = set()
        for p in combo:
            mine = self.forest.traits[p]
            if group.forbidden_traits & mine:
                return False
            traits |= mine
        return all(any_of & traits for any_of in group.required)

    # ---- all groups

    def run(self) -> Candidates:
        q = self.query
        if len(q.groups) == 1 and (q.groups[0].same_provider
                                   or not (self.forest.sharing.any() or self.forest.has_trees)):
            return self._one_group_one_provider(q.groups[0])
        if len(q.groups) == 1:  # the unnumbered group over trees: each pick is a candidate
            return self._collect_one(self.picks(q.groups[0]), q.groups[0].suffix)
        picks_by_suffix: dict[str, list[_Pick]] = {}
        total: dict[str, int] = defaultdict(int)
        multi: set[str] = set()
        for group in q.groups:
            for rc, amount in group.resources:
                if rc in total:
                    multi.add(rc)
                total[rc] += amount
            found = list(self.picks(group))
            if not found:
                return Candidates([], {})
            picks_by_suffix[group.suffix] = found
        by_anchor: dict[int, dict[str, list[_Pick]]] = defaultdict(lambda: defaultdict(list))
        for suffix, found in picks_by_suffix.items():
            for pick in found:
                by_anchor[pick.anchor][suffix].append(pick)
        suffixes = list(picks_by_suffix)

        def combos() -> Iterator[tuple[_Pick, ...]]:
            for anchor in sorted(by_anchor, key=lambda a: self.forest.rows[a]):
                lists = by_anchor[anchor]
                if len(lists) == len(suffixes) and self._enough_overall(lists, multi, total):
                    yield from itertools.product(*(lists[s] for s in suffixes))

        return self._collect(combos(), sum(1 for s in suffixes if s))

    def _collect_one(self, picks: Iterable[_Pick], suffix: str) -> Candidates:
        """One group's picks as candidates. Each part already fits on its own (its mask held capacity, units
        and step) and one group asks each class once, so nothing needs adding up or checking again; only the
        same parts anchored at several trees (a sharing provider's) repeat."""
        q, f = self.query, self.forest
        uuids = f.uuids
        out: list[AllocationRequest] = []
        seen: set[tuple[tuple[int, str, int], ...]] = set()
        used_providers: set[int] = set()
        shared: dict[tuple[tuple[str, int], ...], Amounts] = {}
        for pick in picks:
            if pick.parts in seen:
                continue
            if not q.nested_aware and f.has_trees \
                    and len({int(f.root[p]) for p in pick.providers}) != len(pick.providers):
                continue
            seen.add(pick.parts)
            by_provider: dict[int, list[tuple[str, int]]] = {}
            for p, rc, amount in pick.parts:
                by_provider.setdefault(p, []).append((rc, amount))
            allocations = {}
            for p, resources in by_provider.items():
                key = tuple(resources)
                amounts = shared.get(key)
                if amounts is None:
                    amounts = shared[key] = Amounts(dict(resources))
                allocations[uuids[p]] = amounts
            out.append(AllocationRequest(allocations, {suffix: sorted(uuids[p] for p in pick.providers)}))
            used_providers |= pick.providers
            if q.limit is not None and len(out) >= q.limit:
                break
        return Candidates(out, self._summaries(used_providers))

    def _collect(self, combos: Iterable[tuple[_Pick, ...]], granular: int) -> Candidates:
        q, f = self.query, self.forest
        out: list[AllocationRequest] = []
        seen: set[tuple[frozenset[tuple[int, str, int]], tuple[tuple[str, frozenset[int]], ...]]] = set()
        used_providers: set[int] = set()
        for combo in combos:
            candidate = self._combine(combo, granular)
            if candidate is None:
                continue
            amounts, mappings = candidate
            key = (frozenset((p, rc, a) for (p, rc), a in amounts.items()),
                   tuple(sorted((s, frozenset(ps)) for s, ps in mappings.items())))
            if key in seen:
                continue
            providers = {p for p, _ in amounts}
            if not q.nested_aware and f.has_trees and len({int(f.root[p]) for p in providers}) != len(providers):
                continue
            seen.add(key)
            used_providers |= providers
            out.append(self._request(amounts, mappings))
            if q.limit is not None and len(out) >= q.limit:
                break
        return Candidates(out, self._summaries(used_providers))

    def _enough_overall(self, lists: dict[str, list[_Pick]], multi: set[str], total: dict[str, int]) -> bool:
        """Placement's pre-check: where several groups ask for one class, the tree's providers on offer must
        have that much capacity between them before any combination is tried."""
        if not multi:
            return True
        providers = {p for picks in lists.values() for pick in picks for p, _, _ in pick.parts}
        for rc in multi:
            j = self.table.rc_index.get(rc)
            if j is None:
                return False
            capacity = sum(int(self.rc["capacity"][self.forest.rows[p], j]) for p in providers
                           if self.has[self.forest.rows[p], j])
            if total[rc] > capacity:
                return False
        return True

    def _combine(self, combo: tuple[_Pick, ...], granular: int
                 ) -> tuple[dict[tuple[int, str], int], dict[str, set[int]]] | None:
        q, f = self.query, self.forest
        if q.group_policy == "isolate":
            distinct: set[int] = set()
            for pick in combo:
                if pick.same_provider:
                    distinct |= pick.providers
            if len(distinct) != granular:
                return None
        mappings: dict[str, set[int]] = defaultdict(set)
        for pick in combo:
            mappings[pick.suffix] |= pick.providers
        for subtree in q.same_subtrees:
            members: set[int] = set()
            for suffix in subtree:
                members |= mappings.get(suffix, set())
            if len(members) > 1:
                common = set.intersection(*(f.ancestors(p) for p in members))
                if not common & members:
                    return None
        amounts: dict[tuple[int, str], int] = defaultdict(int)
        for pick in combo:
            for p, rc, amount in pick.parts:
                amounts[(p, rc)] += amount
        for (p, rc), amount in amounts.items():
            j = self.table.rc_index[rc]
            row = f.rows[p]
            capacity = int(self.rc["capacity"][row, j])
            used = self.rc["reported"][row, j] + self.rc["inflight"][row, j]
            if used + amount > capacity + _EPS or amount > self.rc["max_unit"][row, j]:
                return None
        return dict(amounts), dict(mappings)

    def _request(self, amounts: dict[tuple[int, str], int], mappings: dict[str, set[int]]) -> AllocationRequest:
        uuids = self.forest.uuids
        by_provider: dict[str, dict[str, int]] = {}
        for (p, rc), amount in amounts.items():
            by_provider.setdefault(uuids[p], {})[rc] = amount
        return AllocationRequest({uuid: Amounts(r) for uuid, r in by_provider.items()},
                                 {s: sorted(uuids[p] for p in ps) for s, ps in mappings.items()})

    def _summaries(self, providers: set[int]) -> dict[str, ProviderSummary]:
        """Every provider of every tree a returned candidate touches (only the touched providers themselves
        before 1.29, when trees are hidden)."""
        f = self.forest
        if not providers:
            return {}
        if not self.query.nested_aware and f.has_trees:
            shown = np.array(sorted(providers), dtype=np.int64)
        else:
            roots = np.zeros(f.size, dtype=np.bool_)
            roots[f.root[sorted(providers)]] = True
            shown = np.flatnonzero(roots[f.root])
        versions = self.table.col("usage_version")[f.rows[shown]]
        stale = shown[versions != f.summary_version[shown]]
        if len(stale):
            self._build_summaries(stale)
            f.summary_version[stale] = self.table.col("usage_version")[f.rows[stale]]
        cached, uuids = f.summaries, f.uuids
        return {uuids[p]: cached[p] for p in shown.tolist()}

    def _build_summaries(self, providers: np.ndarray) -> None:
        f = self.forest
        rows = f.rows[providers]
        columns = []
        for rc, j in self.table.rc_index.items():
            has = self.has[rows, j]
            if has.any():
                capacity = np.floor(self.rc["capacity"][rows, j]).astype(np.int64)
                used = np.rint(self.rc["reported"][rows, j] + self.rc["inflight"][rows, j]).astype(np.int64)
                columns.append((rc, has.tolist(), capacity.tolist(), used.tolist()))
        shared: dict[tuple[int, int], Usage] = {}  # a homogeneous cloud has few distinct figures
        for i, p in enumerate(providers.tolist()):
            resources = {}
            for rc, has, capacity, used in columns:
                if has[i]:
                    key = (capacity[i], used[i])
                    usage = shared.get(key)
                    if usage is None:
                        usage = shared[key] = Usage(*key)
                    resources[rc] = usage
            parent = f.parent[p]
            f.summaries[p] = ProviderSummary(resources, f.sorted_traits[p],
                                             f.uuids[parent] if parent is not None else None, f.uuids[int(f.root[p])])


def allocation_candidates(table: HostTable, forest: Forest, query: CandidateQuery) -> Candidates:
    """The candidates for ``query`` (call under the table lock: usage is read from the live columns)."""
    try:
        return _Search(table, forest, query).run()
    except _NoCandidates:
        return Candidates([], {})


prepare_types(globals())  # build msgspec type info before any thread encodes (see model.prepare_types)
