"""The Nova side of the PCI-alias parity suite: runs under the reference virtualenv (nova==34.0.0), never imports
gantt.

Reads ``{"aliases": [...], "supports": [...]}`` on stdin.

- ``aliases``: per case ``[pci] alias`` entries, ``[filter_scheduler] pci_in_placement`` and a flavor's
  ``pci_passthrough:alias``: what ``nova.pci.request.get_alias_from_config`` makes of the entries (or that it
  refuses them), and with the option on the request groups ``RequestSpec.generate_request_groups_from_pci_requests``
  makes of the flavor's requests (resource class and required traits of each one-device group, per request).
- ``supports``: per case pools (``pci_stats``), the devices' providers (per class the devices each can still give,
  and its traits) and a flavor asking for aliases under ``pci_in_placement``: whether Nova's PciPassthroughFilter
  would keep the host, i.e. whether some allocation candidate Placement could make (each group on a provider with
  its class, its traits and room, the providers' room shared by all groups; enumerated here by brute force, which
  is Placement's rule for granular groups under ``group_policy=none``) lets ``PciDeviceStats.support_requests`` with
  that candidate's mappings succeed. The case's flavor may set ``group_policy``: the policy Nova asks Placement
  with is Nova's own ``resources_from_request_spec``'s (the flavor's, else ``none`` for these groups), and under
  ``isolate`` a candidate gives every group a provider of its own (Placement's ``_satisfies_group_policy``).
"""

from __future__ import annotations

import itertools
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

from nova.pci import request as pci_request  # noqa: E402
from nova.pci import stats as pci_stats  # noqa: E402

CONF = nova.conf.CONF
CONF([], project="nova", default_config_files=[])


def _configure(entries: list[str], in_placement: bool) -> None:
    CONF.set_override("alias", entries, group="pci")
    CONF.set_override("pci_in_placement", in_placement, group="filter_scheduler")
    pci_request.get_alias_from_config.cache_clear()  # Nova parses [pci] alias once per process


def _requests(flavor_alias: str) -> Any:
    flavor = objects.Flavor(extra_specs={"pci_passthrough:alias": flavor_alias})
    return pci_request.get_pci_requests_from_flavor(flavor)


def _groups(requests: Any) -> Any:
    spec = objects.RequestSpec(pci_requests=requests, requested_resources=[])
    spec.generate_request_groups_from_pci_requests()
    return spec.requested_resources


def _alias_case(case: dict[str, Any]) -> dict[str, Any]:
    _configure(case["entries"], case["in_placement"])
    try:
        aliases = pci_request.get_alias_from_config()
    except Exception as exc:
        return {"refused": type(exc).__name__}
    out: dict[str, Any] = {"aliases": {name: [policy, specs] for name, (policy, specs) in aliases.items()}}
    if case["in_placement"] and case.get("flavor_alias"):
        requests = _requests(case["flavor_alias"])
        groups = {g.requester_id: g for g in _groups(requests)}
        out["groups"] = [[[list(g.resources.items()), sorted(g.required_traits)]
                          for g in (groups[f"{r.request_id}-{i}"] for i in range(r.count))]
                         for r in requests.requests]
    return out


def _group_policy(groups: list[Any], flavor_alias: str, given: str | None) -> str | None:
    """The group_policy Nova's scheduler asks Placement for these groups with (its resources_from_request_spec)."""
    from nova.scheduler import utils

    extra = {"pci_passthrough:alias": flavor_alias, **({"group_policy": given} if given else {})}
    flavor = objects.Flavor(vcpus=1, memory_mb=512, root_gb=1, ephemeral_gb=0, swap=0, extra_specs=extra)
    spec = objects.RequestSpec(flavor=flavor, image=objects.ImageMeta(properties=objects.ImageMetaProps()),
                               is_bfv=False, requested_resources=groups, scheduler_hints={})
    policy: str | None = utils.resources_from_request_spec(None, spec, None).group_policy
    return policy


def _candidates(groups: list[Any], providers: dict[str, Any], isolate: bool = False) -> Any:
    """Every allocation candidate for the groups (one device each): a provider per group that has the group's
    class and traits, no provider given more of a class than it has room for; under ``isolate``, no provider
    given two groups."""
    choices = []
    for group in groups:
        [(rc, _)] = group.resources.items()
        choices.append([rp for rp, p in providers.items()
                        if p["free"].get(rc, 0) > 0 and group.required_traits <= set(p["traits"])])
    for picked in itertools.product(*choices):
        if isolate and len(set(picked)) < len(picked):
            continue
        used: dict[tuple[str, str], int] = {}
        for group, rp in zip(groups, picked, strict=True):
            [(rc, _)] = group.resources.items()
            used[(rp, rc)] = used.get((rp, rc), 0) + 1
        if all(n <= providers[rp]["free"].get(rc, 0) for (rp, rc), n in used.items()):
            yield {group.requester_id: [rp] for group, rp in zip(groups, picked, strict=True)}


def _supports_case(case: dict[str, Any], policy: str | None = None) -> bool | str:
    """True when a candidate lets the pools give every device asked; "short" when the only candidates Nova's
    filter accepts give fewer (``_filter_pools`` counts the devices of every pool a candidate names against the
    request, not those of the providers it maps to: a group on a provider whose pool the spec excludes, or that
    has none, passes unserved, and the compute's claim is left one device short)."""
    _configure(case["entries"], True)
    requests = _requests(case["flavor_alias"])
    groups = list(_groups(requests))
    isolate = _group_policy(groups, case["flavor_alias"], policy or case.get("group_policy")) == "isolate"
    pools = objects.PciDevicePoolList(objects=[objects.PciDevicePool.from_dict(dict(p)) for p in case["pools"]])
    wanted = sum(r.count for r in requests.requests)
    short = False
    for mapping in _candidates(groups, case["providers"], isolate):
        # Placement maps the unsuffixed group to the root provider in every candidate
        stats = pci_stats.PciDeviceStats(None, stats=pools)
        before = sum(p["count"] for p in stats.pools)
        if not stats.support_requests(requests.requests, {"": ["root"], **mapping}):
            continue
        stats.apply_requests(requests.requests, {"": ["root"], **mapping})  # what support_requests tried on a copy
        if before - sum(p["count"] for p in stats.pools) == wanted:
            return True
        short = True
    return "short" if short else False


def main() -> None:
    doc = json.load(sys.stdin)
    supports = doc.get("supports", ())
    json.dump({"aliases": [_alias_case(c) for c in doc.get("aliases", ())],
               "supports": [_supports_case(c) for c in supports],
               # the isolate cases Placement would have answered otherwise under group_policy=none
               "isolate_differs": sum(c.get("group_policy") == "isolate" and _supports_case(c, "none")
                                      != _supports_case(c) for c in supports)}, sys.stdout)


if __name__ == "__main__":
    main()
