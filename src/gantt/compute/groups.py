"""Request groups on a node's provider tree: Nova's ``requested_resources`` (a Cyborg device profile's groups, a QoS
port's) as Placement's allocation candidates place them, decided and claimed by Gantt in one commit.

Each group takes all its resources from ONE provider of the chosen node's tree (the node's own provider, or a
child provider: the FPGA, the NIC's bandwidth provider, a physical GPU's vGPUs), which carries the group's required
traits, none of its forbidden ones and is in an aggregate of every ``member_of`` entry. The flavor's numbered groups
(``resources1:VGPU=1``, ``trait1:…``) are groups too. ``group_policy=isolate`` puts every group on a provider of
its own; ``same_subtree`` keeps the providers of the groups it names in one subtree. Groups that share a provider
must fit there together (their sum within capacity and ``max_unit``), as Placement's combination step checks.

Three uses: ``RequestGroupsFilter`` keeps the nodes whose tree can take every group now (a vectorized reduction per
group, then the exact assignment only when several groups could compete); the claim takes the first assignment
(``assign``) and holds its parts on the child providers in the node's commit; an alternate's Selection shows the
assignment a claim there would take now. A group the node's own (root) provider takes is added to what the
claim holds on the node (and must fit there beside the flavor's own classes), as Placement sums the groups that
share a provider.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from gantt.compute.state.table import HostTable
from gantt.model import AllocationPart


@dataclass(frozen=True, slots=True)
class Group:
    """One request group, parsed: each ``member_of`` entry is "in any of these" (aggregate ids or uuids)."""

    id: str
    resources: tuple[tuple[str, int], ...]
    required: frozenset[str]
    forbidden: frozenset[str]
    member_of: tuple[frozenset[str], ...]
    forbidden_aggregates: frozenset[str]
    in_tree: str | None
    unnumbered: bool = False  # a class of the flavor's own group its node lacks (``spill``): exempt from isolate
    flavor: bool = False  # one of the flavor's numbered groups (``resources1:…``): its id is the suffix


@dataclass(frozen=True, slots=True)
class Groups:
    groups: tuple[Group, ...]
    isolate: bool
    same_subtree: tuple[frozenset[str], ...]
    # the unnumbered group's required traits when some of its classes are on children (``spill``): held by the
    # node's provider and the children that give it resources together, as Placement checks them
    unnumbered_required: frozenset[str] = frozenset()

    @property
    def exact_needed(self) -> bool:
        """Whether a tree that has a provider for each group alone may still fail them together."""
        return len(self.groups) > 1 or bool(self.unnumbered_required)


# ------------------------------------------------------------------------------------------------ the trees


@dataclass(frozen=True, slots=True)
class Trees:
    """The table's provider trees by row: each child row's root row (-1: not a child, or its root has no row),
    each root row's child rows in row order, each child row's parent row."""

    root_of: np.ndarray
    children: dict[int, list[int]]
    parent: dict[int, int]


def trees(table: HostTable) -> Trees:
    """The trees as the child providers' reports last placed them (rebuilt when the table's static state moves:
    a new row, a provider given another parent)."""

    def build() -> Trees:
        n = table.n
        placed = table.provider_tree()
        uuids = table.node_uuids
        by_uuid = {uuids[row]: row for row in range(n) if uuids[row]}
        root_of = np.full(n, -1, dtype=np.int64)
        children: dict[int, list[int]] = {}
        parent: dict[int, int] = {}
        for key, parent_uuid, root_uuid in placed.values():
            row, root = table.row_of(key), by_uuid.get(root_uuid)
            if row is None or root is None or row >= n or root == row:
                continue
            root_of[row] = root
            children.setdefault(root, []).append(row)
            parent[row] = by_uuid.get(parent_uuid, root)
        for rows in children.values():
            rows.sort()
        return Trees(root_of, children, parent)

    return table.static_cache(("provider_trees",), build)


# ------------------------------------------------------------------------------------------ one provider


def _aggregate_keys(table: HostTable, refs: frozenset[str]) -> frozenset[str]:
    return frozenset(agg.key for agg in table.aggregates() if agg.key in refs or agg.uuid in refs)


def _where(table: HostTable, group: Group) -> np.ndarray:
    """Per row: a provider that alone can take ``group`` now (room within units and step, traits, aggregates)."""
    n = table.n
    ok = np.ones(n, dtype=np.bool_)
    rc = table.rc
    for name, amount in group.resources:
        j = table.rc_index.get(name)
        if j is None:
            return np.zeros(n, dtype=np.bool_)
        step = rc["step_size"][:n, j]
        ok &= table.has_inventory[:n, j] & (rc["free"][:n, j] >= amount - 1e-9) \
            & (rc["max_unit"][:n, j] >= amount) & (rc["min_unit"][:n, j] <= amount) \
            & (step > 0) & (np.fmod(amount, np.maximum(step, 1)) == 0)
    if group.required or group.forbidden:
        ok &= table.factor("traits").map(lambda t: group.required <= t and not (group.forbidden & t))[:n]
    if group.member_of or group.forbidden_aggregates:
        wanted = [_aggregate_keys(table, refs) for refs in group.member_of]
        banned = _aggregate_keys(table, group.forbidden_aggregates)
        ok &= table.factor("aggregates").map(lambda a: all(a & k for k in wanted) and not (a & banned))[:n]
    return ok


def candidates(table: HostTable, groups: Groups, base: dict[str, int] | None = None) -> np.ndarray:
    """Per row: a root whose tree can take every group now (``base``: what the node's own provider gives the
    unnumbered group, which a group taken there must fit beside)."""
    n = table.n
    tree = trees(table)
    roots = table.roots()
    is_root = np.ones(n, dtype=np.bool_) if roots is None else roots[:n]
    root_of = tree.root_of[:n]
    anchor = np.where(root_of >= 0, root_of, np.arange(n))  # a root is its own tree's anchor
    out = np.ones(n, dtype=np.bool_)
    on_root = False  # a group a root may take beside the flavor's classes there: the sums are checked exactly
    for group in groups.groups:
        served = _where(table, group) & ((root_of >= 0) | is_root)
        if group.in_tree is not None:
            served &= _in_tree(table, tree, group.in_tree)
        if base and (served & is_root).any() and any(rc in base for rc, _ in group.resources):
            on_root = True
        has = np.zeros(n, dtype=np.bool_)
        has[anchor[served]] = True
        out &= has
    if groups.exact_needed or groups.same_subtree or on_root:
        for row in np.flatnonzero(out).tolist():
            out[row] = assign(table, row, groups, base) is not None
    return out


def _in_tree(table: HostTable, tree: Trees, uuid: str) -> np.ndarray:
    """The rows of the tree ``uuid`` (a root or a child provider) is in."""
    n = table.n
    uuids = table.node_uuids
    row = next((r for r in range(n) if uuids[r] == uuid), None)
    if row is None:
        return np.zeros(n, dtype=np.bool_)
    root = int(tree.root_of[row]) if tree.root_of[row] >= 0 else row
    in_tree: np.ndarray = tree.root_of[:n] == root
    in_tree[root] = True  # the root itself
    return in_tree


# ------------------------------------------------------------------------------------------- assignment


@dataclass(frozen=True, slots=True)
class Assignment:
    """Where each group lands: ``rows[i]`` is group i's provider row; ``parts`` what the claim holds on each
    child provider (the groups on it summed), ``on_node`` what the groups the node's own provider takes add to the
    node's part, ``mappings`` each group's provider uuid (Placement's answer shape), ``providers`` the parts by
    child provider uuid."""

    rows: tuple[int, ...]
    parts: list[AllocationPart]
    mappings: dict[str, list[str]]
    providers: dict[str, dict[str, int]]
    on_node: dict[str, int]


def assign(table: HostTable, row: int, groups: Groups, base: dict[str, int] | None = None,
           used: dict[int, dict[str, int]] | None = None) -> Assignment | None:
    """The first way (providers in row order, the node's own first) node ``row``'s tree takes every group now, or
    None; ``base``: what the node's own provider gives the unnumbered group already; ``used``: what earlier
    instances counted but not claimed take, by row (``headroom``). Call under the table lock when the answer is
    claimed."""
    tree = trees(table)
    providers = [row, *tree.children.get(row, [])]
    used = used or {}
    options: list[list[int]] = []
    for group in groups.groups:
        mine = [k for k in providers if _serves(table, tree, k, group, used.get(k))]
        if not mine:
            return None
        options.append(mine)
    taken = {r: dict(amounts) for r, amounts in used.items()}
    if base:
        taken[row] = _sum(taken.get(row, {}), base)
    for rows in _choices(table, groups, options, [], taken):
        if _subtrees_hold(tree, groups, rows) and _unnumbered_traits_hold(table, groups, rows, row, bool(base)):
            return _assignment(table, groups, tuple(rows), row)
    return None


def _unnumbered_traits_hold(table: HostTable, groups: Groups, rows: Sequence[int], node: int, on_node: bool) -> bool:
    """Placement's rule for the unnumbered group spread over a tree: its required traits among the traits of the
    providers that give it resources (the node's, when it gives any, and the children its classes landed on)."""
    if not groups.unnumbered_required:
        return True
    held = set(table.node_traits(node)) if on_node else set()
    for group, row in zip(groups.groups, rows, strict=True):
        if group.unnumbered:
            held |= table.node_traits(row)
    return groups.unnumbered_required <= held


def _sum(amounts: dict[str, int], more: dict[str, int] | tuple[tuple[str, int], ...]) -> dict[str, int]:
    out = dict(amounts)
    for rc, amount in more.items() if isinstance(more, dict) else more:
        out[rc] = out.get(rc, 0) + amount
    return out


def _serves(table: HostTable, tree: Trees, row: int, group: Group, used: dict[str, int] | None = None) -> bool:
    if table.fits(row, _sum(used or {}, group.resources)) is not None:
        return False
    traits = table.node_traits(row)
    if not group.required <= traits or group.forbidden & traits:
        return False
    if group.member_of or group.forbidden_aggregates:
        keys = {agg.key for agg in table.node_aggregates(row)}
        if any(not keys & _aggregate_keys(table, refs) for refs in group.member_of) \
                or keys & _aggregate_keys(table, group.forbidden_aggregates):
            return False
    if group.in_tree is not None:
        uuids = table.node_uuids
        tree_root = int(tree.root_of[row]) if tree.root_of[row] >= 0 else row
        if uuids[tree_root] != group.in_tree \
                and not any(uuids[k] == group.in_tree for k in tree.children.get(tree_root, ())):
            return False
    return True


def _choices(table: HostTable, groups: Groups, options: list[list[int]], chosen: list[int],
             taken: dict[int, dict[str, int]]) -> Iterator[list[int]]:
    """Every assignment of the remaining groups (depth first, providers in row order) that fits together."""
    i = len(chosen)
    if i == len(options):
        yield list(chosen)
        return
    for row in options[i]:
        if groups.isolate and not groups.groups[i].unnumbered \
                and any(r == row and not g.unnumbered for g, r in zip(groups.groups, chosen, strict=False)):
            continue  # Placement's isolate separates the numbered groups only
        held = dict(taken.get(row, {}))
        for rc, amount in groups.groups[i].resources:
            held[rc] = held.get(rc, 0) + amount
        if row in taken and table.fits(row, held) is not None:
            continue  # the groups already there and this one do not fit together
        before = taken.get(row)
        taken[row] = held
        chosen.append(row)
        yield from _choices(table, groups, options, chosen, taken)
        chosen.pop()
        if before is None:
            del taken[row]
        else:
            taken[row] = before


def _subtrees_hold(tree: Trees, groups: Groups, rows: Sequence[int]) -> bool:
    """``same_subtree``: the providers of each named set of groups lie in the subtree of one of them."""
    by_id = {g.id: r for g, r in zip(groups.groups, rows, strict=True)}
    for subtree in groups.same_subtree:
        members = {by_id[g] for g in subtree if g in by_id}
        if len(members) > 1 and not any(all(_under(tree, m, top) for m in members) for top in members):
            return False
    return True


def _under(tree: Trees, row: int, top: int) -> bool:
    while row != top:
        if row not in tree.parent:
            return False
        row = tree.parent[row]
    return True


def _assignment(table: HostTable, groups: Groups, rows: tuple[int, ...], node: int) -> Assignment:
    held: dict[int, dict[str, int]] = {}
    mappings: dict[str, list[str]] = {}
    uuids = table.node_uuids
    for group, row in zip(groups.groups, rows, strict=True):
        if group.resources:  # a group of traits alone (same_subtree) names its provider and holds nothing there
            held[row] = _sum(held.get(row, {}), group.resources)
        mapped = mappings.setdefault(group.id, [])  # the unnumbered classes may come from several providers
        if str(uuids[row]) not in mapped:
            mapped.append(str(uuids[row]))
    on_node = held.pop(node, {})
    parts = [AllocationPart(host=table.host_names[r], nodename=table.node_names[r], resources=dict(res))
             for r, res in held.items()]
    return Assignment(rows, parts, mappings, {str(uuids[r]): dict(res) for r, res in held.items()}, on_node)


def headroom(table: HostTable, groups: Groups, base: dict[str, int], bound: np.ndarray) -> np.ndarray:
    """Per row, how many more instances the node's tree takes, each as a claim takes it (the first assignment on
    what the ones before left, ``base`` on the node each time), at most ``bound`` (what the other filters let in).
    Trees are disjoint: no node's count depends on another's, so the sum is what claiming one by one would reach."""
    n = table.n
    out = np.zeros(n)
    ok = candidates(table, groups, base) & (bound[:n] > 0)
    if not base and not any(group.resources for group in groups.groups):  # nothing consumed: no count but bound's
        return np.where(ok, bound[:n], 0.0)
    for row in np.flatnonzero(ok).tolist():
        used: dict[int, dict[str, int]] = {}
        count = 0
        while count < bound[row]:
            found = assign(table, row, groups, base, used)
            if found is None:
                break
            count += 1
            for group, r in zip(groups.groups, found.rows, strict=True):
                used[r] = _sum(used.get(r, {}), group.resources)
            if base:
                used[row] = _sum(used.get(row, {}), base)
        out[row] = count
    return out


# ------------------------------------------------------------------------- the flavor's group on the tree


UNNUMBERED = ""  # Placement's name of the request's unsuffixed group in an allocation request's mappings


def spill(table: HostTable, resources: dict[str, int], request: Groups | None,
          required: frozenset[str] = frozenset(), forbidden: frozenset[str] = frozenset()
          ) -> tuple[dict[str, int], Groups | None]:
    """The flavor's (unnumbered) classes that no root provider has an inventory of but a child provider does
    (``resources:CUSTOM_MAGIC=1`` with the magic on a child of the node), moved out of the node's own resources
    into groups of their own: Placement takes each class of the unnumbered group whole from any ONE provider of
    the tree, so each such class becomes a one-class group on a child. A class some root has stays the root's
    (Gantt does not mix: a tree holding it on both is read at its root). ``required`` / ``forbidden``: the
    unnumbered group's traits (the flavor's and image's ``trait:``), which Placement then reads across the providers
    giving the group resources: a child taking a class must have none of the forbidden ones, and the required ones
    must be among theirs and the node's together (the caller stops asking them of the node alone)."""
    roots = table.roots()
    if roots is None or not resources:
        return resources, request
    n = table.n
    child = ~roots[:n]
    moved: list[Group] = []
    kept: dict[str, int] = {}
    for rc, amount in resources.items():
        j = table.rc_index.get(rc)
        has = table.has_inventory[:n, j] if j is not None else None
        if has is None or amount <= 0 or (has & roots[:n]).any() or not (has & child).any():
            kept[rc] = amount
            continue
        moved.append(Group(UNNUMBERED, ((rc, amount),), frozenset(), forbidden, (), frozenset(), None,
                           unnumbered=True))
    if not moved:
        return resources, request
    if request is None:
        return kept, Groups(tuple(moved), False, (), required)
    return kept, Groups((*request.groups, *moved), request.isolate, request.same_subtree, required)
