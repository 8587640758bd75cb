"""Capacity: how many more instances of a request still fit, where, and what a set of hosts takes with it.

The questions operators ask every week ("how many more m1.large fit in az1, and on which hosts?", "if rack r07
fails, what no longer fits?"), answered by the engine's own filters on the replica's state, claiming nothing.

Each filter's verdict on a node either stays as instances of the request land there (an availability zone, a
trait, an aggregate's metadata), or moves with each claim in a way the filter counts (``Filter.headroom``: free
resources over the amount asked, a load below its limit). A node then takes the fewest more instances any filter
lets in, and the cloud the sum over the nodes that pass now: claiming one instance at a time until NoValidHost
would end at the same count, whatever order the weighers pick the nodes in, since no node's count depends on
another's (tests/test_capacity.py checks exactly that against real claims on generated clouds). A filter whose
verdict moves in a way it cannot count (a NUMA fit, PCI pools, a server group, a JSON query) refuses the question
instead of guessing.

Several requests are each counted alone (the room left if only that flavor were placed), not as a mix.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import numpy as np

from gantt.compute import groups
from gantt.compute.engine import Engine
from gantt.compute.filters.base import Filter
from gantt.compute.request import RequestContext
from gantt.model import (
    CapacityAnswer,
    CapacityQuestion,
    Displaced,
    DisplacedShape,
    InvalidRequest,
    NodeKey,
    NodeRoom,
    RequestCapacity,
    RequestSpec,
    Without,
    decode,
)

__all__ = ["CapacityAnswer", "CapacityQuestion", "capacity"]

def capacity(engine: Engine, question: CapacityQuestion | dict[str, Any]) -> CapacityAnswer:
    """The answer to ``question`` from ``engine``'s table, read under the table's lock (rows do not move)."""
    question = decode(question, CapacityQuestion, path="$")
    table = engine.table
    with table.lock:
        removed = _removed(engine, question.without) if question.without is not None else None
        answers = []
        for i, spec in enumerate(question.requests):
            counts = _counts(engine, spec, f"$.requests[{i}]")
            before = None
            if removed is not None:
                before = counts
                counts = np.where(removed, 0.0, counts)
            answers.append(_summary(engine, spec, counts, before, question.limit))
        displaced = _displaced(engine, removed) if removed is not None else None
    return CapacityAnswer(requests=answers, displaced=displaced)


def _counts(engine: Engine, spec: RequestSpec, path: str) -> np.ndarray:
    """Per row, the instances of ``spec`` that still fit there (0 where a filter refuses it now)."""
    for name in ("num_instances",):
        if getattr(spec, name) != 1:
            raise InvalidRequest("a capacity question counts instances of a request one at a time: leave "
                                 "num_instances out", field=f"{path}.num_instances")
    if spec.instance_uuids:
        raise InvalidRequest("a capacity question claims nothing: instance_uuids have no effect here",
                             field=f"{path}.instance_uuids")
    if spec.migration_uuid:
        raise InvalidRequest("a capacity question is not a move", field=f"{path}.migration_uuid")
    ctx = engine.context(spec)  # the flavor's classes only children hold go to them, as a decision reads them
    if not ctx.resources and ctx.groups is None:
        raise InvalidRequest("the request asks for no resources: any number of it fits", field=f"{path}.flavor")
    ranking = engine.ranker.rank(ctx)
    ran: Iterable[Filter] = ranking.applied or [f for f in engine.ranker.filters if f.always_on]
    n = engine.table.n
    room = np.full(n, np.inf)
    for flt in ran:
        head = flt.headroom(engine.table, ctx)
        if head is not None:
            np.minimum(room, head[:n], out=room)
    if ctx.groups is not None:  # last: each tree is walked at most as far as the other filters let in
        room = np.minimum(room, groups.headroom(engine.table, ctx.groups, ctx.resources, room))
    counts = np.where(ranking.mask[:n], room, 0.0)
    counts[~np.isfinite(counts)] = 0.0  # unreachable with resources asked: ResourceFilter bounds every row
    return counts


def _summary(engine: Engine, spec: RequestSpec, counts: np.ndarray, before: np.ndarray | None,
             limit: int) -> RequestCapacity:
    table = engine.table
    total = int(counts.sum())
    with_room = np.flatnonzero(counts > 0)
    order = with_room[np.argsort(-counts[with_room], kind="stable")][:limit]
    ctx_resources = RequestContext.build(spec, engine.config, table.clock()).resources
    return RequestCapacity(
        flavor=spec.flavor.name if spec.flavor is not None else None,
        resources=dict(ctx_resources),
        instances=total,
        nodes=int(with_room.size),
        by_zone=_by_zone(engine, counts),
        by_aggregate=_by_aggregate(engine, counts),
        top=[NodeRoom(host=table.host_names[r], nodename=table.node_names[r], instances=int(counts[r]))
             for r in order.tolist()],
        instances_before=None if before is None else int(before.sum()),
        nodes_before=None if before is None else int((before > 0).sum()),
    )


def _zone_per_code(engine: Engine) -> list[str]:
    """Per aggregate-set code, the availability zone its rows are in (the default zone for none), as the
    Selection names it."""
    default = engine.config.default.default_availability_zone
    return [min(z) if z else default for z in engine.table.zones()]


def _codes(engine: Engine) -> np.ndarray:
    table = engine.table
    return table.col("aggset_code")[: table.n].astype(np.int64)


def _by_zone(engine: Engine, counts: np.ndarray) -> dict[str, int]:
    per_code = _zone_per_code(engine)
    sums = np.bincount(_codes(engine), weights=counts, minlength=len(per_code))
    totals: dict[str, int] = defaultdict(int)
    for code in np.flatnonzero(sums > 0).tolist():
        totals[per_code[code]] += int(sums[code])
    return dict(sorted(totals.items()))


def _aggregate_rows(engine: Engine) -> list[tuple[str, np.ndarray]]:
    """Each aggregate's name and its member rows (rows of every node of each member host)."""
    table = engine.table

    def build() -> list[tuple[str, np.ndarray]]:
        out = []
        for aggregate in table.aggregates():
            rows = sorted(r for host in aggregate.hosts for r in table.rows_of_host(host))
            out.append((aggregate.name or str(aggregate.id), np.asarray(rows, dtype=np.int64)))
        return out

    return table.static_cache(("capacity_aggregates",), build)


def _by_aggregate(engine: Engine, counts: np.ndarray) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, rows in _aggregate_rows(engine):
        total = int(counts[rows].sum()) if rows.size else 0
        if total:
            out[name] = out.get(name, 0) + total
    return dict(sorted(out.items()))


def _removed(engine: Engine, without: Without) -> np.ndarray:
    """The rows ``without`` names; a name that matches nothing is refused (a typo must not answer "no loss")."""
    table = engine.table
    out = np.zeros(table.n, dtype=np.bool_)
    for i, host in enumerate(without.hosts):
        rows = table.rows_of_host(host)
        if not rows:
            raise InvalidRequest(f"no such host {host!r}", field=f"$.without.hosts[{i}]")
        out[list(rows)] = True
    aggregates = table.aggregates()
    for i, key in enumerate(without.aggregates):
        found = [a for a in aggregates if key in (str(a.id), a.uuid, a.name)]
        if not found:
            raise InvalidRequest(f"no such aggregate {key!r}", field=f"$.without.aggregates[{i}]")
        for aggregate in found:
            for host in aggregate.hosts:
                out[list(table.rows_of_host(host))] = True
    if without.zones:
        per_code = np.asarray(_zone_per_code(engine), dtype=object)
        codes = _codes(engine)
        for i, zone in enumerate(without.zones):
            named = (per_code == zone)[codes] if per_code.size else np.zeros(table.n, dtype=np.bool_)
            if not named.any():
                raise InvalidRequest(f"no node is in availability zone {zone!r}", field=f"$.without.zones[{i}]")
            out |= named
    return out


def _displaced(engine: Engine, removed: np.ndarray) -> Displaced:
    """What the consumers on the removed nodes hold there, and how many of each shape the rest could take."""
    table = engine.table
    held: dict[str, dict[str, int]] = {}
    for row in np.flatnonzero(removed).tolist():
        key: NodeKey = (table.host_names[row], table.node_names[row])
        for consumer in table.node_allocations(key):
            allocation = table.allocation(consumer)
            if allocation is None:
                continue
            part = _part_on(allocation, key)
            if part:
                mine = held.setdefault(consumer, {})
                for rc, amount in part.items():
                    mine[rc] = mine.get(rc, 0) + amount
    totals: dict[str, int] = defaultdict(int)
    shapes: dict[tuple[tuple[str, int], ...], int] = defaultdict(int)
    for resources in held.values():
        shapes[tuple(sorted(resources.items()))] += 1
        for rc, amount in resources.items():
            totals[rc] += amount
    out = []
    for shape, consumers in sorted(shapes.items(), key=lambda item: (-item[1], item[0])):
        counts = np.where(removed, 0.0, _counts(engine, RequestSpec(resources=dict(shape)), "$.displaced"))
        out.append(DisplacedShape(resources=dict(shape), consumers=consumers,
                                  fit_again=min(consumers, int(counts.sum()))))
    return Displaced(nodes=int(removed.sum()), consumers=len(held), resources=dict(sorted(totals.items())),
                     shapes=out)


def _part_on(allocation: Any, key: NodeKey) -> dict[str, int]:
    """The resources ``allocation`` holds on node ``key`` (its first part, or one of its further parts)."""
    if (allocation.host, allocation.nodename) == key:
        return dict(allocation.resources)
    for part in getattr(allocation, "extra", None) or ():
        if (part.host, part.nodename) == key:
            return dict(part.resources)
    return {}
