"""Drives a Placement endpoint with Nova 34's own report client, as nova-compute and nova-scheduler use it.

Run by Nova's reference interpreter (tests/parity/reference.py), never imported by Gantt's tests: Nova cannot be
imported beside Gantt. ``python nova_report_driver.py URL TOKEN`` prints one JSON document: what each step of the
sequence saw (return values, provider trees, exceptions by class name), with nothing server-specific in it (request ids,
timestamps), so that two servers given the same sequence can be compared as plain data.

The sequence is what a compute host and a scheduler do in a cloud: the resource tracker ensures its root provider,
flushes a ProviderTree (root, a NUMA child, a PF grandchild, traits, aggregates) with
``update_from_provider_tree``; a second host sets its inventory with ``set_inventory_for_provider``; an operator's
sharing disk pool joins the first host's aggregate; the scheduler asks ``get_allocation_candidates`` with a
ResourceRequest built from a RequestSpec (granular groups, a required trait, group_policy) and claims the first
candidate; a second instance is put directly; a move re-keys an allocation to a migration; quota counts usages; the
compute host tries to drop an inventory in use, reshapes memory into its NUMA child, and allocations are deleted.
"""

from __future__ import annotations

import json
import sys
import uuid
from typing import Any

from keystoneauth1 import adapter, session, token_endpoint
from nova import conf, context, objects
from nova.compute import provider_tree
from nova.scheduler import utils as scheduler_utils
from nova.scheduler.client import report

CN1, CN2, NUMA0, PF0, POOL = (str(uuid.UUID(int=n)) for n in (0xC1, 0xC2, 0xA0, 0xF0, 0xD1))
AGG = str(uuid.UUID(int=0xA66))
INSTANCE1, INSTANCE2, MIGRATION = (str(uuid.UUID(int=n)) for n in (0x11, 0x12, 0x3))
PROJECT, USER = "p-nova", "u-nova"


def inventory(total: int, **more: Any) -> dict[str, Any]:
    return {"total": total, "reserved": 0, "min_unit": 1, "max_unit": total, "step_size": 1,
            "allocation_ratio": 1.0, **more}


def tree_view(tree: provider_tree.ProviderTree) -> dict[str, Any]:
    """Every provider the client's cache holds: what Placement told it, keyed by uuid."""
    out = {}
    for rp_uuid in sorted(tree.get_provider_uuids()):
        data = tree.data(rp_uuid)
        out[rp_uuid] = {"name": data.name, "parent": data.parent_uuid, "generation": data.generation,
                        "inventory": data.inventory, "traits": sorted(data.traits),
                        "aggregates": sorted(data.aggregates)}
    return out


class Steps:
    """Runs each step, recording its value or the exception it raised (by class name): both are the answer."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def __call__(self, name: str, call: Any) -> Any:
        try:
            value = call()
        except Exception as error:  # an exception is an observed answer, compared like a value
            self.seen.append({"step": name, "raised": type(error).__name__})
            return None
        self.seen.append({"step": name, "value": value})
        return value


def main(url: str, token: str) -> list[dict[str, Any]]:
    conf.CONF([], project="nova")
    objects.register_all()
    # Keystone's middleware would tell Placement that Nova's service user has these roles; a server with a
    # token of its own (Gantt's) takes the token as that credential instead.
    auth = token_endpoint.Token(url, token)
    ksa = session.Session(auth=auth, additional_headers={"X-Roles": "admin,service"})
    client = report.SchedulerReportClient(
        adapter=adapter.Adapter(ksa, service_type="placement", raise_exc=False))
    ctx = context.get_admin_context()
    step = Steps()

    # nova-compute, host 1: ensure the root, then flush a nested tree with traits and an aggregate.
    tree = client.get_provider_tree_and_ensure_root(ctx, CN1, name="cn1")
    step("ensure root cn1", lambda: tree_view(tree))
    tree.update_inventory(CN1, {"VCPU": inventory(8, allocation_ratio=4.0), "MEMORY_MB": inventory(8192),
                                "DISK_GB": inventory(100, reserved=10)})
    tree.update_traits(CN1, ["HW_CPU_X86_AVX2", "CUSTOM_FAST", "COMPUTE_STATUS_DISABLED"])
    tree.update_aggregates(CN1, [AGG])
    tree.new_child("cn1_numa0", CN1, uuid=NUMA0)
    tree.update_inventory(NUMA0, {"PCPU": inventory(4)})
    tree.new_child("cn1_pf0", NUMA0, uuid=PF0)
    tree.update_inventory(PF0, {"SRIOV_NET_VF": inventory(8, max_unit=4)})
    tree.update_traits(PF0, ["CUSTOM_PHYSNET_A"])
    step("update_from_provider_tree cn1", lambda: client.update_from_provider_tree(ctx, tree))
    # the service is enabled again: a trait dropped, one kept
    tree.update_traits(CN1, ["HW_CPU_X86_AVX2", "CUSTOM_FAST"])
    step("enable cn1", lambda: client.update_from_provider_tree(ctx, tree))

    # nova-compute, host 2: flat, inventory set directly.
    step("ensure root cn2", lambda: tree_view(client.get_provider_tree_and_ensure_root(ctx, CN2, name="cn2")))
    step("set_inventory_for_provider cn2", lambda: client.set_inventory_for_provider(
        ctx, CN2, {"VCPU": inventory(4), "MEMORY_MB": inventory(4096), "DISK_GB": inventory(40)}))

    # an operator's sharing disk pool in host 1's aggregate
    step("ensure pool", lambda: tree_view(client.get_provider_tree_and_ensure_root(ctx, POOL, name="pool")))
    step("pool inventory", lambda: client.set_inventory_for_provider(ctx, POOL, {"DISK_GB": inventory(1000)}))
    step("pool traits", lambda: client.set_traits_for_provider(ctx, POOL, ["MISC_SHARES_VIA_AGGREGATE"]))
    step("pool aggregates", lambda: client.set_aggregates_for_provider(ctx, POOL, [AGG]))
    client.clear_provider_cache()
    step("tree seen from cn1", lambda: tree_view(client.get_provider_tree_and_ensure_root(ctx, CN1)))
    step("providers in tree", lambda: sorted(p["uuid"] for p in client.get_providers_in_tree(ctx, CN1)))

    # nova-scheduler: candidates for a flavor with a granular VF group and a required trait, then the claim.
    flavor = objects.Flavor(vcpus=2, memory_mb=1024, root_gb=20, ephemeral_gb=0, swap=0, extra_specs={
        "resources1:SRIOV_NET_VF": "2", "trait1:CUSTOM_PHYSNET_A": "required", "trait:CUSTOM_FAST": "required",
        "group_policy": "isolate"})
    spec = objects.RequestSpec(flavor=flavor, image=objects.ImageMeta(properties=objects.ImageMetaProps()),
                               is_bfv=False, requested_resources=[])
    request = scheduler_utils.ResourceRequest.from_request_spec(spec)
    candidates, summaries, version = client.get_allocation_candidates(ctx, request)
    step("get_allocation_candidates", lambda: {
        "allocation_requests": sorted(candidates or [], key=lambda a: json.dumps(a, sort_keys=True)),
        "provider_summaries": summaries, "version": version})
    chosen = sorted(candidates or [], key=lambda a: json.dumps(a, sort_keys=True))
    if chosen:
        step("claim_resources", lambda: client.claim_resources(ctx, INSTANCE1, chosen[0], PROJECT, USER, version))
        step("claim_resources again with no consumer generation", lambda: client.claim_resources(
            ctx, INSTANCE1, chosen[0], PROJECT, USER, version, consumer_generation=None))
    step("get_allocations_for_consumer", lambda: client.get_allocations_for_consumer(ctx, INSTANCE1))
    step("get_allocs_for_consumer", lambda: client.get_allocs_for_consumer(ctx, INSTANCE1))

    # a second instance put directly (as the conductor does for forced hosts); one too big for the host
    step("put_allocations cn2", lambda: client.put_allocations(ctx, INSTANCE2, {
        "allocations": {CN2: {"resources": {"VCPU": 2, "MEMORY_MB": 2048}}}, "project_id": PROJECT,
        "user_id": USER, "consumer_generation": None}))
    step("put_allocations too big", lambda: client.put_allocations(ctx, str(uuid.UUID(int=0x13)), {
        "allocations": {CN2: {"resources": {"VCPU": 3}}}, "project_id": PROJECT, "user_id": USER,
        "consumer_generation": None}))
    step("put_allocations stale consumer generation", lambda: client.put_allocations(ctx, INSTANCE2, {
        "allocations": {CN2: {"resources": {"VCPU": 1}}}, "project_id": PROJECT, "user_id": USER,
        "consumer_generation": None}))

    # a move: the instance's allocation goes to the migration
    step("move_allocations", lambda: client.move_allocations(ctx, INSTANCE1, MIGRATION))
    step("instance after move", lambda: client.get_allocs_for_consumer(ctx, INSTANCE1))
    step("migration after move", lambda: client.get_allocs_for_consumer(ctx, MIGRATION))
    step("move again: already moved", lambda: client.move_allocations(ctx, INSTANCE1, MIGRATION))

    # quota and unified limits count usages
    step("usages for quota", lambda: client.get_usages_counts_for_quota(ctx, PROJECT, USER))
    step("usages for limits", lambda: client.get_usages_counts_for_limits(ctx, PROJECT))
    step("allocations on cn2", lambda: client.get_allocations_for_resource_provider(ctx, CN2).allocations)

    # the compute host drops its VF inventory while the migration holds VFs: refused
    client.clear_provider_cache()
    tree = client.get_provider_tree_and_ensure_root(ctx, CN1)
    tree.update_inventory(PF0, {})
    step("drop an inventory in use", lambda: client.update_from_provider_tree(ctx, tree))
    # ... and reshapes: memory moves from the root into its NUMA child, with the allocations using it
    client.clear_provider_cache()
    tree = client.get_provider_tree_and_ensure_root(ctx, CN1)
    tree.update_inventory(CN1, {"VCPU": inventory(8, allocation_ratio=4.0), "DISK_GB": inventory(100, reserved=10)})
    tree.update_inventory(NUMA0, {"PCPU": inventory(4), "MEMORY_MB": inventory(8192)})
    allocations = client.get_allocations_for_provider_tree(ctx, "cn1")
    for record in allocations.values():
        held = record["allocations"]
        if "MEMORY_MB" in held.get(CN1, {}).get("resources", {}):
            memory = held[CN1]["resources"].pop("MEMORY_MB")
            held.setdefault(NUMA0, {"resources": {}})["resources"]["MEMORY_MB"] = memory
    step("reshape", lambda: client.update_from_provider_tree(ctx, tree, allocations=allocations))
    client.clear_provider_cache()
    step("tree after reshape", lambda: tree_view(client.get_provider_tree_and_ensure_root(ctx, CN1)))
    step("migration after reshape", lambda: client.get_allocs_for_consumer(ctx, MIGRATION))

    # deletes: by consumer generation (GET then PUT empty), forced, and of a consumer with nothing
    step("delete_allocation_for_instance", lambda: client.delete_allocation_for_instance(ctx, INSTANCE2))
    step("delete migration, forced", lambda: client.delete_allocation_for_instance(
        ctx, MIGRATION, consumer_type="migration", force=True))
    step("delete again", lambda: client.delete_allocation_for_instance(ctx, INSTANCE2))
    step("usages after deletes", lambda: client.get_usages_counts_for_limits(ctx, PROJECT))
    client.clear_provider_cache()
    step("final tree", lambda: tree_view(client.get_provider_tree_and_ensure_root(ctx, CN1)))
    return step.seen


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2]), sort_keys=True, indent=1, default=str))
