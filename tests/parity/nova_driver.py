"""The Nova side of the parity suite: runs under the reference virtualenv (nova==34.0.0), never imports gantt.

Reads one JSON document on stdin (clouds, options and requests made by ``tests/parity/cases.py``), builds Nova's
own objects from it (``ComputeNode`` -> ``HostState.update``, ``Aggregate``, ``RequestSpec``, ``Flavor``,
``ImageMeta``, ``InstanceGroup``), runs Nova's filter classes host by host and Nova's ``HostWeightHandler`` on the
node sets it is given, and writes the results as JSON on stdout. Only what needs a database or a message bus is
left out: hosts are built in memory and a service's liveness is its ``last_seen_up``.
"""

from __future__ import annotations

import copy
import datetime
import json
import logging
import sys
import warnings
from typing import Any

warnings.filterwarnings("ignore")
logging.disable(logging.CRITICAL)

import nova.conf  # noqa: E402
from nova import objects  # noqa: E402

objects.register_all()

from nova import exception  # noqa: E402
from nova.objects import pci_device_pool  # noqa: E402
from nova.pci import request as pci_request  # noqa: E402
from nova.scheduler import filters as nova_filters  # noqa: E402
from nova.scheduler import host_manager, request_filter  # noqa: E402
from nova.scheduler import utils as scheduler_utils  # noqa: E402
from nova.scheduler import weights as nova_weights  # noqa: E402
from nova.scheduler.filters import numa_topology_filter, pci_passthrough_filter  # noqa: E402
from nova.virt import hardware  # noqa: E402

# Gantt's name -> Nova's request filter function (the same name where Gantt kept Nova's).
PREFILTERS = {"require_tenant_aggregate": "require_tenant_aggregate", "isolate_aggregates": "isolate_aggregates",
              "require_image_type_support": "require_image_type_support",
              "transform_image_metadata": "transform_image_metadata", "compute_status_filter": "compute_status_filter",
              "AvailabilityZoneRequestFilter": "map_az_to_placement_aggregate"}
from oslo_utils import timeutils  # noqa: E402

CONF = nova.conf.CONF


def _options(options: dict[str, dict[str, Any]]) -> None:
    CONF([], project="nova", default_config_files=[])
    for group, values in options.items():
        for name, value in values.items():
            CONF.set_override(name, value, group=None if group == "DEFAULT" else group)
    pci_request.get_alias_from_config.cache_clear()  # Nova parses [pci] alias once per process


def _compute(host: dict[str, Any], now: datetime.datetime) -> Any:
    s = host["stats"]
    stats = {"num_instances": str(s.get("num_instances", 0)), "io_workload": str(s.get("num_io_ops", 0)),
             "failed_builds": str(s.get("failed_builds", 0))}
    stats.update({k: str(v) for k, v in (s.get("stats") or {}).items()})
    metrics = [{"name": m["name"], "value": m["value"], "source": m.get("source", "gantt"),
                "timestamp": now.isoformat()} for m in s.get("metrics") or []]
    specs = [objects.HVSpec.from_list(list(spec)) for spec in s.get("supported_instances") or []]
    return objects.ComputeNode(
        uuid=s["uuid"], host=host["host"], hypervisor_hostname=host["node"],
        vcpus=s["vcpus"], vcpus_used=s.get("vcpus_used", 0),
        memory_mb=s["memory_mb"], memory_mb_used=s.get("memory_mb_used", 0),
        free_ram_mb=s["memory_mb"] - s.get("memory_mb_used", 0),
        local_gb=s["local_gb"], local_gb_used=s.get("local_gb_used", 0),
        free_disk_gb=s["local_gb"] - s.get("local_gb_used", 0),
        disk_available_least=s.get("disk_available_least"),
        cpu_allocation_ratio=s["cpu_allocation_ratio"], ram_allocation_ratio=s["ram_allocation_ratio"],
        disk_allocation_ratio=s["disk_allocation_ratio"],
        hypervisor_type=s.get("hypervisor_type"), hypervisor_version=s.get("hypervisor_version"),
        cpu_info=json.dumps(s.get("cpu_info") or {}), host_ip=s.get("host_ip"),
        running_vms=s.get("num_instances", 0), current_workload=0, supported_hv_specs=specs,
        stats=stats, metrics=json.dumps(metrics), numa_topology=_numa_json(s.get("numa_topology")),
        pci_device_pools=pci_device_pool.from_pci_stats(s.get("pci_stats")),
        updated_at=now, service_id=None)


def _numa_topology(plain: dict[str, Any]) -> Any:
    cells = []
    for c in plain["cells"]:
        pages = [objects.NUMAPagesTopology(size_kb=p["size_kb"], total=p["total"], used=p.get("used", 0),
                                           reserved=p.get("reserved", 0)) for p in c.get("mempages", [])]
        cells.append(objects.NUMACell(
            id=c["id"], cpuset=set(c.get("cpuset", [])), pcpuset=set(c.get("pcpuset", [])), memory=c["memory"],
            cpu_usage=c.get("cpu_usage", 0), memory_usage=c.get("memory_usage", 0),
            pinned_cpus=set(c.get("pinned_cpus", [])), siblings=[set(s) for s in c.get("siblings", [])],
            mempages=pages, network_metadata=_network_metadata(c.get("network_metadata")),
            socket=c.get("socket")))
    return objects.NUMATopology(cells=cells)


def _network_metadata(plain: dict[str, Any] | None) -> Any:
    """Nova's NetworkMetadata (what nova-compute sets on every cell: empty when nothing is declared)."""
    plain = plain or {}
    return objects.NetworkMetadata(physnets=set(plain.get("physnets", ())), tunneled=plain.get("tunneled", False))


def _numa_json(plain: dict[str, Any] | None) -> str | None:
    """What nova-compute stores in compute_nodes.numa_topology (a versioned-object primitive as JSON)."""
    return _numa_topology(plain)._to_json() if plain else None


def _host_states(cloud: dict[str, Any], now: datetime.datetime) -> list[Any]:
    aggregates = {str(a["id"]): objects.Aggregate(id=int(a["id"]), name=a["name"], hosts=list(a["hosts"]),
                                                  metadata=dict(a["metadata"]))
                  for a in cloud["aggregates"]}
    out = []
    for host in cloud["hosts"]:
        state = host_manager.HostState(host["host"], host["node"], "cell1")
        service = {"host": host["host"], "binary": "nova-compute", "disabled": host["stats"]["service"]["disabled"],
                   "disabled_reason": None, "forced_down": host["stats"]["service"]["forced_down"],
                   "last_seen_up": now - datetime.timedelta(seconds=host["age"]),
                   "created_at": now - datetime.timedelta(days=1)}
        instances = {uuid: objects.Instance(uuid=uuid, host=host["host"]) for uuid in host["stats"]["instances"]}
        state.update(compute=_compute(host, now), service=service,
                     aggregates=[aggregates[str(i)] for i in host["aggregates"]], inst_dict=instances)
        out.append(state)
    _fresh_candidates(out)
    return out


def _fresh_candidates(states: list[Any]) -> None:
    """Placement's one allocation candidate per host for a request without provider mappings. Filters built on
    Nova's CandidateFilterMixin keep only the candidates that passed, so each request starts afresh."""
    for state in states:
        state.allocation_candidates = [{"mappings": {}}]


def _spec(spec: dict[str, Any]) -> Any:
    flavor = spec["flavor"]
    request = objects.RequestSpec(
        flavor=objects.Flavor(name=flavor["name"], flavorid=flavor["name"], vcpus=flavor["vcpus"],
                              memory_mb=flavor["memory_mb"], root_gb=flavor["root_gb"], ephemeral_gb=0, swap=0,
                              extra_specs=dict(flavor.get("extra_specs") or {})),
        image=objects.ImageMeta.from_dict({"id": (spec.get("image") or {}).get("id"), "name": "img",
                                           "disk_format": (spec.get("image") or {}).get("disk_format", "qcow2"),
                                           "properties": dict((spec.get("image") or {}).get("properties") or {})}),
        project_id=spec["project_id"], user_id=spec["user_id"], num_instances=1, ignore_hosts=None,
        force_hosts=None, force_nodes=None, instance_uuid=spec["instance_uuids"][0],
        availability_zone=spec.get("availability_zone"),
        scheduler_hints={k: v if isinstance(v, list) else [v] for k, v in (spec.get("scheduler_hints") or {}).items()},
        instance_group=None)
    # As Nova's API builds them: the flavor's or image's PCI NUMA affinity policy overrides the aliases' own.
    policy = hardware.get_pci_numa_policy_constraint(request.flavor, request.image)
    request.pci_requests = pci_request.get_pci_requests_from_flavor(request.flavor, affinity_policy=policy)
    for n, port in enumerate(spec.get("pci_requests") or ()):
        # as Nova's neutron API appends an SR-IOV port's request: the port's NUMA policy, else flavor's or image's
        port_request = objects.InstancePCIRequest(count=port.get("count", 1), spec=[dict(s) for s in port["spec"]],
                                                  request_id=f"port-{n}")
        if port.get("numa_policy") or policy:
            port_request.numa_policy = port.get("numa_policy") or policy
        request.pci_requests.requests.append(port_request)
    # Nova's API derives the guest NUMA topology when it creates the request spec (numa_get_constraints).
    request.numa_topology = hardware.numa_get_constraints(request.flavor, request.image)
    if spec.get("network_metadata") is not None:  # the physnets and tunnelling of the instance's ports
        request.network_metadata = _network_metadata(spec["network_metadata"])
    group = spec.get("instance_group")
    if group:
        request.instance_group = objects.InstanceGroup(uuid=group["uuid"], policy=group["policy"],
                                                       policies=[group["policy"]],
                                                       hosts=list(group.get("hosts") or []),
                                                       members=list(group.get("members") or []),
                                                       rules=dict(group.get("rules") or {}))
    return request


def _prefilter(name: str, cloud: dict[str, Any], spec_dict: dict[str, Any], states: list[Any]) -> list[str]:
    """Run one of Nova's request filters, then the nodes its constraints admit (what Placement would return).

    Only the aggregate look-ups are served from the generated cloud instead of Nova's API database, with the
    query's meaning (nova/objects/aggregate.py): ``get_by_metadata(value=v)`` -> aggregates with some item of
    value v, carrying those items only; ``get_non_matching_by_metadata_keys`` -> aggregates with an item whose
    key starts with the prefix, whose value is the value and whose key is not ignored.
    """
    aggregates = cloud["aggregates"]

    def by_metadata(ctxt: Any, key: Any = None, value: Any = None) -> list[Any]:
        out = []
        for a in aggregates:
            items = {k: v for k, v in a["metadata"].items()
                     if (key is None or k == key) and (value is None or v == value)}
            if items:
                out.append(objects.Aggregate(id=int(a["id"]), uuid=a["uuid"], name=a["name"], metadata=items))
        return out

    def non_matching(ctxt: Any, ignored: Any, prefix: str, value: Any = None) -> list[Any]:
        return [objects.Aggregate(id=int(a["id"]), uuid=a["uuid"], name=a["name"], metadata={})
                for a in aggregates
                if any(k.startswith(prefix) and v == value and k not in ignored for k, v in a["metadata"].items())]

    objects.AggregateList.get_by_metadata = classmethod(lambda cls, *a, **k: by_metadata(*a, **k))
    objects.AggregateList.get_non_matching_by_metadata_keys = classmethod(lambda cls, *a, **k: non_matching(*a, **k))
    spec = _spec(spec_dict)
    spec.is_bfv = False
    spec.requested_destination = None
    try:
        getattr(request_filter, PREFILTERS[name])(None, spec)
    except exception.RequestFilterFailed:
        return []
    dest = spec.requested_destination
    groups = [set(g.split(",")) for g in (dest.aggregates or [])] if dest is not None and "aggregates" in dest \
        else []
    forbidden = set(dest.forbidden_aggregates) if dest is not None and "forbidden_aggregates" in dest else set()
    required, banned = set(spec.root_required), set(spec.root_forbidden)
    uuid_of = {a["id"]: a["uuid"] for a in aggregates}
    passing = []
    for host, state in zip(cloud["hosts"], states, strict=True):
        member = {uuid_of[i] for i in host["aggregates"]}
        traits = set(host["stats"].get("traits") or ())
        if all(member & g for g in groups) and not member & forbidden and required <= traits \
                and not banned & traits:
            passing.append(state.nodename)
    return sorted(passing)


def _weights(handler: Any, weigher_classes: list[Any], states: list[Any], names: list[str],
             spec: Any) -> dict[str, float]:
    by_node = {s.nodename: s for s in states}
    chosen = [by_node[n] for n in names]
    weighed = handler.get_weighed_objects([cls() for cls in weigher_classes], chosen, spec)
    return {w.obj.nodename: float(w.weight) for w in weighed}


def _numa_cases(doc: dict[str, Any]) -> dict[str, Any]:
    """NUMATopologyFilter alone on generated NUMA hosts and requests: per request the passing nodes, or
    ``"invalid"`` when Nova refuses the request (its image properties, or numa_get_constraints). Also each host's
    numa_topology as Nova stores it, for the check that Gantt reads Nova's own primitive."""
    _options(doc["options"])
    now = timeutils.utcnow()
    cloud = {"hosts": doc["hosts"], "aggregates": []}
    states = _host_states(cloud, now)
    filt = numa_topology_filter.NUMATopologyFilter()
    results: list[Any] = []
    for case in doc["requests"]:
        try:
            spec = _spec(case)
        except Exception as exc:  # any refusal of the request is "invalid" (Gantt: InvalidRequest)
            results.append({"invalid": type(exc).__name__})
            continue
        _fresh_candidates(states)
        results.append(sorted(s.nodename for s in states if filt.host_passes(s, spec)))
    return {"results": results, "stored": [json.loads(_numa_json(h["stats"]["numa_topology"]) or "null")
                                           for h in doc["hosts"]]}


def _pools(pools: Any) -> list[Any]:
    out = []
    for pool in pools:
        items = {k: v for k, v in pool.items() if k != "devices"}
        items.setdefault("numa_node", None)
        if items["count"]:
            out.append(sorted([k, v] for k, v in items.items()))
    return out


def _consumed(state: Any, spec: Any) -> dict[str, Any]:
    """What Nova's HostState consumes for ``spec`` once the filters passed it (a copy: the state stays as it
    was): the host cells the guest's cells landed on and the PCI pools left."""
    state = copy.deepcopy(state)
    spec = spec.obj_clone()
    try:  # the public consume_from_request logs and swallows a failure: the bare one says what it was
        state._locked_consume_from_request(spec)
    except Exception as exc:  # e.g. Nova's usage count on a host cell that lists no page sizes
        return {"error": type(exc).__name__}
    return {"cells": [cell.id for cell in spec.numa_topology.cells] if spec.numa_topology else [],
            "pools": _pools(state.pci_stats.pools)}


def _numa_pci_cases(doc: dict[str, Any]) -> list[Any]:
    """NUMATopologyFilter and PciPassthroughFilter on generated NUMA hosts with PCI pools: per request the nodes
    each passes and, on every node both pass, what HostState.consume_from_request takes; or ``"invalid"``."""
    _options(doc["options"])
    now = timeutils.utcnow()
    states = _host_states({"hosts": doc["hosts"], "aggregates": []}, now)
    filters = {"NUMATopologyFilter": numa_topology_filter.NUMATopologyFilter(),
               "PciPassthroughFilter": pci_passthrough_filter.PciPassthroughFilter()}
    results: list[Any] = []
    for case in doc["requests"]:
        try:
            spec = _spec(case)
            spec.is_bfv = False
            # what the scheduler asks Placement for: the required traits (hyperthreading, the socket policy's)
            traits = sorted(scheduler_utils.ResourceRequest.from_request_spec(spec).all_required_traits)
        except Exception as exc:  # any refusal of the request is "invalid" (Gantt: InvalidRequest)
            results.append({"invalid": type(exc).__name__})
            continue
        out: dict[str, Any] = {"filters": {}, "claims": {}, "required_traits": traits}
        passing: dict[str, list[Any]] = {}
        for name, filt in filters.items():
            _fresh_candidates(states)
            passing[name] = [s for s in states if filt.host_passes(s, spec)]
            out["filters"][name] = sorted(s.nodename for s in passing[name])
        both = {s.nodename for s in passing["PciPassthroughFilter"]}
        for state in passing["NUMATopologyFilter"]:
            if state.nodename in both:
                out["claims"][state.nodename] = _consumed(state, spec)
        results.append(out)
    return results


def main() -> None:
    doc = json.load(sys.stdin)
    if "numa" in doc:
        json.dump([_numa_cases(one) for one in doc["numa"]], sys.stdout)
        return
    if "numa_pci" in doc:
        json.dump([_numa_pci_cases(one) for one in doc["numa_pci"]], sys.stdout)
        return
    filter_classes = {cls.__name__: cls for cls in nova_filters.all_filters()}
    weigher_classes = {cls.__name__: cls for cls in nova_weights.all_weighers()}
    results = []
    for cloud in doc["clouds"]:
        _options(cloud["options"])
        now = timeutils.utcnow()
        states = _host_states(cloud, now)
        handler = nova_weights.HostWeightHandler()
        for case in cloud["requests"]:
            spec = _spec(case["spec"])
            _fresh_candidates(states)
            out: dict[str, Any] = {"filters": {}, "weights": {}}
            for name in case["filters"]:
                if name in PREFILTERS:
                    out["filters"][name] = _prefilter(name, cloud, case["spec"], states)
                    continue
                filt = filter_classes[name]()
                for state in states:  # what Placement returned: one candidate, no PCI in Placement
                    state.allocation_candidates = [{"mappings": {}}]
                out["filters"][name] = sorted(s.nodename for s in states if filt.host_passes(s, spec))
            for name, nodes in case["weigh"].items():
                classes = list(weigher_classes.values()) if name == "all_weighers" else [weigher_classes[name]]
                try:
                    out["weights"][name] = _weights(handler, classes, states, nodes, spec)
                except Exception as exc:  # MetricsWeigher with required=True raises on a missing metric
                    out["weights"][name] = {"error": type(exc).__name__}
            results.append(out)
    json.dump({"filters": sorted([*filter_classes, *PREFILTERS]), "weighers": sorted(weigher_classes),
               "results": results},
              sys.stdout)


if __name__ == "__main__":
    main()
