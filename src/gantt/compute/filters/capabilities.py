"""ComputeCapabilitiesFilter: flavor extra specs matched against the node's HostState attributes.

Which extra specs count (Nova's rules):
- ``capabilities:<attr>[:<sub>…]``: the attribute, then dict keys below it (a JSON string is decoded on the way,
  as Nova decodes cpu_info); ``hw:maxphysaddr_bits=N`` means ``capabilities:cpu_info:maxphysaddr:bits >= N``;
- an unscoped key: only if it names a HostState attribute or a key of the node's ``stats`` (else ignored);
- any other scope (``hw:``, ``trait:``, ``aggregate_instance_extra_specs:`` …) is not this filter's business.
An attribute the node does not have (None) falls back to ``stats``; nothing found there either fails the node.
The value matched is ``str()`` of what was found, with the operators of ``extra_specs_ops``.

Capabilities are interned, so their part of the mask is evaluated once per distinct value and memoized until
``static_revision`` moves; specs naming usage attributes (free_ram_mb, num_instances …) are evaluated on columns;
specs naming HostState's objects (service, instances, metrics, pci_stats, numa_topology, limits, aggregates,
allocation_candidates, updated: ``hoststate.OBJECT_ATTRS``) node by node, walked as Nova walks them. Gantt has no
cells: ``cell_uuid`` is not an attribute here (a documented difference).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from gantt.compute.filters import extra_specs_ops
from gantt.compute.filters.base import CapacityUnknown, Filter, register
from gantt.compute.filters.extra_specs_ops import Requirement
from gantt.compute.filters.hoststate import (
    CAPS_ATTRS,
    HOSTSTATE_ATTRS,
    IDENTITY_ATTRS,
    NUMERIC_ATTRS,
    OBJECT_ATTRS,
    StaticMemo,
    caps_attribute,
    caps_factor,
    descend,
    identity_attribute,
    numeric_attribute,
    object_attribute,
)
from gantt.compute.request import RequestContext
from gantt.compute.state import HostCaps, HostTable
from gantt.config import Config
from gantt.model import InvalidRequest

Spec = tuple[tuple[str, ...], Requirement, bool]  # (scope below "capabilities", requirement, unscoped key)


def relevant_specs(extra_specs: dict[str, str]) -> list[Spec]:
    """The extra specs this filter checks, parsed; InvalidRequest names a malformed one."""
    specs = dict(extra_specs)
    bits = specs.pop("hw:maxphysaddr_bits", None)
    if bits is not None:
        specs["capabilities:cpu_info:maxphysaddr:bits"] = f">= {bits}"
    out: list[Spec] = []
    for key, text in specs.items():
        scope = key.split(":")
        unscoped = len(scope) == 1
        if not unscoped:
            if scope[0] != "capabilities":
                continue
            scope = scope[1:]
        field = "hw:maxphysaddr_bits" if key == "capabilities:cpu_info:maxphysaddr:bits" and bits is not None \
            else key
        try:
            requirement = extra_specs_ops.parse(text)
        except ValueError as exc:
            raise InvalidRequest(f"extra spec {field}: {exc}", field=f"$.flavor.extra_specs.{field}") from None
        out.append((tuple(scope), requirement, unscoped))
    return out


def _caps_value(caps: HostCaps, scope: tuple[str, ...], unscoped: bool) -> tuple[bool, Any]:
    """(considered, value) for one node's capabilities; considered False: Nova ignores the key for this node."""
    root, rest = scope[0], scope[1:]
    stats = caps.stats if isinstance(caps.stats, dict) else {}
    if unscoped and root not in HOSTSTATE_ATTRS and root not in stats:
        return False, None
    value = caps_attribute(caps, root) if root in CAPS_ATTRS else None
    if value is None:
        value = stats.get(root)
    if rest:
        value = descend(value, rest)
    elif root == "cpu_info" and isinstance(value, dict | list):
        value = json.dumps(value)  # Nova keeps cpu_info as JSON text
    return True, value


def _caps_mask(table: HostTable, scope: tuple[str, ...], req: Requirement, unscoped: bool) -> np.ndarray:
    def passes(caps: HostCaps) -> bool:
        considered, value = _caps_value(caps, scope, unscoped)
        if not considered:
            return True
        return value is not None and req.matches(extra_specs_ops.to_text(value))

    return caps_factor(table).map(passes)


def _spec_mask(table: HostTable, scope: tuple[str, ...], req: Requirement) -> np.ndarray:
    """One spec naming a usage or identity attribute (these are always considered: HostState has them)."""
    root, rest = scope[0], scope[1:]
    numeric = numeric_attribute(table, root)
    if numeric is not None:
        if rest:  # a number has no keys below it
            return np.zeros(table.n, dtype=np.bool_)
        fast = req.numeric_mask(numeric.values)
        if fast is not None:
            return fast
        uniq, codes = np.unique(numeric.values, return_inverse=True)
        lut = np.fromiter((req.matches(numeric.text(v)) for v in uniq.tolist()), dtype=np.bool_, count=len(uniq))
        return lut[codes.reshape(-1)]
    identity = identity_attribute(table, root)
    assert identity is not None
    if rest:  # a name or an address has no keys below it
        return np.zeros(table.n, dtype=np.bool_)
    return identity.factor.map(lambda v: v is not None and req.matches(str(v)))


def _object_mask(table: HostTable, scope: tuple[str, ...], req: Requirement) -> np.ndarray:
    """One spec naming a HostState object (service, instances, …): read node by node, as these move with reports
    and claims (such specs are rare; the common ones stay on interned values and columns)."""
    root, rest = scope[0], scope[1:]
    caps = caps_factor(table)
    n = table.n
    out = np.zeros(n, dtype=np.bool_)
    for row in range(n):
        value = object_attribute(table, row, root)
        if value is None:  # Nova falls back to the node's stats
            stats = caps.values[caps.codes[row]].stats
            value = stats.get(root) if isinstance(stats, dict) else None
        if rest:
            value = descend(value, rest)
        out[row] = value is not None and req.matches(extra_specs_ops.to_text(value))
    return out


# HostState attributes a claim moves (Nova's consume_from_request): a capabilities: spec on one of them holds
# for some of the instances a capacity question counts and not for the others.
USAGE_ATTRS = frozenset({"free_ram_mb", "free_disk_mb", "disk_mb_used", "vcpus_used", "num_instances", "num_io_ops",
                         "instances", "numa_topology", "pci_stats"})


@register
class ComputeCapabilitiesFilter(Filter):
    name = "ComputeCapabilitiesFilter"
    once_per_request = True  # flavor and capabilities do not change within a request

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self._memo = StaticMemo(config.gantt.mask_cache_size)

    def mask(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        specs = relevant_specs(ctx.extra_specs)
        if not specs:
            return None
        static_specs: list[Spec] = []
        out: np.ndarray | None = None
        for scope, req, unscoped in specs:
            if scope[0] in OBJECT_ATTRS:
                part = _object_mask(table, scope, req)
                out = part if out is None else out & part
                continue
            if scope[0] not in NUMERIC_ATTRS and scope[0] not in IDENTITY_ATTRS:
                static_specs.append((scope, req, unscoped))
                continue
            part = _spec_mask(table, scope, req)
            out = part if out is None else out & part
        if static_specs:
            def build() -> np.ndarray:
                mask = np.ones(table.n, dtype=np.bool_)
                for scope, req, unscoped in static_specs:
                    mask &= _caps_mask(table, scope, req, unscoped)
                return mask

            key = tuple((scope, req.text, unscoped) for scope, req, unscoped in static_specs)
            part = self._memo.get(table, key, build)
            out = part.copy() if out is None else out & part
        return out

    def headroom(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        moving = sorted({scope[0] for scope, _, _ in relevant_specs(ctx.extra_specs)} & USAGE_ATTRS)
        if not moving:
            return None
        raise CapacityUnknown(self.name, f"matches {', '.join(moving)}, which each claim moves")
