"""Nova's multi-instance loop on generated requests: runs under the reference virtualenv, never imports gantt.

Each request is given to Nova 34's own ``SchedulerManager._schedule`` (its ``_get_sorted_hosts`` with
``host_subset_size`` and ``shuffle_best_same_weighed_hosts``, ``_consume_selected_host``, the re-sort for the next
instance, ``_get_alternate_hosts``) over HostStates built as ``nova_driver`` builds them. Only what needs a
service is served here: the hosts come in the order given (Nova's host manager lists them from a set, an order
that means nothing, so the order Gantt breaks first ties by is one Nova could have), Placement's allocation
candidates are one per host that fits one instance, and its claim succeeds while the host still has room.

``random`` inside Nova's manager is replaced by a recorder: per call of ``random.choice`` it notes the names it
chose among, and it takes the node the request's ``replay`` names for that instance when that node is among them
(else the first). Without a replay that is Nova's pick with ``host_subset_size = 1``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import nova_driver  # the same directory: HostStates, options and RequestSpecs built as the filter suite builds them
from nova import context as nova_context
from nova import exception
from nova.scheduler import filters as nova_filters
from nova.scheduler import host_manager, manager
from nova.scheduler import weights as nova_weights
from oslo_utils import timeutils


class _Recorder:
    """Stands in for the ``random`` module in Nova's manager (choice and shuffle only)."""

    def __init__(self, replay: list[str] | None, fits: Any) -> None:
        self.replay = list(replay or [])
        self.fits = fits  # node name -> whether Placement's claim would succeed there now
        self.order: list[str] = []  # the last weighed order (get_weighed_hosts)
        self.subsets: list[list[str]] = []
        self.landings: list[list[str]] = []
        self.best: list[list[str]] = []

    def choice(self, subset: list[Any]) -> Any:
        names = [h.nodename for h in subset]
        call = len(self.subsets)
        self.subsets.append(sorted(names))
        # Where a pick of each lands: there if its claim succeeds, else _schedule's claim loop walks the list
        # (the pick first, then the weighed order) to the first node whose claim does.
        landing = set()
        for name in names:
            land = name if self.fits(name) else next((n for n in self.order if n != name and self.fits(n)), None)
            if land is not None:
                landing.add(land)
        self.landings.append(sorted(landing))
        if call < len(self.replay) and self.replay[call] in names:
            return subset[names.index(self.replay[call])]
        return subset[0]

    def shuffle(self, best: list[Any]) -> None:
        """Nova shuffles the hosts tied at the best weight; noted, and the replayed node put first."""
        names = [h.nodename for h in best]
        self.best.append(sorted(names))
        call = len(self.subsets)
        if call < len(self.replay) and self.replay[call] in names:
            at = names.index(self.replay[call])
            best.insert(0, best.pop(at))


def _fits(host: dict[str, Any], used: dict[str, float], flavor: dict[str, Any]) -> bool:
    """Placement's capacity check on the classic inventories: (total - reserved) * ratio - used >= asked."""
    s = host["stats"]
    return (s["vcpus"] * s["cpu_allocation_ratio"] - used["VCPU"] >= flavor["vcpus"]
            and s["memory_mb"] * s["ram_allocation_ratio"] - used["MEMORY_MB"] >= flavor["memory_mb"]
            and s["local_gb"] * s["disk_allocation_ratio"] - used["DISK_GB"] >= flavor["root_gb"])


class _Placement:
    """Placement's client where ``_schedule`` calls it itself: dropping a failed request's claims (the world is
    built afresh for every request, so nothing needs undoing)."""

    def delete_allocation_for_instance(self, *args: Any, **kwargs: Any) -> None:
        return None


class _Manager(manager.SchedulerManager):
    placement_client = _Placement()  # claims go to ``claim`` below, never to a Placement service


def _manager() -> Any:
    hm = host_manager.HostManager.__new__(host_manager.HostManager)
    hm.filter_handler = nova_filters.HostFilterHandler()
    hm.filter_cls_map = {cls.__name__: cls for cls in nova_filters.all_filters()}
    hm.filter_obj_map = {}
    hm.enabled_filters = hm._choose_host_filters(hm._load_filters())
    hm.weight_handler = nova_weights.HostWeightHandler()
    hm.weighers = [cls() for cls in hm.weight_handler.get_matching_classes(
        nova_driver.CONF.filter_scheduler.weight_classes)]
    mgr = _Manager.__new__(_Manager)
    mgr.host_manager = hm
    return mgr


def _one(cloud: dict[str, Any], case: dict[str, Any]) -> dict[str, Any]:
    now = timeutils.utcnow()
    states = nova_driver._host_states(cloud, now)
    spec_dict = case["spec"]
    spec = nova_driver._spec(spec_dict)
    spec.num_instances = len(spec_dict["instance_uuids"])
    spec.requested_resources = []
    flavor = spec_dict["flavor"]
    used = {h["node"]: {"VCPU": h["stats"].get("vcpus_used", 0), "MEMORY_MB": h["stats"].get("memory_mb_used", 0),
                        "DISK_GB": h["stats"].get("local_gb_used", 0)} for h in cloud["hosts"]}
    by_node = {h["node"]: h for h in cloud["hosts"]}
    candidates = {s.uuid: [{"mappings": {}, "node": s.nodename}] for s in states
                  if _fits(by_node[s.nodename], used[s.nodename], flavor)}

    def claim(ctxt: Any, client: Any, spec_obj: Any, instance_uuid: str, alloc_req: dict[str, Any],
              allocation_request_version: Any = None) -> bool:
        node = alloc_req["node"]
        if not _fits(by_node[node], used[node], flavor):
            return False
        used[node]["VCPU"] += flavor["vcpus"]
        used[node]["MEMORY_MB"] += flavor["memory_mb"]
        used[node]["DISK_GB"] += flavor["root_gb"]
        return True

    recorder = _Recorder(case.get("replay"), lambda node: _fits(by_node[node], used[node], flavor))
    manager.random = recorder
    manager.utils.claim_resources = claim
    mgr = _manager()
    weigh = mgr.host_manager.get_weighed_hosts

    def weighed(hosts: Any, spec_obj: Any) -> Any:
        out = weigh(hosts, spec_obj)
        recorder.order = [w.obj.nodename for w in out]
        return out

    mgr.host_manager.get_weighed_hosts = weighed
    mgr._get_all_host_states = lambda ctxt, spec_obj, summaries: iter(
        [s for s in states if s.uuid in summaries])
    ctxt = nova_context.RequestContext(user_id="u1", project_id=spec_dict["project_id"])
    try:
        selections = mgr._schedule(ctxt, spec, list(spec_dict["instance_uuids"]), candidates,
                                   {uuid: {} for uuid in candidates}, return_alternates=True)
    except exception.NoValidHost:
        return {"chosen": None, "subsets": recorder.subsets, "landings": recorder.landings, "best": recorder.best}
    return {"chosen": [sel[0].nodename for sel in selections],
            "alternates": [[s.nodename for s in sel[1:]] for sel in selections],
            "subsets": recorder.subsets, "landings": recorder.landings, "best": recorder.best}


def main() -> None:
    doc = json.load(sys.stdin)
    results = []
    for cloud in doc["clouds"]:
        nova_driver._options(cloud["options"])
        for case in cloud["requests"]:
            results.append(_one(cloud, case))
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
