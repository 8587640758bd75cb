"""AggregateImagePropertiesIsolation: aggregate metadata keys that are image properties must match the image.

For every metadata key of the node's aggregates (only keys starting with ``<namespace><separator>`` when
``[filter_scheduler] aggregate_image_properties_isolation_namespace`` is set), an image that sets that property
must have a value among the key's values (comma-separated values are separate values; the property is compared
as ``str()``). An image without the property, or a node in no aggregate, passes.

The image is read as Nova reads it, through its ImageMetaProps (``image_fields``): a key that is not one of its
fields restricts nothing (``license_tier`` on an aggregate never excludes a host), legacy names are read under
their current names, values are typed and canonical (``amd64`` is ``x86_64``; ``hw_boot_menu: "yes"`` is
``True`` and matches an aggregate's ``True``, not ``true``), and a false value (``False``, ``0``) restricts
nothing.
"""

from __future__ import annotations

import json
from collections.abc import Hashable
from typing import Any

import numpy as np

from gantt.compute.filters.agg_meta import Metadata, rows_where
from gantt.compute.filters.base import Filter, register
from gantt.compute.filters.image_fields import typed_properties
from gantt.compute.request import RequestContext
from gantt.compute.state import HostTable


def _props(ctx: RequestContext) -> dict[str, Any]:
    return typed_properties(ctx.image_props)


@register
class AggregateImagePropertiesIsolation(Filter):
    name = "AggregateImagePropertiesIsolation"
    static = True  # aggregates and the image's properties only
    once_per_request = True

    def cache_key(self, ctx: RequestContext) -> Hashable:
        return json.dumps(_props(ctx), sort_keys=True, default=str)

    def mask(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        props = {key: value for key, value in _props(ctx).items() if value}
        if not props or not table.aggregates():
            return None
        fs = self.config.filter_scheduler
        prefix = (fs.aggregate_image_properties_isolation_namespace or "")
        if prefix:
            prefix += fs.aggregate_image_properties_isolation_separator

        def passes(meta: Metadata) -> bool:
            for key, options in meta.items():
                if prefix and not key.startswith(prefix):
                    continue
                prop = props.get(key)
                if prop is not None and str(prop) not in options:
                    return False
            return True

        return rows_where(table, passes)
