"""Nova 34's scheduler objects ↔ Gantt's data contract.

``request_spec`` turns a ``nova.objects.RequestSpec`` (what nova-conductor sends ``select_destinations``) into
Gantt's RequestSpec (``gantt.model.RequestSpec``, as a dict of builtins); ``selections`` turns Gantt's answer into
what Nova's own ``SchedulerManager.select_destinations`` returns. Every RequestSpec field Nova 34's scheduler reads
is either translated or refused with ``Unsupported`` naming it (the manager answers NoValidHost with that reason);
none is dropped. A field Nova adds later and this table does not know is refused too.

=====================================================  =========================================================
Nova RequestSpec field                                 In Gantt
=====================================================  =========================================================
flavor.name / flavorid / id / vcpus / memory_mb /      flavor.*, as they are
ephemeral_gb / swap / extra_specs
flavor.root_gb                                         flavor.root_gb; 0 when ``is_bfv`` (below)
is_bfv                                                 the root disk is a volume: Nova asks Placement for
                                                       DISK_GB = ephemeral + swap only (ResourceRequest.
                                                       from_request_spec), so Gantt gets root_gb = 0
image.id / name / disk_format                          image.*
image.properties (ImageMetaProps)                      image.properties: every set field, in Glance's spelling
                                                       (``hw_numa_cpus.N``, ``hw_numa_mem.N``, ``trait:T``), so
                                                       that ImageMetaProps.from_dict gives the same object back
image's other fields (size, min_ram, status, …)        not read by Nova 34's scheduler: not sent
project_id / user_id / availability_zone               as they are
num_instances, instance_uuid, the RPC's                num_instances and instance_uuids, as Nova's manager
instance_uuids                                         counts them (the RPC's list wins)
scheduler_hints                                        as they are (lists of strings; Gantt unwraps one-element
                                                       lists as RequestSpec.get_scheduler_hint does)
scheduler_hints._nova_check_type = rebuild             as it is: Gantt checks the forced host (the instance's)
                                                       with Nova's RUN_ON_REBUILD filters and claims nothing;
                                                       requested_resources, ports and SR-IOV PCI requests,
                                                       which that check never reads, are not refused then,
                                                       nor network metadata sent
instance_group (uuid, name, policy, members, hosts,    instance_group.*
rules)
ignore_hosts / force_hosts / force_nodes               as they are
requested_destination.host / node / aggregates         requested_destination.*
requested_destination.forbidden_aggregates             member_of: one ``!in:a,b`` group (Placement's syntax)
requested_destination.cell                             ignore_hosts gains every host of the other cells
                                                       (``cells``), so only that cell's hosts are candidates;
                                                       a cell Gantt does not read (or, with ``cell_uuid``
                                                       alone, not the one cell) is refused
requested_destination.allow_cross_cell_move = True     refused: a cross-cell resize is the conductor's
                                                       CrossCellMigrationTask, which Gantt does not implement
request_level_params.root_required / root_forbidden    required_traits / forbidden_traits (a Gantt node is its
                                                       tree's root provider)
request_level_params.same_subtree                      same_subtree, when it names only requested_resources'
                                                       groups (a port's) and the flavor's numbered ones; else
                                                       refused
requested_resources (ports' QoS, Cyborg device         request_groups: requester_id as the group's id,
profiles)                                              resources (zero amounts dropped, as Nova strips them),
                                                       required/forbidden traits, aggregates and forbidden
                                                       aggregates as member_of, in_tree; a group without a
                                                       requester_id, with no resources or use_same_provider
                                                       False is refused. Gantt places each on a child provider
                                                       of the node's tree and claims it in the node's commit
requested_resources: the flavor's PCI groups           not sent: Gantt's claim holds the devices on their
(pci_in_placement: ``<request_id>-<n>``)               providers (``pci_placement`` maps the groups to them)
numa_topology                                          not sent: Gantt derives the guest topology from the flavor
                                                       and image, as Nova's API derived this one
                                                       (hardware.numa_get_constraints)
pci_requests from the flavor's pci_passthrough:alias   pci_requests with ``alias``: spec, count, numa_policy,
                                                       request_id, as Nova's API made them (at boot or resize; a
                                                       move keeps the instance's, whatever [pci] alias says now),
                                                       which PciPassthroughFilter reads; Gantt then derives none
                                                       from the extra spec. Sent for a rebuild's check too
pci_requests without an alias (SR-IOV, vDPA and       pci_requests: spec, count, numa_policy, request_id,
remote-managed ports)                                  in Nova's order (after the flavor's)
network_metadata.physnets / tunneled                  network_metadata.*: a NUMA guest's cells must serve them
                                                       (Nova's NUMATopologyFilter); without a guest NUMA topology
                                                       neither reads it
requested_networks: networks by id, none or auto      not sent: Nova 34's scheduler reads them only for routed
                                                       networks (``[scheduler]
                                                       query_placement_for_routed_network_aggregates``, which
                                                       Gantt refuses unless off, Nova's default)
requested_networks: a port given by id                 not sent: the manager asks Neutron whether it is
                                                       remote-managed (``gantt.nova.prefilters``, adding
                                                       COMPUTE_REMOTE_MANAGED_PORTS to required_traits);
                                                       refused unless ``ports_asked``
(Nova's request filters on flavor and image:           derived by Gantt from flavor.extra_specs and
packed virtqueue, ephemeral encryption, virtio sound,  image.properties (gantt.compute.feature_traits), as
vTPM secret security, accelerators)                    required traits
(owner_nova_filter, remote_managed_ports_filter)       the manager's (gantt.nova.prefilters): required_traits
retry / limits / security_groups / id                  not read by Nova 34's scheduler: not sent
(a move's migration)                                   migration_uuid, given by the caller: a RequestSpec does not
                                                       name the migration holding the source allocation;
                                                       evacuation, when that migration is one (the caller's too)
=====================================================  =========================================================
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from nova import objects
from oslo_serialization import jsonutils

from gantt.compute.pci import PciRequest, by_request, placement_class
from gantt.model import NUMATopologyLimits, Selection, decode

# Placement's microversion Nova 34 asks allocation candidates at (report.SAME_SUBTREE_VERSION): the conductor
# claims an allocation request at the version it was made for.
ALLOCATION_REQUEST_VERSION = "1.36"

# RequestSpec fields this module reads, or knows Nova 34's scheduler ignores. Anything else set is refused.
_KNOWN = frozenset({
    "id", "image", "numa_topology", "pci_requests", "project_id", "user_id", "availability_zone", "flavor",
    "num_instances", "ignore_hosts", "force_hosts", "force_nodes", "requested_destination", "retry", "limits",
    "instance_group", "scheduler_hints", "instance_uuid", "security_groups", "network_metadata", "is_bfv",
    "requested_resources", "request_level_params", "requested_networks",
})
_FLAVOR_FIELDS = ("name", "flavorid", "id", "vcpus", "memory_mb", "root_gb", "ephemeral_gb", "swap")


class Unsupported(ValueError):
    """A RequestSpec field set to something Gantt cannot honour yet; ``field`` names it (dotted)."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"Gantt cannot honour RequestSpec.{field} yet: {reason}")
        self.field = field
        self.reason = reason


def _get(obj: Any, name: str) -> Any:
    """A field's value, None when unset: never ``getattr`` on an unset field, which lazy-loads from Nova's
    database on some objects (InstanceGroup.hosts) and raises on others."""
    return getattr(obj, name) if obj is not None and obj.obj_attr_is_set(name) else None


def request_spec(spec: objects.RequestSpec, instance_uuids: Sequence[str] | None = None, *,
                 migration_uuid: str | None = None, evacuation: bool = False, cell_uuid: str | None = None,
                 cells: Mapping[str, Collection[str]] | None = None,
                 request_id: str | None = None, ports_asked: bool = False) -> dict[str, Any]:
    """Gantt's RequestSpec (builtins, for ``gantt.model.decode``) for what Nova's scheduler would place.

    ``instance_uuids``: select_destinations' argument (None from a 4.3 caller). ``migration_uuid``: on a move,
    the migration whose consumer holds the source allocation; ``evacuation``: that migration is an evacuation's
    (the instance keeps its source beside the destination, as Nova books it). ``cell_uuid``: the cell Gantt's
    hosts are in when there is one; ``cells``: each cell's hosts when there are several (it wins over
    ``cell_uuid``). A requested destination's cell may name one of them. ``ports_asked``: the caller asks Neutron
    about the ports given by id (``gantt.nova.prefilters``); else such a port is refused. Raises Unsupported
    naming the first field Gantt cannot honour."""
    for name in spec.fields:
        if name not in _KNOWN and spec.obj_attr_is_set(name):
            raise Unsupported(name, "a RequestSpec field this translation does not know (newer Nova?)")
    rebuild = _rebuild(spec)  # Nova's rebuild check reads neither Placement's groups nor the request filters
    for network in () if rebuild or ports_asked else _get(spec, "requested_networks") or ():
        if _get(network, "port_id"):
            raise Unsupported("requested_networks", "a port given by id, which Nova asks Neutron about "
                              "(a remote-managed port requires COMPUTE_REMOTE_MANAGED_PORTS)")
    out: dict[str, Any] = {"flavor": _flavor(spec.flavor, bool(_get(spec, "is_bfv")))}
    image = _get(spec, "image")
    if image is not None:
        out["image"] = _image(image)
    for name in ("project_id", "user_id", "availability_zone"):
        if (value := _get(spec, name)) is not None:
            out[name] = value
    uuids = list(instance_uuids) if instance_uuids else None
    if uuids is None and _get(spec, "instance_uuid") is not None and (_get(spec, "num_instances") or 1) == 1:
        uuids = [str(spec.instance_uuid)]
    out["num_instances"] = len(uuids) if uuids else (_get(spec, "num_instances") or 1)
    if uuids:
        out["instance_uuids"] = uuids
    hints = dict(_get(spec, "scheduler_hints") or {})
    if hints:
        out["scheduler_hints"] = {k: list(v) if isinstance(v, list | tuple) else v for k, v in hints.items()}
    if (group := _get(spec, "instance_group")) is not None:
        out["instance_group"] = _group(group)
    for name in ("ignore_hosts", "force_hosts", "force_nodes"):
        if (value := _get(spec, name)) is not None:
            out[name] = list(value)
    destination = _get(spec, "requested_destination")
    if destination is not None:
        _destination(destination, cell_uuid, cells, out)
    _request_level(spec, out)
    # the flavor's PCI devices as request groups (pci_in_placement): Gantt claims them on their providers itself
    flavors = {g for ids in pci_groups(spec) for g in ids}
    if (groups := [g for g in _get(spec, "requested_resources") or () if g.requester_id not in flavors]) \
            and not rebuild:  # ports' and device profiles': on the node's child providers
        out["request_groups"] = [_request_group(g) for g in groups]
    _same_subtree(spec, out, rebuild)
    if flavors and not rebuild:  # Nova makes them while [filter_scheduler] pci_in_placement is on: per request
        out["pci_in_placement"] = True
    # nor the PCI and NUMA filters: a rebuild sends the flavor's alone, which Gantt would otherwise derive again
    if pci := _pci(_get(spec, "pci_requests"), aliases_only=rebuild):
        out["pci_requests"] = pci
    if not rebuild:
        _network(spec, out)
    if migration_uuid is not None:
        out["migration_uuid"] = migration_uuid
        if evacuation:
            out["evacuation"] = True
    if request_id is not None:
        out["request_id"] = request_id
    return out


def _rebuild(spec: objects.RequestSpec) -> bool:
    """A rebuild's check (Nova's ``request_is_rebuild``): Nova's scheduler runs only the RUN_ON_REBUILD filters
    on the instance's own host, without Placement's candidates or the request filters."""
    return bool((_get(spec, "scheduler_hints") or {}).get("_nova_check_type") == ["rebuild"])


def _flavor(flavor: objects.Flavor, bfv: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in _FLAVOR_FIELDS:
        if (value := _get(flavor, name)) is not None:
            out[name] = value
    if bfv:
        out["root_gb"] = 0  # the root disk is a Cinder volume: nothing of the host's disk
    out["extra_specs"] = dict(_get(flavor, "extra_specs") or {})
    return out


def _image(image: objects.ImageMeta) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ("id", "name", "disk_format"):
        if (value := _get(image, name)) is not None:
            out[name] = str(value)
    props = _get(image, "properties")
    out["properties"] = image_properties(props) if props is not None else {}
    return out


def image_properties(props: objects.ImageMetaProps) -> dict[str, Any]:
    """Every set field of ``props``, in the spelling Glance stores and Gantt's filters read: the three fields
    ImageMetaProps keeps in another shape than Glance's (NUMA CPU sets and memory per guest node, required
    traits) are spelt as Glance's keys, the rest are their primitive values."""
    primitive: dict[str, Any] = props.obj_to_primitive()["nova_object.data"]
    out: dict[str, Any] = {}
    for key, value in primitive.items():
        if key == "hw_numa_cpus":
            for node, cpus in enumerate(props.hw_numa_cpus):
                out[f"hw_numa_cpus.{node}"] = ",".join(str(c) for c in sorted(cpus))
        elif key == "hw_numa_mem":
            for node, mem in enumerate(props.hw_numa_mem):
                out[f"hw_numa_mem.{node}"] = str(mem)
        elif key == "traits_required":
            for trait in value:
                out[f"trait:{trait}"] = "required"
        else:
            out[key] = value
    return out


def _group(group: objects.InstanceGroup) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ("uuid", "name", "policy"):
        if (value := _get(group, name)) is not None:
            out[name] = str(value)
    for name in ("members", "hosts"):
        out[name] = list(_get(group, name) or ())
    # ``rules`` is a property over the ``_rules`` field (with max_server_per_host as an int); {} when unset
    out["rules"] = dict(group.rules)
    return out


def _destination(destination: objects.Destination, cell_uuid: str | None,
                 cells: Mapping[str, Collection[str]] | None, out: dict[str, Any]) -> None:
    if _get(destination, "allow_cross_cell_move"):
        raise Unsupported("requested_destination.allow_cross_cell_move",
                          "a cross-cell move (the conductor's cross-cell resize); Gantt moves within a cell")
    if (cell := _get(destination, "cell")) is not None:
        _restrict_to_cell(str(_get(cell, "uuid")), cell_uuid, cells, out)
    target: dict[str, Any] = {}
    for name in ("host", "node"):
        if (value := _get(destination, name)) is not None:
            target[name] = value
    if (aggregates := _get(destination, "aggregates")) is not None:
        target["aggregates"] = list(aggregates)
    if target:
        out["requested_destination"] = target
    if forbidden := _get(destination, "forbidden_aggregates"):
        out.setdefault("member_of", []).append(["!in:" + ",".join(sorted(forbidden))])


def _restrict_to_cell(wanted: str, cell_uuid: str | None, cells: Mapping[str, Collection[str]] | None,
                      out: dict[str, Any]) -> None:
    """Only ``wanted``'s hosts stay candidates, as Nova's host manager reads only that cell's compute nodes: every
    host of the other cells is ignored (ignore_hosts is exactly "not a candidate", and Nova's own list stays)."""
    if cells:
        if wanted not in cells:
            raise Unsupported("requested_destination.cell",
                              f"cell {wanted} is not one of the cells Gantt reads ({', '.join(sorted(cells))})")
        others = {h for uuid, hosts in cells.items() if uuid != wanted for h in hosts}
        others.difference_update(cells[wanted])  # a host name in two cells: never drop the wanted cell's own
        if others:
            out["ignore_hosts"] = [*out.get("ignore_hosts", []), *sorted(others)]
    elif cell_uuid is None or wanted != cell_uuid:
        raise Unsupported("requested_destination.cell",
                          f"cell {wanted} is not the cell Gantt schedules ({cell_uuid})")


def _request_level(spec: objects.RequestSpec, out: dict[str, Any]) -> None:
    params = _get(spec, "request_level_params")
    if params is None:
        return
    if required := _get(params, "root_required"):
        out["required_traits"] = sorted(required)
    if forbidden := _get(params, "root_forbidden"):
        out["forbidden_traits"] = sorted(forbidden)


def _request_group(group: objects.RequestGroup) -> dict[str, Any]:
    """A group of ``requested_resources`` as Gantt's (``gantt.model.RequestGroupSpec``), as Nova's
    ``RequestGroup.to_queryparams`` asks Placement for it (its requester id is the suffix)."""
    gid = _get(group, "requester_id")
    resources = {rc: n for rc, n in (_get(group, "resources") or {}).items() if n}
    if not gid or not resources or _get(group, "use_same_provider") is False:
        raise Unsupported("requested_resources", f"a request group Gantt cannot place (requester_id {gid!r}: "
                          "none, no resources, or resources from several providers)")
    out: dict[str, Any] = {"id": str(gid), "resources": resources}
    for name in ("required_traits", "forbidden_traits"):
        if traits := _get(group, name):
            out[name] = sorted(traits)
    member_of = [["in:" + ",".join(sorted(aggs))] for aggs in _get(group, "aggregates") or () if aggs]
    if forbidden := _get(group, "forbidden_aggregates"):
        member_of.append(["!in:" + ",".join(sorted(forbidden))])
    if member_of:
        out["member_of"] = member_of
    if (in_tree := _get(group, "in_tree")) is not None:
        out["in_tree"] = str(in_tree)
    return out


def _same_subtree(spec: objects.RequestSpec, out: dict[str, Any], rebuild: bool) -> None:
    """request_level_params.same_subtree over the request groups Gantt places (a port's groups, the flavor's
    numbered ones): each set's providers in one subtree; a set naming a group the request does not have (the
    unnumbered one, which Placement refuses there) is refused."""
    subtrees = _get(_get(spec, "request_level_params"), "same_subtree") or []
    if not subtrees or rebuild:
        return
    ids = {g["id"] for g in out.get("request_groups", ())} | (set(request_groups(out)) - {""})
    for subtree in subtrees:
        if not set(subtree) <= ids:
            raise Unsupported("request_level_params.same_subtree",
                              f"{sorted(subtree)} names groups the request does not have")
    out["same_subtree"] = [sorted(s) for s in subtrees]


def _pci(requests: objects.InstancePCIRequests | None, aliases_only: bool = False) -> list[dict[str, Any]]:
    """The instance's PCI requests as Nova holds them, in its order, as Gantt's ``pci_requests``: the flavor's
    aliases' (``alias``: as Nova's API made them when it booted or resized the instance, which a move keeps, as
    PciPassthroughFilter reads them), then SR-IOV, vDPA and remote-managed ports'. ``aliases_only``: the flavor's."""
    out: list[dict[str, Any]] = []
    for request in _get(requests, "requests") or ():
        alias = _get(request, "alias_name")
        if aliases_only and alias is None:
            continue
        specs = []
        for spec in _get(request, "spec") or ():
            if any(not isinstance(v, str | None) for v in spec.values()):
                raise Unsupported("pci_requests", f"a PCI request spec with a value that is not a string "
                                  f"(request_id {_get(request, 'request_id')}: {spec})")
            specs.append(dict(spec))
        if not specs:
            raise Unsupported("pci_requests", f"a PCI request with no spec (request_id "
                              f"{_get(request, 'request_id')})")
        item: dict[str, Any] = {"spec": specs, "count": request.count}
        for name in ("numa_policy", "request_id"):
            if (value := _get(request, name)) is not None:
                item[name] = str(value)
        if alias is not None:
            item["alias"] = str(alias)
        out.append(item)
    return out


def pci_groups(spec: objects.RequestSpec) -> list[list[str]]:
    """The request groups Nova makes of the flavor's PCI requests with ``[filter_scheduler] pci_in_placement``
    (``RequestSpec.generate_request_groups_from_pci_requests``: one group of one device per device asked), per
    request in order, by requester id; [] when there are none in ``requested_resources``."""
    made = {g.requester_id for g in _get(spec, "requested_resources") or ()}
    out = []
    for request in _get(_get(spec, "pci_requests"), "requests") or ():
        if _get(request, "alias_name") is not None:
            out.append([f"{_get(request, 'request_id')}-{i}" for i in range(request.count)])
    return out if any(g in made for ids in out for g in ids) else []


def alias_requests(spec: objects.RequestSpec) -> list[PciRequest]:
    """The flavor's PCI requests as Nova's API made them (an alias each), in Gantt's terms, in order, as the
    request groups of pci_in_placement ask for them (their devices on providers with the class and traits; each
    on a provider of its own under the flavor's ``group_policy=isolate``, as Placement places request groups)."""
    out = []
    isolate = (_get(_get(spec, "flavor"), "extra_specs") or {}).get("group_policy") == "isolate"
    for request in _get(_get(spec, "pci_requests"), "requests") or ():
        if (alias := _get(request, "alias_name")) is not None:
            out.append(PciRequest(str(alias), request.count, tuple(dict(s) for s in _get(request, "spec") or ()),
                                  _get(request, "numa_policy") or "legacy", in_placement=True, isolate=isolate))
    return out


def pci_placement(taken: Sequence[tuple[Any, int]], requests: Sequence[PciRequest], groups: Sequence[Sequence[str]],
                  ) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """The devices ``taken`` (a claim's ``allocation.pci``, or what ``take`` would take on an alternate) of the
    flavor's ``requests`` (``alias_requests``; taken first, request by request) as an allocation request's
    ``allocations`` on their providers (the pools' ``rp_uuid``, one device of ``placement_class`` each), and
    ``groups`` (``pci_groups``) mapped to the provider of the device each took: Placement's ``mappings``, which
    Nova's conductor and PCI claim read."""
    allocations: dict[str, Any] = {}
    mappings: dict[str, list[str]] = {}
    for request, ids, entries in zip(requests, groups, by_request(requests, taken), strict=False):
        devices = [str(dict(pool).get("rp_uuid")) for pool, count in entries for _ in range(count)]
        for group, provider in zip(ids, devices, strict=False):
            mappings[group] = [provider]
        for provider in devices:
            resources = allocations.setdefault(provider, {"resources": {}})["resources"]
            resources[placement_class(request)] = resources.get(placement_class(request), 0) + 1
    return allocations, mappings


def _network(spec: objects.RequestSpec, out: dict[str, Any]) -> None:
    metadata = _get(spec, "network_metadata")
    physnets, tunneled = sorted(_get(metadata, "physnets") or ()), bool(_get(metadata, "tunneled"))
    if physnets or tunneled:
        out["network_metadata"] = {"physnets": physnets, "tunneled": tunneled}


# ------------------------------------------------------------------------------------------------ answers


def selections(answer: Sequence[Sequence[Selection | Mapping[str, Any]]], *, return_objects: bool,
               return_alternates: bool, max_attempts: int, cell_uuid: str | Mapping[str, str],
               default_availability_zone: str = "nova", groups: Iterable[str] = ("",),
               claimed: bool = True,
               placement: Mapping[Any, tuple[dict[str, Any], dict[str, list[str]]]] | None = None,
               ) -> list[list[objects.Selection]] | list[dict[str, Any]]:
    """What Nova's ``SchedulerManager.select_destinations`` returns for Gantt's answer (one list per instance:
    the claimed node first, then unclaimed alternates).

    As Nova: alternates only when ``return_objects`` and ``return_alternates`` are both set, at most
    ``max_attempts - 1`` of them, from the chosen host's cell, never a host chosen for another instance of the
    request; without ``return_objects``, the legacy list of ``{'host', 'nodename', 'limits'}`` dicts.
    ``cell_uuid``: the one cell, or each host's. ``groups``: the request's group suffixes ("" the unsuffixed one)
    that an allocation request's ``mappings`` name, all on the one node Gantt places on. ``claimed`` False (a
    rebuild's check): nothing was booked, and the Selections carry no allocation request, as Nova's.
    ``placement``: what a claim (by consumer) or an alternate (by host and node) holds or would hold on PCI
    providers, and the groups mapped to them (``pci_placement``), added to its allocation request."""
    objects.register_all()
    per_instance = [[decode(s, Selection) for s in choices] for choices in answer]
    chosen = {(c[0].host, c[0].nodename) for c in per_instance if c}
    alternates = max(max_attempts - 1, 0) if return_objects and return_alternates else 0
    group_names = list(groups)
    out: list[list[objects.Selection]] = []
    for choices in per_instance:
        if not choices:
            raise ValueError("Gantt's answer has an instance with no selection")
        first_cell = _cell(cell_uuid, choices[0].host)
        extra = (placement or {}).get(choices[0].consumer_uuid or "")
        picked = [_selection(choices[0], first_cell, default_availability_zone, group_names, claimed, extra)]
        for alt in choices[1:]:
            if len(picked) > alternates:
                break
            cell = _cell(cell_uuid, alt.host)
            if cell == first_cell and (alt.host, alt.nodename) not in chosen:
                picked.append(_selection(alt, cell, default_availability_zone, group_names, claimed,
                                         (placement or {}).get((alt.host, alt.nodename))))
        out.append(picked)
    if not return_objects:
        # Nova's own legacy shape (Selection.to_dict, then jsonutils.to_primitive), for pre-4.5 conductors
        legacy: list[dict[str, Any]] = jsonutils.to_primitive([choices[0].to_dict() for choices in out])
        return legacy
    return out


def _cell(cell_uuid: str | Mapping[str, str], host: str) -> str:
    if isinstance(cell_uuid, str):
        return cell_uuid
    try:
        return cell_uuid[host]
    except KeyError:
        raise ValueError(f"host {host!r} is in no known cell") from None


def _selection(selection: Selection, cell: str, default_az: str, groups: list[str],
               claimed: bool = True, extra: tuple[dict[str, Any], dict[str, list[str]]] | None = None
               ) -> objects.Selection:
    if not selection.uuid:
        raise ValueError(f"node {selection.host}/{selection.nodename} has no UUID: Nova needs its compute node's")
    allocations: dict[str, Any] = {selection.uuid: {"resources": dict(selection.allocation)}}
    # 1.34+: which provider each request group got; all of them, the one node (but the PCI devices' groups)
    mappings: dict[str, list[str]] = {group: [selection.uuid] for group in groups}
    if extra is not None:  # the PCI devices' providers (pci_in_placement)
        allocations.update(extra[0])
        mappings.update(extra[1])
    for uuid, resources in selection.providers.items():  # the request groups' (requested_resources)
        allocations[uuid] = {"resources": dict(resources)}
    for group, uuids in selection.mappings.items():  # "" (the flavor's classes on a child) keeps the node too
        kept = mappings.get(group, []) if group == "" else []  # a numbered group has its one provider
        mappings[group] = [*kept, *(u for u in uuids if u not in kept)]
    allocation_request = {"allocations": allocations, "mappings": mappings}
    numa = selection.limits.get("numa_topology")
    limits: dict[str, Any] = {}
    if numa is not None:
        ratios = decode(numa, NUMATopologyLimits) if not isinstance(numa, NUMATopologyLimits) else numa
        limits["numa_topology"] = objects.NUMATopologyLimits(cpu_allocation_ratio=ratios.cpu_allocation_ratio,
                                                             ram_allocation_ratio=ratios.ram_allocation_ratio)
    # Nova 34's filters put only numa_topology in a host's limits (the Core/Ram/DiskFilter that set vcpu,
    # memory_mb and disk_gb are gone, and its compute claims read no others): Gantt's per-class limits stay here.
    return objects.Selection(
        compute_node_uuid=selection.uuid, service_host=selection.host, nodename=selection.nodename,
        cell_uuid=cell, limits=objects.SchedulerLimits.from_dict(limits),
        allocation_request=json.dumps(allocation_request) if claimed else None,
        allocation_request_version=ALLOCATION_REQUEST_VERSION if claimed else None,
        availability_zone=selection.availability_zone or default_az)


def request_groups(spec: Mapping[str, Any]) -> list[str]:
    """The group suffixes of a translated spec's flavor (``resources1:…``, ``trait_x:…``) beside the unsuffixed
    group "", as Placement names them in an allocation request's ``mappings``."""
    suffixes = {""}
    for key in (spec.get("flavor") or {}).get("extra_specs") or {}:
        prefix, sep, _ = key.partition(":")
        for stem in ("resources", "trait"):
            if sep and prefix.startswith(stem) and prefix != stem:
                suffixes.add(prefix[len(stem):])
    return sorted(suffixes)
