"""GET /allocation_candidates where Gantt adds to Placement: hosts reported through /v1 are candidates with their
reported usage, /v1 claims count, and nothing cached goes stale when traits, aggregates, inventories or the
provider set change. (What Placement itself answers is compared in test_candidates_parity.py.)"""

from __future__ import annotations

import uuid

import httpx

from tests.placement.test_api import create, new_uuid


def custom_class(http: httpx.Client) -> str:
    name = f"CUSTOM_T{uuid.uuid4().hex[:10].upper()}"
    assert http.put(f"/resource_classes/{name}").status_code == 201
    return name


def generation(http: httpx.Client, rp: str) -> int:
    return int(http.get(f"/resource_providers/{rp}").json()["generation"])


def set_inventory(http: httpx.Client, rp: str, inventories: dict[str, dict[str, int | float]]) -> None:
    answer = http.put(f"/resource_providers/{rp}/inventories",
                      json={"resource_provider_generation": generation(http, rp), "inventories": inventories})
    assert answer.status_code == 200, answer.text


def candidates(http: httpx.Client, **params: str) -> dict:
    answer = http.get("/allocation_candidates", params=params)
    assert answer.status_code == 200, answer.text
    return answer.json()


def providers_of(found: dict) -> set[str]:
    return {uuid_ for request in found["allocation_requests"] for uuid_ in request["allocations"]}


def test_a_reported_host_is_a_candidate_with_its_usage_and_claims(http: httpx.Client, v1: httpx.Client) -> None:
    node = new_uuid()
    host = f"cmp-{node[:8]}"
    report = {"name": host, "stats": {"uuid": node, "vcpus": 8, "vcpus_used": 3, "memory_mb": 4096,
                                      "memory_mb_used": 1024, "local_gb": 100, "hypervisor_hostname": host,
                                      "cpu_allocation_ratio": 1.0, "ram_allocation_ratio": 1.0,
                                      "disk_allocation_ratio": 1.0}}
    assert v1.post("/v1/resource-stats", json=report).status_code == 200
    found = candidates(http, resources="VCPU:5", in_tree=node)
    assert providers_of(found) == {node}
    assert found["provider_summaries"][node]["resources"]["VCPU"] == {"capacity": 8, "used": 3}
    assert candidates(http, resources="VCPU:6", in_tree=node)["allocation_requests"] == []
    spec = {"flavor": {"vcpus": 2, "memory_mb": 512, "root_gb": 1}, "force_hosts": [host],
            "instance_uuids": [new_uuid()]}
    placed = v1.post("/v1/select_destinations", json=spec)
    assert placed.status_code == 200, placed.text
    summary = candidates(http, resources="VCPU:1", in_tree=node)["provider_summaries"][node]
    assert summary["resources"]["VCPU"]["used"] == 5 and summary["resources"]["MEMORY_MB"]["used"] == 1536
    assert candidates(http, resources="VCPU:4", in_tree=node)["allocation_requests"] == []


def test_answers_follow_trait_aggregate_inventory_and_provider_changes(http: httpx.Client) -> None:
    rc = custom_class(http)
    a, b = create(http)["uuid"], create(http)["uuid"]
    for rp in (a, b):
        set_inventory(http, rp, {rc: {"total": 4}})
    assert providers_of(candidates(http, resources=f"{rc}:1")) == {a, b}
    assert http.put("/traits/CUSTOM_FAST").status_code in (201, 204)
    answer = http.put(f"/resource_providers/{a}/traits",
                      json={"resource_provider_generation": generation(http, a), "traits": ["CUSTOM_FAST"]})
    assert answer.status_code == 200
    assert providers_of(candidates(http, resources=f"{rc}:1", required="CUSTOM_FAST")) == {a}
    assert providers_of(candidates(http, resources=f"{rc}:1", required="!CUSTOM_FAST")) == {b}
    aggregate = new_uuid()
    answer = http.put(f"/resource_providers/{b}/aggregates",
                      json={"resource_provider_generation": generation(http, b), "aggregates": [aggregate]})
    assert answer.status_code == 200
    assert providers_of(candidates(http, resources=f"{rc}:1", member_of=aggregate)) == {b}
    set_inventory(http, b, {rc: {"total": 4, "reserved": 3}})
    assert providers_of(candidates(http, resources=f"{rc}:2")) == {a}
    assert candidates(http, resources=f"{rc}:1", in_tree=b)["provider_summaries"][b]["resources"][rc] == {
        "capacity": 1, "used": 0}
    assert http.delete(f"/resource_providers/{a}").status_code == 204
    assert providers_of(candidates(http, resources=f"{rc}:1")) == {b}


def test_a_tree_and_a_sharing_provider_make_one_candidate(http: httpx.Client) -> None:
    cpu, disk = custom_class(http), custom_class(http)
    root = create(http)["uuid"]
    numa = create(http, parent=root)["uuid"]
    pool = create(http)["uuid"]
    set_inventory(http, numa, {cpu: {"total": 8}})
    set_inventory(http, pool, {disk: {"total": 100}})
    assert http.put(f"/resource_providers/{pool}/traits", json={
        "resource_provider_generation": generation(http, pool),
        "traits": ["MISC_SHARES_VIA_AGGREGATE"]}).status_code == 200
    assert candidates(http, resources=f"{cpu}:2,{disk}:10")["allocation_requests"] == []  # not linked yet
    aggregate = new_uuid()
    for rp in (root, pool):
        assert http.put(f"/resource_providers/{rp}/aggregates", json={
            "resource_provider_generation": generation(http, rp), "aggregates": [aggregate]}).status_code == 200
    found = candidates(http, resources=f"{cpu}:2,{disk}:10")
    assert found["allocation_requests"] == [{"allocations": {numa: {"resources": {cpu: 2}},
                                                             pool: {"resources": {disk: 10}}},
                                             "mappings": {"": sorted([numa, pool])}}]
    assert set(found["provider_summaries"]) == {root, numa, pool}
    assert found["provider_summaries"][numa]["parent_provider_uuid"] == root
    ram = custom_class(http)
    set_inventory(http, root, {ram: {"total": 16}})
    both = {"resources": f"{cpu}:2,{ram}:4"}  # two providers of one tree
    assert providers_of(candidates(http, **both)) == {numa, root}
    old = http.get("/allocation_candidates", params=both, headers={"openstack-api-version": "placement 1.28"})
    assert old.json() == {"allocation_requests": [], "provider_summaries": {}}  # before 1.29: one per tree


def test_limit_and_bad_queries(http: httpx.Client) -> None:
    rc = custom_class(http)
    for _ in range(5):
        set_inventory(http, create(http)["uuid"], {rc: {"total": 1}})
    limited = candidates(http, resources=f"{rc}:1", limit="2")
    assert len(limited["allocation_requests"]) == 2 and len(limited["provider_summaries"]) == 2
    for params, words in [({"resources": f"{rc}:1", "limit": "0"}, "Failed validating 'pattern'"),
                          ({"resources": "CUSTOM_NEVER_MADE:1"}, "No such resource class CUSTOM_NEVER_MADE"),
                          ({"resources": f"{rc}:1", "required": "CUSTOM_NEVER_MADE"}, "No such trait(s)"),
                          ({"resources": f"{rc}:1", "bogus": "1"}, "does not match any of the regexes"),
                          ({"resources1": f"{rc}:1", "resources2": f"{rc}:1"}, '"group_policy" parameter')]:
        answer = http.get("/allocation_candidates", params=params)
        assert answer.status_code == 400 and words in answer.json()["errors"][0]["detail"], answer.text
    assert http.get("/allocation_candidates", params={"resources": f"{rc}:1"},
                    headers={"openstack-api-version": "placement 1.9"}).status_code == 404
