"""Issue 30 item 5: ``DELETE /v1/hosts/{h}`` freed another provider's usage. A consumer holding 1 VCPU on h4 and 5 on
p1 lost both when h4 was deleted (p1's usage dropped to 0), where Placement refuses to delete a provider with
allocations. Now the deletion is refused (409) while allocations have parts on the host; ``?force=true`` deletes
it and removes only its parts (the consumer keeps its 5 VCPU on p1). On every store kind, through real servers.
"""

from __future__ import annotations

import httpx

from tests.placement.test_api import new_uuid
from tests.placement.test_held_allocations import put
from tests.service.server import ServerProcess


def _report(v1: httpx.Client, host: str, node_uuid: str) -> None:
    answer = v1.post("/v1/resource-stats", json={"name": host, "stats": {
        "uuid": node_uuid, "vcpus": 8, "memory_mb": 4096, "local_gb": 100, "cpu_allocation_ratio": 1.0,
        "ram_allocation_ratio": 1.0, "disk_allocation_ratio": 1.0}})
    assert answer.status_code == 200, answer.text


def test_deleting_a_host_with_allocations_is_refused_unless_forced_and_never_frees_another(
        http: httpx.Client, v1: httpx.Client, server: ServerProcess) -> None:
    h4, p1 = new_uuid(), new_uuid()
    h4_name, p1_name = f"h4-{h4[:8]}", f"p1-{p1[:8]}"
    _report(v1, h4_name, h4)
    _report(v1, p1_name, p1)
    consumer, alone = new_uuid(), new_uuid()
    put(http, consumer, {h4: {"VCPU": 1}, p1: {"VCPU": 5}}, "INSTANCE")
    put(http, alone, {h4: {"VCPU": 2}}, "INSTANCE")

    refused = http.delete(f"/resource_providers/{h4}")
    assert refused.status_code == 409  # Placement's answer
    refused = v1.delete(f"/v1/hosts/{h4_name}")
    assert refused.status_code == 409, refused.text
    problem = refused.json()
    assert problem["field"] == "host" and consumer in problem["detail"] and alone in problem["detail"]
    assert v1.get(f"/v1/hosts/{h4_name}").status_code == 200  # nothing written
    assert http.get(f"/resource_providers/{p1}/usages").json()["usages"]["VCPU"] == 5
    bad = v1.delete(f"/v1/hosts/{h4_name}", params={"force": "yes"})
    assert bad.status_code == 400 and bad.json()["field"] == "force"
    on_get = v1.get(f"/v1/hosts/{h4_name}", params={"force": "true"})  # a deletion's parameter only
    assert on_get.status_code == 400 and on_get.json()["field"] == "force"

    assert v1.delete(f"/v1/hosts/{h4_name}", params={"force": "true"}).status_code == 204
    assert v1.get(f"/v1/hosts/{h4_name}").status_code == 404
    # the consumer keeps its part on p1, and only that; the one that held only h4 is gone
    shown = http.get(f"/allocations/{consumer}").json()
    assert {rp: part["resources"] for rp, part in shown["allocations"].items()} == {p1: {"VCPU": 5}}
    assert shown["consumer_generation"] == 2  # its allocations changed: a client holding 1 must read again
    assert http.get(f"/allocations/{alone}").json() == {"allocations": {}}
    assert http.get(f"/resource_providers/{p1}/usages").json()["usages"]["VCPU"] == 5
    # p1 counts it on /v1's side too: 3 VCPU left there
    spec = {"resources": {"VCPU": 4}, "force_hosts": [p1_name], "instance_uuids": [new_uuid()]}
    assert v1.post("/v1/select_destinations", json=spec).status_code != 200
    if not server.store.startswith("memory"):  # and a replica built from the store afresh sees the same
        server.restart()
        shown = http.get(f"/allocations/{consumer}").json()
        assert {rp: part["resources"] for rp, part in shown["allocations"].items()} == {p1: {"VCPU": 5}}
        assert http.get(f"/resource_providers/{p1}/usages").json()["usages"]["VCPU"] == 5
    # the consumer's remaining allocation is an ordinary one: rewritten with its generation, then deleted
    put_back = http.put(f"/allocations/{consumer}", json={
        "allocations": {p1: {"resources": {"VCPU": 3}}}, "project_id": "p", "user_id": "u",
        "consumer_generation": 2, "consumer_type": "INSTANCE"})
    assert put_back.status_code == 204, put_back.text
    assert http.delete(f"/allocations/{consumer}").status_code == 204
    assert http.get(f"/resource_providers/{p1}/usages").json()["usages"]["VCPU"] == 0
