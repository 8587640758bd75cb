"""Run under the nova+gantt venv (tests/nova/venv.py), as rpc_driver.py is (same stdin and stdout, same World: real
Nova databases, Gantt's manager served by Nova's service framework, asked by Nova's own SchedulerAPI), with the
scenario of a claim confirmed by Nova's instance info (gantt.nova.confirm)."""

from __future__ import annotations

import time
from typing import Any

import rpc_driver  # this script's directory is first on the path
from rpc_driver import World, _cell, _select, _wait, spec

CPUS = 6


def _numa(pinned: set[int]) -> str:
    """One NUMA cell of 6 CPUs both shared and dedicated (a compute with ``vcpu_pin_set``), ``pinned`` taken."""
    from nova import objects

    cpus = set(range(CPUS))
    cell = objects.NUMACell(id=0, cpuset=cpus, pcpuset=cpus, memory=8192, cpu_usage=len(pinned), memory_usage=0,
                            pinned_cpus=set(pinned), siblings=[{c} for c in sorted(cpus)],
                            mempages=[objects.NUMAPagesTopology(size_kb=4, total=8192 * 256, used=0)],
                            network_metadata=objects.NetworkMetadata(physnets=set(), tunneled=False), socket=0)
    text: str = objects.NUMATopology(cells=[cell])._to_json()
    return text


def confirm_by_instance_info(w: World) -> dict[str, Any]:
    """Two pinned guests in a row on one node: the second fits once ``update_instance_info`` lists the first and
    its node's row shows it; before that (the row alone, a row moved for another reason, the periodic sync's
    list) the first counts on top of the row, and nothing is ever counted zero times."""
    from nova import context, objects

    w.conf.set_override("enabled_filters", "ComputeFilter,NUMATopologyFilter", group="filter_scheduler")
    try:
        w.begin()
        w.compute("n1", vcpus=CPUS, numa_topology=_numa(set()))
        sched = w.scheduler("sched-confirm")
        table = sched.manager.replica.table
        api = w.client()
        ctxt = context.get_admin_context()
        out: dict[str, Any] = {}

        def boot(name: str, vcpus: int) -> str:
            request = spec(vcpus, 256, 1)
            request.flavor.extra_specs = {"hw:cpu_policy": "dedicated"}
            out[name] = _select(api, ctxt, request, [request.instance_uuid], alternates=False)
            return str(request.instance_uuid)

        def pins(*uuids: str) -> set[int]:
            held = [table.allocation(u) for u in uuids]
            return {cpu for a in held if a is not None for c in (a.numa or ()) for cpu in c.pinned_cpus}

        def is_confirmed(uuid: str) -> bool:
            held = table.allocation(uuid)
            return held is not None and held.confirmed

        def row(pinned: set[int], **fields: Any) -> None:
            """nova-compute's resource tracker saving the node (its claims applied, or another change)."""
            with _cell(w) as cctxt:
                node = objects.ComputeNode.get_by_nodename(cctxt, "n1")
                node.numa_topology = _numa(pinned)
                node.vcpus_used = len(pinned)
                for name, value in fields.items():
                    setattr(node, name, value)
                node.save()

        def listed(host: str, *uuids: str) -> None:
            api.update_instance_info(ctxt, host, objects.InstanceList(objects=[
                objects.Instance(uuid=u, host=host, node=host) for u in uuids]))

        def confirmed(uuid: str) -> bool:
            return _wait(lambda: is_confirmed(uuid), 10)

        a = boot("a", 4)
        row(pins(a))  # the compute applied a's claim
        # its periodic sync lists a (it may do so before the row shows it): nothing confirmed
        api.sync_instance_info(ctxt, "n1", [a])
        _wait(lambda: sched.manager.replica.instance_info.get("n1") == [a])
        boot("b_before", 2)
        out["a_confirmed_before"] = is_confirmed(a)
        listed("n1", a)  # the build finished: nova-compute casts that n1 runs a
        out["a_confirmed"] = confirmed(a)
        b = boot("b", 2)
        out["disjoint"] = not pins(a) & pins(b) and len(pins(a, b)) == CPUS
        # the row moves again before the compute applied b's claim (another change), and the periodic sync lists
        # b: b still counts, the node is full
        row(pins(a), current_workload=1)
        api.sync_instance_info(ctxt, "n1", [a, b])
        _wait(lambda: sorted(sched.manager.replica.instance_info.get("n1") or []) == sorted([a, b]))
        listed("n1", a)  # a cast naming another instance: b is not its business
        time.sleep(0.5)
        out["b_confirmed_early"] = is_confirmed(b)
        boot("c_while_b_unshown", 1)
        # b applied and listed: confirmed, counted once (by the row): the node is still full
        row(pins(a, b))
        listed("n1", b)
        out["b_confirmed"] = confirmed(b)
        boot("c_after", 1)
        return out
    finally:
        w.conf.clear_override("enabled_filters", group="filter_scheduler")


rpc_driver.SCENARIOS[confirm_by_instance_info.__name__] = confirm_by_instance_info

if __name__ == "__main__":
    rpc_driver.main()
