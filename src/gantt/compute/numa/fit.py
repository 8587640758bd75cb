"""Whether, and how, a guest topology fits a host's NUMA cells: Nova's ``numa_fit_instance_to_host``.

Host cells are ordered as Nova orders them, every permutation is tried in turn, each guest cell checked against page
sizes, memory, shared CPUs under the allocation ratios and dedicated CPUs packed onto thread siblings, and a guest's
PCI devices taken with the NUMA affinity their policy asks for (``gantt.compute.pci.take`` with the cells chosen).
Nova mutates the guest cells while it searches (a cell keeps the page size and the cell id of its last fit, and its
memo is keyed by those); the search below keeps that state the same way, because the answer for a host depends on
it. What a fit takes of each host cell is its claim (``claim``, ``claims_of``).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from gantt.compute.numa.guest import (
    DEDICATED,
    ISOLATE,
    MEMPAGES_ANY,
    MEMPAGES_LARGE,
    MEMPAGES_SMALL,
    MIXED,
    REQUIRE,
    SHARED,
    GuestCell,
    GuestTopology,
)
from gantt.compute.numa.host import HostCell, HostNUMA
from gantt.compute.pci import PciRequest, Pool, Rooms, devices_per_node, take
from gantt.model import NUMACellClaim


@dataclass(frozen=True, slots=True)
class CellFit:
    """Where one guest cell landed: the host cell, the page size chosen, guest vCPU -> host CPU for its
    dedicated vCPUs, and the host CPUs reserved for its emulator threads."""

    host_cell: int
    pagesize: float | None
    pinning: tuple[tuple[int, int], ...]
    reserved: frozenset[int]


def _pinning(threads: int, cores: list[frozenset[int]], vcpus: frozenset[int]) -> list[tuple[int, int]] | None:
    if threads * len(cores) < len(vcpus):
        return None
    usable = itertools.chain.from_iterable(sorted(core)[:threads] for core in cores)
    return list(zip(sorted(vcpus), usable, strict=False))


def _reserved(cores: list[frozenset[int]], pinning: list[tuple[int, int]] | None, count: int,
              isolate: bool = False) -> set[int] | None:
    """Host CPUs left for the emulator threads once ``pinning`` is taken (None: none, or none asked for)."""
    if not pinning:
        return None
    if not count:
        return None
    left = [sorted(core) for core in cores]
    for _, cpu in pinning:
        for core in left:
            if cpu in core:
                if isolate:
                    left.remove(core)  # a core one of our vCPUs takes whole
                else:
                    core.remove(cpu)
    return set(list(itertools.chain.from_iterable(left))[:count]) or None


def _pack(cell: HostCell, vcpus: frozenset[int], thread_policy: str | None,
          reserve: int) -> tuple[list[tuple[int, int]], set[int] | None] | None:
    """Dedicated vCPUs onto the cell's free thread siblings (Nova's ``_pack_instance_onto_cores``)."""
    threads_per_core = max((len(s) for s in cell.siblings), default=0) or 1
    by_threads: dict[int, list[frozenset[int]]] = defaultdict(list)
    for sib in cell.siblings:
        free = sib & cell.free_pcpus
        for n in range(1, len(free) + 1):
            by_threads[n].append(free)
    if thread_policy == ISOLATE:
        if threads_per_core not in by_threads:
            return None  # no wholly free core
        if threads_per_core != 1 and cell.pcpuset != cell.cpuset:
            return None  # SMT host with cpu_dedicated_set: isolate cannot be emulated (Nova bug 1889633)
        pinning = _pinning(1, by_threads[threads_per_core], vcpus)
        reserved = _reserved(by_threads[1], pinning, reserve, isolate=True)
        if not pinning or (reserve and not reserved):
            return None
        return pinning, reserved
    if thread_policy == REQUIRE and threads_per_core <= 1:
        return None
    pinning, reserved, threads = None, None, 1
    for threads, cores in sorted(by_threads.items(), reverse=True):
        if thread_policy == REQUIRE and threads <= 1:
            continue
        pinning = _pinning(threads, cores, vcpus)
        reserved = _reserved(by_threads[1], pinning, reserve)
        if pinning is None or (reserve and not reserved):
            continue
        break
    if thread_policy != REQUIRE and not pinning:
        # No siblings to spare: every free thread counts as a core of its own.
        singles = [frozenset((cpu,)) for core in by_threads[1] for cpu in sorted(core)]
        pinning = _pinning(threads, singles, vcpus)
        reserved = _reserved(singles, pinning, reserve)
    if pinning is None or (reserve and not reserved):
        return None
    return pinning, reserved


_Placed = tuple[list[tuple[int, int]], set[int] | None]  # (pinning, host CPUs reserved for emulator threads)


def _fit_cell(host: HostCell, guest: GuestCell, pagesize: float | None, guest_policy: str | None,
              thread_policy: str | None, cpu_ratio: float, ram_ratio: float,
              reserve: int) -> tuple[float | None, bool, _Placed | None]:
    """One guest cell on one host cell (Nova's ``_numa_fit_instance_cell``).

    Returns the guest cell's state afterwards as Nova leaves it even when a later check fails (the page size it
    found; whether its CPUs were packed here, which gives it this cell's id), and (pinning, reserved), or None
    when the cell does not fit."""
    pinned = guest_policy in (DEDICATED, MIXED)
    memory_kb = guest.memory * 1024
    if pagesize:
        sizes = sorted((size for size, _, _ in host.pages), reverse=True)
        tried: Sequence[float]
        if pagesize == MEMPAGES_SMALL:
            tried = sizes[-1:]
        elif pagesize == MEMPAGES_LARGE:
            tried = sizes[:-1]
        elif pagesize == MEMPAGES_ANY:
            tried = sizes
        else:
            tried = [pagesize]
        chosen = next((size for size in tried if host.page_fits(size, memory_kb)), None)
        if not chosen:
            return pagesize, False, None
        pagesize = chosen
    elif host.pages:
        smallest = min(size for size, _, _ in host.pages)
        # Small pages may be overcommitted, except by pinned guests (Nova's legacy rule).
        if not host.page_fits(smallest, memory_kb, use_free=pinned):
            return pagesize, False, None
    elif pinned:
        if host.avail_memory < guest.memory:
            return pagesize, False, None
    elif host.memory < guest.memory:
        return pagesize, False, None  # an instance may not overcommit a cell against itself
    if pinned and len(guest.pcpuset) + reserve > len(host.pcpuset):
        return pagesize, False, None
    if guest_policy in (SHARED, MIXED, None) and len(guest.cpuset) > len(host.cpuset):
        return pagesize, False, None
    placed: _Placed = ([], None)
    packed = False
    if pinned:
        if len(guest.pcpuset) + reserve > len(host.free_pcpus):
            return pagesize, False, None
        got = _pack(host, guest.pcpuset, thread_policy, reserve)
        if got is None:
            return pagesize, False, None
        packed = True
        if not (guest.cpuset or guest.pcpuset):
            return pagesize, packed, None  # Nova reads a packed cell without vCPUs as a failed packing
        placed = got
    if guest_policy in (SHARED, MIXED, None):
        if host.cpu_usage + len(guest.cpuset) > len(host.cpuset) * cpu_ratio:
            return pagesize, packed, None
        if host.memory_usage + guest.memory > host.memory * ram_ratio:
            return pagesize, packed, None
    return pagesize, packed, placed


def _ordered(host: HostNUMA, guest: GuestTopology, pack: bool,
             pci_per_cell: dict[int | None, int] | None, wants_pci: bool) -> list[HostCell]:
    cells = list(host.cells)
    if len(cells) <= len(guest.cells):
        return cells
    # Spread (the default) tries the emptiest cells first, pack the fullest; stable sorts, as Nova's.
    cells = sorted(cells, key=lambda c: c.avail_memory, reverse=not pack)
    if guest.cpu_policy in (None, SHARED):
        cells = sorted(cells, key=lambda c: c.cpu_usage, reverse=pack)
    else:
        cells = sorted(cells, key=lambda c: len(c.free_pcpus), reverse=not pack)
    if pci_per_cell:
        cells = sorted(cells, key=lambda c: pci_per_cell.get(c.id, 0), reverse=wants_pci)
    return cells


@dataclass(frozen=True, slots=True)
class Networks:
    """What the instance's networks ask of the cells it lands on (Nova's RequestSpec.network_metadata)."""

    physnets: frozenset[str]
    tunneled: bool

    def served(self, host: HostNUMA, chosen: Sequence[int]) -> bool:
        """Nova's ``_numa_cells_support_network_metadata``: no physnet the chosen cells do not serve may be served
        by another cell, and tunnelled networks, when asked and not served by a chosen cell, by no cell at all (a
        network no cell declares affinity to may go anywhere)."""
        cells = [c for c in host.cells if c.id in chosen]
        missing = self.physnets.difference(*(c.physnets for c in cells))
        if missing and any(c.physnets & missing for c in host.cells):
            return False
        return not self.tunneled or any(c.tunneled for c in cells) or not any(c.tunneled for c in host.cells)


def fit(host: HostNUMA | None, guest: GuestTopology | None, *, cpu_ratio: float, ram_ratio: float,
        pack: bool = False, pools: Sequence[Pool] = (),
        pci_requests: Sequence[PciRequest] = (), networks: Networks | None = None,
        rooms: Rooms | None = None) -> list[CellFit] | None:
    """The first way ``guest`` fits ``host`` in Nova's search order (Nova's ``numa_fit_instance_to_host``), one
    CellFit per guest cell, or None when it does not fit.

    ``pack``: ``[compute] packing_host_numa_cells_allocation_strategy``. ``pools``: the host's PCI pools left
    (``gantt.compute.pci.freeze_pools`` tuples); Nova orders the cells by their free devices, those with devices first
    when the guest asks for some (``pci_requests``), last otherwise; and a way of fitting the cells holds only
    when the devices can be taken with the NUMA affinity each request's policy asks for, and the cells serve the
    instance's ``networks`` as Nova's check asks. ``rooms``: the devices' Placement providers (``take``).
    """
    if host is None or guest is None or not host.cells or not guest.cells:
        return None
    if len(host.cells) < len(guest.cells) or (pci_requests and not pools):  # no pool serves any request
        return None
    cells = _ordered(host, guest, pack, devices_per_node(pools) if pools else None, bool(pci_requests))
    # Nova's search state: each guest cell's current id and page size change as it fits (see the module doc).
    ids = [c.id for c in guest.cells]
    sizes = [c.pagesize for c in guest.cells]
    fits: list[CellFit | None] = [None] * len(guest.cells)
    misfit: set[tuple[int, int]] = set()
    fitted: set[tuple[int, int]] = set()
    for perm in itertools.permutations(cells, len(guest.cells)):
        chosen: list[CellFit] = []
        for i, (hcell, gcell) in enumerate(zip(perm, guest.cells, strict=True)):
            pair = (hcell.id, ids[i])
            if pair in misfit:
                break
            if pair in fitted:
                ids[i] = hcell.id
                last = fits[i]
                chosen.append(CellFit(hcell.id, sizes[i], last.pinning if last else (),
                                      last.reserved if last else frozenset()))
                continue
            reserve = 1 if guest.emulator_threads_isolated and not chosen else 0
            sizes[i], packed, placed = _fit_cell(hcell, gcell, sizes[i], guest.cpu_policy, guest.cpu_thread_policy,
                                                 cpu_ratio, ram_ratio, reserve)
            if packed:
                ids[i] = hcell.id
            if placed is None:
                misfit.add(pair)
                break
            ids[i] = hcell.id
            cell_fit = CellFit(hcell.id, sizes[i], tuple(placed[0]), frozenset(placed[1] or ()))
            fits[i] = cell_fit
            chosen.append(cell_fit)
            fitted.add(pair)
        if len(chosen) == len(guest.cells):
            if pci_requests and take(pools, pci_requests, host.affinity([c.host_cell for c in chosen]),
                                     rooms) is None:
                continue
            if networks is not None and not networks.served(host, [c.host_cell for c in chosen]):
                continue
            return chosen
    return None


def claims_of(host: HostNUMA, guest: GuestTopology, fits: list[CellFit]) -> list[NUMACellClaim]:
    """What the instance takes of each host cell it fits on (Nova's ``numa_usage_from_instance_numa``)."""
    cells = {c.id: c for c in host.cells}
    out = []
    for gcell, cell_fit in zip(guest.cells, fits, strict=True):
        hcell = cells[cell_fit.host_cell]
        pinned = {cpu for _, cpu in cell_fit.pinning} | set(cell_fit.reserved)
        if guest.pinned and guest.cpu_thread_policy == ISOLATE:
            for sib in hcell.siblings:  # the whole core goes with each CPU pinned under isolate
                if sib & pinned:
                    pinned |= sib
        size = cell_fit.pagesize if cell_fit.pagesize else min((s for s, _, _ in hcell.pages), default=None)
        out.append(NUMACellClaim(cell=hcell.id, memory_mb=gcell.memory, cpus=len(gcell.cpuset),
                                 pinned_cpus=sorted(pinned) if guest.pinned else [],
                                 pagesize_kb=int(size) if size else None))
    return out


def claim(host: HostNUMA | None, guest: GuestTopology | None, *, cpu_ratio: float, ram_ratio: float,
          pack: bool = False, pools: Sequence[Pool] = (), pci_requests: Sequence[PciRequest] = (),
          networks: Networks | None = None, rooms: Rooms | None = None) -> list[NUMACellClaim] | None:
    """The cells, CPUs and pages the guest would take on ``host`` now (None: it does not fit, devices included)."""
    fits = fit(host, guest, cpu_ratio=cpu_ratio, ram_ratio=ram_ratio, pack=pack, pools=pools,
               pci_requests=pci_requests, networks=networks, rooms=rooms)
    if fits is None or host is None or guest is None:
        return None
    return claims_of(host, guest, fits)
