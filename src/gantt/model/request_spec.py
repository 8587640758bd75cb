"""What a caller asks for: Nova's RequestSpec and its parts (flavor, image, server group, requested destination)."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta, Struct, field

from gantt.model.classes import check_resource_class
from gantt.model.limits import (
    MAX_LIST,
    MAX_NUM_INSTANCES,
    AggregateRefs,
    FreeForm,
    Key,
    Name,
    Text,
    check_json,
)
from gantt.model.prepare import prepare_types

# Nova's names for a CPU architecture (nova.objects.fields.Architecture), hypervisor type (HVType) and VM mode
# (VMMode): what an image's hw_architecture, img_hv_type and hw_vm_mode and a host's supported_instances name.
ARCHITECTURES = frozenset({
    "alpha", "armv6", "armv7l", "armv7b", "aarch64", "cris", "i686", "ia64", "lm32", "m68k", "microblaze",
    "microblazeel", "mips", "mipsel", "mips64", "mips64el", "openrisc", "parisc", "parisc64", "ppc", "ppcle",
    "ppc64", "ppc64le", "ppcemb", "s390", "s390x", "sh4", "sh4eb", "sparc", "sparc64", "unicore32", "x86_64",
    "xtensa", "xtensaeb",
})
HV_TYPES = frozenset({
    "baremetal", "bhyve", "docker", "fake", "hyperv", "ironic", "kqemu", "kvm", "lxc", "lxd", "openvz",
    "parallels", "phyp", "qemu", "test", "uml", "vbox", "vz", "vmware", "xen", "zvm", "prsm",
})
VM_MODES = frozenset({"hvm", "xen", "uml", "exe"})


class Flavor(Struct, forbid_unknown_fields=True, omit_defaults=True):
    name: Text | None = None
    vcpus: int = 0
    memory_mb: int = 0
    root_gb: int = 0
    ephemeral_gb: int = 0
    swap: int = 0  # MB, as in Nova
    extra_specs: Annotated[dict[Key, Text], Meta(max_length=MAX_LIST)] = field(default_factory=dict)
    flavorid: Text | None = None
    # written as PciPool's values are: typing caches a union by its members as a set, so whichever module spells it
    # first would set the order of both (and of their JSON schemas)
    id: Text | int | None = None

    def __post_init__(self) -> None:
        for name in ("vcpus", "memory_mb", "root_gb", "ephemeral_gb", "swap"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        for key, value in self.extra_specs.items():
            if not isinstance(value, str):
                raise ValueError(f"extra_specs must map keys to strings ({key!r} does not)")


class Image(Struct, forbid_unknown_fields=True, omit_defaults=True):
    id: Text | None = None
    name: Text | None = None
    disk_format: Text | None = None  # Glance's (qcow2, raw, …): [scheduler] query_placement_for_image_type_support
    properties: FreeForm = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_json("properties", self.properties)


Policy = Literal["affinity", "anti-affinity", "soft-affinity", "soft-anti-affinity"]


class InstanceGroup(Struct, forbid_unknown_fields=True, omit_defaults=True):
    uuid: Text | None = None
    name: Text | None = None
    policy: Policy | None = None
    policies: Annotated[list[Policy], Meta(max_length=1)] | None = None  # older Nova: a one-element list
    members: Annotated[list[Text], Meta(max_length=MAX_LIST)] = field(default_factory=list)
    hosts: Annotated[list[Text], Meta(max_length=MAX_LIST)] = field(default_factory=list)
    rules: FreeForm = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_json("rules", self.rules)
        if self.policy is None and self.policies:
            self.policy = self.policies[0]
        if "max_server_per_host" in self.rules:
            value = self.rules["max_server_per_host"]
            try:
                number = int(value)
            except (TypeError, ValueError):
                raise ValueError("rules.max_server_per_host must be a positive integer") from None
            if number < 1 or isinstance(value, bool):
                raise ValueError("rules.max_server_per_host must be a positive integer")
            self.rules["max_server_per_host"] = number


class RequestedDestination(Struct, forbid_unknown_fields=True, omit_defaults=True):
    host: Text | None = None
    node: Text | None = None
    # Each a comma-separated "any of" group, as in Nova.
    aggregates: Annotated[list[AggregateRefs], Meta(max_length=MAX_LIST)] | None = None


PciNumaPolicy = Literal["required", "legacy", "preferred", "socket"]


class PciRequestSpec(Struct, forbid_unknown_fields=True, omit_defaults=True):
    """A PCI request: Nova's InstancePCIRequest for an SR-IOV (or vDPA, or remote-managed) port, or with ``alias``
    one the caller made of the flavor's ``pci_passthrough:alias`` (Nova's API, at boot or resize; a move keeps the
    instance's). ``count`` devices of one pool that some entry of ``spec`` describes: the pool has every key's value
    (compared without case; null: the pool has no such key). ``numa_policy``: the devices' NUMA affinity (the
    port's or alias's, else the flavor's or image's; legacy when null)."""

    spec: Annotated[list[Annotated[dict[Key, Text | None], Meta(max_length=64)]], Meta(min_length=1, max_length=16)]
    count: Annotated[int, Meta(ge=0, le=MAX_LIST)] = 1  # 0: an alias asked for none ("a1:0"), as Nova keeps it
    numa_policy: PciNumaPolicy | None = None
    request_id: Text | None = None
    alias: Text | None = None


class NetworkMetadata(Struct, forbid_unknown_fields=True, omit_defaults=True):
    """The instance's networks as NUMA affinity reads them (Nova's RequestSpec.network_metadata): the physical
    networks of its ports and whether one is tunnelled. A guest with a NUMA topology lands on host cells that have
    NIC affinity to them, where the host declares any (NUMATopologyFilter)."""

    physnets: Annotated[list[Text], Meta(max_length=MAX_LIST)] = field(default_factory=list)
    tunneled: bool = False


class RequestGroupSpec(Struct, forbid_unknown_fields=True, omit_defaults=True):
    """A numbered request group from outside the flavor (Nova's RequestSpec.requested_resources: a Cyborg device
    profile's group, a QoS port's): ``resources`` from ONE provider of the chosen node's tree below the node
    (a child provider: the device, the NIC), which carries ``required_traits``, none of ``forbidden_traits`` and
    is in an aggregate of every ``member_of`` entry (Placement's syntax, as the request's own). ``id`` names the
    group (Nova's requester_id, Placement's suffix) in the answer's ``mappings``."""

    id: Text
    resources: Annotated[dict[Key, Annotated[int, Meta(ge=0)]], Meta(max_length=MAX_LIST)] = field(
        default_factory=dict)
    required_traits: Annotated[list[Text], Meta(max_length=MAX_LIST)] = field(default_factory=list)
    forbidden_traits: Annotated[list[Text], Meta(max_length=MAX_LIST)] = field(default_factory=list)
    member_of: Annotated[list[Annotated[list[AggregateRefs], Meta(max_length=MAX_LIST)]],
                         Meta(max_length=MAX_LIST)] = field(default_factory=list)
    in_tree: Text | None = None  # a provider uuid: the group's provider is in that provider's tree

    def __post_init__(self) -> None:
        for rc in self.resources:
            check_resource_class(rc, "resources")


class RequestSpec(Struct, forbid_unknown_fields=True, omit_defaults=True):
    flavor: Flavor | None = None
    image: Image | None = None
    project_id: Text | None = None
    user_id: Text | None = None
    availability_zone: Text | None = None
    num_instances: Annotated[int, Meta(ge=1, le=MAX_NUM_INSTANCES)] = 1
    instance_uuids: Annotated[list[Name], Meta(max_length=MAX_NUM_INSTANCES)] | None = None
    scheduler_hints: FreeForm = field(default_factory=dict)
    instance_group: InstanceGroup | None = None
    ignore_hosts: Annotated[list[Text], Meta(max_length=MAX_LIST)] | None = None
    force_hosts: Annotated[list[Text], Meta(max_length=MAX_LIST)] | None = None
    force_nodes: Annotated[list[Text], Meta(max_length=MAX_LIST)] | None = None
    requested_destination: RequestedDestination | None = None
    resources: Annotated[dict[Key, int], Meta(max_length=MAX_LIST)] | None = None
    required_traits: Annotated[list[Text], Meta(max_length=MAX_LIST)] | None = None
    forbidden_traits: Annotated[list[Text], Meta(max_length=MAX_LIST)] | None = None
    # Each inner list: "in any of these"; all inner lists must hold.
    member_of: Annotated[list[Annotated[list[AggregateRefs], Meta(max_length=MAX_LIST)]],
                         Meta(max_length=MAX_LIST)] | None = None
    request_id: Text | None = None
    # A move (resize, migration, evacuation) of the one instance named in instance_uuids (design §6): the
    # instance is placed anew and its current allocation is held under this UUID until confirm or revert.
    migration_uuid: Name | None = None
    # The move is an evacuation (its source host is down): as Nova's scheduler books one, the instance holds its
    # source beside the destination in one allocation (Placement's doubled allocation) until the source's compute
    # drops that part; the migration holds nothing.
    evacuation: bool = False
    # How many unclaimed alternates to gather at most (default: [scheduler] max_attempts - 1). A caller that keeps
    # only some of them (Nova's seam: those in the chosen host's cell) asks for more, then cuts.
    alternates: Annotated[int, Meta(ge=0, le=MAX_LIST)] | None = None
    # PCI requests beside the flavor's pci_passthrough:alias (which Gantt derives from [pci] alias): SR-IOV ports',
    # taken after the flavor's, in this order, as Nova's API appends them. When one names an ``alias``, these are
    # all of them, the flavor's too, in the caller's order, and the flavor's extra spec is not read again.
    pci_requests: Annotated[list[PciRequestSpec], Meta(max_length=MAX_LIST)] | None = None
    # Hold the flavor's PCI devices on their Placement providers too (None: [filter_scheduler] pci_in_placement).
    # Nova's seam sets it when the RequestSpec carries the devices as request groups, as Nova's API makes them
    # while that option is on.
    pci_in_placement: bool | None = None
    network_metadata: NetworkMetadata | None = None
    # Request groups satisfied by the chosen node's child providers, claimed on them in the same commit; the
    # answer's Selection maps each to its provider. ``group_policy``: isolate (every group on a provider of its
    # own) or none (default: the flavor's ``group_policy`` extra spec). ``same_subtree``: each entry's groups
    # (by id) on providers of one subtree (one of them the others' ancestor or all siblings under one of them).
    request_groups: Annotated[list[RequestGroupSpec], Meta(max_length=MAX_LIST)] | None = None
    group_policy: Literal["none", "isolate"] | None = None
    same_subtree: Annotated[list[Annotated[list[Text], Meta(max_length=MAX_LIST)]],
                            Meta(max_length=MAX_LIST)] | None = None

    def __post_init__(self) -> None:
        check_json("scheduler_hints", self.scheduler_hints)
        # The type's bounds hold for decoded input; a RequestSpec built in Python is checked here.
        if not 1 <= self.num_instances <= MAX_NUM_INSTANCES:
            raise ValueError(f"num_instances must be >= 1 and <= {MAX_NUM_INSTANCES}")
        if self.instance_uuids is not None:
            if len(self.instance_uuids) != self.num_instances:
                if self.num_instances == 1 and len(self.instance_uuids) > 1:
                    self.num_instances = len(self.instance_uuids)
                else:
                    raise ValueError("instance_uuids must have num_instances entries")
            if len(set(self.instance_uuids)) != len(self.instance_uuids):
                raise ValueError("instance_uuids must be unique")
        if self.resources:
            for rc, amount in self.resources.items():
                check_resource_class(rc, "resources")
                if amount < 0:
                    raise ValueError(f"resources.{rc} must be >= 0")
        if self.flavor is None and not self.resources:
            raise ValueError("flavor must be given when resources is not")
        if self.migration_uuid is not None:
            if not self.instance_uuids or len(self.instance_uuids) != 1:
                raise ValueError("a move (migration_uuid) names exactly one instance in instance_uuids")
            if self.migration_uuid == self.instance_uuids[0]:
                raise ValueError("migration_uuid must differ from the instance's UUID")
        elif self.evacuation:
            raise ValueError("an evacuation is a move: it needs migration_uuid")


prepare_types(globals())
