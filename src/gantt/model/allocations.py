"""What a consumer holds once claimed: its Allocation (on one node or several, with the NUMA cells and PCI devices it
took), and how claims, stores and replicas name a node and the pseudo-nodes of server groups and aggregates."""

from __future__ import annotations

from msgspec import Struct, field

from gantt.model.prepare import prepare_types

NodeKey = tuple[str, str]  # (host, nodename): how claims, stores and replicas name a compute node

GROUP_HOST = "(server-group)"  # not a host name (RFC 1123 has no parentheses): the host part of a group's key
AGGREGATE_HOST = "(aggregate)"  # likewise: the host part of an aggregate's key


def aggregate_node(aggregate_id: str) -> tuple[str, str]:
    """The pseudo-node whose revision moves with every write of an aggregate: a write computed from an aggregate's
    members (Placement's provider aggregates) expects it, so two such writes cannot lose each other's member."""
    return (AGGREGATE_HOST, aggregate_id)


def group_node(group: str) -> tuple[str, str]:
    """The pseudo-node whose usage revision is a server group's: stores and replicas count it like a node's."""
    return (GROUP_HOST, group)


# gc=False: made per claim, never in a cycle (model.hosts; tests/test_untracked.py).
class AllocationPart(Struct, forbid_unknown_fields=True, omit_defaults=True, gc=False):
    """What a consumer holds on one more node beyond its first (a sharing disk pool, a child provider)."""

    host: str
    nodename: str
    resources: dict[str, int]


class NUMACellClaim(Struct, forbid_unknown_fields=True, omit_defaults=True, gc=False):
    """What an instance takes of one host NUMA cell (as Nova's numa_usage_from_instance_numa counts it): memory,
    shared vCPUs, the host CPUs it pins (with their siblings under the isolate policy, and the one its emulator
    threads may take) and the page size its memory comes in (None: the cell's smallest, or no page list)."""

    cell: int
    memory_mb: int = 0
    cpus: int = 0
    pinned_cpus: list[int] = field(default_factory=list)
    pagesize_kb: int | None = None


class PciTaken(Struct, forbid_unknown_fields=True, gc=False):
    """Devices a claim took from one of its node's PCI pools: the pool (every key but ``count``) and how many."""

    pool: dict[str, str | int | None]
    count: int


class Allocation(Struct, omit_defaults=True, gc=False):
    """Resources a consumer (an instance UUID) holds, on one node or, as Placement allocates, several. Keyed by
    ``consumer_uuid``: one record per consumer, so that writing it is one compare-and-set over every node it
    touches.

    ``host``/``nodename``/``resources`` are its first part: where the consumer runs, the node whose report lists
    it (a ``/v1`` claim has no other). ``extra`` holds its parts on further nodes, one per node; those nodes list
    no instances, so their parts are never confirmed by a report and count in flight for as long as they are
    held (design §1: a node that reports no usage is accounted by its allocations alone).
    """

    consumer_uuid: str
    host: str
    nodename: str
    resources: dict[str, int]
    project_id: str | None = None
    user_id: str | None = None
    request_id: str | None = None
    created_at: float = 0.0
    confirmed: bool = False  # the host's report lists the consumer: its usage is in the reported figures
    # The server group (affinity or anti-affinity) the consumer was placed under: its claim compares and moves
    # the group's revision (group_node) as well as the node's, so two members' claims serialize.
    group: str | None = None
    # Moves (design §6). On an instance's allocation made by a move: the migration holding its source.
    migration_uuid: str | None = None
    # On a migration's allocation: the instance whose source it holds until confirm (dropped) or revert (given
    # back to the instance). The host lists the instance, not the migration: that is what confirms this one.
    instance_uuid: str | None = None
    extra: list[AllocationPart] = field(default_factory=list)
    # Placement's consumer generation (1.28): moves with every write of the consumer's allocations through the
    # Placement face; None on an allocation that face never wrote (a scheduler claim: shown and compared there as 1,
    # placement_generation; None also keeps such a claim expiring by claim_timeout, compute.state.ledger).
    consumer_generation: int | None = None
    consumer_type: str | None = None  # Placement's (1.38); None shows as "INSTANCE"
    # The NUMA fit the claim took on its first node (NUMATopologyFilter's request): the cells, pinned CPUs and
    # pages it holds there, counted on top of the node's reported topology until the node's report lists it.
    numa: list[NUMACellClaim] | None = None
    # PCI devices taken on the first node (the flavor's pci_passthrough:alias), counted in flight like resources
    pci: list[PciTaken] = field(default_factory=list)
    # The request's groups (RequestSpec.request_groups) by id: the provider (uuid) in ``extra`` each one took
    mappings: dict[str, list[str]] = field(default_factory=dict)

    def placement_generation(self) -> int:
        """The consumer generation Placement shows and compares: the face's own, or 1 on a claim it never wrote.
        Placement creates a consumer at 0 and moves it on with the write that gives it allocations, so a consumer
        holding any is at 1 or more; a scheduler claim must read as that, or Nova's next write (1) is refused."""
        return 1 if self.consumer_generation is None else self.consumer_generation

    def parts(self) -> list[tuple[NodeKey, dict[str, int]]]:
        """Every node the consumer holds resources on, with what it holds there; its first part first."""
        return [((self.host, self.nodename), self.resources),
                *(((p.host, p.nodename), p.resources) for p in self.extra)]

    def nodes(self) -> list[NodeKey]:
        if not self.extra:  # nearly every allocation (a replica asks this per claim and per release it applies)
            return [(self.host, self.nodename)]
        return [(self.host, self.nodename), *((p.host, p.nodename) for p in self.extra)]

    def on(self, key: NodeKey) -> dict[str, int]:
        """What the consumer holds on node ``key`` (empty when it holds nothing there)."""
        for node, resources in self.parts():
            if node == key:
                return resources
        return {}

    @property
    def listed_as(self) -> str:
        """The UUID a host's instance list names when this allocation's resources are in its reported usage."""
        return self.instance_uuid or self.consumer_uuid


prepare_types(globals())
