"""Host affinity: server groups, same_host / different_host hints, and SimpleCIDRAffinityFilter.

These masks start from the few hosts involved (where the named instances run, where the group's members are)
through ``table.instance_host`` and ``table.rows_of_host``; no filter here scans every host in Python. A host's
instances are shared by all of its nodes, as in Nova.

Group bookkeeping across the instances of one request (the engine's ``_book``): each placed instance adds its host
to ``ctx.group_hosts``, its UUID to ``ctx.group_members``, and its claim records where it runs, so instance k+1 of
an affinity request follows instance k and an anti-affinity request spreads.
"""

from __future__ import annotations

import ipaddress
from collections import Counter
from collections.abc import Iterable
from typing import ClassVar

import numpy as np

from gantt.compute.filters.base import CapacityUnknown, Filter, register
from gantt.compute.filters.hoststate import host_rows
from gantt.compute.request import RequestContext
from gantt.compute.state import HostTable
from gantt.model import InvalidRequest


def hosts_running(table: HostTable, uuids: Iterable[object]) -> set[str]:
    found = set()
    for uuid in uuids:
        if isinstance(uuid, str):
            host = table.instance_host(uuid)
            if host is not None:
                found.add(host)
    return found


def claimed_members(table: HostTable, ctx: RequestContext) -> set[str]:
    """Members the table knows were claimed under the group's hard policy, by any scheduler (Allocation.group),
    besides those the request lists: a member placed an instant ago is not in Nova's list yet."""
    group = ctx.hard_group
    return table.group_allocations(group) if group else set()


class _InstancesHint(Filter):
    """A hint naming instances (UUIDs): the hosts running any of them are the only ones in, or the only ones out."""

    once_per_request = True
    hint: ClassVar[str] = ""
    keep_their_hosts: ClassVar[bool] = True

    def mask(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        uuids = ctx.hint_list(self.hint)
        if not uuids:
            return None
        keep = self.keep_their_hosts
        return host_rows(table, hosts_running(table, uuids), value=keep, base=not keep)


@register
class SameHostFilter(_InstancesHint):
    """Hint ``same_host``: only hosts running at least one of the instances."""

    name = "SameHostFilter"
    hint = "same_host"


@register
class DifferentHostFilter(_InstancesHint):
    """Hint ``different_host``: only hosts running none of the instances."""

    name = "DifferentHostFilter"
    hint = "different_host"
    keep_their_hosts = False


@register
class ServerGroupAffinityFilter(Filter):
    """Policy ``affinity``: once the group has hosts, only those hosts."""

    name = "ServerGroupAffinityFilter"

    def mask(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        if ctx.group_policy != "affinity":
            return None
        hosts = set(ctx.group_hosts) | hosts_running(table, claimed_members(table, ctx))
        if not hosts:
            return None
        return host_rows(table, hosts)

    def headroom(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        if ctx.group_policy != "affinity":
            return None
        raise CapacityUnknown(self.name, "places a group's members by where the others went (an instance group)")


@register
class ServerGroupAntiAffinityFilter(Filter):
    """Policy ``anti-affinity``: a host passes while it runs fewer of the group's members than
    ``rules.max_server_per_host`` (default 1).

    As Nova's filter, a host's count is the group's members among the instances it runs (where the table knows them
    to run: instance info, reports, and claims, this request's earlier instances' included). The group's ``hosts``
    play no part: a host listed there that runs no member (a list older than a member's move or deletion) passes,
    as in Nova. The host already running the instance being scheduled passes (a move must not be blocked by the
    instance itself).
    """

    name = "ServerGroupAntiAffinityFilter"

    def mask(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        if ctx.group_policy != "anti-affinity":
            return None
        limit = int(ctx.group_rules.get("max_server_per_host", 1) or 1)
        counts: Counter[str] = Counter()
        for member in ctx.group_members | claimed_members(table, ctx):
            host = table.instance_host(member)
            if host is not None:
                counts[host] += 1
        full = [host for host, count in counts.items() if count >= limit]
        if not full:
            return None
        mask = host_rows(table, full, value=False, base=True)
        uuids = ctx.spec.instance_uuids
        if uuids and ctx.instance_index < len(uuids):
            own = table.instance_host(uuids[ctx.instance_index])
            if own is not None:
                mask |= host_rows(table, [own])
        return mask

    def headroom(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        if ctx.group_policy != "anti-affinity":
            return None
        raise CapacityUnknown(self.name, "places a group's members by where the others went (an instance group)")


def _hint_text(ctx: RequestContext, name: str) -> str | None:
    value = ctx.hint(name)
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise InvalidRequest(f"scheduler hint {name} must be a string", field=f"$.scheduler_hints.{name}")
    return str(value).strip()


@register
class SimpleCIDRAffinityFilter(Filter):
    """Hints ``build_near_host_ip`` (an address) and ``cidr`` (a prefix length, ``/24`` or ``24``; default /24):
    only nodes whose ``host_ip`` lies in that network."""

    name = "SimpleCIDRAffinityFilter"
    once_per_request = True

    def mask(self, table: HostTable, ctx: RequestContext) -> np.ndarray | None:
        near = _hint_text(ctx, "build_near_host_ip")
        if not near:
            return None
        try:
            address = ipaddress.ip_address(near)
        except ValueError:
            raise InvalidRequest(f"build_near_host_ip {near!r} is not an IP address",
                                 field="$.scheduler_hints.build_near_host_ip") from None
        cidr = _hint_text(ctx, "cidr") or "/24"
        prefix_text = cidr[1:] if cidr.startswith("/") else cidr
        if not prefix_text.isdigit() or int(prefix_text) > address.max_prefixlen:
            raise InvalidRequest(f"cidr {cidr!r} is not a prefix length such as /24",
                                 field="$.scheduler_hints.cidr")
        network = ipaddress.ip_network(f"{address}/{int(prefix_text)}", strict=False)
        n = table.n
        ip4 = table.col("host_ip4")
        if network.version == 4:
            netmask = int(network.netmask)
            inside: np.ndarray = (ip4 >= 0) & ((ip4 & netmask) == int(network.network_address))
            return inside
        # IPv6: only the nodes without an IPv4 address can match; look at those few one by one.
        mask = np.zeros(n, dtype=np.bool_)
        for row in np.flatnonzero(ip4 < 0).tolist():
            text = table.host_ips[row]
            if not text:
                continue
            try:
                mask[row] = ipaddress.ip_address(text) in network
            except ValueError:
                continue
        return mask
