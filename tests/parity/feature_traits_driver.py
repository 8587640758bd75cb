"""The Nova side of the feature-trait parity suite: runs under the reference virtualenv (nova==34.0.0), never
imports gantt.

Reads ``{"cases": [{"extra_specs": {...}, "properties": {...}}, ...]}`` on stdin. Per case it builds Nova's own
``Flavor``, ``ImageMeta`` (``ImageMeta.from_dict``, which may refuse the properties) and ``RequestSpec``, runs Nova's
request filters (``request_filter.ALL_REQUEST_FILTERS`` in their order, at Nova's default options; only
``owner_nova_filter``, which asks the cells' databases for the computes' versions, is left out), and writes what
they asked Placement for: the root provider's required and forbidden traits, the request groups' required traits
(``ResourceRequest``), or the refusal (``image`` when ImageMeta refused, else the name of the filter that raised)
with the exception's name.
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

from nova.scheduler import request_filter  # noqa: E402
from nova.scheduler import utils as scheduler_utils  # noqa: E402

CONF = nova.conf.CONF
SKIPPED = {"owner_nova_filter"}  # reads every cell's services table


def _case(case: dict[str, Any]) -> dict[str, Any]:
    try:
        image = objects.ImageMeta.from_dict({"id": "img-1", "name": "img", "disk_format": "qcow2",
                                             "properties": dict(case["properties"])})
    except Exception as exc:  # any refusal of the properties is the request's refusal
        return {"refused": "image", "error": type(exc).__name__}
    flavor = objects.Flavor(name="f1", flavorid="f1", vcpus=1, memory_mb=512, root_gb=1, ephemeral_gb=0, swap=0,
                            extra_specs=dict(case["extra_specs"]))
    spec = objects.RequestSpec(flavor=flavor, image=image, project_id="p1", user_id="u1", num_instances=1,
                               availability_zone=None, ignore_hosts=None, force_hosts=None, force_nodes=None,
                               scheduler_hints={}, instance_group=None, is_bfv=False,
                               requested_resources=[])
    for fn in request_filter.ALL_REQUEST_FILTERS:
        if fn.__name__ in SKIPPED:
            continue
        try:
            fn(None, spec)
        except Exception as exc:  # what Nova's select_destinations would raise (or NoValidHost)
            return {"refused": fn.__name__, "error": type(exc).__name__, "message": str(exc)}
    groups = scheduler_utils.ResourceRequest.from_request_spec(spec)
    return {"root_required": sorted(spec.root_required), "root_forbidden": sorted(spec.root_forbidden),
            "group_required": sorted(groups.all_required_traits)}


def main() -> None:
    CONF([], project="nova", default_config_files=[])
    payload = json.load(sys.stdin)
    json.dump({"results": [_case(c) for c in payload["cases"]]}, sys.stdout)


if __name__ == "__main__":
    main()
