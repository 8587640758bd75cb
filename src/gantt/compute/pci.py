"""PCI passthrough: a flavor's PCI requests (of the ``[pci] alias`` definitions, gantt.config.pci), and whether a
host's pools support them.

The semantics are Nova 34's:
- a flavor asks with the extra spec ``pci_passthrough:alias`` = ``"a1:2,a2:1"``: one request per entry, in order;
  an alias no definition names is refused;
- a host supports the requests (``PciDeviceStats.support_requests`` without NUMA cells, which is what
  PciPassthroughFilter asks) when applying them one after the other to a copy of its pools succeeds: a request
  takes the pools any of its specs matches (keys compared case-insensitively), minus PF pools unless a spec asks
  for type-PF, vDPA pools unless one asks for vdpa, remote-managed pools (an alias cannot ask for them), and pools
  whose live_migratable tag disagrees when every spec states one; then it consumes greedily, pool by pool in
  Nova's pool order (fewest keys first), so that what it takes is gone for the requests after it.

NUMA affinity (``numa_policy``, or the flavor's ``hw:pci_numa_affinity_policy`` / the image's
``hw_pci_numa_affinity_policy`` overriding it) is not the filter's business in Nova either: NUMATopologyFilter
applies it when it fits a NUMA guest's cells (``take`` with an ``Affinity``: Nova's support_requests with
numa_cells), and a claim takes the devices with the cells it fitted.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import os_resource_classes as orc  # untyped: pyproject lets mypy skip it
import os_traits

from gantt.config.pci import NUMA_POLICIES, TRUE_WORDS, PciSection, Spec
from gantt.model import InvalidRequest, PciRequestSpec

ALIAS_SPEC = "pci_passthrough:alias"
# Keys an alias spec carries that Nova leaves to Placement when matching pools.
_IGNORED_SPEC_KEYS = ("resource_class", "traits", "rp_uuids")
# Nova's extra-spec validator: one or more comma-separated "alias:count".
_REQUEST_RE = re.compile(r"[^:]+:\d+(?:\s*,\s*[^:]+:\d+)*")

Pool = tuple[tuple[str, Any], ...]  # one pool's keys and values (count included), sorted by key: hashable


@dataclass(frozen=True, slots=True)
class Room:
    """A PCI device provider in Placement, as a request group of one device sees it: how many devices of each
    resource class it can still give (capacity left, within max_unit), and its traits."""

    free: Mapping[str, int]
    traits: frozenset[str]


Rooms = Mapping[str, Room]  # by provider uuid (the pools' ``rp_uuid`` tag)


@dataclass(frozen=True, slots=True)
class PciRequest:
    """One entry of ``pci_passthrough:alias``: ``count`` devices any of ``specs`` describes."""

    alias: str
    count: int
    specs: tuple[Spec, ...]
    numa_policy: str
    # ``[filter_scheduler] pci_in_placement`` (a flavor's alias request): each device is a request group of one
    # ``placement_class`` with ``placement_traits`` in Placement, so only devices whose provider has them, and room
    # for them, serve it (Nova's allocation candidates, then the pools those candidates name)
    in_placement: bool = False
    # ``group_policy=isolate`` (the flavor's): Placement gives every request group a provider of its own, so each
    # device of an ``in_placement`` request comes from a provider no other device of the request's takes
    isolate: bool = False

    @property
    def key(self) -> Hashable:
        """The request as a hashable value (its specs are dicts)."""
        return (self.alias, self.count, tuple(tuple(sorted(spec.items())) for spec in self.specs), self.numa_policy,
                self.in_placement, self.isolate)

    def pairs(self) -> frozenset[tuple[str, str]] | None:
        """The (vendor_id, product_id) pairs, lower-cased, a device must have to serve this request; None when a
        spec does not name both (an SR-IOV port's asks by physical network: any device may do)."""
        pairs = []
        for spec in self.specs:
            vendor, product = spec.get("vendor_id"), spec.get("product_id")
            if vendor is None or product is None:
                return None
            pairs.append((vendor.lower(), product.lower()))
        return frozenset(pairs)


POLICY_SPEC = "hw:pci_numa_affinity_policy"
POLICY_PROP = "hw_pci_numa_affinity_policy"


def affinity_policy(extra_specs: dict[str, str], image_props: dict[str, Any]) -> str | None:
    """The devices' NUMA affinity policy flavor and image ask for (Nova's get_pci_numa_policy_constraint): it
    overrides every alias's own ``numa_policy``; the two may not disagree."""
    flavor, image = extra_specs.get(POLICY_SPEC), image_props.get(POLICY_PROP)
    if image is not None and image not in NUMA_POLICIES:
        raise InvalidRequest(f"{POLICY_PROP} must be one of {', '.join(NUMA_POLICIES)}, not {image!r}",
                             field=f"$.image.properties.{POLICY_PROP}")
    if flavor and image and flavor != image:
        raise InvalidRequest(f"the image's {POLICY_PROP} conflicts with the flavor's {POLICY_SPEC}",
                             field=f"$.image.properties.{POLICY_PROP}")
    policy = flavor or image
    if policy and policy not in NUMA_POLICIES:
        raise InvalidRequest(f"{POLICY_SPEC} must be one of {', '.join(NUMA_POLICIES)}, not {policy!r}",
                             field=f"$.flavor.extra_specs.{POLICY_SPEC}")
    return policy or None


def requests_from_extra_specs(extra_specs: dict[str, str], section: PciSection, policy: str | None = None,
                              in_placement: bool = False) -> tuple[PciRequest, ...]:
    """The flavor's PCI requests of ``section``'s aliases, each with ``policy`` (``affinity_policy``) or else its
    alias's NUMA policy, and ``in_placement`` (``[filter_scheduler] pci_in_placement``, under which the aliases
    must pass ``check_aliases``); InvalidRequest (naming the extra spec) for a malformed value or unknown alias."""
    text = extra_specs.get(ALIAS_SPEC)
    if text is None:
        return ()
    where = f"$.flavor.extra_specs.{ALIAS_SPEC}"
    try:
        section.check(in_placement)  # as Nova's API reads its aliases for each request
    except ValueError as exc:
        raise InvalidRequest(str(exc), field=where) from None
    aliases = section.aliases
    if not isinstance(text, str) or not _REQUEST_RE.fullmatch(text):
        raise InvalidRequest(f"extra spec {ALIAS_SPEC} must be 'alias:count' entries separated by commas, "
                             f"not {text!r}", field=where)
    out = []
    for entry in text.split(","):
        parts = entry.split(":")
        if len(parts) != 2 or not parts[0].strip():
            raise InvalidRequest(f"extra spec {ALIAS_SPEC}: {entry.strip()!r} is not 'alias:count'", field=where)
        name, count = parts[0].strip(), int(parts[1])
        alias = aliases.get(name)
        if alias is None:
            known = ", ".join(sorted(aliases)) or "none"
            raise InvalidRequest(f"PCI alias {name} is not defined ([pci] alias defines: {known})", field=where)
        out.append(PciRequest(name, count, alias.specs, policy or alias.numa_policy, in_placement))
    return tuple(out)


def requests_from_ports(requests: Sequence[PciRequestSpec] | None, policy: str | None,
                        in_placement: bool = False) -> tuple[PciRequest, ...]:
    """The PCI requests the caller made (``RequestSpec.pci_requests``: SR-IOV ports', and those the caller made of
    the flavor's aliases), each with its own NUMA policy, else ``policy`` (the flavor's or image's,
    ``affinity_policy``), as Nova's API sets them; an alias's ``in_placement`` as the flavor's would be."""
    for i, r in enumerate(requests or ()):
        if r.count < 1 and r.alias is None:  # a flavor may ask an alias for none ("a1:0"); a port asks for one
            raise InvalidRequest("a PCI request without an alias asks for at least one device",
                                 field=f"$.pci_requests[{i}].count")
    return tuple(PciRequest(r.alias or "", r.count, tuple(dict(spec) for spec in r.spec),
                            r.numa_policy or policy or "legacy", in_placement and r.alias is not None)
                 for r in requests or ())


def freeze_pools(pools: Sequence[dict[str, Any]]) -> tuple[Pool, ...]:
    """A host's pools (``HostStats.pci_stats``) as Nova's PciDeviceStats holds them: ordered by how many keys a
    pool has (a stable sort, as Nova's), each one hashable so that equal pool sets can be interned."""
    ordered = sorted(pools, key=len)
    return tuple(tuple(sorted(pool.items())) for pool in ordered)


def device_counts(pools: Sequence[Pool]) -> dict[tuple[str, str], int]:
    """Devices per (vendor_id, product_id), lower-cased: what a request's specs could possibly take."""
    out: dict[tuple[str, str], int] = {}
    for pool in pools:
        values = dict(pool)
        pair = (str(values["vendor_id"]).lower(), str(values["product_id"]).lower())
        out[pair] = out.get(pair, 0) + int(values["count"])
    return out


def _lower(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


def _matches(pool: dict[str, Any], specs: tuple[Spec, ...]) -> bool:
    # A port's spec may hold None (no physical network): only a pool without that key matches it, as in Nova.
    return any(all(_lower(pool.get(k)) == _lower(v) for k, v in spec.items() if k not in _IGNORED_SPEC_KEYS)
               for spec in specs)


def _truthy(value: Any) -> bool:
    return isinstance(value, str) and value.strip().lower() in TRUE_WORDS


@dataclass(frozen=True, slots=True)
class Affinity:
    """Where a guest with a NUMA topology landed, for the devices' NUMA affinity: the host cells its cells took
    (in guest cell order) and the socket of each of the host's cells (None: the host does not say)."""

    cells: tuple[int, ...]
    sockets: tuple[tuple[int, int | None], ...]


def _count(pools: list[dict[str, Any]]) -> int:
    return sum(pool["count"] for pool in pools)


def _on_nodes(pools: list[dict[str, Any]], nodes: Sequence[int | None]) -> list[dict[str, Any]]:
    return [pool for pool in pools if pool.get("numa_node") in nodes]


def _near(pools: list[dict[str, Any]], request: PciRequest, affinity: Affinity) -> list[dict[str, Any]]:
    """Nova's _filter_pools_for_numa_cells: the pools with the NUMA affinity the request's policy asks for.

    Each policy is tried from the strictest down: devices on the guest's own cells whenever there are enough
    (or always, under ``required``); then ``socket``: devices on a cell of the same sockets (none when some
    host cell has no socket); ``legacy`` adds devices of no NUMA node; ``preferred`` takes any device, those
    nearest first (the order in which they are consumed)."""
    policy = request.numa_policy or "legacy"
    nodes: list[int | None] = list(affinity.cells)
    strict = _on_nodes(pools, nodes)
    if policy == "required" or _count(strict) >= request.count:
        return strict
    if policy == "socket":
        sockets = dict(affinity.sockets)
        if any(socket is None for socket in sockets.values()):
            return []
        wanted = {sockets[cell] for cell in affinity.cells if cell in sockets}
        return _on_nodes(pools, [cell for cell, socket in affinity.sockets if socket in wanted])
    nodes.append(None)
    loose = _on_nodes(pools, nodes)
    if policy == "legacy" or _count(loose) >= request.count:
        return loose
    return sorted(pools, key=lambda pool: pool.get("numa_node") not in nodes)


def _candidates(pools: list[dict[str, Any]], request: PciRequest,
                affinity: Affinity | None = None) -> list[dict[str, Any]] | None:
    """Nova's _filter_pools without a Placement allocation: the pools the request may take (with the NUMA
    affinity its policy asks for when the guest's cells are given), or None when they hold too few devices."""
    specs = request.specs
    chosen = [pool for pool in pools if _matches(pool, specs)]
    if sum(pool["count"] for pool in chosen) < request.count:
        return None
    if affinity is not None:
        chosen = _near(chosen, request, affinity)
        if _count(chosen) < request.count:
            return None
    if all(spec.get("dev_type") != "type-PF" for spec in specs):
        chosen = [pool for pool in chosen if pool.get("dev_type") != "type-PF"]
    if sum(pool["count"] for pool in chosen) < request.count:
        return None
    if all(spec.get("dev_type") != "vdpa" for spec in specs):
        chosen = [pool for pool in chosen if pool.get("dev_type") != "vdpa"]
    if all(not _truthy(spec.get("remote_managed")) for spec in specs):
        chosen = [pool for pool in chosen if not _truthy(pool.get("remote_managed"))]
    for word in ("true", "false"):
        if all(spec.get("live_migratable") == word for spec in specs):
            chosen = [pool for pool in chosen if pool.get("live_migratable") == word]
            break
    if sum(pool["count"] for pool in chosen) < request.count:
        return None
    return chosen


def pool_key(pool: Pool) -> Pool:
    """A pool's identity: everything but its count (what a claim names to say which pool it took from)."""
    return tuple(item for item in pool if item[0] != "count")


def take(pools: Sequence[Pool], requests: Sequence[PciRequest], affinity: Affinity | None = None,
         rooms: Rooms | None = None) -> list[tuple[Pool, int]] | None:
    """What serving every request, one after the other, takes from ``pools`` (as ``freeze_pools`` gives them):
    (pool key, devices) in the order taken; None when the pools cannot serve them all. ``affinity``: the guest's
    NUMA cells on the host, for the requests' NUMA policies (Nova's support_requests with numa_cells). ``rooms``:
    the devices' providers in Placement, which requests ``in_placement`` need (``_placed``)."""
    if rooms is not None and any(r.in_placement for r in requests):
        left = {(rp, rc): n for rp, room in rooms.items() for rc, n in room.free.items()}
        return _placed([dict(pool) for pool in pools], requests, affinity, rooms, left, [], [_SEARCH_BUDGET],
                       frozenset())
    if any(r.in_placement for r in requests):
        return None  # no provider known: Placement would offer no candidate for the devices' groups
    live = [dict(pool) for pool in pools]
    taken: list[tuple[Pool, int]] = []
    for request in requests:
        if _consume(live, request, affinity, taken) is None:
            return None
    return taken


def _consume(live: list[dict[str, Any]], request: PciRequest, affinity: Affinity | None,
             taken: list[tuple[Pool, int]]) -> list[tuple[Pool, int]] | None:
    """Nova's _apply_request without a Placement allocation: the request's pools, consumed greedily in order."""
    chosen = _candidates(live, request, affinity)
    if not chosen:  # None, or no pool at all for a request of zero devices
        return None
    wanted = request.count
    for pool in chosen:
        if pool["count"] > wanted:
            pool["count"] -= wanted
            used, wanted = wanted, 0
        else:  # the pool is used up: it is gone, even for a later request of zero devices
            used = pool["count"]
            wanted -= used
            live.remove(pool)
        if used:
            taken.append((tuple(sorted((k, v) for k, v in pool.items() if k != "count")), used))
        if not wanted:
            break
    return taken


# Ways of splitting the devices of in_placement requests over their providers tried per ``take`` at most: Nova
# tries Placement's allocation candidates (at most ``[scheduler] max_placement_results``); a node needing more
# tries than this (many providers, many requests) is refused rather than searched for long.
_SEARCH_BUDGET = 1000


def _placed(live: list[dict[str, Any]], requests: Sequence[PciRequest], affinity: Affinity | None, rooms: Rooms,
            left: dict[tuple[str, str], int], taken: list[tuple[Pool, int]], budget: list[int],
            used: frozenset[str]) -> list[tuple[Pool, int]] | None:
    """``take`` with Placement: whether some allocation candidate (each device of an ``in_placement`` request
    on a provider that has its class, its traits and room left) lets Nova's pool claim follow it (Nova's
    PciPassthroughFilter over a host's candidates: ``_filter_pools_based_on_placement_allocation``, then each
    mapped provider's pool gives what is mapped to it). The splits are tried most-devices-on-the-first-pool
    first, so the first one found is the pools' greedy order whenever that fits. ``used``: the providers the
    devices taken so far are on (under ``isolate``, Placement's ``_satisfies_group_policy``: one device each)."""
    if not requests:
        return taken
    request, rest = requests[0], requests[1:]
    if not request.in_placement or not request.count:  # no device: no group, nothing Placement maps (as Nova)
        live = [dict(pool) for pool in live]
        mine = _consume(live, request, affinity, list(taken))
        return None if mine is None else _placed(live, rest, affinity, rooms, left, mine, budget, used)
    chosen = _candidates(live, request, affinity)
    providers = [pool.get("rp_uuid") for pool in live if pool.get("rp_uuid") is not None]
    if not chosen or len(providers) != len(set(providers)):  # Nova's _assert_one_pool_per_rp_uuid
        return None
    rc, traits = placement_class(request), placement_traits(request)
    caps, index_of = [], {id(pool): index for index, pool in enumerate(live)}
    for pool in chosen:  # in the order the request's policy takes them (nearest first)
        rp, index = pool.get("rp_uuid"), index_of[id(pool)]
        room = rooms.get(str(rp)) if rp is not None else None
        if room is None or not traits <= room.traits or (request.isolate and str(rp) in used):
            continue
        cap = min(pool["count"], left.get((str(rp), rc), 0))
        if (cap := min(cap, 1) if request.isolate else cap) > 0:
            caps.append((index, str(rp), cap))
    for split in _splits(caps, request.count):
        budget[0] -= 1
        if budget[0] < 0:
            return None
        after = [dict(pool) for pool in live]
        now, mine, emptied = dict(left), list(taken), set()
        for (index, rp, _), count in zip(caps, split, strict=True):
            if count:
                pool = after[index]
                pool["count"] -= count
                now[(rp, rc)] -= count
                mine.append((tuple(sorted((k, v) for k, v in pool.items() if k != "count")), count))
                if not pool["count"]:  # a pool the request used up is gone
                    emptied.add(index)
        after = [pool for index, pool in enumerate(after) if index not in emptied]
        mapped = used | {rp for (_, rp, _), count in zip(caps, split, strict=True) if count}
        found = _placed(after, rest, affinity, rooms, now, mine, budget, mapped)
        if found is not None:
            return found
    return None


def _splits(caps: list[tuple[int, str, int]], wanted: int) -> Iterator[tuple[int, ...]]:
    """Every way of taking ``wanted`` devices from pools that can give ``caps`` each, as counts per pool, the
    most on the first pool first."""
    if not caps:
        if wanted == 0:
            yield ()
        return
    (_, _, cap), rest = caps[0], caps[1:]
    for count in range(min(cap, wanted), -1, -1):
        for tail in _splits(rest, wanted - count):
            yield (count, *tail)


def by_request(requests: Sequence[PciRequest], taken: Sequence[tuple[Any, int]]) -> list[list[tuple[Any, int]]]:
    """``take``'s answer (or a claim's PciTaken, as (pool, count)) split per request, in order: ``take`` serves
    the requests one after the other, each from its own entries, which add up to its count."""
    out: list[list[tuple[Any, int]]] = []
    entries = iter(taken)
    for request in requests:
        mine, wanted = [], request.count
        while wanted > 0:
            pool, count = next(entries)
            mine.append((pool, count))
            wanted -= count
        out.append(mine)
    return out


def placement_class(request: PciRequest) -> str:
    """The resource class Nova asks Placement for one device of a flavor's request when ``[filter_scheduler]
    pci_in_placement`` is set (``pci_placement_translator.get_resource_class`` of the alias's one spec): its
    ``resource_class``, upper-cased and made ``CUSTOM_`` unless standard, else ``CUSTOM_PCI_<VENDOR>_<PRODUCT>``."""
    spec = request.specs[0]
    named = spec.get("resource_class")
    if not named:
        return f"CUSTOM_PCI_{spec.get('vendor_id')}_{spec.get('product_id')}".upper()
    rc = named.upper()
    if rc in orc.STANDARDS or orc.is_custom(rc):
        return rc
    return str(orc.normalize_name(rc))


def placement_traits(request: PciRequest) -> frozenset[str]:
    """The traits Nova's request group of one device requires (``pci_placement_translator.get_traits`` of the
    alias's ``traits``, comma-separated): standard ones as they are, the others upper-cased and made ``CUSTOM_``."""
    text = request.specs[0].get("traits")
    if not text:
        return frozenset()
    standard, rest = os_traits.check_traits(text.split(","))
    out = set(standard)
    for name in rest:
        upper = name.upper()
        out.add(upper if os_traits.is_custom(upper) else os_traits.normalize_name(upper))
    return frozenset(out)


def supports(pools: Sequence[Pool], requests: Sequence[PciRequest], affinity: Affinity | None = None,
             rooms: Rooms | None = None) -> bool:
    """Whether pools (as ``freeze_pools`` gives them) can serve every request, one after the other."""
    return take(pools, requests, affinity, rooms) is not None


def devices_per_node(pools: Sequence[Pool]) -> dict[int | None, int]:
    """Devices per NUMA node over every pool (Nova sorts host cells by it when it fits a guest)."""
    out: dict[int | None, int] = {}
    for pool in pools:
        values = dict(pool)
        node = values.get("numa_node")
        out[node] = out.get(node, 0) + int(values["count"])
    return out


def remaining(reported: Sequence[Pool], taken: dict[Pool, int]) -> tuple[Pool, ...]:
    """The pools a node has left: what it reported, less the devices claims hold that its report does not show
    yet. A pool a claim used up is gone, as in Nova's HostState after it consumed a request.

    Claims name a pool by its key, and a report may list two pools with one key: what claims hold of that key is
    taken from those pools in their order, as every claim took them (they pass every filter alike and keep their
    order, so a request never reaches the second while the first has devices)."""
    if not taken:
        return tuple(reported)
    left = dict(taken)
    out = []
    for pool in reported:
        key = pool_key(pool)
        held = left.get(key, 0)
        if not held:
            out.append(pool)
            continue
        count = dict(pool)["count"]
        used = min(held, count)
        left[key] = held - used
        if count > used:
            out.append(tuple((k, count - used if k == "count" else v) for k, v in pool))
    return tuple(out)
