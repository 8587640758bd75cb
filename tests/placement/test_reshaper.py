"""POST /reshaper on a real server (memory, SQLite, etcd): inventory and the allocations on it move between providers
in one commit, and a refused reshape changes nothing."""

from __future__ import annotations

import httpx

from tests.placement.test_allocations import PROJECT, USER, provider, put
from tests.placement.test_api import create, new_uuid

SERVICE = {"x-roles": "admin,service"}  # Placement's default policy lets only a service reshape


def state(http: httpx.Client, *rps: str) -> list[dict]:
    return [{"inventories": http.get(f"/resource_providers/{rp}/inventories").json(),
             "usages": http.get(f"/resource_providers/{rp}/usages").json()} for rp in rps]


def reshape(http: httpx.Client, inventories: dict, allocations: dict, version: str = "1.38") -> httpx.Response:
    body = {"inventories": {rp: {"resource_provider_generation": g, "inventories": {
                rc: {"total": t} for rc, t in inv.items()}} for rp, (g, inv) in inventories.items()},
            "allocations": {c: {"allocations": {rp: {"resources": r} for rp, r in parts.items()},
                                "project_id": PROJECT, "user_id": USER, "consumer_generation": g,
                                "consumer_type": "INSTANCE"}
                            for c, (g, parts) in allocations.items()}}
    return http.post("/reshaper", json=body, headers={"openstack-api-version": f"placement {version}", **SERVICE})


def generation(http: httpx.Client, rp: str) -> int:
    return int(http.get(f"/resource_providers/{rp}").json()["generation"])


def test_vcpu_moves_to_a_numa_child_with_its_allocation(http: httpx.Client) -> None:
    root = provider(http, VCPU=8, MEMORY_MB=4096)
    numa = create(http, parent=root)["uuid"]
    vm = new_uuid()
    assert put(http, vm, {root: {"VCPU": 2, "MEMORY_MB": 512}}).status_code == 204
    root_gen, numa_gen = generation(http, root), generation(http, numa)
    # moving the inventory without its allocation: VCPU is still used on the root
    refused = reshape(http, {root: (root_gen, {"MEMORY_MB": 4096}), numa: (numa_gen, {"VCPU": 8})}, {})
    assert refused.status_code == 409 and refused.json()["errors"][0]["code"] == "placement.inventory.inuse"
    before = state(http, root, numa)
    # more than the child will have: nothing changes
    too_much = reshape(http, {root: (root_gen, {"MEMORY_MB": 4096}), numa: (numa_gen, {"VCPU": 1})},
                       {vm: (1, {root: {"MEMORY_MB": 512}, numa: {"VCPU": 2}})})
    assert too_much.status_code == 409 and "Unable to allocate inventory" in too_much.text
    assert state(http, root, numa) == before
    stale = reshape(http, {root: (root_gen - 1, {"MEMORY_MB": 4096}), numa: (numa_gen, {"VCPU": 8})},
                    {vm: (1, {root: {"MEMORY_MB": 512}, numa: {"VCPU": 2}})})
    assert stale.status_code == 409 and stale.json()["errors"][0]["code"] == "placement.concurrent_update"
    assert state(http, root, numa) == before
    moved = reshape(http, {root: (root_gen, {"MEMORY_MB": 4096}), numa: (numa_gen, {"VCPU": 8})},
                    {vm: (1, {root: {"MEMORY_MB": 512}, numa: {"VCPU": 2}})})
    assert moved.status_code == 204, moved.text
    after = state(http, root, numa)
    assert set(after[0]["inventories"]["inventories"]) == {"MEMORY_MB"} and after[0]["usages"]["usages"] == {
        "MEMORY_MB": 512}
    assert after[1]["usages"]["usages"] == {"VCPU": 2}
    # Placement's generations: an interim and a final inventory, and the allocation write
    assert (generation(http, root), generation(http, numa)) == (root_gen + 3, numa_gen + 3)
    held = http.get(f"/allocations/{vm}").json()
    assert held["consumer_generation"] == 2 and set(held["allocations"]) == {root, numa}
    # the child now offers the VCPU to candidates, with the moved usage counted
    found = http.get("/allocation_candidates", params={"resources": "VCPU:6", "in_tree": root}).json()
    assert [set(r["allocations"]) for r in found["allocation_requests"]] == [{numa}]
    assert found["provider_summaries"][numa]["resources"]["VCPU"] == {"capacity": 8, "used": 2}


def test_reshaper_refusals(http: httpx.Client) -> None:
    rp = provider(http, VCPU=4)
    assert http.post("/reshaper", json={"inventories": {}, "allocations": {}},
                     headers={"openstack-api-version": "placement 1.29", **SERVICE}).status_code == 404
    empty = http.post("/reshaper", json={"inventories": {}, "allocations": {}},
                      headers={"openstack-api-version": "placement 1.30", **SERVICE})
    assert empty.status_code == 400 and "does not have enough properties" in empty.text
    missing = reshape(http, {new_uuid(): (0, {"VCPU": 1})}, {}, "1.30")
    assert missing.status_code == 400 and "in inventories not found" in missing.text
    unknown = reshape(http, {rp: (generation(http, rp), {"CUSTOM_NOT_MADE": 1})}, {}, "1.30")
    assert unknown.status_code == 400 and "No such resource class CUSTOM_NOT_MADE" in unknown.text
    mappings = http.post("/reshaper", headers={"openstack-api-version": "placement 1.33", **SERVICE}, json={
        "inventories": {rp: {"resource_provider_generation": generation(http, rp), "inventories": {}}},
        "allocations": {new_uuid(): {"allocations": {}, "project_id": PROJECT, "user_id": USER,
                                     "consumer_generation": None, "mappings": {"": [rp]}}}})
    assert mappings.status_code == 400 and "'mappings' was unexpected" in mappings.text
