"""The Nova side of the PCPU fallback parity suite: runs under the reference virtualenv (nova==34.0.0), never imports
gantt.

Reads ``{"cases": [{"vcpus": N, "extra_specs": {...}, "properties": {...}, "disable": bool}, ...]}`` on stdin. Per
case it builds Nova's own Flavor, ImageMeta and RequestSpec, refuses what Nova's API refuses
(``ImageMeta.from_dict``, ``hardware.numa_get_constraints``), and writes the Placement queries Nova 34's
``SchedulerManager.select_destinations`` makes: the first from ``ResourceRequest.from_request_spec`` (the CPU
policies translated), then, when that request's ``cpu_pinning_requested`` and ``[workarounds]
disable_fallback_pcpu_query`` is off, the fallback one without the translation. Each query: its merged resources
and its required and forbidden traits.
"""

from __future__ import annotations

import json
import logging
import sys
import warnings
from typing import Any

warnings.filterwarnings("ignore")
logging.disable(logging.CRITICAL)

import nova.conf  # noqa: E402
from nova import objects  # noqa: E402

objects.register_all()

from nova.scheduler import utils as scheduler_utils  # noqa: E402
from nova.virt import hardware  # noqa: E402

CONF = nova.conf.CONF


def _query(request: Any) -> dict[str, Any]:
    groups = list(request._rg_by_id.values())
    return {"resources": dict(request.merged_resources()),
            "required": sorted(request.all_required_traits),
            "forbidden": sorted(set().union(*(g.forbidden_traits for g in groups)))}


def _case(case: dict[str, Any]) -> Any:
    try:
        image = objects.ImageMeta.from_dict({"id": "img-1", "name": "img", "disk_format": "qcow2",
                                             "properties": dict(case["properties"])})
        flavor = objects.Flavor(name="f1", flavorid="f1", vcpus=case["vcpus"], memory_mb=1024, root_gb=1,
                                ephemeral_gb=0, swap=0, extra_specs=dict(case["extra_specs"]))
        hardware.numa_get_constraints(flavor, image)  # what Nova's API refuses before it asks the scheduler
    except Exception as exc:  # any refusal by Nova's API is the request's refusal
        return {"invalid": type(exc).__name__}
    spec = objects.RequestSpec(flavor=flavor, image=image, project_id="p1", user_id="u1", num_instances=1,
                               is_bfv=False, requested_resources=[])
    CONF.set_override("disable_fallback_pcpu_query", case["disable"], group="workarounds")
    first = scheduler_utils.ResourceRequest.from_request_spec(spec, enable_pinning_translate=True)
    queries = [_query(first)]
    # nova/scheduler/manager.py, select_destinations: the second query and its merged answer
    if first.cpu_pinning_requested and not CONF.workarounds.disable_fallback_pcpu_query:
        queries.append(_query(scheduler_utils.ResourceRequest.from_request_spec(spec,
                                                                                enable_pinning_translate=False)))
    return queries


def main() -> None:
    CONF([], project="nova", default_config_files=[])
    payload = json.load(sys.stdin)
    json.dump({"results": [_case(c) for c in payload["cases"]]}, sys.stdout)


if __name__ == "__main__":
    main()
