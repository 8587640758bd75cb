"""HostTable: the in-memory replica of every host, columnar so filters and weighers run over all hosts at once.

The table is a façade over parts that each own one piece of state (this package):
- ``columns.Columns``: the rows and their columns (one row per compute node; row numbers are not identities);
- ``intake.Intake`` (with ``reports``): how host reports, touches and heartbeats land in the parts;
- ``changes.Changes``: the revisions, the row layout, the journal of changed rows, the listeners;
- ``derived.Derived`` (``derived``): liveness, usage masks, extremes and weighted sums, patched from the journal;
- ``aggregates.AggregateIndex``: aggregates, memberships, and what they say per aggregate set;
- ``instances.InstanceIndex``: which instances each node runs, and where each instance is;
- ``ledger.Ledger``: allocations, claims, moves, and what counts in flight.
Everything else reads and writes through the methods below.

Public data: what filters and weighers read, over the live rows ``0 .. n-1``, without the lock:
- scalar columns, ``col(name)``: ``num_io_ops``, ``num_instances``, ``running_vms``, ``current_workload``,
  ``failed_builds``, ``inflight_instances`` (unconfirmed allocations), ``io_ops_load`` and ``instances_load``
  (reported + in flight), ``hypervisor_version``, ``updated_at``, ``disabled``, ``forced_down``, ``free_ram_mb``,
  ``free_disk_mb`` (physical, in MB), ``disk_available_least``, ``host_ip4`` (-1: none), ``usage_version``, and
  the interned codes ``caps_code``, ``traits_code``, ``aggset_code`` (per-code values: ``factor``, ``zones``,
  ``metadata_values``), ``pci_code`` (the node's PCI pools: ``factor("pci_pools")``; devices per vendor and
  product: ``pci_devices``);
- per resource class, ``rc_col(column, rc)`` for ``total``, ``reserved``, ``min_unit``, ``max_unit``,
  ``step_size``, ``ratio``, ``reported``, ``inflight``, ``capacity``, ``free``; ``has_rc(rc)``, ``used(rc)``;
  the same as 2-D arrays over every allocated row (``rc[column][row, rc_index[rc]]``, ``has_inventory``) for
  the filters that index rows directly;
- ``metric(name)``: one column per metric name, NaN where a node does not report it;
- row-aligned names: ``host_names``, ``node_names``, ``node_uuids``, ``hypervisor_hostnames``, ``host_ips``;
  ``node_numa(row)``: the node's NUMA cells (``numa_cells``, ``numa_max_*``, ``numa_threads`` summarize them per
  node; ``numa_cell_arrays()`` holds them per cell, rows x cells).
Readers take array references without the lock; growth swaps in new arrays, so a reader holds a consistent (if
slightly old) array. Claims re-check under the lock.

Revisions
- ``revision`` moves on every change.
- ``static_revision`` moves only when something a *static* filter can see changes (interned attributes,
  aggregates, the set of rows, a service enabled or disabled, an inventory's shape: total, reserved, ratio,
  units). Static filter masks are cached against it (and ``static_cache`` here), so a stream of usage-only
  reports does not throw the cache away.
- The journal lists the rows whose usage or report time changed, in order: what decisions derive from usage
  columns (fit masks, liveness, extremes, weighted sums) is patched on those rows (``gantt.compute.journal``).

Thread safety: every mutation holds ``lock``; callers hold it to make several calls one atomic step.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, TypeVar

import numpy as np

from gantt.compute.numa import HostNUMA
from gantt.compute.pci import PciRequest, Pool, Room
from gantt.compute.state.aggregates import AggregateIndex
from gantt.compute.state.cells import CellArrays
from gantt.compute.state.changes import Changes
from gantt.compute.state.columns import Columns, Factor, HostCaps
from gantt.compute.state.derived import Derived
from gantt.compute.state.instances import InstanceIndex
from gantt.compute.state.intake import Intake
from gantt.compute.state.ledger import Ledger
from gantt.compute.state.reports import DEFAULT_RATIOS
from gantt.config import Config
from gantt.model import Aggregate, Allocation, HostReport, NodeKey, NotFound, NUMATopologyLimits

T = TypeVar("T")

_IDENTITY = ("host", "nodename", "hypervisor_hostname", "uuid", "host_ip")


class HostTable:
    """All hosts, columnar. See the module docstring for the parts, the public data and the revisions."""

    def __init__(self, *, service_down_time: float = 60.0, claim_timeout: float = 600.0,
                 clock: Callable[[], float] = time.time, initial_rows: int = 1024,
                 default_ratios: dict[str, float] | None = None,
                 on_expire: Callable[[list[Allocation]], None] | None = None) -> None:
        """``on_expire``: with a shared store, expiring an unconfirmed claim must be a store write (every replica
        must agree), so the owner releases the claims it is given through the store; without it the table drops
        them itself."""
        self._lock = threading.RLock()
        self._clock = clock
        self._default_ratios = {**DEFAULT_RATIOS, **(default_ratios or {})}
        self._service_down_time = service_down_time
        self._stale_reports = 0  # none since reports are applied in the order given (the store's): kept for callers
        # Why an operator disabled a node (Nova's service.disabled_reason): shown, never filtered on, so kept
        # beside the columns for the few nodes that have one.
        self._disabled_reasons: dict[NodeKey, str] = {}
        self._static_values: tuple[int, dict[Hashable, Any]] = (-1, {})  # see static_cache
        self._columns = Columns(initial_rows)
        self._changes = Changes(self._columns)
        self._aggregates = AggregateIndex(self.static_cache)
        self._instances = InstanceIndex()
        self._ledger = Ledger(self._columns, self._instances, lock=self._lock, clock=clock,
                              claim_timeout=claim_timeout, touched=self._changes.touched,
                              changed=self._changes.changed, on_expire=on_expire)
        self._intake = Intake(lock=self._lock, clock=clock, columns=self._columns, aggregates=self._aggregates,
                              instances=self._instances, ledger=self._ledger, changes=self._changes,
                              default_ratios=self._default_ratios, disabled_reasons=self._disabled_reasons)
        # derived data patched on changed rows rather than recomputed per decision (see gantt.compute.journal)
        self.derived = Derived(self._columns, self._changes, clock, service_down_time)

    @classmethod
    def from_config(cls, config: Config, **kwargs: Any) -> HostTable:
        """A table with the options that shape it: ``service_down_time``, ``claim_timeout`` and the allocation
        ratios a host that reports none gets (Nova: ``cpu_allocation_ratio`` when set, else
        ``initial_cpu_allocation_ratio``; likewise for RAM and disk)."""
        d = config.default
        ratios = {
            "VCPU": d.cpu_allocation_ratio or d.initial_cpu_allocation_ratio,
            "MEMORY_MB": d.ram_allocation_ratio or d.initial_ram_allocation_ratio,
            "DISK_GB": d.disk_allocation_ratio or d.initial_disk_allocation_ratio,
        }
        kwargs.setdefault("service_down_time", d.service_down_time)
        kwargs.setdefault("claim_timeout", config.gantt.claim_timeout)
        return cls(default_ratios=ratios, **kwargs)

    # ------------------------------------------------------------------------- options and revisions

    @property
    def clock(self) -> Callable[[], float]:
        return self._clock

    @property
    def default_ratios(self) -> dict[str, float]:
        """The allocation ratio of a classic class (VCPU, MEMORY_MB, DISK_GB) whose host reports none."""
        return dict(self._default_ratios)

    @property
    def service_down_time(self) -> float:
        return self._service_down_time

    @property
    def claim_timeout(self) -> float:
        return self._ledger.claim_timeout

    @property
    def lock(self) -> threading.RLock:
        return self._lock

    @property
    def revision(self) -> int:
        return self._changes.revision

    @property
    def layout(self) -> int:
        """Moves when rows are renumbered (a removal moves the last row into the freed one). A decision reads
        columns without the lock: row numbers it took under one layout name other nodes under the next, so it
        checks this before it turns a row into a node (and ranks again if it moved)."""
        return self._changes.layout

    @property
    def static_revision(self) -> int:
        return self._changes.static_revision

    @property
    def stale_reports(self) -> int:
        return self._stale_reports

    @property
    def expired_claims(self) -> int:
        return self._ledger.expired_claims

    @property
    def settled_claims(self) -> int:
        return self._ledger.settled_claims

    def subscribe(self, listener: Callable[[str, Any], None]) -> None:
        """Called (under the lock) with ("host"|"aggregate"|"allocation"|..., object) after each change."""
        self._changes.listeners.append(listener)

    # ------------------------------------------------------------------------------------------- rows

    @property
    def n(self) -> int:
        return self._columns.n

    def __len__(self) -> int:
        return self._columns.n

    def __contains__(self, key: NodeKey) -> bool:
        return key in self._columns.row_of

    def __iter__(self) -> Iterator[NodeKey]:
        """The nodes' keys, in row order."""
        columns = self._columns
        for i in range(columns.n):
            yield (columns.host_names[i], columns.node_names[i])

    def row_of(self, key: NodeKey) -> int | None:
        """The row of node ``key`` exactly, or None."""
        return self._columns.row_of.get(key)

    def row(self, host: str, node: str | None = None) -> int:
        """The row the API names: ``host`` alone names its node when it has one (bare metal has several)."""
        columns = self._columns
        row = columns.row_of.get((host, node if node is not None else host))
        if row is None:
            rows = columns.rows_of_host.get(host)
            if node is None and rows and len(rows) == 1:
                return next(iter(rows))
            raise NotFound(f"no such host {host!r}" + (f" node {node!r}" if node else ""), field="host")
        return row

    def rows_of_host(self, host: str) -> AbstractSet[int]:
        return self._columns.rows_of_host.get(host, frozenset())

    # ---------------------------------------------------------------------------------- public data

    @property
    def host_names(self) -> Sequence[str]:
        return self._columns.host_names

    @property
    def node_names(self) -> Sequence[str]:
        return self._columns.node_names

    @property
    def node_uuids(self) -> Sequence[str | None]:
        return self._columns.node_uuids

    @property
    def hypervisor_hostnames(self) -> Sequence[str | None]:
        return self._columns.hypervisor_hostnames

    @property
    def host_ips(self) -> Sequence[str | None]:
        return self._columns.host_ips

    def col(self, name: str) -> np.ndarray:
        """A scalar column trimmed to the live rows (a view, no copy)."""
        return self._columns.col(name)

    def rc_col(self, column: str, rc: str) -> np.ndarray | None:
        """One resource class's column (``free``, ``capacity``, ``total`` …) for the live rows, or None."""
        return self._columns.rc_col(column, rc)

    def has_rc(self, rc: str) -> np.ndarray:
        return self._columns.has_rc(rc)

    def used(self, rc: str) -> np.ndarray:
        return self._columns.used(rc)

    @property
    def rc(self) -> Mapping[str, np.ndarray]:
        return self._columns.rc

    @property
    def has_inventory(self) -> np.ndarray:
        return self._columns.has_inventory

    @property
    def rc_index(self) -> Mapping[str, int]:
        """Resource class -> its column in ``rc`` and ``has_inventory``, in the order classes were first seen."""
        return self._columns.rc_index

    def metric(self, name: str) -> np.ndarray | None:
        return self._columns.metric(name)

    def pci_overbooked(self, row: int) -> list[tuple[tuple[tuple[str, Any], ...], int, int]]:
        """(pool, devices held by unconfirmed claims, devices it has) for each of the node's PCI pools held
        beyond its count (an audit's finding: claims never do it)."""
        return self._columns.pci_overbooked(row)

    def has_pci(self) -> bool:
        """Whether a node may have PCI devices (False: no node has any)."""
        return len(self._columns.pci_source[1]) > 1

    def pci_pools(self) -> tuple[Factor, int]:
        """Each live row's PCI pools left (gantt.compute.pci.freeze_pools tuples: reported, less what unconfirmed claims
        hold) as codes and values, and the epoch those codes belong to: a value cached by code is valid for
        that epoch only (the sets are renumbered now and then). Values are shared, not copied: never modify."""
        n = self._columns.n
        codes, values, epoch = self._columns.pci_source
        return Factor(codes[:n], values), epoch

    def pci_devices(self, pair: tuple[str, str]) -> np.ndarray | None:
        """Per live row, how many PCI devices of (vendor_id, product_id) (lower-cased) its pools hold; None when
        no node reported any."""
        j = self._columns.pci_index.get(pair)
        return None if j is None else self._columns.pci_devices[: self._columns.n, j]

    def inventories(self, row: int) -> dict[str, dict[str, float]]:
        """The node's inventories: resource class -> each of its columns' value."""
        return self._columns.inventories(row)

    def node_caps(self, row: int) -> HostCaps:
        return self._columns.node_caps(row)

    def disabled_reason(self, key: NodeKey) -> str | None:
        return self._disabled_reasons.get(key)

    def node_traits(self, row: int) -> frozenset[str]:
        return self._columns.node_traits(row)

    def node_numa(self, row: int) -> HostNUMA | None:
        return self._columns.numa[row]

    def numa_cell_arrays(self) -> CellArrays:
        """The per-cell NUMA figures, rows x cells over every allocated row: ``fields[name]`` for each of
        ``gantt.compute.state.cells.FIELDS``, ``pages[size_kb]`` free MiB in pages of that size (-1: none in that cell).
        Take it once per evaluation: a wider report swaps in a new object (never resizes the arrays in place)."""
        return self._columns.cells.arrays

    def numa_limits(self, row: int) -> NUMATopologyLimits:
        """The CPU and RAM allocation ratios a NUMA guest's cells are fitted under on node ``row``."""
        cpu, ram = self.rc_col("ratio", "VCPU"), self.rc_col("ratio", "MEMORY_MB")
        return NUMATopologyLimits(cpu_allocation_ratio=float(cpu[row]) if cpu is not None else 0.0,
                                  ram_allocation_ratio=float(ram[row]) if ram is not None else 0.0)

    def node_pci_pools(self, row: int) -> tuple[Pool, ...]:
        """The PCI pools node ``row`` has left (``gantt.compute.pci.freeze_pools`` tuples; never modify)."""
        codes, values, _ = self._columns.pci_source
        pools: tuple[Pool, ...] = values[codes[row]]
        return pools

    def provider_tree(self) -> Mapping[str, tuple[NodeKey, str, str]]:
        return self._ledger.child_tree  # child providers by uuid: (their node, parent uuid, root uuid)

    def pci_rooms(self, row: int) -> dict[str, Room]:
        """The Placement providers of node ``row``'s PCI pools now (``pci.take``'s ``rooms``: ``in_placement``)."""
        return self._ledger.pci_rooms(self.node_pci_pools(row))

    def node_aggregates(self, row: int) -> list[Aggregate]:
        return self._aggregates.of_code(int(self._columns.cols["aggset_code"][row]))

    def factor(self, attribute: str) -> Factor:
        """A node attribute as codes + distinct values: interned ones (capabilities, each or whole as ``caps``,
        traits, aggregates) and names."""
        columns = self._columns
        if attribute in HostCaps.__struct_fields__:
            return Factor(columns.col("caps_code"), [getattr(c, attribute) for c in columns.caps.values])
        if attribute == "caps":
            return Factor(columns.col("caps_code"), list(columns.caps.values))
        if attribute == "traits":
            return Factor(columns.col("traits_code"), list(columns.traitsets.values))
        if attribute == "aggregates":
            return Factor(columns.col("aggset_code"), self._aggregates.sets())
        if attribute == "pci_pools":
            return self.pci_pools()[0]
        if attribute in _IDENTITY:
            sources: dict[str, list[str] | list[str | None]] = {
                "host": columns.host_names, "nodename": columns.node_names,
                "hypervisor_hostname": columns.hypervisor_hostnames, "uuid": columns.node_uuids,
                "host_ip": columns.host_ips}
            n = columns.n
            return Factor(np.arange(n, dtype=np.int64), sources[attribute][:n])
        raise KeyError(attribute)  # numbers are filters/hoststate.numeric_attribute's, with Nova's semantics

    # ------------------------------------------------------------------------------------ derived data

    def alive(self, now: float | None = None) -> np.ndarray:
        """Nodes whose last report is within ``service_down_time`` (do not modify the result: it is shared)."""
        return self.derived.alive(now)

    def static_cache(self, key: Hashable, build: Callable[[], T]) -> T:
        """``build()``, memoized under ``key`` until ``static_revision`` moves (callable without the lock)."""
        # The (revision, values) pair is swapped as one object so that a value built from state of revision r can
        # never land in the dict of a later revision (which a separate "reset dict, then set revision" sequence
        # allowed when another thread reset it mid-build).
        rev = self._changes.static_revision
        entry = self._static_values
        if entry[0] != rev:
            entry = (rev, {})
            self._static_values = entry
        values = entry[1]
        if key in values:
            kept: T = values[key]  # built by ``build`` for this key (callers give one builder per key)
            return kept
        value = build()
        if self._changes.static_revision == rev:  # state moved during the build: use the value once, do not keep it
            values[key] = value
        return value

    # --------------------------------------------------------------------------------------- reports

    def update(self, report: HostReport, *, now: float | None = None, whole: bool = False,
               observed: bool = False) -> int:
        """Apply one host report (a full replacement of what it names); returns the node's row. ``whole``: the
        report is the node's whole stored record; ``now``/``observed``: its report time (see ``Intake.update``)."""
        return self._intake.update(report, now=now, whole=whole, observed=observed)

    def load(self, reports: Iterable[HostReport], *, now: float | None = None, whole: bool = False) -> None:
        """``update`` with each of ``reports`` in turn, the new nodes' in bulk: a cold start (``Intake.load``)."""
        self._intake.load(reports, now=now, whole=whole)

    def roots(self) -> np.ndarray | None:
        """The rows that are root providers (design §5: only they are candidates for a Nova-shaped request);
        None when every row is one (the common case: no provider trees)."""

        def build() -> np.ndarray | None:
            child = self._columns.col("child")
            return ~child if child.any() else None

        return self.static_cache(("roots",), build)

    def touch(self, host: str, node: str, now: float) -> None:
        """``update`` with the node's own record at a later time (the store's touch: a report that changed nothing
        but its time). What a report does besides writing its figures is done alike, so nothing tells the two
        apart but cost: the instances it lists are listed again, claims settle or expire on its time."""
        self.touch_many([((host, node), now)])

    def touch_many(self, touches: list[tuple[NodeKey, float]], *, observed: bool = False) -> None:
        """``touch`` for each (node, time) in order, under one hold of the lock (``Intake.touch_many``)."""
        self._intake.touch_many(touches, observed=observed)

    def heartbeat(self, rows: np.ndarray, now: float) -> None:
        """``update(HostReport(host))`` for many rows at once: a report naming nothing only says "alive at now"."""
        self._intake.heartbeat(rows, now)

    def remove(self, host: str, node: str | None = None) -> list[NodeKey]:
        """Remove a node (or, without ``node``, every node of the host) and the allocations on it."""
        with self._lock:
            columns = self._columns
            if node is not None:
                keys = [(host, node)] if (host, node) in columns.row_of else []
            else:
                keys = [(host, columns.node_names[r]) for r in sorted(columns.rows_of_host.get(host, ()))]
            if not keys:
                raise NotFound(f"no such host {host!r}" + (f" node {node!r}" if node else ""), field="host")
            self._changes.layout += 1  # before any row moves: see ``layout``
            for key in keys:
                self._ledger.drop_node(key)
                self._disabled_reasons.pop(key, None)
                row = columns.row_of[key]
                last = columns.remove_row(row)
                self._instances.remove_row(row, last, key[0])
            self._changes.changed("host_deleted", keys, static=True)
            return keys

    # ------------------------------------------------------------------------------------ aggregates

    def aggregate(self, key: str) -> Aggregate | None:
        return self._aggregates.aggregate(key)

    def aggregates(self) -> Collection[Aggregate]:
        """Every aggregate (a live view: hold the lock to iterate while others may write)."""
        return self._aggregates.aggregates()

    def zones(self) -> list[frozenset[str]]:
        """Per aggregate-set code, the availability zones its aggregates name (see ``AggregateIndex.zones``)."""
        return self._aggregates.zones()

    def zone(self, row: int) -> str | None:
        """The node's availability zone (None: in no zoned aggregate). Nova's Selection takes any one of a set
        that should have one member; the first in sorted order is the same answer on every replica."""
        zones = self._aggregates.zones()[int(self._columns.cols["aggset_code"][row])]
        return min(zones) if zones else None

    def metadata_values(self, key: str) -> list[set[str]]:
        """Per aggregate-set code: the values of metadata ``key`` across those aggregates (empty: not set)."""
        return self._aggregates.metadata_values(key)

    def metadata_min(self, key: str, number: type[float] | type[int] = float) -> np.ndarray | None:
        """Per live row: the lowest value of metadata ``key``, parsed as ``number``, across the node's aggregates
        (NaN: unset, or a value that does not parse); None when no aggregate sets the key at all (the common
        case: callers skip the work). Read-only: shared by every caller until static state moves."""

        def rows() -> np.ndarray | None:
            lut = self._aggregates.metadata_min_per_set(key, number)
            if lut is None:
                return None
            per_row: np.ndarray = lut[self._columns.col("aggset_code")]
            per_row.flags.writeable = False
            return per_row

        # Memoized per row, not just per aggregate set: aggset codes and the row set are static state, and the
        # ratio filters ask for this on every decision (a 100,000-row gather each time otherwise).
        return self.static_cache(("metadata_min_rows", key, number.__name__), rows)

    def update_aggregate(self, aggregate: Aggregate) -> None:
        with self._lock:
            self._recode_hosts(self._aggregates.update_aggregate(aggregate))
            self._changes.changed("aggregate", aggregate, static=True)

    def delete_aggregate(self, aggregate_id: int | str) -> Aggregate:
        with self._lock:
            old, hosts = self._aggregates.delete_aggregate(aggregate_id)
            self._recode_hosts(hosts)
            self._changes.changed("aggregate_deleted", old, static=True)
            return old

    def _recode_hosts(self, hosts: Iterable[str]) -> None:
        codes = self._columns.cols["aggset_code"]
        rows_of_host = self._columns.rows_of_host
        if not rows_of_host:  # no row yet (a snapshot loads its aggregates first): nothing to recode
            return
        for host in hosts:
            rows = rows_of_host.get(host)
            if not rows:  # not loaded yet (aggregates load first): its row takes its code when written
                continue
            code = self._aggregates.code_of(host)
            for row in rows:
                codes[row] = code

    # ------------------------------------------------------------------------------------ accounting

    def allocation(self, consumer_uuid: str) -> Allocation | None:
        return self._ledger.allocation(consumer_uuid)

    def age_claims_by_creation(self) -> None:
        """Claims loaded from now on are as old as their ``created_at`` (the audit's view), not as old as the load
        (a replica's: ``Ledger._seen``)."""
        self._ledger.ages_from_creation = True

    def allocations(self) -> Collection[Allocation]:
        """Every allocation (a live view: hold the lock to iterate while others may write)."""
        return self._ledger.allocations()

    def node_allocations(self, key: NodeKey) -> frozenset[str]:
        """The consumers holding an allocation on node ``key`` (also one removed while they held it)."""
        return self._ledger.node_allocations(key)

    def group_allocations(self, group: str) -> set[str]:
        """The consumers claimed under server group ``group``'s hard policy, wherever they run."""
        return self._ledger.group_allocations(group)

    def fits(self, row: int, resources: dict[str, int], limits: dict[str, float] | None = None) -> str | None:
        """None if the node can take ``resources`` now; else the first resource class that does not fit."""
        return self._ledger.fits(row, resources, limits)

    def within_capacity(self, key: NodeKey, allocation: Allocation | None = None) -> bool:
        """The node exists and none of its classes is counted beyond its capacity (``Ledger.within_capacity``)."""
        return self._ledger.within_capacity(key, allocation)

    def claim(self, key: NodeKey, allocation: Allocation, *, limits: dict[str, float] | None = None,
              pci: Sequence[PciRequest] = (), pci_parts: bool = False) -> Allocation:
        """Consume ``allocation.resources`` (and the PCI devices ``pci`` asks for, recorded on the allocation) on
        node ``key`` atomically, or raise ClaimRejected; a consumer that already holds an allocation gets it
        back. ``pci_parts``: the flavor's devices are held on their Placement providers too (pci_in_placement)."""
        return self._ledger.claim(key, allocation, limits=limits, pci=pci, pci_parts=pci_parts)

    def confirm_shown(self, host: str, consumers: Collection[str], *, dry: bool = False) -> dict[NodeKey, list[str]]:
        with self._lock:  # Ledger.confirm_shown
            return self._ledger.confirm_shown(host, consumers, dry=dry)

    def put_allocation(self, allocation: Allocation) -> None:
        """Record an allocation decided elsewhere (the store committed it): no capacity check."""
        self._ledger.put_allocation(allocation)

    def release(self, consumer_uuid: str) -> Allocation:
        return self._ledger.release(consumer_uuid)

    def move(self, key: NodeKey, allocation: Allocation, source: Allocation, *,
             limits: dict[str, float] | None = None, pci: Sequence[PciRequest] = (),
             pci_parts: bool = False, doubled: bool = False) -> Allocation:
        """Move ``source``'s consumer to node ``key`` as ``allocation`` in one compare-and-set, holding the source
        under the migration (``doubled``: in the same allocation); returns the holder (see ``Ledger.move``)."""
        return self._ledger.move(key, allocation, source, limits=limits, pci=pci, pci_parts=pci_parts,
                                 doubled=doubled)

    def unmove(self, allocation: Allocation, held: Allocation, source: Allocation) -> bool:
        """Undo ``move`` while nothing else has replaced its allocations (a failed commit). Whether it did."""
        return self._ledger.unmove(allocation, held, source)

    def migration(self, migration_uuid: str) -> Allocation:
        """The allocation holding a move's source, under the migration's UUID."""
        return self._ledger.migration(migration_uuid)

    def revertible(self, migration_uuid: str) -> tuple[Allocation, Allocation]:
        """(the source held, the instance's allocation) of a move that can still be reverted."""
        return self._ledger.revertible(migration_uuid)

    def reverted(self, held: Allocation) -> Allocation:
        """The instance's allocation a revert gives back: the source, as the migration holds it."""
        return self._ledger.reverted(held)

    # ------------------------------------------------------------------------------------- instances

    def instances(self, row: int) -> AbstractSet[str]:
        """What the node runs: what its host lists and what is allocated on it."""
        return self._instances.instances(row)

    def instance_host(self, instance_uuid: str) -> str | None:
        """The host an instance runs on, if the table knows it."""
        return self._instances.instance_host(instance_uuid)

    def set_instances(self, host: str, instances: Iterable[str], *, replace: bool) -> None:
        """Nova's update/sync_instance_info: what runs on a host, for the affinity filters."""
        with self._lock:
            rows = self._columns.rows_of_host.get(host)
            if not rows:
                raise NotFound(f"no such host {host!r}", field="host")
            self._instances.set_instances(host, rows, instances, replace=replace, held=self._ledger)
            self._changes.changed("instances", host)

    def delete_instance(self, host: str, instance_uuid: str) -> None:
        with self._lock:
            rows = self._columns.rows_of_host.get(host)
            if not rows:
                raise NotFound(f"no such host {host!r}", field="host")
            if not self._instances.delete_instance(host, rows, instance_uuid):
                raise NotFound(f"instance {instance_uuid!r} is not on host {host!r}", field="instance_uuid")
            self._changes.changed("instances", host)
