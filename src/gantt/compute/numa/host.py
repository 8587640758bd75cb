"""A host's NUMA cells prepared for fitting (``HostNUMA``, once per report), and the same cells with claims counted
on top (``with_claims``)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from gantt.compute.pci import Affinity
from gantt.model import NUMACell, NUMACellClaim, NUMATopology


@dataclass(frozen=True, slots=True)
class HostCell:
    """One host cell, prepared for fitting (sets instead of lists, free figures computed once)."""

    id: int
    cpuset: frozenset[int]
    pcpuset: frozenset[int]
    memory: int
    cpu_usage: int
    memory_usage: int
    free_pcpus: frozenset[int]
    siblings: tuple[frozenset[int], ...]
    pages: tuple[tuple[int, int, int], ...]  # (size_kb, total, free) in the order reported
    socket: int | None = None
    # the physical networks (and whether tunnelled ones) the cell's NICs serve; none: no affinity declared, which
    # Nova's check reads as it reads a cell without network_metadata
    physnets: frozenset[str] = frozenset()
    tunneled: bool = False

    @classmethod
    def of(cls, cell: NUMACell) -> HostCell:
        pcpus = frozenset(cell.pcpuset)
        network = cell.network_metadata
        return cls(id=cell.id, cpuset=frozenset(cell.cpuset), pcpuset=pcpus, memory=cell.memory,
                   cpu_usage=cell.cpu_usage, memory_usage=cell.memory_usage,
                   free_pcpus=pcpus - frozenset(cell.pinned_cpus),
                   siblings=tuple(frozenset(s) for s in cell.siblings),
                   pages=tuple((p.size_kb, p.total, p.total - p.used - p.reserved) for p in cell.mempages),
                   socket=cell.socket, physnets=frozenset(network.physnets) if network else frozenset(),
                   tunneled=bool(network and network.tunneled))

    @property
    def avail_memory(self) -> int:
        return self.memory - self.memory_usage

    @property
    def has_threads(self) -> bool:
        return any(len(s) > 1 for s in self.siblings)

    def page_fits(self, size_kb: float, memory_kb: int, *, use_free: bool = True) -> bool | None:
        """Whether ``memory_kb`` fits in pages of ``size_kb`` (None: the cell has no such pages)."""
        for size, total, free in self.pages:
            if size == size_kb:
                return memory_kb <= (free if use_free else total) * size and memory_kb % size == 0
        return None

    @property
    def largest_guest_memory(self) -> float:
        """No guest cell larger than this (MiB) can fit here, whatever it asks for (the prefilter's bound)."""
        pages = max((total * size for size, total, _ in self.pages), default=0) / 1024
        return max(float(self.memory), pages)


@dataclass(frozen=True, slots=True)
class HostNUMA:
    cells: tuple[HostCell, ...]

    @classmethod
    def of(cls, topology: NUMATopology | None) -> HostNUMA | None:
        if topology is None or not topology.cells:
            return None
        return cls(tuple(HostCell.of(c) for c in topology.cells))

    @property
    def has_threads(self) -> bool:
        return any(c.has_threads for c in self.cells)

    def affinity(self, cells: list[int]) -> Affinity:
        """The guest cells landing on host ``cells``, as the PCI devices' NUMA affinity reads them."""
        return Affinity(tuple(cells), tuple((c.id, c.socket) for c in self.cells))


def with_claims(host: HostNUMA, claims: list[NUMACellClaim]) -> tuple[HostNUMA, bool]:
    """``host`` with ``claims`` counted, and whether they all hold: every CPU pinned is one of the cell's
    dedicated CPUs and free (pinned by no report and no other claim), no page size is used beyond its free
    pages."""
    ok = True
    memory: dict[int, int] = defaultdict(int)
    cpus: dict[int, int] = defaultdict(int)
    pinned: dict[int, set[int]] = defaultdict(set)
    pages: dict[tuple[int, float], int] = defaultdict(int)
    cells = {c.id: c for c in host.cells}
    for c in claims:
        cell = cells.get(c.cell)
        if cell is None:
            ok = False
            continue
        taken = set(c.pinned_cpus)
        if not taken <= cell.free_pcpus or taken & pinned[c.cell]:
            ok = False
        pinned[c.cell] |= taken
        memory[c.cell] += c.memory_mb
        cpus[c.cell] += c.cpus
        if c.pagesize_kb:
            pages[(c.cell, c.pagesize_kb)] += c.memory_mb * 1024 // c.pagesize_kb
    new_cells = []
    for cell in host.cells:
        if cell.id not in memory:
            new_cells.append(cell)
            continue
        new_pages = []
        for size, total, free in cell.pages:
            left = free - pages.get((cell.id, size), 0)
            if left < 0 and pages.get((cell.id, size)) and size != min(s for s, _, _ in cell.pages):
                ok = False  # huge pages are never overcommitted; small ones may be (as Nova)
            new_pages.append((size, total, left))
        new_cells.append(HostCell(
            id=cell.id, cpuset=cell.cpuset, pcpuset=cell.pcpuset, memory=cell.memory,
            cpu_usage=cell.cpu_usage + cpus[cell.id], memory_usage=cell.memory_usage + memory[cell.id],
            free_pcpus=cell.free_pcpus - pinned[cell.id], siblings=cell.siblings, pages=tuple(new_pages),
            socket=cell.socket, physnets=cell.physnets, tunneled=cell.tunneled))
    return HostNUMA(tuple(new_cells)), ok
