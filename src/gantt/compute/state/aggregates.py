"""The aggregate index: every aggregate, each host's memberships, and what aggregates say per *aggregate set*.

Hosts in the same aggregates share one aggregate-set code (the table's ``aggset_code`` column): a predicate over a
set's aggregates or metadata runs once per distinct set and reaches the rows through one lookup table. This is why
the aggregate filters cost the same at 100 or 100,000 hosts. What is derived per set is kept in the table's
static cache: an aggregate's change moves ``static_revision``.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Collection, Hashable, Iterable
from typing import Protocol, TypeVar

import numpy as np

from gantt.compute.state.columns import Interner
from gantt.model import Aggregate, NotFound

log = logging.getLogger(__name__)

T = TypeVar("T")
_NONE: frozenset[str] = frozenset()


class StaticCache(Protocol):
    """The table's memo of values derived from static state (``HostTable.static_cache``)."""

    def __call__(self, key: Hashable, build: Callable[[], T], /) -> T: ...


class AggregateIndex:
    def __init__(self, cache: StaticCache) -> None:
        """``cache(key, build)``: the table's memo of values derived from static state."""
        self._aggregates: dict[str, Aggregate] = {}
        # Each host's memberships as a frozenset shared by every host in the same aggregates (a million hosts
        # in a dozen sets hold a dozen sets, not a million): its code is one lookup (its hash is kept), with no
        # set built per host, and an aggregate's change moves each host from one shared set to another.
        self._host_aggregates: dict[str, frozenset[str]] = {}
        self._shared: dict[frozenset[str], frozenset[str]] = {_NONE: _NONE}  # grows as the set interner does
        self._aggsets: Interner[frozenset[str]] = Interner(frozenset())
        self._cache = cache

    # ------------------------------------------------------------------------------------------- reading

    def aggregate(self, key: str) -> Aggregate | None:
        return self._aggregates.get(key)

    def aggregates(self) -> Collection[Aggregate]:
        return self._aggregates.values()

    def code_of(self, host: str) -> int:
        """The aggregate-set code of ``host``'s memberships now (a new set gets a new code)."""
        return self._aggsets.code(self._host_aggregates.get(host, _NONE))

    def codes_of(self, hosts: Iterable[str]) -> list[int]:
        """``code_of`` each of ``hosts`` (a cold start's million: one lookup each, the distinct sets interned in
        the order of their first host, as one ``code_of`` per host in turn would)."""
        sets = list(map(self._host_aggregates.get, hosts, itertools.repeat(_NONE)))
        code = self._aggsets.code
        codes = {held: code(held) for held in dict.fromkeys(sets)}
        return list(map(codes.__getitem__, sets))

    def sets(self) -> list[frozenset[str]]:
        """Per aggregate-set code, the keys of its aggregates (a copy: codes are added under the table's lock)."""
        return list(self._aggsets.values)

    def of_code(self, code: int) -> list[Aggregate]:
        return [self._aggregates[k] for k in sorted(self._aggsets.values[code])]

    # ------------------------------------------------------------------------------------------- writing

    def update_aggregate(self, aggregate: Aggregate) -> set[str]:
        """Add or replace ``aggregate``; returns the hosts whose memberships changed."""
        key = aggregate.key
        old = self._aggregates.get(key)
        old_hosts = set(old.hosts) if old else set()
        new_hosts = set(aggregate.hosts)
        self._aggregates[key] = aggregate
        self._move(old_hosts - new_hosts, key, joined=False)
        self._move(new_hosts - old_hosts, key, joined=True)
        return old_hosts ^ new_hosts

    def _move(self, hosts: Iterable[str], key: str, *, joined: bool) -> None:
        """Each of ``hosts`` joins (or leaves) aggregate ``key``: from its shared set to the shared set with (or
        without) ``key``, made once per distinct set."""
        memberships = self._host_aggregates
        moved: dict[frozenset[str], frozenset[str]] = {}
        for host in hosts:
            held = memberships.get(host, _NONE)
            after = moved.get(held)
            if after is None:
                after = held | {key} if joined else held - {key}
                after = moved[held] = self._shared.setdefault(after, after)  # one object per distinct set
            memberships[host] = after

    def delete_aggregate(self, aggregate_id: int | str) -> tuple[Aggregate, set[str]]:
        """Remove the aggregate; returns it and the hosts it held."""
        key = str(aggregate_id)
        old = self._aggregates.pop(key, None)
        if old is None:
            raise NotFound(f"no such aggregate {aggregate_id!r}", field="id")
        self._move(old.hosts, key, joined=False)
        return old, set(old.hosts)

    # ------------------------------------------------------------------------------- derived per set

    def metadata_values(self, key: str) -> list[set[str]]:
        """Per aggregate-set code: the values of metadata ``key`` across those aggregates (empty: not set)."""

        def build() -> list[set[str]]:
            out: list[set[str]] = []
            for aggset in self._aggsets.values:
                values = set()
                for agg_key in aggset:
                    agg = self._aggregates.get(agg_key)
                    if agg is not None and key in agg.metadata:
                        values.add(agg.metadata[key])
                out.append(values)
            return out

        return self._cache(("metadata_values", key), build)

    def zones(self) -> list[frozenset[str]]:
        """Per aggregate-set code: the availability zones its aggregates name (empty: none, the default zone).

        The one derivation of a node's zone, for the filters, the Selection and the host's description: as
        Nova's aggregate_metadata_get_by_host, each ``availability_zone`` value is split on commas and stripped.
        """

        def build() -> list[frozenset[str]]:
            return [frozenset(zone.strip() for value in values for zone in value.split(",") if zone.strip())
                    for values in self.metadata_values("availability_zone")]

        return self._cache(("zones",), build)

    def metadata_min_per_set(self, key: str, number: type[float] | type[int]) -> np.ndarray | None:
        """Per aggregate-set code: the lowest value of metadata ``key`` parsed as ``number`` (NaN: unset); None
        when no aggregate sets it at all.

        As Nova's validate_num_values does, one value that does not parse voids the set's whole value (NaN: the
        caller's default applies), rather than letting the remaining values decide.
        """

        def build() -> np.ndarray | None:
            lut = np.full(len(self._aggsets), np.nan)
            found = False
            for code, values in enumerate(self.metadata_values(key)):
                if not values:
                    continue
                try:
                    lut[code] = min(number(value) for value in values)
                    found = True
                except ValueError:
                    log.warning("aggregate metadata %s=%r is not %s; the default applies", key, sorted(values),
                                "an integer" if number is int else "a number")
            return lut if found else None

        return self._cache(("metadata_min", key, number.__name__), build)
