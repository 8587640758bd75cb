"""Nova's request filters (``nova/scheduler/request_filter.py``), which Nova runs before the filters to narrow
Placement's query, as always-on masks named after Nova's functions. Each is off unless its option is set (as in
Nova), except ``compute_status_filter``, which Nova always applies.

- ``require_tenant_aggregate`` ([scheduler] limit_tenants_to_placement_aggregate): when some aggregate has a
  ``filter_tenant_id*`` key whose value is exactly the project, only hosts in one of those aggregates; when none
  does, every host (or, with placement_aggregate_required_for_tenants, none).
- ``isolate_aggregates`` ([scheduler] enable_isolated_aggregate_filtering): an aggregate with a metadata key
  ``trait:T`` set to ``required`` keeps out every request that does not require trait T.
- ``require_image_type_support`` ([scheduler] query_placement_for_image_type_support): the image's disk format
  as a required trait ``COMPUTE_IMAGE_TYPE_<FORMAT>``.
- ``transform_image_metadata`` ([scheduler] image_metadata_prefilter): image properties (bus, video, vif,
  architecture, viommu models) as required traits; none when one of them names no trait.
- ``compute_status_filter``: a node with the COMPUTE_STATUS_DISABLED trait is out.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import ClassVar

import numpy as np
import os_traits

from gantt.compute.filters.base import Filter, register
from gantt.compute.filters.hoststate import in_any_aggregate
from gantt.compute.request import RequestContext
from gantt.compute.state import HostTable

_TENANT_KEY = "filter_tenant_id"
_IMAGE_TRAIT_PREFIXES = {
    "hw_cdrom_bus": "COMPUTE_STORAGE_BUS", "hw_disk_bus": "COMPUTE_STORAGE_BUS",
    "hw_video_model": "COMPUTE_GRAPHICS_MODEL", "hw_vif_model": "COMPUTE_NET_VIF_MODEL",
    "hw_architecture": "HW_ARCH", "hw_emulation_architecture": "COMPUTE_ARCH", "hw_viommu_model": "COMPUTE_VIOMMU",
}


def _having(table: HostTable, traits: frozenset[str]) -> np.ndarray:
    return table.factor("traits").map(lambda have: traits <= have)


class _RequestFilter(Filter):
    """Always on and static (Nova runs these on every request, before Placement); off unless ``option`` is set."""

    always_on = True
    static = True
    option: ClassVar[str | None] = None  # the [scheduler] switch; None: always applies

    def switched_on(self) -> bool:
        return self.option is None or bool(getattr(self.config.scheduler, self.option))

    def cache_key(self, ctx: RequestContext) -> Hashable:
        # The switch is part of the key: Nova reads it at each request, and Gantt's Nova seam follows a change made
        # after start (gantt.nova.conf.RequestOptions) in this same Config; a mask cached while off (None)
        # must not answer once it is on.
        return (True, self.request_key(ctx)) if self.switched_on() else False

    def request_key(self, ctx: RequestContext) -> Hashable:
        """The parts of the request (and of the options) the mask depends on, once the switch is on."""
        raise NotImplementedError

    def mask(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        if not self.switched_on():
            return None
        return self.narrow(table, ctx)

    def narrow(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        """The mask, once the switch is on."""
        raise NotImplementedError


@register
class RequireTenantAggregate(_RequestFilter):
    name = "require_tenant_aggregate"
    option = "limit_tenants_to_placement_aggregate"

    def request_key(self, ctx: RequestContext) -> Hashable:
        return ctx.spec.project_id, self.config.scheduler.placement_aggregate_required_for_tenants

    def narrow(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        project = ctx.spec.project_id
        keys = frozenset(agg.key for agg in table.aggregates()
                         if any(k.startswith(_TENANT_KEY) and v == project for k, v in agg.metadata.items()))
        if keys:
            return in_any_aggregate(table, keys)
        if self.config.scheduler.placement_aggregate_required_for_tenants:
            return np.zeros(table.n, dtype=np.bool_)
        return None


@register
class IsolateAggregates(_RequestFilter):
    name = "isolate_aggregates"
    option = "enable_isolated_aggregate_filtering"

    def request_key(self, ctx: RequestContext) -> Hashable:
        return ctx.required_traits - ctx.feature_traits

    def narrow(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        # the guest features' traits are the root provider's, which Nova adds after this filter has run
        wanted = {f"trait:{t}" for t in ctx.required_traits - ctx.feature_traits}
        keys = frozenset(agg.key for agg in table.aggregates()
                         if any(k.startswith("trait:") and v == "required" and k not in wanted
                                for k, v in agg.metadata.items()))
        return ~in_any_aggregate(table, keys) if keys else None


@register
class RequireImageTypeSupport(_RequestFilter):
    name = "require_image_type_support"
    option = "query_placement_for_image_type_support"

    def request_key(self, ctx: RequestContext) -> Hashable:
        return ctx.spec.image.disk_format if ctx.spec.image else None

    def narrow(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        image = ctx.spec.image
        if image is None or not image.disk_format:
            return None  # no image (boot from volume): nothing to require, as in Nova
        trait = f"COMPUTE_IMAGE_TYPE_{image.disk_format.upper()}"
        if not hasattr(os_traits, trait):
            return None  # Nova logs and requires nothing for a format os-traits does not know
        return _having(table, frozenset({trait}))


@register
class TransformImageMetadata(_RequestFilter):
    name = "transform_image_metadata"
    option = "image_metadata_prefilter"

    def request_key(self, ctx: RequestContext) -> Hashable:
        return tuple(sorted((k, str(v)) for k, v in ctx.image_props.items() if k in _IMAGE_TRAIT_PREFIXES))

    def narrow(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        traits = set()
        for key, prefix in _IMAGE_TRAIT_PREFIXES.items():
            if key in ctx.image_props:
                trait = f"{prefix}_{str(ctx.image_props[key]).replace('-', '_').upper()}"
                if not hasattr(os_traits, trait):
                    return None  # Nova: one unknown trait and the prefilter adds none
                traits.add(trait)
        return _having(table, frozenset(traits)) if traits else None


@register
class ComputeStatusFilter(_RequestFilter):
    name = "compute_status_filter"

    def request_key(self, ctx: RequestContext) -> Hashable:
        return None

    def narrow(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        disabled = os_traits.COMPUTE_STATUS_DISABLED
        mask = table.factor("traits").map(lambda have: disabled not in have)
        return None if mask.all() else mask  # cached as static: None spares every decision a pass
