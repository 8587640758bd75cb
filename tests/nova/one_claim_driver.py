"""Run under the nova+gantt venv (tests/nova/venv.py), by tests/nova/test_one_claim.py: issue 33's "one claim" as
deployed. A real ``gantt serve`` is Nova's Placement endpoint on a SQLite file; Gantt's nova-scheduler managers
(Nova's service framework, asked by Nova's own ``SchedulerAPI``) decide and claim on the same file; nova-compute's
part is played by Nova's own report client (``SchedulerReportClient``), registering each compute node's root
provider, inventory and traits over HTTP as the resource tracker does, and the cell database holds the compute
nodes as nova-compute writes them: one compute service with two nodes (Nova's multi-node fake driver: host and
node names differ), one with an FQDN node name; providers registered before the cell rows for some nodes, after
for another.

stdin: {"src", "tmp", "transport_url", "placement_url", "token", "store"}
stdout: {"result": {...} or {"error": traceback}, "nova_calls": {...}}
"""

from __future__ import annotations

import json
import sys
import threading
import traceback
import uuid as uuidlib
from pathlib import Path
from typing import Any

GOLD = "CUSTOM_GOLD"
INVENTORY = {"VCPU": 2, "MEMORY_MB": 2048, "DISK_GB": 20}


def main() -> None:
    payload = json.load(sys.stdin)
    sys.path.insert(0, payload["src"])  # the tree under test, never an installed Gantt
    from nova import monkey_patch

    monkey_patch.patch(backend="threading")
    import gantt

    assert gantt.__file__.startswith(payload["src"]), gantt.__file__
    import rpc_driver  # beside this file: Nova's world as the manager's other tests build it

    world = rpc_driver.World(Path(payload["tmp"]), payload["transport_url"])
    try:
        out = one_claim(world, rpc_driver, payload["placement_url"], payload["token"], payload["store"])
    except Exception:
        out = {"error": traceback.format_exc()}
    finally:
        world.end_scenario()
    json.dump({"result": out, "nova_calls": rpc_driver.NOVA_CALLS}, sys.stdout)
    sys.stdout.flush()


def report_client(url: str, token: str) -> tuple[Any, Any]:
    """Nova's report client on ``url``, with the credential nova-compute's ``[placement]`` section gives it."""
    from keystoneauth1 import adapter, session, token_endpoint
    from nova.scheduler.client import report

    ksa = session.Session(auth=token_endpoint.Token(url, token), additional_headers={"X-Roles": "admin,service"})
    placement = adapter.Adapter(ksa, service_type="placement", raise_exc=False)
    return report.SchedulerReportClient(adapter=placement), placement


def register(client: Any, ctxt: Any, uuid: str, name: str, traits: list[str]) -> None:
    """What nova-compute's resource tracker does for a node: ensure its root provider (named by the node), then
    flush its inventory and traits with ``update_from_provider_tree``."""
    tree = client.get_provider_tree_and_ensure_root(ctxt, uuid, name=name)
    tree.update_inventory(uuid, {rc: {"total": total, "reserved": 0, "min_unit": 1, "max_unit": total,
                                      "step_size": 1, "allocation_ratio": 1.0} for rc, total in INVENTORY.items()})
    tree.update_traits(uuid, ["COMPUTE_NODE", *traits])
    client.update_from_provider_tree(ctxt, tree)


def one_claim(w: Any, rpc: Any, url: str, token: str, store_url: str) -> dict[str, Any]:
    from nova import context

    from gantt.store import open_store

    w.begin(store=store_url)
    ctxt = context.get_admin_context()
    client, placement = report_client(url, token)
    nodes = {("c1", "c1-n1"): str(uuidlib.uuid4()), ("c1", "c1-n2"): str(uuidlib.uuid4()),
             ("c2", "c2.example.org"): str(uuidlib.uuid4())}
    sizes = {"vcpus": 2, "memory_mb": 2048, "local_gb": 20}
    # c1's two nodes: providers first (the resource tracker's usual order), then the cell rows
    register(client, ctxt, nodes[("c1", "c1-n1")], "c1-n1", [])
    register(client, ctxt, nodes[("c1", "c1-n2")], "c1-n2", [GOLD])
    w.compute("c1", hypervisor_hostname="c1-n1", node_uuid=nodes[("c1", "c1-n1")], **sizes)
    w.compute("c1", hypervisor_hostname="c1-n2", node_uuid=nodes[("c1", "c1-n2")], new_service=False, **sizes)
    # c2: the cell row first, read by the schedulers as they start; its provider after
    w.compute("c2", hypervisor_hostname="c2.example.org", node_uuid=nodes[("c2", "c2.example.org")], **sizes)
    # a root provider an operator made through Placement, with room for every boot here: no compute node has it,
    # so no Nova host is named so, and no boot may land on it
    orphan = str(uuidlib.uuid4())
    tree = client.get_provider_tree_and_ensure_root(ctxt, orphan, name="orphan")
    tree.update_inventory(orphan, {rc: {"total": 10 * total, "reserved": 0, "min_unit": 1, "max_unit": 10 * total,
                                        "step_size": 1, "allocation_ratio": 1.0} for rc, total in INVENTORY.items()})
    client.update_from_provider_tree(ctxt, tree)
    scheds = [w.scheduler("sched-a"), w.scheduler("sched-b")]
    register(client, ctxt, nodes[("c2", "c2.example.org")], "c2.example.org", [])
    out: dict[str, Any] = {"nodes": {f"{h}/{n}": u for (h, n), u in nodes.items()}}
    listed = placement.get("/resource_providers", microversion="1.36").json()["resource_providers"]
    out["providers"] = sorted((p["uuid"], p["name"]) for p in listed if p["uuid"] != orphan)
    out["orphan_usages"] = {}
    records = [sorted((h["host"], h["nodename"]) for h in s.manager.replica.hosts() if h["host"] != orphan)
               for s in scheds]
    out["records"] = records

    # A flavor requiring the trait only Placement knows (nova-compute set it): decided and claimed by Gantt
    with open_store(store_url) as store:
        before = store.head()
        gold = rpc.spec(2, 1024, 10)
        gold.flavor.extra_specs = {f"trait:{GOLD}": "required"}
        out["gold"] = rpc._select(w.client("sched-a"), ctxt, gold, [gold.instance_uuid])
        out["gold_instance"] = gold.instance_uuid
        # what Placement shows at once (no wait, no write of its own): the booking, as the Selection says
        out["gold_placement"] = client.get_allocs_for_consumer(ctxt, gold.instance_uuid)
        changes = store.changes(before, timeout=0)
    touching = [c for c in changes if c.allocation is not None and c.allocation.consumer_uuid == gold.instance_uuid]
    out["gold_commits"] = sorted({c.revision for c in touching})
    out["gold_changes"] = [c.kind for c in touching]

    # Six boots at once through the two managers, for the two slots left (c1-n1 and c2's node): two placed
    out["race"] = race(w, rpc, ctxt, 6)
    out["usages_after_race"] = usages(placement, nodes)
    out["race_placement"] = {i: client.get_allocs_for_consumer(ctxt, i)["allocations"]
                             for i in out["race"]["placed"]}
    # One slot freed through Placement (the conductor deleting a build's allocation): both managers race for it
    freed = sorted(out["race"]["placed"])[0]
    out["freed_node"] = next(iter(out["race_placement"][freed]))
    client.delete_allocation_for_instance(ctxt, freed, force=True)
    out["last_slot"] = race(w, rpc, ctxt, 2)
    out["usages_at_end"] = usages(placement, nodes)
    out["last_placement"] = {i: client.get_allocs_for_consumer(ctxt, i)["allocations"]
                             for i in out["last_slot"]["placed"]}
    out["orphan_usages"] = usages(placement, {("", ""): orphan})[orphan]
    return out


def race(w: Any, rpc: Any, ctxt: Any, n: int) -> dict[str, Any]:
    clients = [w.client("sched-a"), w.client("sched-b")]
    results: list[dict[str, Any]] = [{} for _ in range(n)]
    requests = [rpc.spec(2, 1024, 10) for _ in range(n)]
    barrier = threading.Barrier(n)

    def ask(i: int) -> None:
        barrier.wait()
        results[i] = rpc._select(clients[i % 2], ctxt, requests[i], [requests[i].instance_uuid], alternates=False)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    placed = {requests[i].instance_uuid: r["selections"][0][0] for i, r in enumerate(results) if "selections" in r}
    return {"placed": placed, "refused": [r["error"] for r in results if "error" in r]}


def usages(placement: Any, nodes: dict[tuple[str, str], str]) -> dict[str, dict[str, int]]:
    return {u: placement.get(f"/resource_providers/{u}/usages", microversion="1.36").json()["usages"]
            for u in nodes.values()}


if __name__ == "__main__":
    main()
