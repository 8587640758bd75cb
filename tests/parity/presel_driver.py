"""The Nova side of the issue-31 parity suites: runs under the reference virtualenv (nova==34.0.0), never imports
gantt. Builds Nova's objects with ``nova_driver``'s helpers and answers, per document key:

- ``presel``: Nova's own ``HostManager.get_filtered_hosts`` (ignore/force hosts and nodes, the requested
  destination, ``_nova_check_type`` and the rebuild filters, with Nova's filter classes behind it). A request that
  is not a rebuild first meets Placement, stood in for by its capacity check (a rebuild does not ask Placement).
- ``caps``: ComputeCapabilitiesFilter on extra specs naming every HostState attribute.
- ``image_meta``: whether Nova's ``ImageMeta.from_dict`` takes generated image properties (and, when it refuses,
  the exception's name and the property it names).
- ``uncomparable``: the extra-spec filters node by node, and what Nova raises on a value its operator cannot read.
- ``stored``: the JSON text compute_nodes holds for a host's ``numa_topology`` and ``pci_stats``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import nova_driver as nd  # first: it registers Nova's objects and quiets their logs
from nova import objects
from nova.objects import pci_device_pool
from nova.scheduler import filters as nova_filters
from nova.scheduler import host_manager
from nova.scheduler.filters import compute_capabilities_filter
from oslo_utils import timeutils


def _manager(names: list[str]) -> Any:
    """A HostManager without its database: its filter handler and the enabled filters, nothing else is read by
    get_filtered_hosts."""
    manager = host_manager.HostManager.__new__(host_manager.HostManager)
    manager.filter_handler = nova_filters.HostFilterHandler()
    by_name = {cls.__name__: cls for cls in nova_filters.all_filters()}
    manager.enabled_filters = [by_name[name]() for name in names]
    return manager


def _placement_has_room(host: dict[str, Any], flavor: dict[str, Any]) -> bool:
    """Placement's capacity check for VCPU, MEMORY_MB and DISK_GB ((total - reserved) x ratio - used)."""
    s = host["stats"]
    return (s["vcpus"] * s["cpu_allocation_ratio"] - s.get("vcpus_used", 0) >= flavor["vcpus"]
            and s["memory_mb"] * s["ram_allocation_ratio"] - s.get("memory_mb_used", 0) >= flavor["memory_mb"]
            and s["local_gb"] * s["disk_allocation_ratio"] - s.get("local_gb_used", 0) >= flavor["root_gb"])


def _presel(cloud: dict[str, Any]) -> list[list[str]]:
    nd._options({"filter_scheduler": {k: v for k, v in cloud["options"]["filter_scheduler"].items()
                                      if k != "enabled_filters"}, "DEFAULT": cloud["options"]["DEFAULT"]})
    now = timeutils.utcnow()
    states = nd._host_states(cloud, now)
    manager = _manager(cloud["options"]["filter_scheduler"]["enabled_filters"])
    out = []
    for case in cloud["requests"]:
        spec = nd._spec(case)
        spec.ignore_hosts = case.get("ignore_hosts")
        spec.force_hosts = case.get("force_hosts")
        spec.force_nodes = case.get("force_nodes")
        dest = case.get("requested_destination")
        spec.requested_destination = objects.Destination(host=dest["host"], node=dest.get("node")) if dest else None
        nd._fresh_candidates(states)
        hosts = states
        if spec.scheduler_hints.get("_nova_check_type") != ["rebuild"]:
            hosts = [s for s, h in zip(states, cloud["hosts"], strict=True) if _placement_has_room(h, case["flavor"])]
        out.append(sorted(s.nodename for s in manager.get_filtered_hosts(hosts, spec)))
    return out


def _caps(doc: dict[str, Any]) -> list[list[str]]:
    nd._options({"DEFAULT": {"service_down_time": 60}})
    states = nd._host_states({"hosts": doc["hosts"], "aggregates": doc["aggregates"]}, timeutils.utcnow())
    filt = compute_capabilities_filter.ComputeCapabilitiesFilter()
    out = []
    for extra in doc["extra_specs"]:
        spec = objects.RequestSpec(flavor=objects.Flavor(extra_specs=dict(extra)))
        out.append(sorted(s.nodename for s in states if filt.host_passes(s, spec)))
    return out


def _uncomparable(doc: dict[str, Any]) -> list[dict[str, list[Any]]]:
    """AggregateInstanceExtraSpecsFilter and ComputeCapabilitiesFilter node by node: True, False, or the name of
    what Nova raises (a value its numeric operator cannot read: the whole request fails in Nova)."""
    nd._options({"DEFAULT": {"service_down_time": 60}})
    states = nd._host_states({"hosts": doc["hosts"], "aggregates": doc["aggregates"]}, timeutils.utcnow())
    by_name = {cls.__name__: cls for cls in nova_filters.all_filters()}
    filters = {name: by_name[name]() for name in ("AggregateInstanceExtraSpecsFilter", "ComputeCapabilitiesFilter")}
    out = []
    for extra in doc["extra_specs"]:
        spec = objects.RequestSpec(flavor=objects.Flavor(extra_specs=dict(extra)))
        answer: dict[str, list[Any]] = {}
        for name, filt in filters.items():
            row = []
            for state in states:
                try:
                    row.append(bool(filt.host_passes(state, spec)))
                except Exception as exc:  # what the filter raises ends Nova's request
                    row.append(type(exc).__name__)
            answer[name] = row
        out.append(answer)
    return out


def _image_meta(props_list: list[dict[str, Any]]) -> list[Any]:
    out: list[Any] = []
    for props in props_list:
        try:
            objects.ImageMeta.from_dict({"id": "img", "properties": dict(props)})
            out.append(None)
        except Exception as exc:  # ValueError from a field's coercion, or Nova's own exceptions
            out.append({"error": type(exc).__name__, "message": str(exc)})
    return out


def _stored(hosts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for host in hosts:
        pools = pci_device_pool.from_pci_stats(host.get("pci_stats"))
        out.append({"numa_topology": nd._numa_json(host.get("numa_topology")),
                    "pci_stats": json.dumps(pools.obj_to_primitive()) if pools is not None else None})
    return out


def main() -> None:
    doc = json.load(sys.stdin)
    out: dict[str, Any] = {}
    if "presel" in doc:
        out["presel"] = [_presel(cloud) for cloud in doc["presel"]]
    if "caps" in doc:
        out["caps"] = [_caps(one) for one in doc["caps"]]
    if "image_meta" in doc:
        out["image_meta"] = _image_meta(doc["image_meta"])
    if "uncomparable" in doc:
        out["uncomparable"] = [_uncomparable(one) for one in doc["uncomparable"]]
    if "stored" in doc:
        out["stored"] = _stored(doc["stored"])
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
