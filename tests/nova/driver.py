"""Run under the nova+gantt venv (tests/nova/venv.py): builds real ``nova.objects.RequestSpec`` objects from the
cases on stdin, translates them with ``gantt.nova.translate``, and prints, per case, what Gantt received beside
what Nova's own scheduler code reads from the same object. The test compares them.

stdin: {"src": checkout's src, "specs": [case, …], "answers": [answer case, …]}
"""

from __future__ import annotations

import json
import sys
from typing import Any


def main() -> None:
    payload = json.load(sys.stdin)
    sys.path.insert(0, payload["src"])  # the tree under test, never an installed Gantt

    from nova import objects
    objects.register_all()

    import gantt
    assert gantt.__file__.startswith(payload["src"]), gantt.__file__
    out = {"specs": [_spec_case(case) for case in payload["specs"]],
           "answers": [_answer_case(case) for case in payload["answers"]]}
    json.dump(out, sys.stdout)


def _build(case: dict[str, Any]) -> Any:
    from nova import objects

    f = case["flavor"]
    flavor = objects.Flavor(name=f["name"], flavorid=f["name"], id=f["id"], vcpus=f["vcpus"],
                            memory_mb=f["memory_mb"], root_gb=f["root_gb"], ephemeral_gb=f["ephemeral_gb"],
                            swap=f["swap"], extra_specs=dict(f["extra_specs"]))
    spec = objects.RequestSpec(flavor=flavor, project_id=case["project_id"], user_id=case["user_id"],
                               num_instances=case["num_instances"], instance_uuid=case["instance_uuids"][0],
                               is_bfv=case["is_bfv"], availability_zone=None, ignore_hosts=None,
                               force_hosts=None, force_nodes=None, requested_destination=None)
    spec.image = objects.ImageMeta.from_dict(dict(case["image"])) if case.get("image") is not None else None
    for name in ("availability_zone", "ignore_hosts", "force_hosts", "force_nodes"):
        if name in case:
            setattr(spec, name, case[name])
    spec.scheduler_hints = dict(case.get("scheduler_hints") or {})
    if (g := case.get("instance_group")) is not None:
        spec.instance_group = objects.InstanceGroup(uuid=g["uuid"], name=g["name"], policy=g["policy"],
                                                    members=g["members"], hosts=g["hosts"], rules=g["rules"])
    else:
        spec.instance_group = None
    if (d := case.get("requested_destination")) is not None:
        dest = objects.Destination()
        for name in ("host", "node", "aggregates", "allow_cross_cell_move"):
            if name in d:
                setattr(dest, name, d[name])
        if "forbidden_aggregates" in d:
            dest.forbidden_aggregates = set(d["forbidden_aggregates"])
        if "cell" in d:
            dest.cell = objects.CellMapping(uuid=d["cell"])
        spec.requested_destination = dest
    if (p := case.get("request_level_params")) is not None:
        spec.request_level_params = objects.RequestLevelParams(
            root_required=set(p.get("root_required", ())), root_forbidden=set(p.get("root_forbidden", ())),
            same_subtree=[set(s) for s in p.get("same_subtree", ())])
    spec.requested_resources = [
        objects.RequestGroup(requester_id=r["requester_id"], resources=r["resources"],
                             required_traits=set(r.get("required_traits", ())),
                             forbidden_traits=set(r.get("forbidden_traits", ())),
                             aggregates=[list(a) for a in r.get("aggregates", ())])
        for r in case.get("requested_resources", ())]
    pci = []
    if (boot := case.get("boot_alias")) is not None:
        pci.extend(_boot_alias_requests(flavor, boot["entries"], boot["today"]))
    for r in case.get("port_pci_requests", ()):
        request = objects.InstancePCIRequest(count=1, spec=[dict(r["spec"])], alias_name=None,
                                             request_id=r["request_id"], requester_id=f"port-{r['request_id']}")
        if r.get("numa_policy"):
            request.numa_policy = r["numa_policy"]
        pci.append(request)
    spec.pci_requests = objects.InstancePCIRequests(requests=pci)
    if (nets := case.get("requested_networks")) is not None:
        spec.requested_networks = objects.NetworkRequestList(objects=[
            objects.NetworkRequest(network_id=n.get("network_id"), port_id=n.get("port_id")) for n in nets])
    if case.get("network_metadata") is not None:
        spec.network_metadata = objects.NetworkMetadata(physnets=set(case["network_metadata"]["physnets"]),
                                                        tunneled=case["network_metadata"]["tunneled"])
    # as Nova's API does for every request (None when flavor and image ask for no NUMA topology)
    from nova.virt import hardware
    spec.numa_topology = hardware.numa_get_constraints(
        spec.flavor, spec.image or objects.ImageMeta(properties=objects.ImageMetaProps()))
    return spec


def _boot_alias_requests(flavor: Any, entries: list[str], today: list[str]) -> list[Any]:
    """The flavor's PCI requests as Nova's API made them under ``entries`` (by Nova's own code); ``[pci] alias`` is
    ``today`` afterwards, as when an operator changed it between the boot and a move."""
    import nova.conf
    from nova.pci import request as pci_request

    conf = nova.conf.CONF
    conf.set_override("alias", entries, group="pci")
    pci_request.get_alias_from_config.cache_clear()  # Nova parses [pci] alias once per process
    try:
        return list(pci_request.get_pci_requests_from_flavor(flavor).requests)
    finally:
        conf.set_override("alias", today, group="pci")
        pci_request.get_alias_from_config.cache_clear()


def _spec_case(case: dict[str, Any]) -> dict[str, Any]:
    from nova import objects
    from nova.scheduler import utils as scheduler_utils

    from gantt.compute.request import RequestContext
    from gantt.config import Config
    from gantt.model import InvalidRequest, RequestSpec, decode, to_builtins
    from gantt.nova.translate import Unsupported, request_groups, request_spec

    spec = _build(case)
    try:
        translated = request_spec(spec, case.get("rpc_instance_uuids"), cell_uuid=case["cell_uuid"],
                                  cells=case.get("cells"), ports_asked=case.get("ports_asked", False))
    except Unsupported as exc:
        return {"unsupported": exc.field, "message": str(exc)}
    json.dumps(translated)  # builtins only: what the HTTP face or a store would carry
    gantt_spec = decode(translated, RequestSpec)
    try:
        ctx = RequestContext.build(gantt_spec, Config(), 0.0)
    except InvalidRequest as exc:  # what Placement 1.36 refuses (Nova finds no host): the test checks which
        return {"refused": exc.field, "message": str(exc), "translated": translated}

    # What Nova's scheduler reads from the same object
    nova_req = scheduler_utils.ResourceRequest.from_request_spec(spec, enable_pinning_translate=True)
    groups = list(nova_req._rg_by_id.values())
    nova_required = set(nova_req.all_required_traits) | set(spec.root_required)
    nova_forbidden = set().union(*(g.forbidden_traits for g in groups)) | set(spec.root_forbidden)
    dest = spec.requested_destination if spec.obj_attr_is_set("requested_destination") else None
    gantt_dest = gantt_spec.requested_destination
    group = spec.instance_group
    props_back = None
    if gantt_spec.image is not None:
        props_back = objects.ImageMetaProps.from_dict(dict(gantt_spec.image.properties)).obj_to_primitive()
    # Nova's manager: num_instances = len(instance_uuids) if the RPC gave them, else spec_obj.num_instances.
    # Without the RPC's list (a 4.3 caller) Nova claims nothing; Gantt claims for the spec's own instance_uuid
    # when there is exactly one instance, and for Gantt-made consumers otherwise.
    rpc_uuids = case.get("rpc_instance_uuids")
    count = len(rpc_uuids) if rpc_uuids else spec.num_instances
    uuids = rpc_uuids or ([spec.instance_uuid] if count == 1 else None)
    # Nova asks Placement for the outside groups beside the flavor's (ResourceRequest._add_request_group);
    # Gantt asks for them as request groups, on the node's child providers
    # and the flavor's numbered groups as request groups too, named by their suffixes
    numbered = set(request_groups(translated)) - {""}
    outside = [g for g in groups if g.requester_id in {r["requester_id"] for r in case.get("requested_resources", ())}
               or g.requester_id in numbered]
    group_required: set[str] = set()
    group_forbidden: set[str] = set()
    for g in ctx.groups.groups if ctx.groups else ():
        group_required |= g.required
        group_forbidden |= g.forbidden

    def with_groups(resources: dict[str, int]) -> dict[str, int]:
        out = dict(resources)
        for g in ctx.groups.groups if ctx.groups else ():
            for rc, n in g.resources:
                out[rc] = out.get(rc, 0) + n
        return out
    return {
        "translated": translated,
        "pairs": {  # name: [what Gantt reads, what Nova reads]
            "resources": [with_groups(ctx.resources), dict(nova_req.merged_resources())],
            "request_groups": [
                [[g.id, dict(g.resources), sorted(g.required), sorted(g.forbidden), sorted(map(sorted, g.member_of))]
                 for g in sorted(ctx.groups.groups if ctx.groups else (), key=lambda g: g.id)],
                [[g.requester_id, dict(g.resources), sorted(g.required_traits), sorted(g.forbidden_traits),
                  sorted(sorted(a) for a in g.aggregates)] for g in sorted(outside, key=lambda g: g.requester_id)]],
            # the PCI requests Nova's PciPassthroughFilter hands PciDeviceStats: count, specs, NUMA policy
            "pci_requests": [[[r.count, list(r.specs), r.numa_policy] for r in ctx.pci_requests],
                             [[r.count, list(r.spec), r.numa_policy or "legacy"] for r in spec.pci_requests.requests]],
            "required_traits": [sorted(ctx.required_traits | group_required), sorted(nova_required)],
            "forbidden_traits": [sorted(ctx.forbidden_traits | group_forbidden), sorted(nova_forbidden)],
            "hints": [{k: ctx.hint(k) for k in spec.scheduler_hints},
                      {k: spec.get_scheduler_hint(k) for k in spec.scheduler_hints}],
            "project_user_az": [[gantt_spec.project_id, gantt_spec.user_id, gantt_spec.availability_zone],
                                [spec.project_id, spec.user_id, spec.availability_zone]],
            "instances": [[gantt_spec.num_instances, gantt_spec.instance_uuids],
                          [count, uuids]],
            "ignore_force": [[gantt_spec.ignore_hosts, gantt_spec.force_hosts, gantt_spec.force_nodes],
                             [spec.ignore_hosts, spec.force_hosts, spec.force_nodes]],
            "destination": [
                [gantt_dest.host, gantt_dest.node, gantt_dest.aggregates] if gantt_dest else None,
                # as resources_from_request_spec reads it: each only when set
                [_v(dest, "host"), _v(dest, "node"), _v(dest, "aggregates")]
                if dest is not None and (_v(dest, "host") or _v(dest, "node") or _v(dest, "aggregates")) else None],
            "forbidden_aggregates": [sorted(ctx.forbidden_aggregates),
                                     sorted(_v(dest, "forbidden_aggregates") or ()) if dest is not None else []],
            "group": [
                [ctx.group_policy, sorted(ctx.group_members), ctx.group_hosts,
                 ctx.group_rules.get("max_server_per_host"), gantt_spec.instance_group.uuid]
                if gantt_spec.instance_group else None,
                [group.policy, sorted(group.members), group.hosts,
                 int(group.rules["max_server_per_host"]) if "max_server_per_host" in group.rules else None,
                 group.uuid] if group else None],
            "image_properties": [props_back,
                                 spec.image.properties.obj_to_primitive() if spec.obj_attr_is_set("image") and
                                 spec.image is not None else None],
            # numa_topology is not sent: Gantt derives it, and must reach what NUMATopologyFilter reads
            "numa_topology": [_gantt_cells(ctx.numa), _nova_cells(_v(spec, "numa_topology"))],
            # what NUMATopologyFilter passes numa_fit_instance_to_host (nothing asked: None)
            "network_metadata": [[sorted(ctx.networks.physnets), ctx.networks.tunneled] if ctx.networks else None,
                                 _nova_networks(_v(spec, "network_metadata"))],
            # the manager's second Placement query for a dedicated guest ([workarounds] at Nova's default)
            "pcpu_fallback": [with_groups(ctx.fallback.resources) if ctx.fallback else None,
                              dict(scheduler_utils.ResourceRequest.from_request_spec(
                                  spec, enable_pinning_translate=False).merged_resources())
                              if nova_req.cpu_pinning_requested else None],
            "image_id": [gantt_spec.image.id if gantt_spec.image else None,
                         spec.image.id if spec.obj_attr_is_set("image") and spec.image is not None else None],
        },
        "decoded": to_builtins(gantt_spec),
    }


def _nova_networks(metadata: Any) -> Any:
    if metadata is None or not (metadata.physnets or metadata.tunneled):
        return None
    return [sorted(metadata.physnets), metadata.tunneled]


def _gantt_cells(guest: Any) -> Any:
    if guest is None:
        return None
    return [guest.cpu_policy, [[c.id, sorted(c.cpuset | c.pcpuset), c.memory] for c in guest.cells]]


def _nova_cells(topology: Any) -> Any:
    if topology is None:
        return None
    policy = topology.cells[0].cpu_policy if topology.cells else None
    return [policy, [[c.id, sorted(c.total_cpus), c.memory] for c in topology.cells]]


def _data(primitive: Any) -> Any:
    """A primitive without its change lists, which say what was set since creation, not what it holds."""
    if isinstance(primitive, dict):
        return {k: _data(v) for k, v in primitive.items() if k != "nova_object.changes"}
    return primitive


def _v(obj: Any, name: str) -> Any:
    return getattr(obj, name) if name in obj else None


def _answer_case(case: dict[str, Any]) -> dict[str, Any]:
    from nova import objects

    from gantt.model import Selection
    from gantt.nova.translate import selections

    answer = [[Selection(**s) for s in choices] for choices in case["answer"]]
    got = selections(answer, return_objects=case["return_objects"], return_alternates=case["return_alternates"],
                     max_attempts=case["max_attempts"], cell_uuid=case["cell_uuid"], groups=case["groups"])
    if not case["return_objects"]:
        return {"legacy": got}
    out = []
    for choices in got:
        row = []
        for sel in choices:
            assert isinstance(sel, objects.Selection)
            primitive = sel.obj_to_primitive()
            back = objects.Selection.obj_from_primitive(primitive)
            assert _data(back.obj_to_primitive()) == _data(primitive), (back, sel)
            data = primitive["nova_object.data"]
            limits = data["limits"]["nova_object.data"]
            numa = limits.get("numa_topology")
            row.append({"host": data["service_host"], "nodename": data["nodename"],
                        "compute_node_uuid": data["compute_node_uuid"], "cell_uuid": data["cell_uuid"],
                        "availability_zone": data["availability_zone"],
                        "allocation_request": json.loads(data["allocation_request"]),
                        "allocation_request_version": data["allocation_request_version"],
                        "numa_limits": numa["nova_object.data"] if numa else None,
                        "legacy": sel.to_dict() if not numa else None})
        out.append(row)
    return {"objects": out}


if __name__ == "__main__":
    main()
