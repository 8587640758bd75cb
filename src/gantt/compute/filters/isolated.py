"""IsolatedHostsFilter: isolated images run only on isolated hosts (and, by default, only they run there).

With ``restrict_isolated_hosts_to_isolated_images`` (the default) a node passes when "the image is isolated" equals
"the host is isolated"; without it, isolated hosts also take other images. With no isolated images configured,
the restrictive mode keeps everything off the isolated hosts. A request without an image (volume-backed) counts as
a non-isolated image.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from gantt.compute.filters.base import Filter, register
from gantt.compute.filters.hoststate import host_rows
from gantt.compute.request import RequestContext
from gantt.compute.state import HostTable


@register
class IsolatedHostsFilter(Filter):
    name = "IsolatedHostsFilter"
    static = True  # configuration, the image and host names only
    once_per_request = True

    def _image_isolated(self, ctx: RequestContext) -> bool:
        image = ctx.spec.image
        image_id = image.id if image is not None else None
        return image_id is not None and image_id in self.config.filter_scheduler.isolated_images

    def cache_key(self, ctx: RequestContext) -> Hashable:
        return self._image_isolated(ctx)

    def mask(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        fs = self.config.filter_scheduler
        restrict = fs.restrict_isolated_hosts_to_isolated_images
        image_isolated = self._image_isolated(ctx)
        if not restrict and not image_isolated:
            return None
        # Isolated images go to the isolated hosts only; any other image goes anywhere else.
        return host_rows(table, fs.isolated_hosts, value=image_isolated, base=not image_isolated)
