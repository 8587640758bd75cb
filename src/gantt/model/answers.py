"""What a decision answers: where each instance goes (Selection, with the NUMA limits it was fitted under), the
candidates of a dry run, and, when nothing fits, the Explanation filter by filter."""

from __future__ import annotations

from collections.abc import Sequence

from msgspec import Struct, field

from gantt.model.prepare import prepare_types


class NUMATopologyLimits(Struct):
    """Nova's NUMATopologyLimits: the allocation ratios NUMATopologyFilter fitted the guest's cells under, which
    the compute host's claim fits them under again (``limits["numa_topology"]`` of a Selection)."""

    cpu_allocation_ratio: float
    ram_allocation_ratio: float


class Selection(Struct, omit_defaults=True):
    host: str
    nodename: str
    uuid: str | None = None
    availability_zone: str | None = None
    allocation: dict[str, int] = field(default_factory=dict)
    # Nova's limits: capacity after overcommit per resource class, and ``numa_topology`` (NUMATopologyLimits) on a
    # node NUMATopologyFilter passed for a NUMA guest
    limits: dict[str, float | NUMATopologyLimits] = field(default_factory=dict)
    consumer_uuid: str | None = None  # set on the claimed (first) entry only
    weight: float | None = None
    # The request's groups (RequestSpec.request_groups): what the claim holds (an alternate's would hold) on the
    # node's child providers, by provider uuid, and the provider each group took, by group id (Placement's
    # allocation request ``allocations`` beyond the node and ``mappings``)
    providers: dict[str, dict[str, int]] = field(default_factory=dict)
    mappings: dict[str, list[str]] = field(default_factory=dict)


class Candidate(Struct):
    """A node that passes every filter for a request, with its total weight and each weigher's part (a dry run)."""

    host: str
    nodename: str
    weight: float
    uuid: str | None = None
    availability_zone: str | None = None
    weights: dict[str, float] = field(default_factory=dict)


class FilterStep(Struct):
    """One line of a NoValidHost explanation."""

    name: str
    before: int
    removed: int
    after: int


class NearestMiss(Struct, omit_defaults=True):
    resource_class: str
    requested: int
    best_free: float
    short_by: float
    host: str | None = None
    nodename: str | None = None
    constraint: str | None = None  # a unit constraint no node can meet (then no amount of free capacity helps)


def emptied_by(steps: Sequence[FilterStep]) -> str | None:
    """The step that removed the last candidates: the one to report as the reason. Not the one that removed the
    most: in a zoned cloud that is nearly always the zone filter, whatever really failed."""
    for step in steps:
        if step.before > 0 and step.after == 0:
            return step.name
    return None


class Explanation(Struct, omit_defaults=True):
    hosts: int
    steps: list[FilterStep]
    nearest_miss: list[NearestMiss] = field(default_factory=list)
    instance_index: int = 0
    reason: str = ""  # the filter that emptied the list, see emptied_by ("contention" when claims lost every race)
    down: int = 0  # nodes without a report for longer than service_down_time
    service_down_time: float = 0.0

    def summary(self) -> str:
        parts = [f"{s.name} removed {s.removed}" for s in self.steps if s.removed]
        passed = self.steps[-1].after if self.steps else self.hosts
        if passed:  # nodes passed the filters: they were taken meanwhile, not ruled out
            text = f"no node could take the request: {passed} of {self.hosts} passed the filters"
        else:
            text = f"no valid host among {self.hosts}"
        if self.reason:
            text += f" ({self.reason})"
        if parts:
            text += ": " + ", ".join(parts)
        if self.down:
            text += f"; {self.down} down: no report for > {self.service_down_time:g} s"
        for miss in self.nearest_miss:
            if miss.constraint:
                text += f"; {miss.resource_class} {miss.requested} can never fit: {miss.constraint}"
                continue
            text += (f"; nearest {miss.resource_class}: {miss.best_free:g} free of {miss.requested} "
                     f"asked (short by {miss.short_by:g})")
        return text


prepare_types(globals())
