"""Generated clouds and requests for the Nova parity suite, and Gantt's answers to them.

A cloud is hosts (every compute_nodes field Gantt reads), aggregates (every metadata key with a meaning, plus keys
that extra specs and image properties match) and options (every [filter_scheduler] / [metrics] / [DEFAULT]
option a compared filter or weigher reads). A request uses every field and extra-spec form those read. The same
JSON goes to ``nova_driver.py`` (Nova's objects and classes) and to Gantt (``HostReport``, ``Aggregate``,
``RequestSpec``); ``compare`` lines the answers up.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import numpy as np

from gantt import Scheduler
from gantt.compute.filters import FILTERS
from gantt.compute.request import RequestContext
from gantt.compute.weighers import WEIGHERS
from gantt.config import Config
from gantt.model import GanttError
from tests.parity import pci_cases

NOW = 1_000_000.0
ARCHES = ["x86_64", "aarch64", "ppc64le"]
HV_TYPES = ["qemu", "kvm", "ironic"]
VM_MODES = ["hvm", "exe"]
PROJECTS = ["p1", "p2", "p3"]
FLAVORS = ["m1.small", "m1.large", "gpu.xl"]
METRICS = ["cpu.percent", "cpu.frequency"]
HOST_TRAITS = ["COMPUTE_STATUS_DISABLED", "COMPUTE_IMAGE_TYPE_QCOW2", "COMPUTE_IMAGE_TYPE_RAW", "HW_ARCH_X86_64",
               "HW_ARCH_AARCH64", "COMPUTE_STORAGE_BUS_VIRTIO", "COMPUTE_GRAPHICS_MODEL_VGA", "CUSTOM_GOLD",
               "CUSTOM_SILVER"]

# Filters Gantt registers that Nova 34 no longer ships, so there is nothing to run them against: Nova removed
# AggregateCore/Ram/DiskFilter in 20.0.0 (Placement enforces allocation ratios) and AvailabilityZoneFilter in
# 27.0.0 (the map_az_to_placement_aggregate prefilter replaced it); the always-on five are Placement's query
# (resources, traits, member_of, request groups on child providers, the AZ as an aggregate), not Nova filters.
# README "Nova parity" lists them.
NO_NOVA_REFERENCE = frozenset({"AggregateCoreFilter", "AggregateRamFilter", "AggregateDiskFilter",
                               "AvailabilityZoneFilter", "ResourceFilter", "TraitsFilter", "MemberOfFilter",
                               "RequestGroupsFilter"})


def _maybe(rng: random.Random, p: float, value: Any) -> Any:
    return value if rng.random() < p else None


def _host(rng: random.Random, i: int) -> dict[str, Any]:
    vcpus = rng.choice([8, 16, 32, 64])
    memory = rng.choice([16384, 65536, 131072])
    disk = rng.choice([200, 1000, 4000])
    ratio = rng.choice([1.0, 1.5, 4.0, 16.0])
    hv = rng.choice(HV_TYPES)
    stats: dict[str, Any] = {
        "uuid": f"00000000-0000-0000-0000-{i:012d}",
        "vcpus": vcpus, "vcpus_used": rng.randrange(0, int(vcpus * ratio) + 1),
        "memory_mb": memory, "memory_mb_used": rng.randrange(0, int(memory * 1.3)),
        "local_gb": disk, "local_gb_used": rng.randrange(0, disk + 1),
        "disk_available_least": _maybe(rng, 0.5, rng.randrange(-50, disk + 100)),
        "cpu_allocation_ratio": ratio, "ram_allocation_ratio": rng.choice([1.0, 1.5]),
        "disk_allocation_ratio": rng.choice([1.0, 2.0]),
        "hypervisor_type": {"qemu": "QEMU", "kvm": "QEMU", "ironic": "ironic"}[hv],
        "hypervisor_version": rng.choice([6002000, 8002000, 9000000]),
        "hypervisor_hostname": f"n{i}",
        "cpu_info": {"arch": rng.choice(ARCHES), "vendor": rng.choice(["Intel", "AMD"]),
                     "features": rng.sample(["avx", "avx2", "sse4.2", "aes"], 2)},
        "supported_instances": [[rng.choice(ARCHES), hv, rng.choice(VM_MODES)]
                                for _ in range(rng.randrange(0, 3))],
        "host_ip": f"10.0.{rng.randrange(0, 3)}.{i % 250 + 1}",
        "num_instances": rng.randrange(0, 60), "num_io_ops": rng.randrange(0, 12),
        "failed_builds": rng.choice([0, 0, 0, 1, 3]),
        "metrics": [{"name": m, "value": round(rng.uniform(0, 100), 2), "source": "libvirt"}
                    for m in METRICS if rng.random() < 0.8],
        "stats": {"gpu": rng.choice(["a100", "none"]), "rack": f"r{rng.randrange(3)}"},
        "instances": [f"vm-{i}-{k}" for k in range(rng.randrange(0, 3))],
        "service": {"disabled": rng.random() < 0.1, "forced_down": rng.random() < 0.05},
        "traits": rng.sample(HOST_TRAITS, rng.randrange(0, 6)),
    }
    if rng.random() < 0.3:
        # Inventories as a host that also reports to Placement sends them: their reserved amounts are Placement's
        # (reserved_host_*); Nova's HostState never sees them (nova_driver builds it from the fields above).
        stats["inventories"] = {"VCPU": {"total": vcpus, "reserved": rng.choice([1, 2, 4]),
                                         "allocation_ratio": ratio},
                                "MEMORY_MB": {"total": memory, "reserved": rng.choice([512, 2048]),
                                              "allocation_ratio": stats["ram_allocation_ratio"]},
                                "DISK_GB": {"total": disk, "reserved": rng.choice([0, 10]),
                                            "allocation_ratio": stats["disk_allocation_ratio"]}}
    if hv == "ironic":
        # Nova's ironic driver reports no VCPU, RAM or disk for a node (its custom resource class instead, which
        # Nova's HostState never sees); Gantt treats an ironic node so whatever the fields say (issue 31).
        stats.update(vcpus=0, vcpus_used=0, memory_mb=0, memory_mb_used=0, local_gb=0, local_gb_used=0,
                     disk_available_least=0)
        stats.pop("inventories", None)
    return {"host": f"n{i}", "node": f"n{i}", "age": rng.choice([1, 20, 45, 120, 900]), "stats": stats,
            "aggregates": []}


def _aggregates(rng: random.Random, hosts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    keys: list[tuple[str, list[str]]] = [
        ("availability_zone", ["az1", "az2"]),
        ("filter_tenant_id", ["p1", "p2", "p1,p2"]),
        ("filter_tenant_id_x", ["p1"]),
        ("owner", ["p2"]),
        ("trait:CUSTOM_GOLD", ["required"]),
        ("trait:CUSTOM_SILVER", ["required", "forbidden"]),
        ("filter_tenant_id_2", ["p3"]),
        ("instance_type", ["m1.small", "m1.small,m1.large", "gpu.xl"]),
        ("max_io_ops_per_host", ["2", "5", "x"]),
        ("max_instances_per_host", ["10", "40"]),
        ("ssd", ["true", "false"]),
        ("gpu", ["a100"]),
        ("os_distro", ["ubuntu", "rhel"]),
        ("hw_architecture", ["x86_64", "aarch64"]),
        ("ns.os_type", ["linux", "windows"]),
        ("ram_weight_multiplier", ["2.0", "-1.0", "lots"]),
        ("cpu_weight_multiplier", ["0.5", "-3"]),
        ("disk_weight_multiplier", ["4"]),
        ("io_ops_weight_multiplier", ["-2.5"]),
        ("num_instances_weight_multiplier", ["1.5"]),
        ("hypervisor_version_weight_multiplier", ["-1"]),
        ("build_failure_weight_multiplier", ["10"]),
        ("soft_affinity_weight_multiplier", ["3"]),
        ("soft_anti_affinity_weight_multiplier", ["0.25"]),
        ("metrics_weight_multiplier", ["-1", "2"]),
    ]
    out = []
    for agg_id in range(1, rng.randrange(2, 6)):
        members = rng.sample(hosts, rng.randrange(1, max(2, len(hosts) // 2)))
        metadata = {key: rng.choice(values) for key, values in rng.sample(keys, rng.randrange(1, 5))}
        for host in members:
            host["aggregates"].append(agg_id)
        out.append({"id": agg_id, "uuid": f"aaaaaaaa-0000-0000-0000-{agg_id:012d}", "name": f"agg{agg_id}",
                    "hosts": [h["host"] for h in members],
                    "metadata": metadata})
    return out


def _options(rng: random.Random, hosts: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    names = [h["host"] for h in hosts]
    fs: dict[str, Any] = {
        "isolated_hosts": rng.sample(names, rng.randrange(0, 3)),
        "isolated_images": rng.sample(["img-1", "img-2"], rng.randrange(0, 2)),
        "restrict_isolated_hosts_to_isolated_images": rng.random() < 0.5,
        "max_io_ops_per_host": rng.choice([4, 8]),
        "max_instances_per_host": rng.choice([20, 50]),
        "aggregate_image_properties_isolation_namespace": rng.choice([None, "ns"]),
        "aggregate_image_properties_isolation_separator": rng.choice([".", ":"]),
    }
    for name in ["ram", "cpu", "disk", "io_ops", "num_instances", "hypervisor_version", "build_failure",
                 "soft_affinity", "soft_anti_affinity"]:
        choices = [1.0, 2.5, 0.0] if name.startswith("soft") else [1.0, -1.0, 2.5, 0.0]  # Nova: soft ones >= 0
        fs[f"{name}_weight_multiplier"] = rng.choice([*choices, 1000000.0 if name == "build_failure" else 1.0])
    metrics = {"weight_setting": [f"{m}={rng.choice([1.0, -0.5, 2.0])}" for m in rng.sample(METRICS, 2)],
               "weight_multiplier": rng.choice([1.0, -1.0]), "weight_of_unavailable": -10000.0,
               "required": rng.random() < 0.2}
    scheduler = {name: rng.random() < 0.5 for name in (
        "limit_tenants_to_placement_aggregate", "placement_aggregate_required_for_tenants",
        "enable_isolated_aggregate_filtering", "query_placement_for_image_type_support", "image_metadata_prefilter")}
    return {"filter_scheduler": fs, "scheduler": scheduler, "metrics": metrics,
            "DEFAULT": {"service_down_time": 60}}


EXTRA_SPECS = [
    ("capabilities:hypervisor_type", ["QEMU", "s== QEMU", "<in> iron"]),
    ("capabilities:cpu_info:arch", ["x86_64", "<or> aarch64 <or> ppc64le"]),
    ("capabilities:vcpus", [">= 16", "<= 8"]),
    ("capabilities:free_ram_mb", [">= 4096"]),
    ("capabilities:hypervisor_version", [">= 8002000"]),
    ("aggregate_instance_extra_specs:ssd", ["true", "<in> tr"]),
    ("ssd", ["true"]),
    ("gpu", ["a100", "s!= a100"]),
    ("hw:cpu_policy", ["shared"]),
    ("trait:CUSTOM_GOLD", ["required"]),
    ("trait:CUSTOM_SILVER", ["required", "forbidden"]),
]
IMAGE_PROPS = [
    ("hw_architecture", ["x86_64", "aarch64"]),
    ("img_hv_type", ["qemu", "kvm", "ironic"]),
    ("hw_vm_mode", ["hvm", "exe"]),
    ("img_hv_requested_version", [">=8002000", "<6003000"]),
    ("os_distro", ["ubuntu", "rhel"]),
    ("hw_disk_bus", ["virtio", "scsi"]),
    ("hw_video_model", ["vga", "virtio"]),
]
# Deliberate difference (README "Nova parity"): Nova's HostState.host_ip is a netaddr.IPAddress, which never
# equals the string a JsonFilter query names, so Nova passes no host on this query; Gantt compares the address
# as the text it was reported as.
HOST_IP_QUERY = '["in", "$host_ip", "10.0.1.5", "10.0.0.7"]'
QUERIES = ['[">=", "$free_ram_mb", 4096]', '["and", [">=", "$vcpus_total", 16], ["<", "$num_instances", 30]]',
           '["or", ["=", "$hypervisor_type", "QEMU"], ["not", ["<", "$free_disk_mb", 100000]]]', HOST_IP_QUERY]


def documented_difference(c: dict[str, Any], spec: dict[str, Any], name: str, ours: Any, nova: Any) -> bool:
    """True when ``ours`` and ``nova`` differ exactly as a README-listed deliberate difference says."""
    zone = spec.get("availability_zone")
    if name == "AvailabilityZoneRequestFilter" and zone and \
            not any(a["metadata"].get("availability_zone") == zone for a in c["aggregates"]):
        # Nova's map_az_to_placement_aggregate adds no constraint for a zone no aggregate names (its API has
        # refused unknown zones already, and the default zone then matches every host); Gantt keeps the
        # default zone to the hosts in no zone and an unknown zone to none.
        zoned = {h for a in c["aggregates"] if "availability_zone" in a["metadata"] for h in a["hosts"]}
        wanted = sorted(h["node"] for h in c["hosts"] if h["host"] not in zoned) if zone == "nova" else []
        return nova == sorted(h["node"] for h in c["hosts"]) and ours == wanted
    if name == "JsonFilter" and spec["scheduler_hints"].get("query") == HOST_IP_QUERY:
        wanted = {"10.0.1.5", "10.0.0.7"}
        return nova == [] and ours == sorted(h["node"] for h in c["hosts"] if h["stats"]["host_ip"] in wanted)
    return False


def _request(rng: random.Random, hosts: list[dict[str, Any]], k: int) -> dict[str, Any]:
    extra = {key: rng.choice(values) for key, values in rng.sample(EXTRA_SPECS, rng.randrange(0, 3))}
    props = {key: rng.choice(values) for key, values in rng.sample(IMAGE_PROPS, rng.randrange(0, 3))}
    all_vms = [vm for h in hosts for vm in h["stats"]["instances"]]
    hints: dict[str, Any] = {}
    if all_vms and rng.random() < 0.3:
        hints[rng.choice(["same_host", "different_host"])] = rng.sample(all_vms, min(len(all_vms), 2))
    if rng.random() < 0.3:
        hints["query"] = rng.choice(QUERIES)
    if rng.random() < 0.3:
        hints["build_near_host_ip"] = f"10.0.{rng.randrange(0, 3)}.9"
        hints["cidr"] = rng.choice(["/24", "/16", "/30"])
    spec: dict[str, Any] = {
        "flavor": {"name": rng.choice(FLAVORS), "vcpus": 1, "memory_mb": 256, "root_gb": 1, "extra_specs": extra},
        "image": {"id": rng.choice(["img-1", "img-2", "img-3"]), "properties": props,
                  "disk_format": rng.choice(["qcow2", "raw", "iso", "vdi"])},
        "project_id": rng.choice(PROJECTS), "user_id": "u1", "instance_uuids": [f"req-{k}"],
        "scheduler_hints": hints,
    }
    if rng.random() < 0.4:
        spec["availability_zone"] = rng.choice(["az1", "az2", "nova", "az9"])
    if rng.random() < 0.4:
        members = rng.sample(all_vms, min(len(all_vms), rng.randrange(0, 4)))
        group_hosts = sorted({h["host"] for h in hosts for vm in h["stats"]["instances"] if vm in members})
        spec["instance_group"] = {"uuid": f"g{k}", "policy": rng.choice(["affinity", "anti-affinity",
                                                                         "soft-affinity", "soft-anti-affinity"]),
                                  "members": members, "hosts": group_hosts,
                                  "rules": {"max_server_per_host": rng.choice([1, 2])} if rng.random() < 0.3 else {}}
        spec["scheduler_hints"]["group"] = f"g{k}"
        _stale_group(random.Random(f"group-{k}-{len(hosts)}"), hosts, spec, members)
    return spec


def _stale_group(rng: random.Random, hosts: list[dict[str, Any]], spec: dict[str, Any], members: list[str]) -> None:
    """The group as Nova's request spec may hold it: ``hosts`` read before a member moved or was deleted (a host
    that runs no member listed, one that does left out), and the request for a member itself (a move). Its own
    random stream, so that the cases drawn before it was added stay the same."""
    group = spec["instance_group"]
    if rng.random() < 0.5:
        group["hosts"] = sorted({*group["hosts"], rng.choice(hosts)["host"]})
    if group["hosts"] and rng.random() < 0.3:
        group["hosts"].remove(rng.choice(group["hosts"]))
    if members and rng.random() < 0.3:
        spec["instance_uuids"] = [rng.choice(members)]


def cloud(seed: int, requests: int) -> dict[str, Any]:
    rng = random.Random(seed)
    hosts = [_host(rng, i) for i in range(rng.randrange(6, 14))]
    aggregates = _aggregates(rng, hosts)
    out = {"seed": seed, "hosts": hosts, "aggregates": aggregates, "options": _options(rng, hosts),
           "requests": [{"spec": _request(rng, hosts, k)} for k in range(requests)]}
    pci_cases.decorate(seed, hosts, out["options"], out["requests"])
    return out


# ------------------------------------------------------------------------------------------------ gantt side


def _config(options: dict[str, dict[str, Any]], weighers: list[str]) -> Config:
    fs = {k: v for k, v in options["filter_scheduler"].items() if v is not None}
    fs.update({"enabled_filters": ["AllHostsFilter"], "weight_classes": weighers})
    return Config.from_dict({"filter_scheduler": fs, "scheduler": options["scheduler"], "metrics": options["metrics"],
                             "DEFAULT": options["DEFAULT"], "gantt": {"seed": 1}, "pci": options.get("pci", {})})


def _scheduler(c: dict[str, Any], weighers: list[str]) -> Scheduler:
    sched = Scheduler(_config(c["options"], weighers), clock=lambda: NOW)
    for host in c["hosts"]:
        stats = {k: v for k, v in host["stats"].items() if v is not None}
        sched.report({"host": host["host"], "stats": stats, "reported_at": NOW - host["age"]})
    for agg in c["aggregates"]:
        sched.update_aggregate(agg)
    return sched


def gantt_answers(c: dict[str, Any], filters: list[str], weighers: list[str]) -> list[dict[str, Any]]:
    """Per request: the nodes each filter passes, and per weigher (and all of them) the weight of each
    candidate. Fills in each request's ``filters`` and ``weigh`` (the node sets Nova is to weigh)."""
    base = _scheduler(c, ["nova.scheduler.weights.all_weighers"])
    table = base.table
    config = base.config
    per_weigher = {name: _scheduler(c, [name]) for name in weighers}
    answers = []
    for case in c["requests"]:
        spec = case["spec"]
        ctx = RequestContext.build(_decode(spec), config, NOW)
        out: dict[str, Any] = {"filters": {}, "weights": {}}
        for name in filters:
            mask = FILTERS[name](config).mask(table, ctx)
            rows = range(table.n) if mask is None else np.flatnonzero(mask[:table.n]).tolist()
            out["filters"][name] = sorted(table.node_names[r] for r in rows)
        case["filters"] = list(filters)
        case["weigh"] = {}
        for name, sched in [*per_weigher.items(), ("all_weighers", base)]:
            nodes = [cand.nodename for cand in _unweighed(sched).candidates(spec)]
            case["weigh"][name] = nodes
            try:
                found = sched.candidates(spec)
            except GanttError as exc:  # MetricsWeigher with [metrics] required and a metric missing: as Nova
                out["weights"][name] = {"error": type(exc).__name__}
                continue
            out["weights"][name] = {cand.nodename: (cand.weights.get(name, 0.0) if name != "all_weighers"
                                                    else cand.weight) for cand in found}
        answers.append(out)
    return answers


def _unweighed(sched: Scheduler) -> Scheduler:
    """The same scheduler with no weighers: the candidate set, even where a weigher would raise."""
    engine = sched.engine
    clone = Scheduler.__new__(Scheduler)
    clone.__dict__.update(sched.__dict__)
    clone.engine = type(engine).__new__(type(engine))
    clone.engine.__dict__.update(engine.__dict__)
    clone.engine.ranker = copy.copy(engine.ranker)
    clone.engine.ranker.weighers = []
    return clone


def _decode(spec: dict[str, Any]) -> Any:
    from gantt.model import RequestSpec, decode

    return decode(spec, RequestSpec)


def registered() -> tuple[list[str], list[str]]:
    return sorted(FILTERS), sorted(WEIGHERS)
