"""Runs inside the Cinder 29 reference venv: reads generated clouds (JSON on stdin), answers with Cinder's own code.

Cinder's BackendState/PoolState take each backend's report (update_from_volume_capability), consume the volumes
already placed (consume_from_volume), and Cinder's filter classes and weight handler judge every request with the
filter properties Cinder's FilterScheduler builds. Only what would reach another service is replaced: the volume
database (where volumes live, how many a pool holds) and Nova (where an instance runs) answer from the cloud.
A filter that raises on a pool is reported as "error" for that pool (Cinder would fail the whole request).
"""

from __future__ import annotations

import copy
import datetime
import json
import sys
import warnings
from typing import Any

warnings.filterwarnings("ignore")

from cinder import context as cinder_context  # noqa: E402
from cinder import objects  # noqa: E402

objects.register_all()

from cinder.scheduler import host_manager, weights  # noqa: E402
from cinder.scheduler.filters import (  # noqa: E402
    affinity_filter,
    availability_zone_filter,
    capabilities_filter,
    capacity_filter,
    driver_filter,
    instance_locality_filter,
    json_filter,
)
from cinder.scheduler.weights import capacity, goodness, volume_number  # noqa: E402
from oslo_config import cfg  # noqa: E402

CONF = cfg.CONF
CONF([], project="cinder")

FILTERS = {
    "AvailabilityZoneFilter": availability_zone_filter.AvailabilityZoneFilter,
    "CapacityFilter": capacity_filter.CapacityFilter,
    "CapabilitiesFilter": capabilities_filter.CapabilitiesFilter,
    "DriverFilter": driver_filter.DriverFilter,
    "InstanceLocalityFilter": instance_locality_filter.InstanceLocalityFilter,
    "SameBackendFilter": affinity_filter.SameBackendFilter,
    "DifferentBackendFilter": affinity_filter.DifferentBackendFilter,
    "JsonFilter": json_filter.JsonFilter,
}
WEIGHERS = {
    "CapacityWeigher": capacity.CapacityWeigher,
    "AllocatedCapacityWeigher": capacity.AllocatedCapacityWeigher,
    "VolumeNumberWeigher": volume_number.VolumeNumberWeigher,
    "GoodnessWeigher": goodness.GoodnessWeigher,
}
DEFAULT_FILTERS = ("AvailabilityZoneFilter", "CapacityFilter", "CapabilitiesFilter")
OPTIONS = ("capacity_weight_multiplier", "allocated_capacity_weight_multiplier", "volume_number_multiplier",
           "max_over_subscription_ratio")

VOLUMES: list[dict[str, Any]] = []
INSTANCES: dict[str, str] = {}


def _volumes_on(context: Any, affinity_uuids: list[str], backend_state: Any) -> list[dict[str, Any]]:
    # the volume database's host filter: with a '#', the pool named exactly
    return [v for v in VOLUMES if v["id"] in affinity_uuids and f"{v['host']}#{v['pool']}" == backend_state.host]


def _volume_count(context: Any, host: str, count_only: bool = False) -> int:
    return sum(1 for v in VOLUMES if f"{v['host']}#{v['pool']}" == host)


class _Nova:
    def get_server(self, context: Any, uuid: str, **kwargs: Any) -> Any:
        return type("Server", (), {"OS-EXT-SRV-ATTR:host": INSTANCES[uuid]})()


affinity_filter.AffinityFilter.__init__ = lambda self: None  # type: ignore[method-assign]
affinity_filter.AffinityFilter._get_volumes = lambda self, c, ids, b: _volumes_on(c, ids, b)  # type: ignore
volume_number.db.volume_data_get_for_host = _volume_count
instance_locality_filter.nova.API = _Nova


def pools_of(cloud: dict[str, Any]) -> list[Any]:
    out = []
    now = datetime.datetime.now(datetime.UTC)
    for backend in cloud["backends"]:
        state = host_manager.BackendState(backend["host"], None)
        caps = copy.deepcopy(backend["capabilities"])
        if backend.get("pools") is not None:
            caps["pools"] = copy.deepcopy(backend["pools"])
        caps["timestamp"] = now
        service = {"availability_zone": "nova", "disabled": False, **backend.get("service", {})}
        state.update_from_volume_capability(caps, service)
        out.extend(state.pools.values())
    by_host = {pool.host: pool for pool in out}
    for volume in cloud["volumes"]:
        by_host[f"{volume['host']}#{volume['pool']}"].consume_from_volume({"size": volume["size"]},
                                                                          update_time=False)
    return out


def properties(spec: dict[str, Any], context: Any) -> dict[str, Any]:
    """What FilterScheduler._get_weighted_candidates hands the filters and weighers."""
    request_spec = copy.deepcopy(spec)
    request_spec["resource_properties"] = request_spec["volume_properties"]
    volume_type = request_spec.get("volume_type") or {}
    props: dict[str, Any] = {"scheduler_hints": spec.get("scheduler_hints", {}), "context": context,
                             "request_spec": request_spec, "config_options": {}, "volume_type": volume_type,
                             "resource_type": volume_type}
    vol = request_spec["volume_properties"]
    props.update(size=vol["size"], availability_zone=vol.get("availability_zone"), user_id=vol.get("user_id"),
                 metadata=vol.get("metadata"), qos_specs=vol.get("qos_specs"))
    if spec.get("new_size"):
        props["new_size"] = spec["new_size"]
    return props


def verdicts(name: str, pools: list[Any], props: dict[str, Any]) -> dict[str, Any]:
    instance = FILTERS[name]()
    out: dict[str, Any] = {}
    for pool in pools:
        try:
            out[pool.host] = bool(instance.backend_passes(pool, props))
        except Exception:  # Cinder would fail the request on this pool
            out[pool.host] = "error"
    return out


def weighed(classes: list[Any], pools: list[Any], props: dict[str, Any]) -> Any:
    handler = weights.OrderedHostWeightHandler("cinder.scheduler.weights")
    try:
        ranked = handler.get_weighed_objects(classes, pools, props)
    except Exception as exc:
        return {"error": type(exc).__name__}
    return {w.obj.host: float(w.weight) for w in ranked}


def main() -> None:
    clouds = json.load(sys.stdin)["clouds"]
    context = cinder_context.get_admin_context()
    results = []
    for cloud in clouds:
        for option in OPTIONS:
            CONF.set_override(option, cloud["options"][option])
        VOLUMES[:] = cloud["volumes"]
        for spec in cloud["requests"]:
            pools = pools_of(cloud)
            INSTANCES.clear()
            INSTANCES.update(spec.get("instance_hosts") or {})
            props = properties(spec, context)
            answer: dict[str, Any] = {"filters": {name: verdicts(name, pools, props) for name in FILTERS},
                                      "weights": {}}
            defaults = [answer["filters"][name] for name in DEFAULT_FILTERS]
            if any(v == "error" for verdict in defaults for v in verdict.values()):
                answer["weights"] = {name: {"error": "filter"} for name in [*WEIGHERS, "all"]}
            else:
                candidates = [p for p in pools if all(verdict[p.host] for verdict in defaults)]
                for name, cls in WEIGHERS.items():
                    answer["weights"][name] = weighed([cls], candidates, props)
                answer["weights"]["all"] = weighed(list(WEIGHERS.values()), candidates, props)
            results.append(answer)
    json.dump({"results": results}, sys.stdout)


if __name__ == "__main__":
    main()
