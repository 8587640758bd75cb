"""ServerGroupSoftAffinityWeigher and ServerGroupSoftAntiAffinityWeigher (Nova's soft server-group policies).

The raw value of a node is how many members of the request's server group it runs (anti-affinity: minus that).
Only the few hosts that hold a member can score non-zero, so the column is built from those hosts alone: the
group's known hosts (``ctx.group_hosts``, which grows as this request's instances are placed) and wherever the
table says a member runs (``table.instance_host``). No loop over all hosts.
"""

from __future__ import annotations

import logging
from typing import ClassVar

import numpy as np

from gantt.compute.request import RequestContext
from gantt.compute.state import HostTable
from gantt.compute.weighers.base import Weigher, register

log = logging.getLogger(__name__)


class _GroupMembersWeigher(Weigher):
    policy: ClassVar[str] = ""
    sign: ClassVar[float] = 1.0

    def raw(self, table: HostTable, ctx: RequestContext, mask: np.ndarray | None = None) -> np.ndarray | None:
        if ctx.group_policy != self.policy:
            return None  # every node weighs 0 for this request
        members = ctx.group_members
        if not members:
            return None
        hosts = set(ctx.group_hosts)
        instance_host = table.instance_host
        for member in members:
            host = instance_host(member)
            if host is not None:
                hosts.add(host)
        counts: dict[int, int] = {}
        n = table.n
        for host in hosts:
            for row in table.rows_of_host(host):
                if row >= n:
                    continue
                # Nova counts members among the node's instances (HostState is per node, not per host).
                # One C-level set intersection: atomic under the GIL while claims add to the node's set.
                on_node = len(members & table.instances(row))
                if on_node:
                    counts[row] = on_node
        if not counts:
            return None
        out = np.zeros(n)
        rows = np.fromiter(counts.keys(), dtype=np.int64, count=len(counts))
        out[rows] = np.fromiter(counts.values(), dtype=np.float64, count=len(counts))
        if self.sign < 0:
            np.negative(out, out=out)
        return out


@register
class ServerGroupSoftAffinityWeigher(_GroupMembersWeigher):
    """``soft-affinity``: prefer the nodes that already run members of the group."""

    name = "ServerGroupSoftAffinityWeigher"
    multiplier_option = "soft_affinity_weight_multiplier"
    policy = "soft-affinity"


@register
class ServerGroupSoftAntiAffinityWeigher(_GroupMembersWeigher):
    """``soft-anti-affinity``: prefer the nodes that run the fewest members of the group."""

    name = "ServerGroupSoftAntiAffinityWeigher"
    multiplier_option = "soft_anti_affinity_weight_multiplier"
    policy = "soft-anti-affinity"
    sign = -1.0
