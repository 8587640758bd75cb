"""The providers' shape for allocation candidates (``gantt.placement.candidates``): every provider that has a row
of the table, by index, with its root, parent, traits and aggregates as arrays and sets, and the summaries of
each as last built (a forest is cached while the providers' shape does not change)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

import msgspec
import numpy as np

from gantt.compute.state.table import HostTable
from gantt.model import prepare_types
from gantt.resources.providers import ProviderIndex

SHARING_TRAIT = "MISC_SHARES_VIA_AGGREGATE"


# Made by the thousand and holding no cycles: untracked by the cyclic collector (see candidates' answer objects).
class Usage(msgspec.Struct, frozen=True, gc=False):
    capacity: int
    used: int


class ProviderSummary(msgspec.Struct, gc=False):
    resources: dict[str, Usage]
    traits: list[str]
    parent_provider_uuid: str | None
    root_provider_uuid: str


@dataclass
class Forest:
    """Every provider that has a row, by index: uuid, row, root and parent (indices), traits, aggregate uuids."""

    uuids: list[str]
    index: dict[str, int]
    rows: np.ndarray
    root: np.ndarray
    parent: list[int | None]
    traits: list[frozenset[str]]
    aggregates: list[frozenset[str]]
    sharing: np.ndarray
    has_trees: bool
    sorted_traits: list[list[str]] = field(default_factory=list)
    # Summaries as last built, with the row's usage version they were built at (-1: never): most providers'
    # figures did not move since the previous request, and rebuilding 10,000 summaries costs milliseconds.
    summaries: list[ProviderSummary | None] = field(default_factory=list)
    summary_version: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    _members: dict[str, np.ndarray] = field(default_factory=dict)
    _trait_masks: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return len(self.uuids)

    def member_mask(self, aggregate: str) -> np.ndarray:
        found = self._members.get(aggregate)
        if found is None:
            found = np.fromiter((aggregate in aggs for aggs in self.aggregates), dtype=np.bool_, count=self.size)
            self._members[aggregate] = found
        return found

    def any_member(self, aggregates: Iterable[str]) -> np.ndarray:
        out = np.zeros(self.size, dtype=np.bool_)
        for aggregate in aggregates:
            out |= self.member_mask(aggregate)
        return out

    def trait_mask(self, trait: str) -> np.ndarray:
        found = self._trait_masks.get(trait)
        if found is None:
            found = np.fromiter((trait in t for t in self.traits), dtype=np.bool_, count=self.size)
            self._trait_masks[trait] = found
        return found

    def any_trait(self, traits: Iterable[str]) -> np.ndarray:
        out = np.zeros(self.size, dtype=np.bool_)
        for trait in traits:
            out |= self.trait_mask(trait)
        return out

    def anchors(self, provider: int) -> list[int]:
        """The roots of every tree that shares an aggregate with ``provider`` (its own root included when it is
        in an aggregate at all): the trees a sharing provider serves."""
        mask = self.any_member(self.aggregates[provider])
        return sorted(set(self.root[mask].tolist()))

    def ancestors(self, provider: int) -> set[int]:
        out = {provider}
        current = self.parent[provider]
        while current is not None and current not in out:
            out.add(current)
            current = self.parent[current]
        return out


def build_forest(table: HostTable, index: ProviderIndex, placement_uuid: dict[str, str]) -> Forest:
    """The providers' shape from the replica's provider index and table (call under the table lock).
    ``placement_uuid``: Gantt aggregate key -> the uuid Placement knows it by."""
    by_host: dict[str, set[str]] = defaultdict(set)
    for aggregate in table.aggregates():
        uuid = placement_uuid.get(aggregate.key)
        if uuid is not None:
            for host in aggregate.hosts:
                by_host[host].add(uuid)
    views = [(v, table.row_of(v.key)) for v in index.by_uuid.values()]
    views = [(v, row) for v, row in views if row is not None]
    uuids = [v.uuid for v, _ in views]
    positions = {uuid: i for i, uuid in enumerate(uuids)}
    traits = [frozenset(v.record.stats.traits or ()) for v, _ in views]
    return Forest(
        uuids=uuids, index=positions,
        rows=np.fromiter((row for _, row in views), dtype=np.int64, count=len(views)),
        root=np.fromiter((positions.get(v.root_provider_uuid, i) for i, (v, _) in enumerate(views)),
                         dtype=np.int64, count=len(views)),
        parent=[positions.get(v.parent_provider_uuid) if v.parent_provider_uuid else None for v, _ in views],
        traits=traits,
        aggregates=[frozenset(by_host.get(v.key[0], ())) for v, _ in views],
        sharing=np.fromiter((SHARING_TRAIT in t for t in traits), dtype=np.bool_, count=len(views)),
        has_trees=any(v.parent_provider_uuid for v, _ in views),
        # Placement lists a provider's traits by their ids: os-traits' standard ones were made first
        sorted_traits=[sorted(t, key=lambda name: (name.startswith("CUSTOM_"), name)) for t in traits],
        summaries=[None] * len(views),
        summary_version=np.full(len(views), -1, dtype=np.int64),
    )


prepare_types(globals())  # build msgspec type info before any thread encodes (see model.prepare_types)
