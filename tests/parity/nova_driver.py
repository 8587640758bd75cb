"""The Nova side of the parity suite: runs under the reference virtualenv (nova==34.0.0), never imports gantt.

Reads one JSON document on stdin (clouds, options and requests made by ``tests/parity/cases.py``), builds Nova's
own objects from it (``ComputeNode`` -> ``HostState.update``, ``Aggregate``, ``RequestSpec``, ``Flavor``,
``ImageMeta``, ``InstanceGroup``), runs Nova's filter classes host by host and Nova's ``HostWeightHandler`` on the
node sets it is given, and writes the results as JSON on stdout. Only what needs a database or a message bus is
left out: hosts are built in memory and a service's liveness is its ``last_seen_up``.
"""

from __future__ import annotations

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

from nova.scheduler import filters as nova_filters  # noqa: E402
from nova.scheduler import host_manager  # noqa: E402
from nova.scheduler import weights as nova_weights  # noqa: E402
from oslo_utils import timeutils  # noqa: E402

CONF = nova.conf.CONF


def _options(options: dict[str, dict[str, Any]]) -> None:
    CONF([], project="nova", default_config_files=[])
    for group, values in options.items():
        for name, value in values.items():
            CONF.set_override(name, value, group=None if group == "DEFAULT" else group)


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
        stats=stats, metrics=json.dumps(metrics), numa_topology=None, pci_device_pools=None,
        updated_at=now, service_id=None)


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
    return out


def _spec(spec: dict[str, Any]) -> Any:
    flavor = spec["flavor"]
    request = objects.RequestSpec(
        flavor=objects.Flavor(name=flavor["name"], flavorid=flavor["name"], vcpus=flavor["vcpus"],
                              memory_mb=flavor["memory_mb"], root_gb=flavor["root_gb"], ephemeral_gb=0, swap=0,
                              extra_specs=dict(flavor.get("extra_specs") or {})),
        image=objects.ImageMeta.from_dict({"id": (spec.get("image") or {}).get("id"), "name": "img", "properties":
                                           dict((spec.get("image") or {}).get("properties") or {})}),
        project_id=spec["project_id"], user_id=spec["user_id"], num_instances=1, ignore_hosts=None,
        force_hosts=None, force_nodes=None, instance_uuid=spec["instance_uuids"][0],
        scheduler_hints={k: v if isinstance(v, list) else [v] for k, v in (spec.get("scheduler_hints") or {}).items()},
        instance_group=None)
    group = spec.get("instance_group")
    if group:
        request.instance_group = objects.InstanceGroup(uuid=group["uuid"], policy=group["policy"],
                                                       policies=[group["policy"]],
                                                       hosts=list(group.get("hosts") or []),
                                                       members=list(group.get("members") or []),
                                                       rules=dict(group.get("rules") or {}))
    return request


def _weights(handler: Any, weigher_classes: list[Any], states: list[Any], names: list[str],
             spec: Any) -> dict[str, float]:
    by_node = {s.nodename: s for s in states}
    chosen = [by_node[n] for n in names]
    weighed = handler.get_weighed_objects([cls() for cls in weigher_classes], chosen, spec)
    return {w.obj.nodename: float(w.weight) for w in weighed}


def main() -> None:
    doc = json.load(sys.stdin)
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
            out: dict[str, Any] = {"filters": {}, "weights": {}}
            for name in case["filters"]:
                filt = filter_classes[name]()
                out["filters"][name] = sorted(s.nodename for s in states if filt.host_passes(s, spec))
            for name, nodes in case["weigh"].items():
                classes = list(weigher_classes.values()) if name == "all_weighers" else [weigher_classes[name]]
                try:
                    out["weights"][name] = _weights(handler, classes, states, nodes, spec)
                except Exception as exc:  # MetricsWeigher with required=True raises on a missing metric
                    out["weights"][name] = {"error": type(exc).__name__}
            results.append(out)
    json.dump({"filters": sorted(filter_classes), "weighers": sorted(weigher_classes), "results": results},
              sys.stdout)


if __name__ == "__main__":
    main()
