"""Placement's consumer calls: allocations read and written (one commit for every consumer of a request), the
usages they add up to, and the reshaper (inventories and the allocations on them moved in one commit).

``Consumers`` holds the replica, as the Placement façade that holds it (``Placement.consumers``) does; its writes
are operations as steps, run by ``Replica.run`` or ``Replica.perform`` like the façade's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from gantt.compute.state import HostTable
from gantt.model import (
    Allocation,
    AllocationPart,
    Conflict,
    ConsumerConflict,
    GenerationConflict,
    InvalidRequest,
    Inventory,
    NotFound,
    StoreUnavailable,
)
from gantt.placement.view import ReplicaView
from gantt.replication.steps import SYNC, Steps, Write, holding
from gantt.resources import providers
from gantt.resources.providers import INCOMPLETE_CONSUMER, ConsumerWrite, ProviderView, Usage
from gantt.store.base import Batch, Capacity, ConsumerGeneration, ConsumerHeld, Expect, Generation, StoreConflict

_ATTEMPTS = 8  # a replica behind the store catches up and tries again; past this, the writers contend too hard


def used_on(table: HostTable, found: ProviderView) -> dict[str, int]:
    """What the allocations on the provider use, per class (under the table's lock)."""
    held = [table.allocation(c) for c in table.node_allocations(found.key)]
    return providers.used((a for a in held if a is not None), found.key)


class Consumers(ReplicaView):
    """The consumers' calls over one replica."""

    def consumer_allocations(self, consumer: str) -> tuple[Allocation | None, dict[tuple[str, str], ProviderView]]:
        """The consumer's allocation (None: it holds none), and the providers of its parts by node."""
        if self.table.allocation(consumer) is None:
            self.replica.sync()  # another instance may have written it an instant ago
        with self.table.lock:
            held = self.table.allocation(consumer)
            return held, self._views_of([held] if held is not None else [])

    def _views_of(self, held: list[Allocation]) -> dict[tuple[str, str], ProviderView]:
        return {key: self.providers.by_key[key] for a in held for key in a.nodes() if key in self.providers.by_key}

    def provider_allocations(self, uuid: str) -> tuple[ProviderView, list[Allocation]]:
        """The provider, and every allocation with a part on it."""
        self._known(uuid)
        with self.table.lock:
            found = self.providers.get(uuid)
            held = [self.table.allocation(c) for c in sorted(self.table.node_allocations(found.key))]
            return found, [a for a in held if a is not None]

    def provider_usages(self, uuid: str) -> tuple[ProviderView, dict[str, int]]:
        """Placement's usages of a provider: every class it has inventory of, with what its allocations use."""
        self._known(uuid)
        with self.table.lock:
            found = self.providers.get(uuid)
            in_use = used_on(self.table, found)
            offered = providers.inventories(found.record, self.table.default_ratios)
            return found, {rc: in_use.get(rc, 0) for rc in offered}

    def usages(self, project_id: str, user_id: str | None, *, by_type: bool,
               consumer_type: str | None) -> dict[str, Usage]:
        with self.table.lock:
            return providers.usages(list(self.table.allocations()), project_id, user_id, by_type=by_type,
                                    consumer_type=consumer_type)

    def write_allocations(self, writes: list[ConsumerWrite]) -> None:
        self.replica.run(self.write_allocations_steps(writes))

    def write_allocations_steps(self, writes: list[ConsumerWrite]) -> Steps[None]:
        """Replace each consumer's allocations with what ``writes`` gives, all in one commit (Placement's PUT
        /allocations/{consumer} and POST /allocations). The store checks every touched provider for room,
        compares the consumer generations and moves the touched providers' generations on (store.planner)."""
        yield from self._check_names_steps(writes)
        yield from self._commit_allocations_steps(writes, "allocate")

    def reshape(self, inventories: dict[str, tuple[int, dict[str, Inventory]]], writes: list[ConsumerWrite], *,
                reserved_may_equal_total: bool) -> None:
        """Placement's reshaper: replace the named providers' inventories (each guarded by the generation the
        client read) and the named consumers' allocations in one commit, so that inventory can move between
        providers (a parent's VCPU to its NUMA children) with the allocations on it. Capacity is checked against
        the new inventories, and a class that goes away must have no allocation left on it, both by the store
        (store.planner) after the allocations, as Placement checks them."""
        with self.table.lock:
            missing = self.catalog.missing("resource_class", {rc for _, given in inventories.values() for rc in given})
        if missing:
            raise NotFound(f"No such resource class {', '.join(missing)}.", field="inventories")
        for _, given in inventories.values():
            for rc, inv in given.items():
                providers.check_inventory(rc, inv, reserved_may_equal_total=reserved_may_equal_total)
        self.replica.run(self._check_names_steps(writes))

        def add_inventories(batch: Batch) -> None:
            for uuid, (generation, given) in inventories.items():
                current = self.providers.get(uuid)
                if current.generation != generation:
                    raise GenerationConflict([current.key])
                old = providers.inventories(current.record, self.table.default_ratios)
                batch.vacated += [(*current.key, rc) for rc in sorted(set(old) - set(given))]
                # Placement sets an interim inventory (when any is given) and then the final one: two
                # generations, one more when allocations touch the provider too (as here, bump_providers)
                batch.providers.append(providers.with_inventories(current, given, self.replica.clock(),
                                                                  steps=2 if given else 1))
                batch.generations.append(Generation(*current.key, current.generation))
                batch.expect.append(Expect(*current.key, self.replica.node_revisions.get(current.key, 0)))

        self.replica.run(self._commit_allocations_steps(writes, "reshape", add_inventories))

    def _commit_allocations_steps(self, writes: list[ConsumerWrite], verb: str,
                                  extend: Callable[[Batch], None] | None = None) -> Steps[None]:
        """The allocation batch (``extend``-ed, under the table lock) written; a replica that was behind the store
        catches up and builds it again. A generation the client named and the store no longer holds is the
        client's conflict: a consumer's always, a provider's only when ``extend`` named one."""
        for attempt in range(_ATTEMPTS):
            if attempt:
                yield SYNC
            try:
                with (yield from holding(self.table.lock)):
                    batch = self._allocation_batch(writes)
                    if extend is not None:
                        extend(batch)
            except GenerationConflict:
                if attempt:
                    raise
                continue  # the client may have read a generation this replica has not seen yet: catch up first
            try:
                yield Write(batch)
                return
            except ConsumerConflict as exc:
                if any(w.check_generation for w in writes if w.consumer == exc.consumer):
                    with contextlib.suppress(StoreUnavailable):  # caught up before refusing (_edit_steps)
                        yield SYNC
                    raise
            except GenerationConflict:
                if extend is not None:
                    with contextlib.suppress(StoreUnavailable):
                        yield SYNC
                    raise
            except (StoreConflict, ConsumerHeld, NotFound):
                pass  # this replica was behind the store: catch up and build the batch again
        if verb == "allocate":
            raise Conflict("Inventory and/or allocations changed while attempting to allocate: allocations kept "
                           "changing; try again")
        raise Conflict("Inventory and/or allocations changed while attempting to reshape; try again")

    def delete_allocations(self, consumer: str) -> None:
        self.replica.run(self.delete_allocations_steps(consumer))

    def delete_allocations_steps(self, consumer: str) -> Steps[None]:
        """Drop every allocation of the consumer (NotFound when it holds none)."""
        if self.table.allocation(consumer) is None:
            yield SYNC  # another instance may have written it an instant ago
        if self.table.allocation(consumer) is None:
            raise NotFound(f"No allocations for consumer '{consumer}'", field="consumer_uuid")
        try:
            yield Write(Batch(releases=[consumer]))
        except NotFound:
            raise NotFound(f"No allocations for consumer '{consumer}'", field="consumer_uuid") from None

    def _check_names_steps(self, writes: list[ConsumerWrite]) -> Steps[None]:
        """Every provider and class the writes name exists. One created by another instance an instant ago
        exists too: a name not found here is looked for again after a catch-up (a name found here needs none:
        one deleted elsewhere meanwhile is the store's NotFound, and the batch is built again after a catch-up)."""
        for attempt in range(2):
            if attempt:
                yield SYNC
            with (yield from holding(self.table.lock)):
                error = self._missing_names(writes)
            if error is None:
                return
        assert error is not None  # the loop ran: its last look found a name missing
        raise error

    def _missing_names(self, writes: list[ConsumerWrite]) -> InvalidRequest | None:
        for write in writes:
            for uuid in write.allocations:
                if uuid not in self.providers.by_uuid:
                    return InvalidRequest(f"Allocation for resource provider '{uuid}' that does not exist.",
                                          field="allocations")
        missing = self.catalog.missing("resource_class", {rc for w in writes for r in w.allocations.values()
                                                          for rc in r})
        if missing:
            return InvalidRequest(f"No such resource class {', '.join(sorted(missing))}.", field="allocations")
        return None

    def _allocation_batch(self, writes: list[ConsumerWrite]) -> Batch:
        batch = Batch(capacity=Capacity(default_ratios=dict(self.table.default_ratios)))
        now = self.replica.clock()
        for write in writes:
            held = self.table.allocation(write.consumer)
            current = None if held is None else held.placement_generation()
            expected = write.generation if write.check_generation else current
            batch.consumers.append(ConsumerGeneration(write.consumer, expected))
            if not write.allocations:
                if held is not None:
                    batch.releases.append(write.consumer)
                    batch.bump_providers += held.nodes()
                continue
            parts = []
            for uuid, resources in write.allocations.items():
                found = self.providers.by_uuid.get(uuid)
                if found is None:  # deleted since _check_names_steps
                    raise InvalidRequest(f"Allocation for resource provider '{uuid}' that does not exist.",
                                         field="allocations")
                parts.append((found, dict(resources)))
            # The first part is where the consumer runs: a root provider (a compute node) when there is one.
            parts.sort(key=lambda part: part[0].parent_provider_uuid is not None)
            (first, resources), rest = parts[0], parts[1:]
            allocation = Allocation(
                consumer_uuid=write.consumer, host=first.key[0], nodename=first.key[1], resources=resources,
                extra=[AllocationPart(host=p.key[0], nodename=p.key[1], resources=r) for p, r in rest],
                project_id=write.project_id or INCOMPLETE_CONSUMER, user_id=write.user_id or INCOMPLETE_CONSUMER,
                created_at=now,
                consumer_generation=(expected or 0) + 1,
                consumer_type=write.consumer_type or (held.consumer_type if held is not None else None))
            if held is not None:
                batch.replaces.append(write.consumer)
            batch.allocations.append(allocation)
            batch.bump_providers += allocation.nodes()
        batch.bump_providers = list(dict.fromkeys(batch.bump_providers))
        return batch
