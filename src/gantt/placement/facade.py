"""The Placement façade: resource providers, inventories, traits, resource classes, provider aggregates, allocations.

``Placement`` holds a ``gantt.replication.replica.Replica`` and reads its state (the host table, the providers'
index, the catalog of classes and traits); the Placement face (``gantt.placement.api``) and library callers talk
to it. Its writes are operations as steps (``gantt.replication.steps``): a blocking call runs them in its thread
(``Replica.run``), the HTTP face hands them to ``Replica.perform``. Every write is one store batch that names the
provider generations it read (``Batch.generations``: the store refuses it with ``GenerationConflict`` when one moved)
and the node revisions it read (``Batch.expect``: a report or claim landed meanwhile); a replica that was
merely behind catches up and builds the batch again, a client that sent a stale generation gets 409.
"""

from __future__ import annotations

import contextlib
import time
import uuid as uuidlib
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import msgspec

from gantt.compute.state import HostTable
from gantt.model import (
    Aggregate,
    Conflict,
    GenerationConflict,
    HostReport,
    InvalidRequest,
    Inventory,
    NotFound,
    Record,
    RecordKind,
    ReplicaBehind,
    StoreUnavailable,
)
from gantt.placement import candidates
from gantt.placement.candidates import CandidateQuery, Candidates
from gantt.placement.consumers import Consumers, used_on
from gantt.placement.forest import Forest, build_forest
from gantt.placement.view import ReplicaView
from gantt.replication.replica import Replica
from gantt.replication.steps import SYNC, Steps, Write, holding
from gantt.resources import catalog, providers
from gantt.resources.providers import (
    DuplicateName,
    ParentInUse,
    ProviderInUse,
    ProviderQuery,
    ProviderView,
)
from gantt.store.base import (
    Batch,
    Expect,
    Generation,
    Membership,
    StoreConflict,
)

T = TypeVar("T")
# A write's steps: ``SYNC`` to catch up with the store, ``Write(batch)`` to commit and apply a batch (an error of
# either is thrown back in where it was asked for, as the call would have raised there); nothing while they hold
# the table lock; ``OFF_LOOP``, when the lock is busy, to go on where waiting for it stalls nothing else.


# How long a create waits (catching up) for another of its name or uuid in flight here: a commit's fsync on a
# busy machine takes tens of milliseconds; past this the create goes on unguarded, as on a store without the check.
_IN_FLIGHT_WAIT = 2.0
_ATTEMPTS = 8  # a replica behind the store catches up and tries again; past this, the writers contend too hard


def placement_uuid(aggregate: Aggregate) -> str:
    """The uuid Placement knows a Gantt aggregate by: its ``uuid``, else its id (Placement creates aggregates
    with id = uuid)."""
    return aggregate.uuid or str(aggregate.id)


class Placement(ReplicaView):
    """Placement's calls over one replica (one façade per replica: it keeps the creates in flight and the
    providers' forest for the replica's state)."""

    def __init__(self, replica: Replica) -> None:
        super().__init__(replica)
        # names and uuids of provider creates built here and not yet applied (create_provider_steps): their marks
        self._creating: dict[str, set[object]] = {}
        self._forest_cache: tuple[Any, Forest] | None = None
        # the consumers' calls: allocations read and written, usages, the reshaper
        self.consumers = Consumers(replica)

    # ------------------------------------------------------------------------------------------ reads

    def provider(self, uuid: str) -> ProviderView:
        return self.replica.run(self.provider_steps(uuid))

    def provider_steps(self, uuid: str) -> Steps[ProviderView]:
        yield from self._known_steps(uuid)
        with (yield from holding(self.table.lock)):
            return self.providers.get(uuid)

    def provider_as_read(self, uuid: str, generation: int) -> ProviderView:
        """The provider, caught up with the store first when its generation is not the one the client names: the
        client may have read it from another instance an instant ago, and only a generation the store no longer
        holds is the client's conflict."""
        found = self.provider(uuid)
        if found.generation != generation:
            self.replica.sync()
            found = self.provider(uuid)
        return found

    def has_provider(self, uuid: str) -> bool:
        """Whether this replica holds ``uuid`` now: one dict lookup, no lock and no store read, so the HTTP layer
        may ask it on its event loop (False says nothing: ``provider`` then catches up with the store)."""
        return uuid in self.providers.by_uuid

    def _known_steps(self, uuid: str) -> Steps[None]:
        if uuid not in self.providers.by_uuid:
            yield SYNC

    def provider_list(self) -> list[ProviderView]:
        with self.table.lock:
            return list(self.providers.by_uuid.values())

    def find_providers(self, query: ProviderQuery) -> list[ProviderView]:
        """The providers ``query`` matches, in creation order (unknown classes or traits: the caller's 400)."""
        with self.table.lock:
            root = None
            if query.in_tree is not None:
                tree_of = self.providers.by_uuid.get(query.in_tree)
                if tree_of is None:
                    return []  # Placement: a list filtered by an unknown tree is empty
                root = tree_of.root_provider_uuid
            out = []
            for found in self.providers.by_uuid.values():
                if not query.matches_identity(found, root):
                    continue
                if (query.member_of or query.forbidden_aggregates) \
                        and not query.matches_aggregates(set(self._aggregates_of(found))):
                    continue
                if (query.required or query.forbidden_traits) \
                        and not query.matches_traits(set(found.record.stats.traits or ())):
                    continue
                if query.resources and not query.matches_resources(
                        providers.inventories(found.record, self.table.default_ratios), used_on(self.table, found)):
                    continue
                out.append(found)
        # Placement's order is its ids': creation order. The index keeps it while the process runs; a replica
        # loaded from the store holds the providers in the store's key order, so the creation time decides (a
        # host that only reports through /v1 has none: 0, first, in the index's order, as sorted() is stable).
        return sorted(out, key=_created)

    def provider_tree(self, uuid: str) -> list[ProviderView]:
        with self.table.lock:
            return self.providers.tree(uuid) if uuid in self.providers.by_uuid else []

    def provider_inventories(self, uuid: str) -> tuple[ProviderView, dict[str, Inventory]]:
        return self.replica.run(self._inventories_steps(uuid))

    def _inventories_steps(self, uuid: str) -> Steps[tuple[ProviderView, dict[str, Inventory]]]:
        yield from self._known_steps(uuid)
        with (yield from holding(self.table.lock)):
            found = self.providers.get(uuid)
            return found, providers.inventories(found.record, self.table.default_ratios)

    def provider_usage(self, uuid: str) -> dict[str, int]:
        """What the allocations on the provider use, per class."""
        self._known(uuid)
        with self.table.lock:
            return used_on(self.table, self.providers.get(uuid))

    def provider_aggregates(self, uuid: str) -> tuple[ProviderView, list[str]]:
        return self.replica.run(self._aggregates_steps(uuid))

    def _aggregates_steps(self, uuid: str) -> Steps[tuple[ProviderView, list[str]]]:
        yield from self._known_steps(uuid)
        with (yield from holding(self.table.lock)):
            found = self.providers.get(uuid)
            return found, self._aggregates_of(found)

    def _aggregates_of(self, found: ProviderView) -> list[str]:
        host = found.key[0]
        # in the order they were made, as Placement lists them (its rows' ids)
        return [placement_uuid(a) for a in self.table.aggregates() if host in a.hosts]

    def allocation_candidates(self, query: CandidateQuery) -> Candidates:
        with self.table.lock:
            return candidates.allocation_candidates(self.table, self._forest(), query)

    def without_waiting(self, fn: Callable[[], T]) -> T | None:
        """``fn()`` (reads of this replica) if the table's lock is free now and the providers' forest is current,
        so that nothing waits and nothing long is rebuilt; None otherwise (then call it off the loop). For an
        event loop's cheap reads: under load, the two thread switches of a hop cost more than such an answer."""
        lock = self.table.lock
        if not lock.acquire(blocking=False):
            return None
        try:
            cached = self._forest_cache
            if cached is None or cached[0] != self._forest_key():
                return None
            return fn()
        finally:
            lock.release()

    def _forest_key(self) -> tuple[Any, ...]:
        return (id(self.providers), self.providers.version, self.table.static_revision, self.table.layout)

    def _forest(self) -> Forest:
        """The providers' shape, rebuilt only when a provider, an aggregate or the table's rows changed."""
        key = self._forest_key()
        cached = self._forest_cache
        if cached is not None and cached[0] == key:
            return cached[1]
        forest = build_forest(self.table, self.providers,
                                         {a.key: placement_uuid(a) for a in self.table.aggregates()})
        self._forest_cache = (key, forest)
        return forest

    def resource_classes(self) -> list[str]:
        with self.table.lock:
            return self.catalog.resource_classes()

    def traits(self) -> list[str]:
        with self.table.lock:
            return self.catalog.traits()

    def traits_in_use(self) -> list[str]:
        """Every trait some provider has."""
        with self.table.lock:
            return sorted({t for p in self.providers.by_uuid.values() for t in p.record.stats.traits or ()})

    def has_record(self, kind: RecordKind, name: str) -> bool:
        with self.table.lock:
            return self.catalog.has(kind, name)

    def missing_records(self, kind: RecordKind, names: Iterable[str]) -> list[str]:
        with self.table.lock:
            return self.catalog.missing(kind, names)

    # -------------------------------------------------------------------------------- provider writes

    def create_provider(self, name: str, uuid: str | None = None, parent: str | None = None) -> ProviderView:
        return self.replica.run(self.create_provider_steps(name, uuid, parent))

    def create_provider_steps(self, name: str, uuid: str | None = None,
                              parent: str | None = None) -> Steps[ProviderView]:
        uuid = uuid or str(uuidlib.uuid4())
        # A name or uuid written by another instance an instant ago is a duplicate too. A store that checks a
        # batch's freshness refuses this one if another process wrote after what this replica holds, and only
        # then is a catch-up needed (each was a read of the store's head on a handler thread, per create); else
        # the replica catches up first. A create of the same name or uuid in flight here (built, not yet applied)
        # is waited for, by catching up, before this one is checked.
        fresh = self.replica.store.checks_freshness
        if not fresh:
            yield SYNC
        creating = self._creating
        token = object()
        deadline: float | None = None
        while True:
            with (yield from holding(self.table.lock)):
                in_flight = fresh and (name in creating or uuid in creating)
                if not in_flight:
                    taken = [f"uuid: {uuid}"] if uuid in self.providers.by_uuid else []
                    if name in self.providers.by_name:
                        taken.append(f"name: {name}")
                    if taken:
                        raise DuplicateName(f"Conflicting resource provider {', '.join(taken)} already exists.")
                    if parent == uuid:
                        raise InvalidRequest(f'Unable to create resource provider "{name}", {uuid}: parent provider '
                                             "UUID cannot be same as UUID. Please specify a different parent.",
                                             field="parent_provider_uuid")
                    above = self._parent(parent, uuid)
                    record = providers.new_record(uuid, name, above, self.replica.clock())
                    as_of = self.replica.revision if fresh else None
                    for key in (name, uuid):
                        creating.setdefault(key, set()).add(token)
            if in_flight:  # catch up until the other is applied (or refused), then check against it
                now = time.monotonic()
                deadline = deadline or now + _IN_FLIGHT_WAIT
                if now >= deadline:
                    fresh = False
                yield SYNC
                continue
            try:
                yield Write(Batch(generations=[Generation(uuid, uuid, None)], providers=[record], fresh_as_of=as_of))
            except GenerationConflict:
                raise DuplicateName(f"Conflicting resource provider uuid: {uuid} already exists.") from None
            except ReplicaBehind:  # another process wrote meanwhile: catch up (once), check and build again
                fresh = False
                yield SYNC
                continue
            finally:
                # Not under the table's lock (the loop may not wait for it): set operations are atomic, so no
                # create's mark outlives it; at worst a create added at this instant loses its mark (two creates
                # of one name at once, then unguarded, as any two are on a store that does not check).
                for key in (name, uuid):
                    holders = creating.get(key)
                    if holders is not None:
                        holders.discard(token)
                        if not holders:
                            creating.pop(key, None)
            return (yield from self.provider_steps(uuid))

    def _parent(self, parent: str | None, uuid: str) -> ProviderView | None:
        if parent is None:
            return None
        if parent == uuid or parent in self.providers.descendants(uuid):
            raise InvalidRequest("creating loop in the provider tree is not allowed.",
                                 field="parent_provider_uuid")
        if parent not in self.providers.by_uuid:
            raise InvalidRequest(f"parent provider UUID does not exist: {parent}.", field="parent_provider_uuid")
        return self.providers.by_uuid[parent]

    def update_provider(self, uuid: str, name: str | None, parent: str | None, *, set_parent: bool,
                        reparent: bool) -> ProviderView:
        return self.replica.run(self.update_provider_steps(uuid, name, parent, set_parent=set_parent,
                                                         reparent=reparent))

    def update_provider_steps(self, uuid: str, name: str | None, parent: str | None, *, set_parent: bool,
                              reparent: bool) -> Steps[ProviderView]:
        """Rename and/or (re)parent. ``reparent`` (microversion 1.37): any parent may change, else only a root
        may get one."""

        def build(current: ProviderView) -> list[HostReport]:
            new_name = name if name is not None else current.name
            owner = self.providers.by_name.get(new_name)
            if owner is not None and owner != uuid:
                raise DuplicateName(f"Conflicting resource provider {new_name} already exists.")
            new_parent = parent if set_parent else current.parent_provider_uuid
            if not reparent and current.parent_provider_uuid is not None \
                    and new_parent != current.parent_provider_uuid:
                what = "un-parenting" if new_parent is None else "re-parenting"
                raise InvalidRequest(f"Unable to save resource provider {uuid}: Object action update failed "
                                     f"because: {what} a provider is not currently allowed.",
                                     field="parent_provider_uuid")
            above = self._parent(new_parent, uuid)
            record = providers.renamed(current, new_name, above, self.replica.clock())
            return [record, *self._reroot(current, record)]

        yield from self._edit_steps(uuid, None, build)
        return (yield from self.provider_steps(uuid))

    def _reroot(self, current: ProviderView, record: HostReport) -> list[HostReport]:
        """The descendants of a provider whose root changes, with the new root."""
        assert record.provider is not None
        root = record.provider.root_provider_uuid or record.provider.uuid
        if root == current.root_provider_uuid:
            return []
        out = []
        for child_uuid in self.providers.descendants(current.uuid):
            child = self.providers.by_uuid[child_uuid]
            moved = msgspec.structs.replace(providers.provider_of(child), root_provider_uuid=root)
            out.append(msgspec.structs.replace(child.record, provider=moved))
        return out

    def delete_provider(self, uuid: str) -> None:
        for _ in range(_ATTEMPTS):
            self.replica.sync()
            with self.table.lock:
                batch = self._deletion(uuid)
            try:
                self.replica.write(batch)
                return
            except StoreConflict:
                continue  # a report or an allocation landed there meanwhile: look again
        raise Conflict(f"resource provider {uuid} kept changing; try again")

    def _deletion(self, uuid: str) -> Batch:
        if uuid not in self.providers.by_uuid:
            raise NotFound(f"No resource provider with uuid {uuid} found for delete", field="uuid")
        found = self.providers.get(uuid)
        if self.providers.children(uuid):
            raise ParentInUse(f"Unable to delete parent resource provider {uuid}: It has child resource "
                              "providers.")
        if self.table.node_allocations(found.key):
            raise ProviderInUse(f"Unable to delete resource provider {uuid}: Resource provider has "
                                "allocations.")
        host, node = found.key
        left = [n for n in (self.table.node_names[r] for r in self.table.rows_of_host(host)) if n != node]
        # Left by the store from what it holds: a member another process adds meanwhile stays.
        leaving = [] if left else [Membership(a.key, host, join=False) for a in self.table.aggregates()
                                   if host in a.hosts]
        # Its usage as this replica saw it (none): an allocation written there meanwhile moves the node's
        # revision, and the deletion fails instead of taking the allocation with it.
        return Batch(expect=[Expect(host, node, self.replica.node_revisions.get(found.key, 0))],
                     delete_hosts=[found.key], memberships=leaving)

    # ------------------------------------------------------------------------------------ inventories

    def set_inventories(self, uuid: str, generation: int | None, given: dict[str, Inventory], *,
                        reserved_may_equal_total: bool, merge: bool = False, remove: Iterable[str] = (),
                        existing: bool = False) -> tuple[ProviderView, dict[str, Inventory]]:
        return self.replica.run(self.set_inventories_steps(uuid, generation, given,
                                                         reserved_may_equal_total=reserved_may_equal_total,
                                                         merge=merge, remove=remove, existing=existing))

    def set_inventories_steps(self, uuid: str, generation: int | None, given: dict[str, Inventory], *,
                              reserved_may_equal_total: bool, merge: bool = False, remove: Iterable[str] = (),
                              existing: bool = False) -> Steps[tuple[ProviderView, dict[str, Inventory]]]:
        """Replace the provider's inventories with ``given`` (``merge``: add or change only those, and drop
        ``remove``; ``existing``: only change classes it has). Classes must exist; a class dropped while
        allocated is InventoryInUse."""
        with (yield from holding(self.table.lock)):
            missing = self.catalog.missing("resource_class", given)
        if missing:
            raise InvalidRequest(f"Unknown resource class in inventory for resource provider {uuid}: No such "
                                 f"resource class {', '.join(missing)}.", field="inventories")
        for rc, inv in given.items():
            providers.check_inventory(rc, inv, reserved_may_equal_total=reserved_may_equal_total)
        dropped = set(remove)

        def build(current: ProviderView) -> list[HostReport]:
            old = providers.inventories(current.record, self.table.default_ratios)
            absent = sorted(set(given) - set(old)) if existing else []
            if absent:
                raise InvalidRequest(f"No inventory record with resource class for resource provider {uuid}: "
                                     f"No inventory of class {', '.join(absent)} found", field="resource_class")
            new = {**old, **given} if merge else dict(given)
            for rc in dropped:
                new.pop(rc, None)
            providers.check_not_in_use(uuid, set(old) - set(new), used_on(self.table, current))
            return [providers.with_inventories(current, new, self.replica.clock())]

        yield from self._edit_steps(uuid, generation, build)
        return (yield from self._inventories_steps(uuid))

    # ----------------------------------------------------------------------------------- traits, aggs

    def set_provider_traits(self, uuid: str, generation: int | None, names: list[str]) -> ProviderView:
        return self.replica.run(self.set_provider_traits_steps(uuid, generation, names))

    def set_provider_traits_steps(self, uuid: str, generation: int | None, names: list[str]) -> Steps[ProviderView]:
        with (yield from holding(self.table.lock)):
            missing = self.catalog.missing("trait", names)
        if missing:
            raise InvalidRequest(f"No such trait(s): {', '.join(missing)}.", field="traits")
        yield from self._edit_steps(uuid, generation,
                                    lambda current: [providers.with_traits(current, names, self.replica.clock())])
        return (yield from self.provider_steps(uuid))

    def set_provider_aggregates(self, uuid: str, generation: int | None, wanted: list[str], *,
                                bump: bool) -> tuple[ProviderView, list[str]]:
        return self.replica.run(self.set_provider_aggregates_steps(uuid, generation, wanted, bump=bump))

    def set_provider_aggregates_steps(self, uuid: str, generation: int | None, wanted: list[str], *,
                                      bump: bool) -> Steps[tuple[ProviderView, list[str]]]:
        """The provider's aggregates become ``wanted``: its host joins or leaves the Gantt aggregates of those
        uuids (one is created, id = uuid, when none has it). ``bump``: from 1.19 the generation moves."""
        target = set(wanted)

        def build(current: ProviderView) -> tuple[list[HostReport], list[Membership]]:
            host = current.key[0]
            by_uuid = {placement_uuid(a): a for a in self.table.aggregates()}
            # Joins and leaves, not whole aggregates: the store applies each to the aggregate it holds, so joins
            # of one aggregate (every compute node of a sharing pool at once, through any process) all land.
            # Rewriting the aggregate from this replica's view instead refused each other, one winner per
            # commit, until they ran out of attempts.
            changed = [Membership(a.key, host, join=agg_uuid in target) for agg_uuid, a in by_uuid.items()
                       if (host in a.hosts) != (agg_uuid in target)]
            changed += [Membership(u, host, join=True) for u in dict.fromkeys(wanted) if u not in by_uuid]
            record = providers.bumped(current, self.replica.clock()) if bump else current.record
            return ([record] if bump else []), changed

        yield from self._edit_steps(uuid, generation, build)
        return (yield from self._aggregates_steps(uuid))

    # ----------------------------------------------------------------------------------- the CAS loop

    def _edit_steps(self, uuid: str, generation: int | None, build: Callable[[ProviderView], Any]) -> Steps[None]:
        """Write what ``build`` makes of the provider as the replica holds it, guarded by its generation and
        node revision. ``generation``: what the client read (None: whatever is current)."""
        yield from self._known_steps(uuid)
        for attempt in range(_ATTEMPTS):
            with (yield from holding(self.table.lock)):
                current = self.providers.get(uuid)
                if generation is not None and current.generation != generation and attempt == 0:
                    stale = True
                else:
                    stale = False
                    if generation is not None and current.generation != generation:
                        raise GenerationConflict([current.key])
                    batch = self._batch(current, build(current))
            if stale:
                yield SYNC  # sync: this replica may be the one behind: read everything committed before deciding
                continue
            try:
                yield Write(batch)
                return
            except StoreConflict:
                yield SYNC
            except GenerationConflict:
                if generation is not None:
                    # The store refused a generation the client named: this replica is behind the write that beat
                    # it. Caught up before the 409 goes out, the client's next read here (Nova reads the provider
                    # or consumer again after a conflict) shows that write; a store too slow to answer leaves the
                    # refusal as it is (it is the true answer).
                    with contextlib.suppress(StoreUnavailable):
                        yield SYNC
                    raise
                yield SYNC
        raise Conflict(f"resource provider {uuid} kept changing; try again")

    def _batch(self, current: ProviderView, built: Any) -> Batch:
        records, memberships = built if isinstance(built, tuple) else (built, [])
        keys = list(dict.fromkeys([current.key, *((r.host, r.nodename) for r in records)]))
        views = {key: self.providers.by_key[key] for key in keys}
        return Batch(expect=[Expect(h, n, self.replica.node_revisions.get((h, n), 0)) for h, n in keys],
                     generations=[Generation(h, n, views[(h, n)].generation) for h, n in keys],
                     providers=records, memberships=memberships)

    # ---------------------------------------------------------------------------------------- records

    def put_record(self, kind: RecordKind, name: str) -> bool:
        """Create a custom resource class or trait; False when it exists already (nothing written)."""
        catalog.check_custom(kind, name)
        self.replica.sync()  # another instance may have made it an instant ago: then the answer is "it exists"
        if self.has_record(kind, name):
            return False
        self.replica.write(Batch(records=[Record(kind=kind, name=name, created_at=time.time())]))
        return True

    def delete_record(self, kind: RecordKind, name: str) -> None:
        self.replica.sync()
        with self.table.lock:
            users = sum(1 for p in self.providers.by_uuid.values() if _uses(p, kind, name, self.table))
            catalog.check_deletable(kind, name, self.catalog, users)
        self.replica.write(Batch(delete_records=[(kind, name)]))

    def rename_record(self, kind: RecordKind, old: str, new: str) -> None:
        """Placement before 1.7: PUT /resource_classes/{name} renames a custom class nothing uses."""
        self.replica.sync()
        with self.table.lock:
            users = sum(1 for p in self.providers.by_uuid.values() if _uses(p, kind, old, self.table))
            catalog.check_deletable(kind, old, self.catalog, users, verb="update")
            if self.catalog.has(kind, new):
                raise Conflict(f"Resource class already exists: {new}")
        self.replica.write(Batch(delete_records=[(kind, old)],
                                 records=[Record(kind=kind, name=new, created_at=time.time())]))


def _uses(found: ProviderView, kind: RecordKind, name: str, table: HostTable) -> bool:
    if kind == "trait":
        return name in (found.record.stats.traits or ())
    return name in providers.inventories(found.record, table.default_ratios)


def _created(found: ProviderView) -> float:
    provider = found.record.provider
    return provider.created_at if provider is not None else 0.0
