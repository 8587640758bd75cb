"""The synthetic cloud the in-process benchmarks decide in: hypervisors of three sizes, multi-node bare-metal hosts,
availability zones, tenant-isolation / flavor-affinity / ratio / extra-spec aggregates, a mixed request stream and
the config (Nova's default filters and the aggregate ones); the HTTP benchmarks' uniform cloud (``host_stats``,
``FLAVOR``); and the helpers every in-process benchmark times decisions with."""

from __future__ import annotations

import random
from collections import deque
from typing import Any

import msgspec
import numpy as np

from gantt.compute.engine import Engine
from gantt.compute.state import HostTable
from gantt.config import NOVA_DEFAULT_FILTERS, Config
from gantt.model import Aggregate, HostReport, HostStats, RequestSpec, Selection

AGGREGATE_FILTERS = [
    "AvailabilityZoneFilter",
    "AggregateInstanceExtraSpecsFilter",
    "AggregateMultiTenancyIsolation",
    "AggregateTypeAffinityFilter",
    "AggregateCoreFilter",
    "AggregateRamFilter",
    "AggregateDiskFilter",
]
WEIGHERS = ["RAMWeigher", "CPUWeigher", "DiskWeigher", "IoOpsWeigher"]

# (share of hosts, vcpus, memory_mb, local_gb): a mix of small, medium and large hypervisors
# The HTTP benchmarks' cloud (bench/http_api.py, mixed.py, ...): identical hosts, one small flavor.
FLAVOR = {"name": "m1.small", "vcpus": 1, "memory_mb": 512, "root_gb": 1}
HOST_VCPUS, HOST_RAM_MB, HOST_DISK_GB = 32, 131072, 2000


def host_stats(i: int, now: float | None = None) -> dict[str, Any]:
    """Host ``i``'s report in the HTTP benchmarks' cloud (``now`` unused: the report carries no time)."""
    return {"vcpus": HOST_VCPUS, "vcpus_used": 0, "memory_mb": HOST_RAM_MB, "memory_mb_used": 0,
            "local_gb": HOST_DISK_GB, "local_gb_used": 0, "hypervisor_type": "QEMU", "hypervisor_version": 8002000,
            "cpu_allocation_ratio": 1.0, "ram_allocation_ratio": 1.0, "disk_allocation_ratio": 1.0,
            "supported_instances": [["x86_64", "kvm", "hvm"]], "num_instances": 0, "num_io_ops": 0,
            "host_ip": f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}"}


HOST_SIZES = [(0.5, 32, 131072, 1000), (0.35, 64, 262144, 2000), (0.15, 128, 524288, 4000)]
BAREMETAL_SHARE = 0.05  # of the nodes: ironic hosts with 8 nodes each
BAREMETAL_NODES = 8
ZONES = 4
FLAVORS = [
    {"name": "m1.small", "vcpus": 1, "memory_mb": 2048, "root_gb": 20},
    {"name": "m1.medium", "vcpus": 2, "memory_mb": 4096, "root_gb": 40},
    {"name": "m1.large", "vcpus": 4, "memory_mb": 8192, "root_gb": 80},
    {"name": "m1.xlarge", "vcpus": 8, "memory_mb": 16384, "root_gb": 160},
    {"name": "m1.large.ssd", "vcpus": 4, "memory_mb": 8192, "root_gb": 80,
     "extra_specs": {"aggregate_instance_extra_specs:ssd": "true"}},
    {"name": "bm.node", "vcpus": 16, "memory_mb": 65536, "root_gb": 400,
     "extra_specs": {"resources:CUSTOM_BAREMETAL": "1", "resources:VCPU": "0", "resources:MEMORY_MB": "0",
                     "resources:DISK_GB": "0"}},
]


def _stats(rng: random.Random, vcpus: int, memory_mb: int, local_gb: int, baremetal: bool) -> HostStats:
    inventories = None
    if baremetal:
        inventories = {"CUSTOM_BAREMETAL": {"total": 1, "max_unit": 1}}
    return msgspec.convert({
        "uuid": f"{rng.getrandbits(128):032x}",
        "vcpus": vcpus, "vcpus_used": 0 if baremetal else rng.randrange(0, vcpus // 4 + 1),
        "memory_mb": memory_mb, "memory_mb_used": 0 if baremetal else rng.randrange(0, memory_mb // 4, 512),
        "local_gb": local_gb, "local_gb_used": 0 if baremetal else rng.randrange(0, local_gb // 4),
        "cpu_allocation_ratio": 1.0 if baremetal else 4.0, "ram_allocation_ratio": 1.0 if baremetal else 1.5,
        "disk_allocation_ratio": 1.0,
        "hypervisor_type": "ironic" if baremetal else "QEMU",
        "hypervisor_version": 1 if baremetal else rng.choice([6002000, 8002000, 9000000]),
        "cpu_info": {"arch": "x86_64", "vendor": "Intel", "model": "Cascadelake-Server"},
        "supported_instances": [["x86_64", "baremetal" if baremetal else "kvm", "hvm"]],
        "host_ip": f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}",
        "num_io_ops": rng.randrange(0, 4), "num_instances": rng.randrange(0, 20),
        "service": {"disabled": False}, "inventories": inventories,
        "traits": ["HW_CPU_X86_AVX2", "COMPUTE_STATUS_ENABLED"] if not baremetal else ["CUSTOM_BM"],
    }, HostStats)


def build_reports(hosts: int, seed: int) -> list[HostReport]:
    """``hosts`` node reports: VM hypervisors of three sizes, and bare-metal hosts of several nodes each."""
    rng = random.Random(seed)
    reports: list[HostReport] = []
    n_bm_nodes = int(hosts * BAREMETAL_SHARE) // BAREMETAL_NODES * BAREMETAL_NODES
    for b in range(n_bm_nodes // BAREMETAL_NODES):
        for k in range(BAREMETAL_NODES):
            reports.append(HostReport(host=f"ironic-{b}", node=f"bm-{b}-{k}",
                                      stats=_stats(rng, 32, 131072, 480, baremetal=True)))
    weights = [s[0] for s in HOST_SIZES]
    for i in range(hosts - n_bm_nodes):
        _, vcpus, mem, disk = rng.choices(HOST_SIZES, weights)[0]
        reports.append(HostReport(host=f"cmp-{i:06d}", stats=_stats(rng, vcpus, mem, disk, baremetal=False)))
    return reports


def build_aggregates(reports: list[HostReport], seed: int) -> list[Aggregate]:
    """Zones over every host, plus isolation, flavor-affinity, ratio and extra-spec aggregates on slices."""
    rng = random.Random(seed + 1)
    names = sorted({r.host for r in reports})
    aggs: list[Aggregate] = []
    for z in range(ZONES):
        aggs.append(Aggregate(id=f"az{z}", name=f"az{z}", hosts=names[z::ZONES],
                              metadata={"availability_zone": f"az{z}"}))
    vm_hosts = [h for h in names if h.startswith("cmp-")]
    sample = rng.sample(vm_hosts, len(vm_hosts))
    slice_ = max(1, len(vm_hosts) // 20)
    aggs.append(Aggregate(id="tenant-a", hosts=sample[:slice_], metadata={"filter_tenant_id": "proj-a"}))
    aggs.append(Aggregate(id="large-only", hosts=sample[slice_: 2 * slice_],
                          metadata={"instance_type": "m1.large,m1.xlarge"}))
    aggs.append(Aggregate(id="dense", hosts=sample[2 * slice_: 4 * slice_],
                          metadata={"cpu_allocation_ratio": "2.0", "ram_allocation_ratio": "1.0",
                                    "disk_allocation_ratio": "1.0"}))
    aggs.append(Aggregate(id="ssd", hosts=sample[4 * slice_: 7 * slice_], metadata={"ssd": "true"}))
    aggs.append(Aggregate(id="spread", hosts=sample[7 * slice_: 9 * slice_],
                          metadata={"ram_weight_multiplier": "2.0"}))
    return aggs


def build_requests(count: int, seed: int) -> list[RequestSpec]:
    """A mixed stream: several flavors, a third pinned to a zone, one in ten multi-instance, some tenants."""
    rng = random.Random(seed + 2)
    specs: list[RequestSpec] = []
    for _ in range(count):
        flavor = rng.choices(FLAVORS, [30, 30, 15, 8, 10, 2])[0]
        body: dict[str, Any] = {"flavor": flavor, "project_id": rng.choice(["proj-a", "proj-b", "proj-c"]),
                                "user_id": "bench", "image": {"id": "img", "properties": {}}}
        if rng.random() < 0.33:
            body["availability_zone"] = f"az{rng.randrange(ZONES)}"
        if rng.random() < 0.1:
            body["num_instances"] = rng.randint(2, 3)
        specs.append(msgspec.convert(body, RequestSpec))
    return specs


def make_config(seed: int) -> tuple[Config, list[str], list[str]]:
    """Nova's default filters plus the aggregate filters that are registered; the four load weighers."""
    from gantt.compute import filters as filter_pkg
    wanted = [*NOVA_DEFAULT_FILTERS, *AGGREGATE_FILTERS]
    enabled = [f for f in wanted if f in filter_pkg.FILTERS]
    missing = [f for f in wanted if f not in filter_pkg.FILTERS]
    config = Config.from_dict({"filter_scheduler": {"enabled_filters": enabled, "weight_classes": WEIGHERS},
                               "gantt": {"seed": seed}})
    return config, enabled, missing


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def hold_claims(engine: Engine, live: deque[str], answer: list[list[Selection]], limit: int) -> None:
    """Keep the consumers just placed, releasing the oldest beyond ``limit`` so the cloud fills and drains as a
    real one does (``limit`` 0: release every one)."""
    for selections in answer:
        live.append(selections[0].consumer_uuid or "")
    while len(live) > limit:
        engine.release(live.popleft())


def load_table(reports: list[HostReport], aggs: list[Aggregate], now: float) -> HostTable:
    """A fresh table holding ``reports`` and ``aggs``, its clock stopped at ``now``: loaded as a replica loads its
    store's snapshot (``gantt.replication.audit.load_snapshot``), the aggregates first, so that each node's
    aggregate set is known when its row is written rather than written again for every host an aggregate names."""
    table = HostTable(clock=lambda: now, initial_rows=len(reports))
    for agg in aggs:
        table.update_aggregate(agg)
    table.load(reports, now=now)
    return table
