"""The prose of the OpenAPI document: an ``operationId``, a tag and an example for every operation, and a
description for every property of every schema. ``annotate`` adds them to the document
``gantt.service.openapi.document`` builds.

The examples are built from the wire types themselves (``msgspec.to_builtins`` of real Structs), so that an
example cannot drift from the schema it illustrates.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec

from gantt.model import (
    Aggregate,
    Candidate,
    CapacityAnswer,
    CapacityQuestion,
    Displaced,
    DisplacedShape,
    Explanation,
    FilterStep,
    Flavor,
    HostStats,
    Inventory,
    NodeRoom,
    RequestCapacity,
    RequestSpec,
    Selection,
    Without,
)
from gantt.model.activity import (
    ClassUsage,
    Decision,
    HostUsage,
    Overview,
    Pick,
    Placed,
    RecentAllocation,
    Refusal,
    ZoneHosts,
)
from gantt.service.schemas import (
    AllocationList,
    AllocationView,
    Candidates,
    Health,
    HostInfo,
    HostList,
    InventoryView,
    Link,
    ReportBatchIn,
    ReportIn,
    Selections,
    Written,
    versions,
)

TAGS = [
    {"name": "service", "description": "Version discovery, health, metrics and this document"},
    {"name": "hosts", "description": "Compute nodes: their reports, operator changes, the instances they run"},
    {"name": "aggregates", "description": "Host aggregates (zones, tenant isolation, per-aggregate options)"},
    {"name": "scheduling", "description": "Deciding: claim a node per instance, or rank candidates (dry run)"},
    {"name": "allocations", "description": "What consumers hold, releases, and moves (confirm or revert)"},
]

# (path, method) -> (operationId, tag): the ids are the client library's method names where it has one.
OPERATIONS: dict[tuple[str, str], tuple[str, str]] = {
    ("/", "get"): ("versions", "service"),
    ("/health", "get"): ("health", "service"),
    ("/metrics", "get"): ("metrics", "service"),
    ("/openapi.json", "get"): ("openapi", "service"),
    ("/v1/resource-stats", "post"): ("update_resource_stats", "hosts"),
    ("/v1/resource-stats/batch", "post"): ("update_resource_stats_many", "hosts"),
    ("/v1/hosts", "get"): ("hosts", "hosts"),
    ("/v1/hosts/{host}", "get"): ("host", "hosts"),
    ("/v1/hosts/{host}", "patch"): ("update_host", "hosts"),
    ("/v1/hosts/{host}", "delete"): ("delete_host", "hosts"),
    ("/v1/aggregates", "get"): ("aggregates", "aggregates"),
    ("/v1/aggregates/{id}", "get"): ("aggregate", "aggregates"),
    ("/v1/aggregates/{id}", "put"): ("update_aggregate", "aggregates"),
    ("/v1/aggregates/{id}", "delete"): ("delete_aggregate", "aggregates"),
    ("/v1/select_destinations", "post"): ("select_destinations", "scheduling"),
    ("/v1/candidates", "post"): ("candidates", "scheduling"),
    ("/v1/capacity", "post"): ("capacity", "scheduling"),
    ("/v1/overview", "get"): ("overview", "service"),
    ("/v1/allocations", "get"): ("allocations", "allocations"),
    ("/v1/allocations/{consumer}", "get"): ("allocation", "allocations"),
    ("/v1/allocations/{consumer}", "delete"): ("release", "allocations"),
    ("/v1/migrations/{migration}/confirm", "post"): ("confirm_move", "allocations"),
    ("/v1/migrations/{migration}/revert", "post"): ("revert_move", "allocations"),
    ("/v1/instances/{host}", "post"): ("update_instance_info", "hosts"),
    ("/v1/instances/{host}", "put"): ("sync_instance_info", "hosts"),
    ("/v1/instances/{host}/{instance}", "delete"): ("delete_instance_info", "hosts"),
}

EXAMPLE_TIME = datetime(2026, 11, 23, 9, 30, tzinfo=UTC)


def decoded(value: Any) -> Any:
    """``value`` as a client decodes it."""
    # Through JSON, so that the document equals what a client decodes (tuples become lists).
    return msgspec.json.decode(msgspec.json.encode(value))


def _examples() -> dict[tuple[str, str], dict[str, Any]]:
    """Per operation: ``request`` (a body), ``response`` (the success body) or ``revision`` (a 204's header)."""
    stats = HostStats(vcpus=32, memory_mb=131072, local_gb=2000, vcpus_used=4, memory_mb_used=8192,
                      local_gb_used=40, hypervisor_type="QEMU", host_ip="192.0.2.11")
    report = ReportIn(name="compute-1", stats=stats)
    inventories = {
        "VCPU": InventoryView(total=32, reserved=0, min_unit=1, max_unit=32, step_size=1, allocation_ratio=4.0,
                              reported_used=4, in_flight=2, capacity=128.0, free=122.0),
        "MEMORY_MB": InventoryView(total=131072, reserved=512, min_unit=1, max_unit=131072, step_size=1,
                                   allocation_ratio=1.0, reported_used=8192, in_flight=4096, capacity=130560.0,
                                   free=118272.0)}
    host = HostInfo(host="compute-1", nodename="compute-1", up=True, disabled=False, inventories=inventories,
                    uuid="4f1c0a36-1f53-4b0e-9c53-6a4f1b1f2d10", host_ip="192.0.2.11", hypervisor_type="QEMU",
                    updated_at=EXAMPLE_TIME, last_report_seconds_ago=12.5, num_instances=3, free_ram_mb=118272.0,
                    free_disk_mb=1_966_080.0, traits=["HW_CPU_X86_AVX2"], aggregates=["az1"],
                    availability_zone="az1", instances=["i-1", "i-2", "i-3"], allocations=["vm-7"])
    aggregate = Aggregate(id="az1", name="zone one", hosts=["compute-1", "compute-2"],
                          metadata={"availability_zone": "az1", "ssd": "true"})
    spec = RequestSpec(flavor=Flavor(name="m1.small", vcpus=1, memory_mb=2048, root_gb=20),
                       project_id="demo", instance_uuids=["vm-7"], availability_zone="az1")
    allocation = AllocationView(consumer_uuid="vm-7", host="compute-1", nodename="compute-1",
                                resources={"VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 20}, project_id="demo",
                                created_at=EXAMPLE_TIME)
    selection = Selection(host="compute-1", nodename="compute-1", availability_zone="az1",
                          allocation=allocation.resources, consumer_uuid="vm-7", weight=1.75)
    explanation = Explanation(hosts=3, steps=[FilterStep("ComputeFilter", 3, 0, 3),
                                              FilterStep("AvailabilityZoneFilter", 3, 1, 2),
                                              FilterStep("ResourceFilter", 2, 0, 2)])
    candidates = Candidates(
        candidates=[Candidate(host="compute-1", nodename="compute-1", weight=1.75, availability_zone="az1",
                              weights={"RAMWeigher": 1.0, "CPUWeigher": 0.75}),
                    Candidate(host="compute-2", nodename="compute-2", weight=0.5, availability_zone="az1",
                              weights={"RAMWeigher": 0.25, "CPUWeigher": 0.25})],
        explanation=explanation)
    written = Written(revision=42)
    moved = AllocationView(consumer_uuid="mig-1", host="compute-2", nodename="compute-2",
                           resources={"VCPU": 1, "MEMORY_MB": 2048}, instance_uuid="vm-7", created_at=EXAMPLE_TIME)
    health = Health(status="ok", version="0.1.0", pid=4242, store="sqlite:///var/lib/gantt/gantt.sqlite",
                    revision=42, hosts=3, hosts_up=3, seconds_since_sync=0.002)
    return {
        ("/", "get"): {"response": versions()},
        ("/health", "get"): {"response": health},
        ("/metrics", "get"): {"response": '# TYPE gantt_hosts gauge\ngantt_hosts{worker="0",state="up"} 3\n',
                              "media": "text/plain"},
        ("/openapi.json", "get"): {"response": {"openapi": "3.1.0", "info": {"title": "Gantt scheduler"}}},
        ("/v1/resource-stats", "post"): {"request": report, "response": written},
        ("/v1/resource-stats/batch", "post"): {
            "request": ReportBatchIn(reports=[report, ReportIn(name=("bm-1", "node-a"), stats=HostStats(
                inventories={"CUSTOM_BAREMETAL_GOLD": Inventory(total=1)}))]),
            "response": Written(revision=44, count=2)},
        ("/v1/hosts", "get"): {"response": HostList(hosts=[host], hosts_links=[
            Link(rel="next", href="/v1/hosts?limit=1&marker=compute-1")])},
        ("/v1/hosts/{host}", "get"): {"response": host},
        ("/v1/hosts/{host}", "patch"): {
            "request": {"service": {"disabled": True, "disabled_reason": "disk replacement, ticket 4711"}},
            "response": written},
        ("/v1/hosts/{host}", "delete"): {"revision": 43},
        ("/v1/aggregates", "get"): {"response": {"aggregates": [decoded(aggregate)]}},
        ("/v1/aggregates/{id}", "get"): {"response": aggregate},
        ("/v1/aggregates/{id}", "put"): {"request": aggregate, "response": written},
        ("/v1/aggregates/{id}", "delete"): {"revision": 43},
        ("/v1/select_destinations", "post"): {"request": spec, "response": Selections(selections=[[selection]])},
        ("/v1/candidates", "post"): {"request": spec, "response": candidates},
        ("/v1/capacity", "post"): _capacity_example(),
        ("/v1/overview", "get"): {"response": _overview_example(allocation, explanation)},
        ("/v1/allocations", "get"): {"response": AllocationList(allocations=[allocation])},
        ("/v1/allocations/{consumer}", "get"): {"response": allocation},
        ("/v1/allocations/{consumer}", "delete"): {"revision": 43},
        ("/v1/migrations/{migration}/confirm", "post"): {"response": moved},
        ("/v1/migrations/{migration}/revert", "post"): {"response": allocation},
        ("/v1/instances/{host}", "post"): {"request": {"instances": ["i-4"]}, "response": written},
        ("/v1/instances/{host}", "put"): {"request": {"instances": ["i-1", "i-2", "i-4"]}, "response": written},
        ("/v1/instances/{host}/{instance}", "delete"): {"revision": 43},
    }


def _overview_example(allocation: AllocationView, explanation: Explanation) -> Overview:
    return Overview(
        at=EXAMPLE_TIME, pid=4242, revision=42, hosts=3,
        zones=[ZoneHosts(zone="az1", up=1, down=0, disabled=1), ZoneHosts(zone="nova", up=0, down=1, disabled=0)],
        classes=[ClassUsage(resource_class="VCPU", used=6.0, capacity=384.0, hosts=3)],
        resource_classes=["VCPU"],
        utilization=[HostUsage(host="compute-1", nodename="compute-1", zone="az1", state="up", usage=[0.047]),
                     HostUsage(host="compute-2", nodename="compute-2", zone="az1", state="disabled", usage=[0.0]),
                     HostUsage(host="compute-3", nodename="compute-3", zone="nova", state="down", usage=[None])],
        utilization_omitted=0, allocations=1,
        recent_allocations=[RecentAllocation(consumer_uuid="vm-7", host="compute-1", nodename="compute-1",
                                             resources=allocation.resources, created_at=EXAMPLE_TIME,
                                             project_id="demo")],
        decisions=[Decision(at=EXAMPLE_TIME, request_id="req-9f1c", instances=1, placements=[Placed(
            consumer_uuid="vm-7", host="compute-1", nodename="compute-1",
            candidates=[Pick("compute-1", "compute-1", 1.75), Pick("compute-2", "compute-2", 0.5)])])],
        refusals=[Refusal(at=EXAMPLE_TIME, request_id=None, instances=1, message=explanation.summary(),
                          reason="AvailabilityZoneFilter", explanation=explanation)],
        counters={"decisions": 2, "placements": 1, "no_valid_host": 1})


def _capacity_example() -> dict[str, Any]:
    return {
        "request": CapacityQuestion(requests=[RequestSpec(flavor=Flavor(name="m1.large", vcpus=4, memory_mb=8192,
                                                                        root_gb=80))],
                                    without=Without(aggregates=["r07"]), limit=2),
        "response": CapacityAnswer(
            requests=[RequestCapacity(flavor="m1.large", resources={"VCPU": 4, "MEMORY_MB": 8192, "DISK_GB": 80},
                                      instances=16, nodes=4, by_zone={"az1": 8, "az2": 8},
                                      by_aggregate={"r08": 8, "r09": 8},
                                      top=[NodeRoom("compute-3", "compute-3", 4),
                                           NodeRoom("compute-4", "compute-4", 4)],
                                      instances_before=21, nodes_before=6)],
            displaced=Displaced(nodes=2, consumers=3, resources={"VCPU": 12, "MEMORY_MB": 24576, "DISK_GB": 240},
                                shapes=[DisplacedShape(resources={"VCPU": 4, "MEMORY_MB": 8192, "DISK_GB": 80},
                                                       consumers=3, fit_again=3)]))}


_COMMON = {
    "host": "The compute host's name (Nova's service host)",
    "nodename": "The compute node's name: the host's own for a one-node host, another for each node of a "
                "host with several (bare metal)",
    "uuid": "The compute node's UUID, as the host reported it",
    "availability_zone": "The availability zone (from the aggregates' `availability_zone` metadata); null: none",
    "project_id": "The project (tenant) the consumer belongs to",
    "user_id": "The user who asked for the consumer",
    "request_id": "The request that made the claim (x-openstack-request-id)",
    "consumer_uuid": "The consumer (instance or migration UUID) that holds the allocation",
    "migration_uuid": "On a move: the migration that holds the source until confirm or revert",
    "instance_uuid": "On a migration's allocation: the instance whose source it holds",
    "total": "Amount the node has of the class",
    "reserved": "Amount kept back from consumers",
    "min_unit": "Smallest amount one consumer may take",
    "max_unit": "Largest amount one consumer may take",
    "step_size": "Amounts a consumer takes are multiples of this",
    "allocation_ratio": "Overcommit factor: capacity is (total - reserved) x ratio",
    "name": "Name",
    "id": "Identifier",
    "hosts": "Host names",
    "weight": "Sum of the weighers' normalized, multiplied weights (higher is better)",
}

PROPERTIES: dict[str, dict[str, str]] = {
    "Versions": {"versions": "Every API version served", "release": "The Gantt release that answers"},
    "ApiVersion": {"id": "The version's name (v1)", "status": "CURRENT, SUPPORTED or DEPRECATED",
                   "links": "Where the version lives"},
    "Link": {"rel": "What the link is: `self`, or `next` (the following page)", "href": "The path it points to"},
    "ReportIn": {"name": "\"host\", or [\"host\", \"node\"] for one node of a host with several",
                 "stats": "What the host reports (Nova's compute_nodes fields); fields left out keep their value"},
    "HostStats": {
        "uuid": "The compute node's UUID",
        "vcpus": "Physical CPUs (the VCPU inventory's total)", "vcpus_used": "vCPUs in use",
        "memory_mb": "RAM in MiB (the MEMORY_MB inventory's total)", "memory_mb_used": "RAM in use, MiB",
        "local_gb": "Local disk in GiB (the DISK_GB inventory's total)", "local_gb_used": "Disk in use, GiB",
        "disk_available_least": "Free disk counting thin-provisioned images at full size, GiB (DiskFilter)",
        "cpu_allocation_ratio": "VCPU overcommit; null: [DEFAULT] initial_cpu_allocation_ratio",
        "ram_allocation_ratio": "MEMORY_MB overcommit; null: [DEFAULT] initial_ram_allocation_ratio",
        "disk_allocation_ratio": "DISK_GB overcommit; null: [DEFAULT] initial_disk_allocation_ratio",
        "hypervisor_type": "Hypervisor kind (QEMU, ironic, …): ImagePropertiesFilter, ComputeCapabilitiesFilter",
        "hypervisor_version": "Hypervisor version as Nova encodes it (major*1000000 + minor*1000 + patch)",
        "hypervisor_hostname": "The hypervisor's own name for the node",
        "cpu_info": "CPU model and features (ComputeCapabilitiesFilter's cpu_info:…)",
        "supported_instances": "[[arch, hypervisor type, vm mode], …] the node runs (ImagePropertiesFilter)",
        "host_ip": "The host's IP address (SimpleCIDRAffinityFilter)",
        "running_vms": "Instances running", "num_instances": "Instances on the node (NumInstancesFilter)",
        "num_io_ops": "Instances in I/O-heavy states (IoOpsFilter)",
        "current_workload": "Instances being built, resized, migrated (Nova's workload)",
        "failed_builds": "Recent failed builds (BuildFailureWeigher)",
        "metrics": "Monitor metrics (MetricsFilter, MetricsWeigher)",
        "stats": "Free-form capabilities, namespaced by their top-level keys (ComputeCapabilitiesFilter)",
        "service": "The compute service's state: disabled (with a reason) or forced down",
        "inventories": "Placement-style inventories by resource class; VCPU, MEMORY_MB and DISK_GB default "
                       "from the classic fields",
        "traits": "The node's traits (os-traits names or CUSTOM_*)",
        "instances": "UUIDs of the instances the node runs; their allocations then count as reported usage",
        "numa_topology": "The node's NUMA cells, as nova-compute's compute_nodes.numa_topology (plain, or Nova's "
                         "versioned-object primitive): NUMATopologyFilter",
        "pci_stats": "Nova's PCI device pools (compute_nodes.pci_stats): the PciDevicePoolList primitive, or a list "
                     "of pools {vendor_id, product_id, numa_node, count, tag: value …} (PciPassthroughFilter)",
    },
    "NUMATopology": {"cells": "The NUMA cells; none: the node has no NUMA topology",
                     "nova_object.name": "Nova's object envelope: NUMATopology",
                     "nova_object.namespace": "Nova's object envelope: nova",
                     "nova_object.version": "Nova's object envelope: the object's version",
                     "nova_object.changes": "Nova's object envelope: fields changed (ignored)",
                     "nova_object.data": "Nova's object envelope: the topology itself (cells), nested objects "
                                         "wrapped alike"},
    "NUMACell": {"id": "The cell's id", "cpuset": "Host CPUs for shared (floating) vCPUs",
                 "pcpuset": "Host CPUs for dedicated (pinned) vCPUs", "memory": "Memory, MiB",
                 "cpu_usage": "Shared vCPUs in use", "memory_usage": "Memory in use, MiB",
                 "pinned_cpus": "Dedicated CPUs already pinned", "siblings": "Thread siblings: the CPUs of each core",
                 "mempages": "Memory pages per page size", "network_metadata": "Networks with NIC affinity here",
                 "socket": "The socket the cell is on"},
    "NUMAPages": {"size_kb": "Page size, KiB", "total": "Pages", "used": "Pages in use",
                  "reserved": "Pages reserved for the host"},
    "NUMANetworkMetadata": {"physnets": "Physical networks", "tunneled": "Whether tunnelled networks are here"},
    "PciDevicePoolList": {"nova_object.name": "PciDevicePoolList", "nova_object.namespace": "nova",
                          "nova_object.version": "The object's version (1.1)", "nova_object.data": "Its pools",
                          "nova_object.changes": "Fields changed (ignored)"},
    "PciDevicePoolListData": {"objects": "The pools, each a PciDevicePool primitive"},
    "PciDevicePoolObject": {"nova_object.name": "PciDevicePool", "nova_object.namespace": "nova",
                            "nova_object.version": "The object's version (1.0 or 1.1)",
                            "nova_object.data": "The pool", "nova_object.changes": "Fields changed (ignored)"},
    "PciDevicePoolData": {"product_id": "PCI product id", "vendor_id": "PCI vendor id",
                          "count": "Free devices in the pool", "numa_node": "The devices' NUMA node (null: unknown)",
                          "tags": "Tags: dev_type, physical_network, trusted, remote_managed, live_migratable, …"},
    "PciTaken": {"pool": "The pool the devices came from (its fields and tags, without count)",
                 "count": "Devices taken from it"},
    "Metric": {"name": "Metric name (cpu.percent, …)", "value": "Its value", "source": "Who measured it",
               "timestamp": "When it was measured (ISO 8601, or epoch seconds)"},
    "ServiceInfo": {"disabled": "Disabled by an operator: ComputeFilter removes the node",
                    "disabled_reason": "Why it was disabled (shown only)",
                    "forced_down": "Forced down by an operator: the node counts as down whatever it reports"},
    "Inventory": {"used": "Amount in use as the host counts it; null: counted from allocations alone"},
    "ReportBatchIn": {"reports": "Host reports, applied as one atomic batch"},
    "InstancesIn": {"instances": "Instance UUIDs (affinity filters read them)"},
    "Aggregate": {"id": "The aggregate's id, chosen by the caller (a number or a name)",
                  "name": "Display name", "uuid": "The aggregate's UUID (member_of names aggregates by it)",
                  "hosts": "Member hosts", "metadata": "Key-value properties (availability_zone, filter_tenant_id, "
                                                      "*_allocation_ratio, …); values are strings",
                  "availability_zone": "Shorthand for metadata.availability_zone"},
    "RequestSpec": {
        "flavor": "The flavor asked for", "image": "The image to boot (ImagePropertiesFilter)",
        "availability_zone": "Zone to place in (AvailabilityZoneFilter)",
        "num_instances": "How many instances to place, all or nothing",
        "instance_uuids": "Consumer UUIDs, one per instance: asking again returns the claims already held",
        "scheduler_hints": "Nova's scheduler hints (same_host, different_host, group, query, cidr, …)",
        "instance_group": "The server group (affinity or anti-affinity) the instances join",
        "ignore_hosts": "Hosts never to choose", "force_hosts": "Choose only among these hosts",
        "force_nodes": "Choose only among these nodes",
        "requested_destination": "A host, node or aggregates the request must land on",
        "resources": "Amounts by resource class, added to the flavor's (or replacing them without a flavor)",
        "required_traits": "Traits every chosen node must have",
        "forbidden_traits": "Traits no chosen node may have",
        "member_of": "Aggregate UUIDs: each inner list is \"in any of these\", and every list must hold",
        "request_id": "The caller's request id, kept with the claims",
        "migration_uuid": "Make this a move of the one instance named: the source is held under this UUID",
        "evacuation": "The move is an evacuation (its source host is down): the instance holds its source "
                      "beside the destination, nothing is held under migration_uuid",
        "alternates": "How many unclaimed alternates to gather (default [scheduler] max_attempts - 1)",
        "pci_requests": "PCI requests beside the flavor's pci_passthrough:alias (SR-IOV ports'), taken after "
                        "the flavor's, in order; with an alias named, every one (the flavor's too)",
        "pci_in_placement": "Hold the flavor's PCI devices on their Placement providers too (the pools' rp_uuid); "
                            "null: [filter_scheduler] pci_in_placement",
        "network_metadata": "The instance's networks (Nova's network_metadata): a NUMA guest lands on host cells "
                            "with NIC affinity to them (NUMATopologyFilter)",
        "request_groups": "Request groups (Nova's requested_resources: device profiles', ports'), each taken from "
                          "one child provider of the chosen node's tree and claimed there in the same commit",
        "group_policy": "isolate: every request group on a provider of its own; none (default: the flavor's "
                        "group_policy extra spec): groups may share one",
        "same_subtree": "Sets of request group ids whose providers lie in one subtree",
    },
    "RequestGroupSpec": {"id": "The group's name in the answer's mappings (Nova's requester_id)",
                         "resources": "Amounts by resource class, all from one provider",
                         "required_traits": "Traits that provider must have",
                         "forbidden_traits": "Traits it may not have",
                         "member_of": "Aggregate UUIDs it must be in, as the request's member_of",
                         "in_tree": "A provider uuid: the group's provider is in that provider's tree"},
    "PciRequestSpec": {"spec": "Device specs, any of which a pool may match: each key's value must equal the "
                               "pool's (without case; null: the pool lacks the key), e.g. physical_network, "
                               "remote_managed, dev_type, trusted",
                       "count": "Devices from one matching pool's kind", "numa_policy":
                       "The devices' NUMA affinity: required, legacy, preferred or socket (null: the flavor's or "
                       "image's, else legacy)",
                       "request_id": "The caller's id for the request (Nova's InstancePCIRequest.request_id)",
                       "alias": "The flavor's alias the caller made it of: then the request's pci_requests are all "
                                "of them and the flavor's pci_passthrough:alias is not read again"},
    "NetworkMetadata": {"physnets": "Physical networks of the instance's ports",
                        "tunneled": "Whether one of its networks is tunnelled"},
    "Flavor": {"name": "Flavor name (a label)", "vcpus": "vCPUs", "memory_mb": "RAM, MiB",
               "root_gb": "Root disk, GiB", "ephemeral_gb": "Ephemeral disk, GiB", "swap": "Swap, MiB",
               "extra_specs": "Flavor extra specs (capabilities:…, aggregate_instance_extra_specs:…, trait:…, "
                              "resources:…, hw:…)",
               "flavorid": "Nova's flavor id", "id": "Nova's internal flavor id"},
    "Image": {"id": "The image's id", "name": "The image's name",
              "disk_format": "Glance's disk format (qcow2, raw, …)",
              "properties": "Image properties (hw_architecture, img_hv_type, …)"},
    "InstanceGroup": {"uuid": "The server group's UUID", "name": "Its name",
                      "policy": "affinity, anti-affinity, soft-affinity or soft-anti-affinity",
                      "policies": "Older Nova's one-element list of the policy",
                      "members": "Instance UUIDs in the group", "hosts": "Hosts the members run on",
                      "rules": "Policy rules (max_server_per_host)"},
    "RequestedDestination": {"host": "The host to land on", "node": "The node to land on",
                             "aggregates": "Aggregate UUIDs the destination must be in (comma-separated: any)"},
    "Written": {"revision": "The store revision that holds the write", "count": "How many items it wrote"},
    "HostInfo": {
        "up": "Reported within service_down_time and not forced down", "disabled": "Disabled by an operator",
        "inventories": "Per resource class: what the node has and what is used",
        "hypervisor_hostname": "The hypervisor's own name for the node", "host_ip": "The host's IP address",
        "name": "The node's resource provider name, as Placement shows it (null: no uuid, so no provider); "
                "/v1/hosts/{host} also finds a node by it, or by its uuid, when no host has that name",
        "hypervisor_type": "Hypervisor kind", "hypervisor_version": "Hypervisor version (Nova's encoding)",
        "forced_down": "Forced down by an operator", "disabled_reason": "Why it was disabled; null: not disabled "
                                                                        "or no reason given",
        "updated_at": "When the node last reported (ISO 8601, UTC); null: never",
        "last_report_seconds_ago": "Seconds since the node last reported; past service_down_time it is down",
        "num_io_ops": "Instances in I/O-heavy states", "num_instances": "Instances on the node",
        "failed_builds": "Recent failed builds", "free_ram_mb": "RAM free, MiB, after overcommit",
        "free_disk_mb": "Disk free, MiB, after overcommit", "traits": "The node's traits",
        "aggregates": "Ids of the aggregates the host is in", "instances": "Instance UUIDs the node runs",
        "allocations": "Consumers holding an allocation on the node",
    },
    "InventoryView": {"reported_used": "Used, as the node's last report says",
                      "in_flight": "Held by allocations the node has not reported yet",
                      "capacity": "(total - reserved) x allocation_ratio",
                      "free": "capacity - reported_used - in_flight"},
    "HostList": {"hosts": "The nodes of this page",
                 "hosts_links": "A `next` link when more nodes follow (paging with limit)"},
    "AggregateList": {"aggregates": "Every aggregate"},
    "AllocationView": {"resources": "Amounts held, by resource class",
                       "pci": "PCI devices the claim took on its node, by pool (pci_passthrough:alias)",
                       "created_at": "When the claim was made (ISO 8601, UTC)",
                       "confirmed": "The node's report lists the consumer: its usage is in the reported figures",
                       "group": "The server group the consumer was placed under",
                       "extra": "Its parts on further nodes (a Placement allocation across providers)",
                       "consumer_generation": "Placement's consumer generation (written through /placement)",
                       "consumer_type": "Placement's consumer type (1.38); absent: none given",
                       "numa": "The NUMA cells, pinned CPUs and pages the claim holds on its node",
                       "mappings": "The request groups' providers (uuids in `extra`), by group id"},
    "NUMACellClaim": {"cell": "The host NUMA cell's id", "memory_mb": "Memory taken, MiB",
                      "cpus": "Shared vCPUs placed on the cell", "pinned_cpus": "Host CPUs pinned",
                      "pagesize_kb": "The page size the memory comes in; absent: the cell's smallest"},
    "AllocationPart": {"host": "The node's host", "nodename": "The node",
                       "resources": "Amounts held there, by resource class"},
    "AllocationList": {"allocations": "The allocations of this page",
                       "allocations_links": "A `next` link when more allocations follow (paging with limit)"},
    "NUMATopologyLimits": {"cpu_allocation_ratio": "The CPU allocation ratio the guest's cells were fitted under",
                           "ram_allocation_ratio": "The RAM allocation ratio the guest's cells were fitted under"},
    "Selections": {"selections": "One list per instance: the claimed node first, then alternates"},
    "Selection": {"allocation": "What the claim holds, by resource class (empty on alternates)",
                  "limits": "Nova's limits: capacity after overcommit, by resource; `numa_topology` on a node "
                            "NUMATopologyFilter passed for a NUMA guest",
                  "consumer_uuid": "The consumer claimed for (first entry only)",
                  "providers": "The request groups' amounts on the node's child providers, by provider uuid "
                               "(held by the claim; an alternate's: what a claim there would hold now)",
                  "mappings": "Each request group's provider (uuid), by group id, as Placement's mappings",
                  "weight": "The node's weight when it was chosen"},
    "Candidates": {"candidates": "Nodes that pass every filter, best first",
                   "explanation": "How many nodes each filter removed"},
    "Candidate": {"weights": "Each weigher's normalized, multiplied contribution"},
    "CapacityQuestion": {"requests": "Requests to count, each alone (1 to 20; one instance each)",
                         "without": "Hosts to take away first (a rack or zone lost, hosts drained)",
                         "limit": "How many of the nodes with the most room each answer lists (0 to 1,000)"},
    "Without": {"hosts": "Hosts by name (every node of each)", "aggregates": "Aggregates by id, uuid or name",
                "zones": "Availability zones"},
    "CapacityAnswer": {"requests": "One answer per request, in order",
                       "displaced": "With `without`: what the consumers on those nodes hold there"},
    "RequestCapacity": {"flavor": "The flavor's name, when the request has one",
                        "resources": "What one instance asks for, by resource class",
                        "instances": "More instances that fit on the nodes left",
                        "nodes": "Nodes with room for at least one",
                        "by_zone": "Instances that fit, per availability zone",
                        "by_aggregate": "Instances that fit, per aggregate with room (by name)",
                        "top": "The nodes with the most room, most first (at most `limit`)",
                        "instances_before": "With `without`: the instances that fitted with those hosts in",
                        "nodes_before": "With `without`: the nodes with room with those hosts in"},
    "NodeRoom": {"instances": "More instances of the request that fit on the node"},
    "Displaced": {"nodes": "Nodes taken away", "consumers": "Consumers holding something there",
                  "resources": "What they hold there, summed by resource class",
                  "shapes": "The same, per distinct amount held, most common first"},
    "DisplacedShape": {"resources": "What each of these consumers holds on the nodes taken away",
                       "consumers": "How many hold exactly that",
                       "fit_again": "How many of them the nodes left have room for (this shape alone)"},
    "Explanation": {"hosts": "Nodes considered", "steps": "Filter by filter: nodes before, removed, after",
                    "nearest_miss": "Per resource class short: the node that came nearest and by how much",
                    "instance_index": "Which instance of the request did not fit (0-based)",
                    "reason": "The filter that emptied the list (\"contention\": claims lost every race)",
                    "down": "Nodes without a report for longer than service_down_time",
                    "service_down_time": "The service_down_time in force, seconds"},
    "FilterStep": {"name": "The filter", "before": "Nodes before it", "removed": "Nodes it removed",
                   "after": "Nodes after it"},
    "NearestMiss": {"resource_class": "The resource class short", "requested": "Amount asked for",
                    "best_free": "The most any node had free", "short_by": "requested - best_free",
                    "host": "The host that came nearest", "nodename": "Its node",
                    "constraint": "A unit constraint no node can meet (min_unit, max_unit, step_size)"},
    "Overview": {
        "at": "When the overview was taken (ISO 8601, UTC)",
        "pid": "The answering process: decisions and refusals are this process's own",
        "revision": "The replica's store revision", "hosts": "Nodes known",
        "zones": "Nodes per availability zone, by state", "classes": "Per resource class: used and capacity",
        "resource_classes": "The heat map's columns: the classes of `utilization[].usage`, in order",
        "utilization": "The heat map: per node, the fraction of each class in use (the most used nodes, "
                       "in zone and name order)",
        "utilization_omitted": "Nodes left out of the heat map (only the 2,000 most used are shown)",
        "allocations": "Allocations held", "recent_allocations": "The newest allocations, newest first",
        "decisions": "This process's last placed requests, newest first",
        "refusals": "This process's last NoValidHost answers, newest first",
        "counters": "This process's decisions, placements and NoValidHost answers since it started",
        "trend": "This process's last hour, one point per minute, oldest first"},
    "TrendPoint": {"at": "The minute's start (ISO 8601, UTC)", "placed": "Instances placed in that minute",
                   "refused": "Instances answered NoValidHost in that minute",
                   "utilization": "Per resource class, the share in use when the overview was first read in "
                                  "that minute (empty: nobody read it then)"},
    "ZoneHosts": {"zone": "The availability zone (the default zone for nodes in none)",
                  "up": "Nodes reporting and enabled", "down": "Nodes without a report within service_down_time, "
                                                                  "or forced down",
                  "disabled": "Nodes reporting but disabled by an operator"},
    "ClassUsage": {"resource_class": "The resource class", "used": "Reported plus in-flight use over every node",
                   "capacity": "(total - reserved) x allocation_ratio over every node",
                   "hosts": "Nodes with an inventory of the class"},
    "HostUsage": {"zone": "The node's availability zone", "state": "up, down or disabled (as in `zones`)",
                  "usage": "Per class of `resource_classes`: used / capacity (above 1: over capacity); null: "
                           "the node has none of the class"},
    "RecentAllocation": {"resources": "Amounts held, by resource class",
                         "created_at": "When the claim was made (ISO 8601, UTC)"},
    "Decision": {"at": "When it was decided (ISO 8601, UTC)", "instances": "Instances the request placed",
                 "request_id": "The request's own request_id, else the x-openstack-request-id it was answered with",
                 "placements": "Per instance (the first 8): where it went and the top candidates"},
    "Placed": {"candidates": "The claimed node and the alternates the answer carried, by weight (at most 3)"},
    "Refusal": {"at": "When it was refused (ISO 8601, UTC)", "instances": "Instances the request asked for",
                "request_id": "The request's own request_id, else the x-openstack-request-id it was answered with",
                "message": "The NoValidHost message", "reason": "The filter that emptied the list "
                                                                "(\"contention\": claims lost every race)",
                "explanation": "Filter by filter, why nothing fit"},
    "Health": {"status": "ok, or degraded (answered with 503)", "version": "The Gantt release",
               "pid": "The answering process",
               "store": "The store's URL (a user, password or token in it shown as ***)",
               "revision": "The replica's revision",
               "hosts": "Nodes known", "hosts_up": "Nodes up", "seconds_since_sync": "Age of the replica's "
                                                                                      "last change-feed read",
               "last_write_error": "The store's last failed write, while none has succeeded since",
               "namespaces": "The named namespaces served beside the default one, by name: kind, status, "
                             "revision (each namespace's own), hosts, hosts_up, seconds_since_sync"},
    "LastWriteError": {"at": "When (ISO 8601, UTC)", "message": "The error the store gave"},
    "Problem": {"type": "A URI naming the problem type", "title": "Short summary", "status": "The HTTP status",
                "detail": "What went wrong, for a person", "field": "JSON path or name of the offending input",
                "explanation": "With a 409 NoValidHost: filter by filter, why nothing fits"},
}


def _describe(components: dict[str, Any]) -> None:
    for name, schema in components.items():
        texts = PROPERTIES.get(name, {})
        for prop, prop_schema in schema.get("properties", {}).items():
            if "description" in prop_schema:
                continue
            text = texts.get(prop) or _COMMON.get(prop)
            if text is not None:
                prop_schema["description"] = text


def annotate(document: dict[str, Any]) -> None:
    """Add ids, tags, examples and property descriptions to ``document`` (in place)."""
    _describe(document["components"]["schemas"])
    document["tags"] = TAGS
    examples = _examples()
    for path, item in document["paths"].items():
        for method, op in item.items():
            if method == "parameters":
                continue
            op["operationId"], tag = OPERATIONS[(path, method)]
            op["tags"] = [tag]
            example = examples[(path, method)]
            if "request" in example:
                media = op["requestBody"]["content"]["application/json"]
                media["example"] = decoded(example["request"])
            ok = next(code for code in op["responses"] if code.startswith("2"))
            if "revision" in example:
                op["responses"][ok]["headers"]["Gantt-Revision"]["example"] = example["revision"]
            else:
                content = op["responses"][ok]["content"]
                media_type = example.get("media", "application/json")
                content[media_type]["example"] = decoded(example["response"])
