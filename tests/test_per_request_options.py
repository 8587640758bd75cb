"""Nova reads some of its options at each request, not once at start (``gantt.config.per_request.PER_REQUEST``):
Nova's functional tests set them with ``self.flags`` after the scheduler started, and Gantt's Nova seam follows
them from nova.conf (``gantt.nova.conf.RequestOptions``). Here, for every one of them: a scheduler that decided
with the old value, its Config retuned (``retune``, then ``Engine.retune``), decides exactly as a scheduler started
with the new value, on generated clouds (the parity suites'), and differently from before (the case cannot pass
for want of an effect). The options Gantt refuses unless at Nova's default are refused by name, nothing set.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from gantt import Scheduler
from gantt.config import Config
from gantt.config.per_request import PER_REQUEST, retune
from gantt.model import GanttError, InvalidRequest
from tests.parity import cases, numa_cases, pci_cases

NOW = cases.NOW
FILTERS = ["ComputeFilter", "IoOpsFilter", "AggregateIoOpsFilter", "NumInstancesFilter",
           "AggregateNumInstancesFilter", "IsolatedHostsFilter", "AggregateImagePropertiesIsolation",
           "ImagePropertiesFilter", "ServerGroupAntiAffinityFilter", "ServerGroupAffinityFilter"]
HOSTS = [f"n{i}" for i in range(20)]

# (section, option) -> (the cloud it shows on, options the scheduler starts with, the value it is changed to)
CHANGES: dict[tuple[str, str], tuple[str, dict[str, dict[str, Any]], Any]] = {
    ("filter_scheduler", "host_subset_size"): ("main", {}, 4),
    # every weight tied (the one weigher gives every node 0): the shuffle decides
    ("filter_scheduler", "shuffle_best_same_weighed_hosts"): (
        "main", {"filter_scheduler": {"weight_classes": ["ServerGroupSoftAffinityWeigher"]}}, True),
    ("filter_scheduler", "max_io_ops_per_host"): ("main", {}, 2),
    ("filter_scheduler", "max_instances_per_host"): ("main", {}, 5),
    ("filter_scheduler", "isolated_hosts"): ("main", {"filter_scheduler": {"isolated_hosts": []}}, HOSTS[:4]),
    ("filter_scheduler", "isolated_images"): (
        "main", {"filter_scheduler": {"isolated_hosts": HOSTS[:4], "isolated_images": []}}, ["img-1"]),
    ("filter_scheduler", "restrict_isolated_hosts_to_isolated_images"): (
        "main", {"filter_scheduler": {"isolated_hosts": HOSTS[:4], "isolated_images": [],
                                      "restrict_isolated_hosts_to_isolated_images": True}}, False),
    ("filter_scheduler", "aggregate_image_properties_isolation_namespace"): (
        "main", {"filter_scheduler": {"aggregate_image_properties_isolation_namespace": None}}, "ns"),
    # "os" and "_" make the prefix os_, which the aggregates' os_distro key has; "os." matches no key
    ("filter_scheduler", "aggregate_image_properties_isolation_separator"): (
        "main", {"filter_scheduler": {"aggregate_image_properties_isolation_namespace": "os",
                                      "aggregate_image_properties_isolation_separator": "."}}, "_"),
    ("filter_scheduler", "image_properties_default_architecture"): ("main", {}, "aarch64"),
    **{("filter_scheduler", f"{name}_weight_multiplier"): ("main", {"filter_scheduler": {
        f"{name}_weight_multiplier": 1.0}}, 7.5) for name in (
        "ram", "cpu", "disk", "io_ops", "num_instances", "hypervisor_version", "build_failure", "soft_affinity",
        "soft_anti_affinity", "pci")},
    ("scheduler", "max_attempts"): ("main", {"scheduler": {"max_attempts": 2}}, 6),
    **{("scheduler", name): ("main", {"scheduler": {name: False}}, True) for name in (
        "limit_tenants_to_placement_aggregate", "enable_isolated_aggregate_filtering",
        "query_placement_for_image_type_support", "image_metadata_prefilter")},
    ("scheduler", "placement_aggregate_required_for_tenants"): (
        "main", {"scheduler": {"limit_tenants_to_placement_aggregate": True,
                               "placement_aggregate_required_for_tenants": False}}, True),
    ("metrics", "weight_multiplier"): ("main", {"metrics": {"weight_multiplier": 1.0}}, -4.0),
    ("metrics", "required"): ("main", {}, True),
    ("metrics", "weight_of_unavailable"): ("main", {}, -5.0),
    ("compute", "packing_host_numa_cells_allocation_strategy"): (
        "numa", {"compute": {"packing_host_numa_cells_allocation_strategy": False}}, True),
    ("workarounds", "disable_fallback_pcpu_query"): ("numa", {}, True),
    # the cloud's own aliases, each naming another device: the flavors' pci_passthrough:alias ask for other pools
    ("pci", "alias"): ("pci", {}, lambda cloud: _other_devices(cloud["options"]["pci"]["alias"])),
}
# Nova reads them at each request; Gantt does not implement them, so a change is refused (as at start)
REFUSED = {("filter_scheduler", "image_props_weight_multiplier"): 1.0,
           ("scheduler", "query_placement_for_routed_network_aggregates"): True,
           ("scheduler", "max_placement_results"): 10}


def _other_devices(entries: list[str]) -> list[str]:
    """``[pci] alias`` with the same names, device types and policies, each entry naming the next device."""
    out = []
    for text in entries:
        entry = json.loads(text)
        at = pci_cases.DEVICES.index((entry["vendor_id"].lower(), entry["product_id"].lower()))
        entry["vendor_id"], entry["product_id"] = pci_cases.DEVICES[(at + 1) % len(pci_cases.DEVICES)]
        out.append(json.dumps(entry))
    return out


def _cloud(kind: str, seed: int) -> dict[str, Any]:
    """The parity suites' clouds; the filters' one with every node up, enabled and empty, so that most requests
    find several candidates (it is made to try each filter alone, and most of its requests pass none of them)."""
    if kind == "numa":
        doc = numa_cases.cases(seed, 12, 40)
        return {**doc, "requests": [{"spec": spec} for spec in doc["requests"]]}
    cloud = cases.cloud(seed, 40)
    for host in cloud["hosts"]:
        stats = host["stats"]
        stats.update(vcpus_used=0, memory_mb_used=0, local_gb_used=0, disk_available_least=None,
                     service={"disabled": False, "forced_down": False},
                     traits=[t for t in stats["traits"] if t != "COMPUTE_STATUS_DISABLED"])
        stats.pop("inventories", None)
        if stats["hypervisor_type"] == "ironic":
            stats.update(hypervisor_type="QEMU", vcpus=16, memory_mb=65536, local_gb=1000)
        host["age"] = 1
    # an aggregate every cloud has, whose metadata AggregateImagePropertiesIsolation (os_distro) and
    # enable_isolated_aggregate_filtering (a required trait) read
    cloud["aggregates"].append({"id": 90, "uuid": "aaaaaaaa-0000-0000-0000-000000000090", "name": "gold",
                                "hosts": ["n0", "n1"],
                                "metadata": {"os_distro": "ubuntu", "trait:CUSTOM_GOLD": "required"}})
    for case in cloud["requests"]:
        spec = case["spec"]
        spec.pop("availability_zone", None)  # (most of its zones hold few hosts, or none)
        # no PCI asked (the claim would want devices no filter here looks for) but in the PCI cloud, the flavors'
        # only; the nodes keep theirs (PCIWeigher)
        spec.pop("pci_requests", None)
        if kind != "pci":
            spec["flavor"]["extra_specs"].pop("pci_passthrough:alias", None)
    return cloud


def _options(kind: str, cloud: dict[str, Any], start: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    if kind == "numa":
        options: dict[str, dict[str, Any]] = {"filter_scheduler": {"enabled_filters": ["NUMATopologyFilter"]},
                                              "compute": dict(cloud["options"]["compute"])}
    else:
        given = cloud["options"]
        options = {"filter_scheduler": {k: v for k, v in given["filter_scheduler"].items() if v is not None},
                   "scheduler": dict.fromkeys(given["scheduler"], False), "DEFAULT": dict(given["DEFAULT"]),
                   # a candidate without a metric the weigher needs fails the whole request: not by default here
                   "metrics": {**given["metrics"], "required": False}, "pci": given.get("pci", {})}
        # room for most nodes (the cases that change these lower them)
        filters = FILTERS + (["PciPassthroughFilter"] if kind == "pci" else [])
        options["filter_scheduler"].update(enabled_filters=filters, max_io_ops_per_host=16, max_instances_per_host=100)
    for section, values in start.items():
        options.setdefault(section, {}).update(copy.deepcopy(values))
    return {**options, "gantt": {"seed": 1}}


def _scheduler(cloud: dict[str, Any], options: dict[str, dict[str, Any]]) -> Scheduler:
    sched = Scheduler(Config.from_dict(copy.deepcopy(options)), clock=lambda: NOW)
    for host in cloud["hosts"]:
        stats = {k: v for k, v in host["stats"].items() if v is not None}
        sched.report({"host": host["host"], "stats": stats, "reported_at": NOW - host["age"]})
    for agg in cloud.get("aggregates", []):
        sched.update_aggregate(agg)
    return sched


def _ranked(sched: Scheduler, cloud: dict[str, Any]) -> list[Any]:
    """Per request: the candidates and their weights (a dry run), or the error."""
    out: list[Any] = []
    for case in cloud["requests"]:
        try:
            out.append([(c.nodename, round(c.weight, 9)) for c in sched.candidates(case["spec"])])
        except GanttError as exc:
            out.append(f"{type(exc).__name__}: {exc.message}")
    return out


def _placed(sched: Scheduler, cloud: dict[str, Any]) -> list[Any]:
    """Per request, in turn, each claiming: the chosen node and its alternates, and the NUMA cells it holds."""
    sched.engine.order.rng.seed(7)
    out: list[Any] = []
    for case in cloud["requests"]:
        try:
            [choices] = sched.select_destinations(case["spec"])
        except GanttError as exc:
            out.append(type(exc).__name__)
            continue
        held = sched.table.allocation(choices[0].consumer_uuid or "")
        cells = sorted(c.cell for c in held.numa) if held is not None and held.numa else []
        out.append(([s.nodename for s in choices], cells))
    return out


def test_every_option_nova_reads_per_request_is_tried() -> None:
    assert set(CHANGES) | set(REFUSED) == {(s, n) for s, names in PER_REQUEST.items() for n in names}


@pytest.mark.parametrize("option", sorted(CHANGES), ids=lambda o: f"{o[0]}.{o[1]}")
def test_a_retuned_scheduler_decides_as_one_started_with_the_option(option: tuple[str, str]) -> None:
    section, name = option
    kind, start, value = CHANGES[option]
    seen_effect = False
    for seed in range(3):
        cloud = _cloud(kind, seed)
        before = _options(kind, cloud, start)
        changed = value(cloud) if callable(value) else value
        after = copy.deepcopy(before)
        after.setdefault(section, {})[name] = changed
        running = _scheduler(cloud, before)
        old = (_ranked(running, cloud), _placed(_scheduler(cloud, before), cloud))  # masks and memos kept
        assert retune(running.config, {section: {name: changed}}) == [f"{section}.{name}"]
        running.engine.retune()
        fresh = _scheduler(cloud, after)
        new = (_ranked(fresh, cloud), _placed(fresh, cloud))
        assert (_ranked(running, cloud), _placed(running, cloud)) == new, seed
        seen_effect = seen_effect or new != old
    assert seen_effect, "the change made no difference on these clouds: the case proves nothing"


@pytest.mark.parametrize("option", sorted(REFUSED), ids=lambda o: f"{o[0]}.{o[1]}")
def test_an_option_gantt_cannot_honour_is_refused_by_name_and_nothing_set(option: tuple[str, str]) -> None:
    section, name = option
    config = Config()
    with pytest.raises(InvalidRequest) as err:
        # an honoured change beside it is not set either
        retune(config, {"filter_scheduler": {"host_subset_size": 3}, section: {name: REFUSED[option]}})
    assert err.value.field == f"{section}.{name}" and name in err.value.message
    assert config == Config()


def test_values_out_of_novas_bounds_are_refused_and_an_unchanged_value_changes_nothing() -> None:
    config = Config()
    for section, name, value in (("filter_scheduler", "host_subset_size", 0),
                                 ("filter_scheduler", "ram_weight_multiplier", float("nan")),
                                 ("filter_scheduler", "soft_affinity_weight_multiplier", -1.0),
                                 ("filter_scheduler", "image_properties_default_architecture", "vax"),
                                 ("scheduler", "max_attempts", 0), ("metrics", "weight_multiplier", "x"),
                                 ("filter_scheduler", "enabled_filterz", [])):
        with pytest.raises(InvalidRequest) as err:
            retune(config, {section: {name: value}})
        assert err.value.field == f"{section}.{name}", err.value.message
    assert config == Config()
    assert retune(config, {"filter_scheduler": {"host_subset_size": 1, "isolated_hosts": ()}}) == []
